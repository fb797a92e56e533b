//! What the soak reads about the switch process from /proc: open file
//! descriptors, mappings and resident memory, and panics in a log.

use std::path::Path;

/// One reading of a process's resources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Resources {
    /// Entries of `/proc/PID/fd`.
    pub fds: usize,
    /// Lines of `/proc/PID/maps`.
    pub maps: usize,
    /// `VmRSS` of `/proc/PID/status`, KiB.
    pub rss_kib: u64,
    /// `RssAnon` (heap, stacks: what a leak grows; VmRSS also counts the
    /// guest memory the switch has touched, which comes and goes with
    /// VNF sessions), KiB.
    pub anon_kib: u64,
    /// Resident pages of guest memory (VNF memory tables the switch has
    /// mapped and touched), KiB; part of `rss_kib`.
    pub guest_kib: u64,
    /// Entries of `/proc/PID/task` (threads).
    pub threads: usize,
}

impl Resources {
    pub fn read(pid: u32) -> Result<Resources, String> {
        let base = format!("/proc/{pid}");
        let count = |what: &str| {
            std::fs::read_dir(format!("{base}/{what}"))
                .map(|rd| rd.count())
                .map_err(|e| format!("{base}/{what}: {e}"))
        };
        let maps = std::fs::read_to_string(format!("{base}/maps"))
            .map_err(|e| format!("{base}/maps: {e}"))?
            .lines()
            .count();
        let status = std::fs::read_to_string(format!("{base}/status"))
            .map_err(|e| format!("{base}/status: {e}"))?;
        let kib = |key| status_kib(&status, key).ok_or_else(|| format!("{base}/status: no {key}"));
        Ok(Resources {
            fds: count("fd")?,
            maps,
            rss_kib: kib("VmRSS")?,
            anon_kib: kib("RssAnon")?,
            guest_kib: guest_rss_kib(
                &std::fs::read_to_string(format!("{base}/smaps"))
                    .map_err(|e| format!("{base}/smaps: {e}"))?,
            ),
            threads: count("task")?,
        })
    }
}

/// Whether a mapping (its perms and path) is guest memory: a shared
/// memfd or hugetlbfs mapping other than the switch's own packet pool
/// (whose memfd is named `nfvswitch-<node>`).
fn is_guest_memory(perms: &str, path: &str) -> bool {
    perms.ends_with('s')
        && (path.starts_with("/memfd:") || path.contains("huge"))
        && !path.starts_with("/memfd:nfvswitch-")
}

/// Sum of `Rss:` over the guest-memory mappings of a `/proc/PID/smaps`
/// text, KiB.
pub fn guest_rss_kib(smaps: &str) -> u64 {
    let mut guest = false;
    let mut sum = 0;
    for line in smaps.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols
            .first()
            .is_some_and(|c| c.contains('-') && !c.ends_with(':'))
        {
            let path = cols.get(5..).map(|p| p.join(" ")).unwrap_or_default();
            guest = is_guest_memory(cols.get(1).unwrap_or(&""), &path);
        } else if guest && cols.first() == Some(&"Rss:") {
            sum += cols.get(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    sum
}

/// The value of `key` (e.g. `VmRSS`) in a `/proc/PID/status` text, KiB.
pub fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status
        .lines()
        .find(|l| l.strip_prefix(key).is_some_and(|r| r.starts_with(':')))?;
    let mut words = line[key.len() + 1..].split_whitespace();
    let n = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(n)
}

/// glibc's per-thread malloc heaps are reserved 64 MiB at a time, aligned
/// to 64 MiB (HEAP_MAX_SIZE on 64-bit).
const ARENA_HEAP: u64 = 64 << 20;
const PAGE: u64 = 4096;

/// A `/proc/PID/maps` text sorted into what glibc keeps for reuse and
/// everything else. glibc never unmaps a malloc arena (up to 8 per CPU)
/// and keeps the stacks of exited threads for the next thread (up to
/// 40 MiB), so both grow to a bound after start without any leak; any
/// other mapping (guest memory, rings, the packet pool, large
/// allocations) must come and go with what uses it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MapsCensus {
    /// 64 MiB-aligned anonymous malloc heaps.
    pub arenas: usize,
    /// Anonymous read-write mappings right above a one-page guard
    /// (thread stacks and signal stacks, live or cached).
    pub stacks: usize,
    /// Every other mapping, counted by path (memfd names included) or,
    /// for anonymous ones, `[anon PERMS]`.
    pub other: std::collections::BTreeMap<String, i64>,
}

