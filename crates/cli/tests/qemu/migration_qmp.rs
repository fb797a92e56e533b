//! The QMP side of the migration test (`qemu_migration.rs`): starting a
//! migration, waiting for its end and for a QEMU's run state, and
//! comparing the guest RAM of both ends.

use super::guest::GUEST_RAM;
use super::qmp::Qmp;
use nfv_testutil::wait_until;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// QEMU 7.2's refusals to migrate while the vhost-user backend cannot log
/// the pages it writes: the protocol feature for a shared log
/// (hw/virtio/vhost-user.c) and the virtio feature (hw/virtio/vhost.c).
/// The first is checked first, so it is the one a backend without either
/// gets. These are the only refusals that make a case SKIPPED.
pub const NO_DIRTY_LOG: [&str; 2] = [
    "Migration disabled: vhost-user backend lacks VHOST_USER_PROTOCOL_F_LOG_SHMFD feature.",
    "Migration disabled: vhost lacks VHOST_F_LOG_ALL feature.",
];

/// Waits until QEMU's run state (`query-status`) is `want`; Err: the
/// last status it answered.
pub fn wait_status(qmp: &mut Qmp, want: &str, timeout: Duration) -> Result<(), Value> {
    let mut status = Value::Null;
    if wait_until(timeout, || {
        status = qmp
            .run("query-status", json!({}))
            .unwrap_or_else(|e| json!(e));
        status["status"] == want
    }) {
        Ok(())
    } else {
        Err(status)
    }
}

/// Guest RAM of a migration's source (paused after it) and destination
/// (paused before it runs), compared page by page: the switch marks every
/// page it writes in the dirty log, so nothing it wrote may be missing at
/// the destination. Both QEMUs dump their RAM (`pmemsave`) into `dir`.
/// Ok: what was compared; Err: the pages that differ.
pub fn same_memory(source: &mut Qmp, dest: &mut Qmp, dir: &Path) -> Result<String, String> {
    const PAGE: usize = 4096;
    let dump = |qmp: &mut Qmp, name: &str| -> Result<Vec<u8>, String> {
        let path = dir.join(name);
        let args = json!({ "val": 0, "size": GUEST_RAM, "filename": path.display().to_string() });
        qmp.run("pmemsave", args)?;
        std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let src = dump(source, "source.ram")?;
    let dst = dump(dest, "destination.ram")?;
    if src.len() != dst.len() || src.len() as u64 != GUEST_RAM {
        return Err(format!(
            "pmemsave wrote {} bytes at the source, {} at the destination (of {GUEST_RAM})",
            src.len(),
            dst.len()
        ));
    }
    let differ: Vec<String> = src
        .chunks(PAGE)
        .zip(dst.chunks(PAGE))
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| {
            let diff: Vec<usize> = (0..PAGE).filter(|&k| a[k] != b[k]).collect();
            // The 16-byte lines around the first difference, both sides:
            // enough to tell ring entries from packet data.
            let from = diff[0] & !15;
            let to = (from + 64).min(PAGE);
            format!(
                "{:#x} ({} bytes, {:#x}..={:#x}; source {:02x?}; destination {:02x?})",
                i * PAGE,
                diff.len(),
                diff[0],
                diff[diff.len() - 1],
                &a[from..to],
                &b[from..to]
            )
        })
        .collect();
    if differ.is_empty() {
        for name in ["source.ram", "destination.ram"] {
            let _ = std::fs::remove_file(dir.join(name));
        }
    } else {
        return Err(format!(
            "guest memory differs between source and destination in {} pages \
             (a write the dirty log missed): {}",
            differ.len(),
            differ
                .iter()
                .take(40)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(format!(
        "destination RAM equal to the source's ({} KiB)",
        GUEST_RAM >> 10
    ))
}

/// Starts a migration of the guest behind `qmp` to `uri` as fast as
/// `bandwidth` allows. `Ok(Some(refusal))`: QEMU refused because the
/// switch cannot log dirty pages (the one reason to skip); any other
/// refusal is an error.
pub fn start_migration(qmp: &mut Qmp, uri: &str, bandwidth: u64) -> Result<Option<String>, String> {
    qmp.run(
        "migrate-set-parameters",
        json!({ "max-bandwidth": bandwidth }),
    )?;
    match qmp.execute("migrate", json!({ "uri": uri }))? {
        Ok(_) => Ok(None),
        Err(e) if NO_DIRTY_LOG.iter().any(|m| e.contains(m)) => Ok(Some(e)),
        Err(e) => Err(format!("migrate to {uri} refused: {e}")),
    }
}

/// Polls `query-migrate` until the migration has ended (completed,
/// failed or cancelled); returns QEMU's last answer.
pub fn wait_migration_end(qmp: &mut Qmp, timeout: Duration) -> Result<Value, String> {
    let deadline = Instant::now() + timeout;
    let mut completed_at = None;
    loop {
        let v = qmp.run("query-migrate", json!({}))?;
        match v["status"].as_str() {
            Some("failed" | "cancelled") => return Ok(v),
            // QEMU 7.2 says `completed` a moment before it has worked out
            // the total time and the downtime (0 until then).
            Some("completed") => {
                let at = *completed_at.get_or_insert_with(Instant::now);
                let timed = v["total-time"].as_u64().unwrap_or(0) > 0;
                if timed || at.elapsed() > Duration::from_secs(2) {
                    return Ok(v);
                }
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            return Err(format!("migration not over after {timeout:?}: {v}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
