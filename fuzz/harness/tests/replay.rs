//! Replays every checked-in corpus file (`fuzz/corpus/<target>/*`, seeds
//! and regression inputs) through its target's function: what the fuzzer
//! found once stays fixed, with plain `cargo test`.

use std::path::PathBuf;

fn corpus(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus")
        .join(target)
}

fn replay(target: &str) {
    let (_, run) = nfv_fuzz_harness::TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .expect("a registered target");
    let dir = corpus(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no seeds", dir.display());
    for f in &files {
        let data = std::fs::read(f).unwrap();
        let r = std::panic::catch_unwind(|| run(&data));
        assert!(r.is_ok(), "{target}: {} fails", f.display());
    }
    println!("{target}: {} inputs replayed", files.len());
}

#[test]
fn every_target_has_a_corpus_and_a_test() {
    for (name, _) in nfv_fuzz_harness::TARGETS {
        assert!(corpus(name).is_dir(), "fuzz/corpus/{name} missing");
        let t =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../fuzz_targets/{name}.rs"));
        assert!(t.is_file(), "{} missing", t.display());
    }
}

#[test]
fn virtio_burst() {
    replay("virtio_burst");
}

#[test]
fn flow_extract() {
    replay("flow_extract");
}

#[test]
fn flow_actions() {
    replay("flow_actions");
}

#[test]
fn config_parse() {
    replay("config_parse");
}

#[test]
fn vhost_messages() {
    replay("vhost_messages");
}

#[test]
fn cni_input() {
    replay("cni_input");
}

#[test]
fn attach_request() {
    replay("attach_request");
}

#[test]
fn state_file() {
    replay("state_file");
}

#[test]
fn vxlan_underlay() {
    replay("vxlan_underlay");
}

#[test]
fn memif_handshake() {
    replay("memif_handshake");
}

#[test]
fn memif_rings() {
    replay("memif_rings");
}