struct Mapping {
    start: u64,
    end: u64,
    perms: String,
    path: Option<String>,
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (a, b) = cols.first()?.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                perms: cols.get(1)?.to_string(),
                path: cols.get(5..).filter(|p| !p.is_empty()).map(|p| p.join(" ")),
            })
        })
        .collect()
}

pub fn census(text: &str) -> MapsCensus {
    let maps = parse_maps(text);
    let mut c = MapsCensus::default();
    let mut i = 0;
    while i < maps.len() {
        let m = &maps[i];
        let next = maps
            .get(i + 1)
            .filter(|n| n.start == m.end && n.path.is_none());
        if m.path.is_none() && m.start.is_multiple_of(ARENA_HEAP) {
            // rw-p part (may be all of it), then the ---p reserve.
            let end = next.filter(|n| n.perms == "---p").map_or(m.end, |n| n.end);
            if end - m.start == ARENA_HEAP {
                c.arenas += 1;
                i += if end == m.end { 1 } else { 2 };
                continue;
            }
        }
        if m.path.is_none()
            && m.perms == "---p"
            && m.end - m.start == PAGE
            && next.is_some_and(|n| n.perms == "rw-p")
        {
            c.stacks += 1;
            i += 2;
            continue;
        }
        let kind = m
            .path
            .clone()
            .unwrap_or_else(|| format!("[anon {}]", m.perms));
        *c.other.entry(kind).or_insert(0) += 1;
        i += 1;
    }
    c
}

/// What changed in the mappings that are not allocator caches:
/// `+2 [anon rw-p], -1 /memfd:x` (empty when nothing did).
pub fn other_maps_diff(before: &MapsCensus, after: &MapsCensus) -> String {
    let (b, a) = (&before.other, &after.other);
    let mut out = Vec::new();
    for k in b
        .keys()
        .chain(a.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let d = a.get(k).unwrap_or(&0) - b.get(k).unwrap_or(&0);
        if d != 0 {
            out.push(format!("{d:+} {k}"));
        }
    }
    out.join(", ")
}

/// Lines of the log at `path` that report a Rust panic, at most `keep`
/// of them (with the total).
pub fn panics(path: &Path, keep: usize) -> (usize, Vec<String>) {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let hits: Vec<&str> = text.lines().filter(|l| l.contains("panicked")).collect();
    let shown = hits
        .iter()
        .take(keep)
        .map(|l| l.trim().to_string())
        .collect();
    (hits.len(), shown)
}

/// Lines of the log at `path` at tracing level WARN and ERROR (the
/// switch writes colour codes even to a file: they are skipped).
pub fn warnings_and_errors(path: &Path) -> (usize, usize) {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let (mut w, mut e) = (0, 0);
    for l in text.lines() {
        let plain = strip_colours(l);
        let level = plain.split_whitespace().nth(1);
        w += usize::from(level == Some("WARN"));
        e += usize::from(level == Some("ERROR"));
    }
    (w, e)
}

