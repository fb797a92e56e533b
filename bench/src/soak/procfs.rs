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
            threads: count("task")?,
        })
    }
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

/// Lines of the log at `path` at tracing level WARN and ERROR.
pub fn warnings_and_errors(path: &Path) -> (usize, usize) {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let (mut w, mut e) = (0, 0);
    for l in text.lines() {
        if l.contains(" WARN ") {
            w += 1;
        } else if l.contains(" ERROR ") {
            e += 1;
        }
    }
    (w, e)
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
    fn panics_are_found_and_counted() {
        let path = std::env::temp_dir().join(format!("nfv-bench-panics-{}", std::process::id()));
        std::fs::write(
            &path,
            "2026 INFO port up\nthread 'pmd-c01/0' panicked at src/x.rs:1:1:\nboom\n\
             2026  WARN slow\nthread 'ctl' panicked at y\n",
        )
        .unwrap();
        let (n, shown) = panics(&path, 1);
        let (w, e) = warnings_and_errors(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(n, 2);
        assert_eq!(shown, vec!["thread 'pmd-c01/0' panicked at src/x.rs:1:1:"]);
        assert_eq!((w, e), (1, 0));
    }
}
