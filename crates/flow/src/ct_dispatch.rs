//! A tracked packet's answer in table T without a second lookup, where
//! table T's first rules can only tell packets apart by what `ct` decided.
//!
//! After `ct(zone=Z, table=T)` a packet goes back to table T with the key
//! it was looked up with, its metadata set by the pipeline and its ct
//! fields (`nfv_datapath`'s recirculation). The usual stateful firewall's
//! table T begins with rules such as `ct_state=+trk+est,ip,actions=...`:
//! they look at the ct fields, the EtherType, the in_port and the metadata
//! only — all known the moment the tracker answers, without building the
//! 192-byte key or probing a cache for it.
//!
//! [`CtDispatch`] keeps, for each table some `ct(table=T)` names, the
//! longest run of its rules from the top (the classifier's order: higher
//! priority first, the older rule of equal priority first) that match on
//! nothing else and run no pipeline action. A packet those fields match to
//! one of them gets exactly the rule the lookup would have found: every
//! rule above it was tried and missed. A packet none of them matches is
//! looked up as before (its answer lies further down the table).

use crate::classifier::Classifier;
use crate::key::FlowKey;
use crate::rule::Rule;
use crate::{Action, PortNo};
use std::sync::Arc;

/// Rules of a table kept at most: a firewall's "established" and "new"
/// rules come first; past a few, a lookup costs less than trying each.
pub const MAX_DISPATCH_RULES: usize = 8;

/// The key words a `ct(table=T)` verdict fixes: word 0's in_port and
/// EtherType, word 4's table, word 5 (metadata) and word 6 (`ct_state`,
/// `ct_zone`, `ct_mark`).
const DECIDED: FlowKey = {
    let mut k = FlowKey::ZERO;
    k.set_in_port(PortNo::MAX);
    k.set_dl_type(u16::MAX);
    k.set_table(u8::MAX);
    k.w[5] = u64::MAX;
    k.w[6] = u64::MAX;
    k
};

/// One rule of a table's dispatch: its match on words 0, 5 and 6 (word
/// 4's only bits are the table's, which every packet sent to the table
/// matches).
#[derive(Clone, Debug)]
struct Entry {
    mask: [u64; 3],
    key: [u64; 3],
}

/// A table's rules that its tracked packets can be answered from.
#[derive(Clone, Debug, Default)]
pub struct Prefix {
    entries: Vec<Entry>,
    rules: Vec<Arc<Rule>>,
}

impl Prefix {
    /// The rule a packet back from `ct` gets in this table, when it is one
    /// of the prefix's: `word0` is word 0 of the key it was looked up with
    /// (in_port, EtherType), `metadata` what the `ct` passes on, `ct_word`
    /// its ct fields as [`FlowKey::ct_word`] lays them out. `None`: the
    /// table must be looked up.
    #[inline]
    pub fn find(&self, word0: u64, metadata: u64, ct_word: u64) -> Option<&Arc<Rule>> {
        let i = self.entries.iter().position(|e| {
            (word0 & e.mask[0]) ^ e.key[0]
                | (metadata & e.mask[1]) ^ e.key[1]
                | (ct_word & e.mask[2]) ^ e.key[2]
                == 0
        })?;
        self.rules.get(i)
    }

    /// The prefix's rules, in the order they are tried.
    pub fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }
}

/// Every `ct(table=T)` target's [`Prefix`] (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct CtDispatch {
    tables: Vec<(u8, Prefix)>,
}

impl CtDispatch {
    /// Works out the prefixes of one rule set (once per generation).
    pub fn of(classifier: &Classifier) -> CtDispatch {
        let rules = classifier.rules();
        let mut targets: Vec<u8> = rules
            .iter()
            .flat_map(|r| r.spec.actions.iter())
            .filter_map(|a| match a {
                Action::Ct(ct) => ct.table,
                _ => None,
            })
            .collect();
        targets.sort_unstable();
        targets.dedup();
        let tables = targets
            .into_iter()
            .filter_map(|t| {
                let p = prefix_of(&rules, t);
                (!p.rules.is_empty()).then_some((t, p))
            })
            .collect();
        CtDispatch { tables }
    }

    /// Table `t`'s prefix, if it has one.
    #[inline]
    pub fn prefix(&self, t: u8) -> Option<&Prefix> {
        self.tables.iter().find(|(n, _)| *n == t).map(|(_, p)| p)
    }
}

/// `rules` of table `t` from the top while they qualify. `rules` is in
/// the order the lookup prefers them (higher priority first, the older of
/// equal priorities first: [`Classifier::rules`]), so the first rule of
/// the prefix a packet matches is the lookup's answer, ties included.
fn prefix_of(rules: &[Arc<Rule>], t: u8) -> Prefix {
    let mut p = Prefix::default();
    for r in rules.iter().filter(|r| r.spec.matches.key.table() == t) {
        let m = &r.spec.matches.mask;
        let decided = m.w.iter().zip(DECIDED.w).all(|(w, d)| w & !d == 0);
        if !decided || r.pipeline || p.rules.len() == MAX_DISPATCH_RULES {
            break;
        }
        let k = &r.spec.matches.key;
        p.entries.push(Entry {
            mask: [m.w[0], m.w[5], m.w[6]],
            key: [k.w[0] & m.w[0], k.w[5] & m.w[5], k.w[6] & m.w[6]],
        });
        p.rules.push(Arc::clone(r));
    }
    p
}

#[cfg(test)]
#[path = "ct_dispatch_tests.rs"]
mod tests;