/// `line` without ANSI colour sequences (`ESC [ ... m`).
fn strip_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kib_values_of_status_texts() {
        let text =
            "Name:\tx\nVmHWM:\t  900 kB\nVmRSS:\t   51234 kB\nRssAnon:\t 1 kB\nRssAnonX: 5 kB\n";
        let cases: [(&str, &str, Option<u64>); 6] = [
            (text, "VmRSS", Some(51234)),
            (text, "RssAnon", Some(1)),
            (text, "VmSwap", None),
            ("VmRSS:\t0 kB\n", "VmRSS", Some(0)),
            ("VmRSS:\t12 MB\n", "VmRSS", None),
            ("VmRSS:\n", "VmRSS", None),
        ];
        for (text, key, want) in cases {
            assert_eq!(status_kib(text, key), want, "{key} of {text:?}");
        }
    }

    #[test]
    fn this_process_has_fds_maps_and_memory() {
        let r = Resources::read(std::process::id()).unwrap();
        assert!(
            r.fds >= 3 && r.maps > 10 && r.rss_kib > 0 && r.threads >= 1,
            "{r:?}"
        );
    }

    #[test]
    fn maps_census_sorts_arenas_stacks_and_the_rest() {
        let line = |a: u64, b: u64, perms: &str, path: &str| {
            format!("{a:x}-{b:x} {perms} 00000000 00:00 0 {path}\n")
        };
        let h = 0x7f00_0000_0000u64; // 64 MiB-aligned
        let mut before = String::new();
        before += &line(h, h + 0x21000, "rw-p", ""); // arena: rw part + reserve
        before += &line(h + 0x21000, h + ARENA_HEAP, "---p", "");
        before += &line(h + ARENA_HEAP + 0x1000, h + ARENA_HEAP + 0x2000, "---p", ""); // guard
        before += &line(
            h + ARENA_HEAP + 0x2000,
            h + ARENA_HEAP + 0x202000,
            "rw-p",
            "",
        ); // stack
        before += &line(
            h + 0x9000_0000,
            h + 0x9100_0000,
            "rw-s",
            "/memfd:vnf (deleted)",
        );
        before += &line(h + 0x9200_0000, h + 0x9200_1000, "---p", ""); // lone guard
        let c = census(&before);
        assert_eq!((c.arenas, c.stacks), (1, 1), "{c:?}");
        assert_eq!(c.other.get("/memfd:vnf (deleted)"), Some(&1));
        assert_eq!(c.other.get("[anon ---p]"), Some(&1));
        // A second arena (all of it read-write) and a mapping gone.
        let mut after = before.replace("/memfd:vnf (deleted)", "/memfd:pool");
        after += &line(h + 2 * ARENA_HEAP, h + 3 * ARENA_HEAP, "rw-p", "");
        let a = census(&after);
        assert_eq!((a.arenas, a.stacks), (2, 1));
        assert_eq!(
            other_maps_diff(&c, &a),
            "+1 /memfd:pool, -1 /memfd:vnf (deleted)"
        );
        assert_eq!(other_maps_diff(&a, &a), "");
    }

    #[test]
    fn guest_memory_is_the_shared_memfds_but_the_pool() {
        let smaps = "7f00-7f10 rw-s 00000000 00:01 5 /memfd:nohuge (deleted)\n\
                     Size:  64 kB\nRss:   40 kB\n\
                     7f10-7f20 rw-s 00000000 00:01 6 /memfd:nfvswitch-soak-1 (deleted)\n\
                     Rss:   64 kB\n\
                     7f20-7f30 rw-p 00000000 00:00 0 \nRss:   8 kB\n\
                     7f30-7f40 rw-s 00000000 00:0f 7 /dev/hugepages/vm1\nRss: 2048 kB\n\
                     7f40-7f50 r--p 00000000 00:01 8 /memfd:nfv-vnf-rings (deleted)\nRss: 4 kB\n";
        assert_eq!(guest_rss_kib(smaps), 40 + 2048);
    }

    #[test]
    fn panics_are_found_and_counted() {
        let path = std::env::temp_dir().join(format!("nfv-bench-panics-{}", std::process::id()));
        std::fs::write(
            &path,
            "2026 INFO port up\nthread 'pmd-c01/0' panicked at src/x.rs:1:1:\nboom\n\
             2026  WARN slow\nthread 'ctl' panicked at y\n\
             \x1b[2m2026\x1b[0m \x1b[33m WARN\x1b[0m \x1b[2mx\x1b[0m: y\n\
             \x1b[2m2026\x1b[0m \x1b[31mERROR\x1b[0m x: ERROR WARN\n",
        )
        .unwrap();
        let (n, shown) = panics(&path, 1);
        let (w, e) = warnings_and_errors(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(n, 2);
        assert_eq!(shown, vec!["thread 'pmd-c01/0' panicked at src/x.rs:1:1:"]);
        assert_eq!((w, e), (2, 1));
    }
}
