//! `ctl trace` as text: the lookup, each step with the packet after it,
//! group buckets and tracked copies (`ct(table=T)` followed) indented
//! under the step that made them.

use nfv_control::protocol::{TraceRecirculationReport, TraceReport, TraceStepReport};

/// The steps of a trace, numbered, each with the packet after it, its
/// note and (a group's) the buckets that ran, indented below it.
fn trace_steps(out: &mut String, steps: &[TraceStepReport], indent: &str) {
    for (i, s) in steps.iter().enumerate() {
        *out += &format!("{indent}{}. {}\n", i + 1, s.action);
        *out += &format!("{indent}   packet: {}\n", s.packet);
        if let Some(n) = &s.note {
            *out += &format!("{indent}   {n}\n");
        }
        for b in &s.buckets {
            *out += &format!("{indent}   bucket {} (its own copy):\n", b.bucket);
            trace_steps(out, &b.steps, &format!("{indent}     "));
            if !b.unused_actions.is_empty() {
                *out += &format!("{indent}     not applied: {}\n", b.unused_actions.join(","));
            }
        }
        if let Some(r) = &s.recirculation {
            trace_recirculation(out, r, &format!("{indent}   "));
        }
    }
}

/// A tracked copy (ct(table=T)) as the trace followed it, below the ct
/// step that forked it.
fn trace_recirculation(out: &mut String, r: &TraceRecirculationReport, indent: &str) {
    let table = r.tables.first().map_or(0, |t| t.table);
    *out += &format!(
        "{indent}recirculation {} (round {}), ct_state={} ({}), from table {table}:\n",
        r.recirculation, r.round, r.ct_state, r.ct_state_from
    );
    let inner = format!("{indent}  ");
    *out += &format!("{inner}packet: {}\n", r.packet);
    match &r.rule {
        Some(rule) => *out += &format!("{inner}rule:   {rule}\n"),
        None => *out += &format!("{inner}rule:   none matches: this copy is dropped (no_match)\n"),
    }
    if r.tables.len() > 1 {
        for st in &r.tables[1..] {
            *out += &match &st.rule {
                Some(rule) => format!("{inner}then table {}: {rule}\n", st.table),
                None => format!(
                    "{inner}then table {}: no rule matches: the pipeline ends\n",
                    st.table
                ),
            };
        }
    }
    trace_steps(out, &r.steps, &inner);
    if !r.unused_actions.is_empty() {
        *out += &format!("{inner}not applied: {}\n", r.unused_actions.join(","));
    }
    if r.rule.is_some() {
        *out += &match r.outputs.is_empty() {
            true => format!("{inner}outputs of this copy: none\n"),
            false => format!("{inner}outputs of this copy: {}\n", r.outputs.join(", ")),
        };
    }
}

pub fn trace_text(t: &TraceReport) -> String {
    let mut out = format!(
        "packet:     {}
decided by: {}
",
        t.packet, t.decided_by
    );
    match (&t.rule, t.cookie) {
        (Some(rule), Some(cookie)) if cookie != 0 => {
            out += &format!(
                "rule:       {rule} (cookie 0x{cookie:x})
"
            )
        }
        (Some(rule), _) => {
            out += &format!(
                "rule:       {rule}
"
            )
        }
        (None, _) => {
            out += "rule:       none matches: dropped (no_match)
"
        }
    }
    if t.tables.len() > 1 {
        out += "tables:\n";
        for st in &t.tables {
            out += &match &st.rule {
                Some(r) => format!("  table {}: {r}\n", st.table),
                None => format!(
                    "  table {}: no rule matches: the pipeline ends here\n",
                    st.table
                ),
            };
        }
        out += "actions of the whole pipeline:\n";
    }
    trace_steps(&mut out, &t.steps, "  ");
    if !t.unused_actions.is_empty() {
        out += &format!(
            "not applied (after the last output, or after a drop): {}
",
            t.unused_actions.join(",")
        );
    }
    if t.rule.is_some() {
        out += &match t.outputs.is_empty() {
            true => "outputs:    none: dropped (action_drop)
"
            .to_string(),
            false => format!(
                "outputs:    {}
",
                t.outputs.join(", ")
            ),
        };
    }
    out += &format!(
        "cache:      {}
",
        t.cache
    );
    out
}
