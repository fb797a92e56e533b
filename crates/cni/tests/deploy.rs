//! `deploy/` checked against schemas: the Kubernetes objects against the
//! Kubernetes OpenAPI schemas (kubernetes-validate, strict), the
//! NetworkAttachmentDefinitions against the NPWG resource's schema and
//! their CNI configs and the conflist against the CNI spec's structure
//! (`deploy/check`). A broken copy is refused, so the check is not empty.

use std::path::{Path, PathBuf};
use std::process::Command;

const TEST: &str = "deploy::manifests_pass_the_schema_check";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// A Python with kubernetes-validate: `$NFVSWITCH_DEPLOY_PYTHON`, else the
/// venv `scripts/test` makes in `target/deploy-check`.
fn python() -> Result<PathBuf, String> {
    let p = std::env::var_os("NFVSWITCH_DEPLOY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/deploy-check/bin/python")
        });
    let ok = Command::new(&p)
        .args(["-c", "import kubernetes_validate, jsonschema, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(p)
    } else {
        Err(format!(
            "{} cannot import kubernetes_validate (scripts/test installs it with pip into \
             target/deploy-check, or set NFVSWITCH_DEPLOY_PYTHON)",
            p.display()
        ))
    }
}

fn check(python: &Path, dir: &Path) -> (bool, String) {
    let out = Command::new(python)
        .arg(deploy_dir().join("check"))
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn manifests_pass_the_schema_check() {
    let python = match python() {
        Ok(p) => p,
        Err(why) => return nfv_testutil::skip(TEST, &why),
    };
    let (ok, out) = check(&python, &deploy_dir());
    assert!(ok, "{out}");
    for object in [
        "NetworkAttachmentDefinition/nfv-vhost",
        "NetworkAttachmentDefinition/nfv-memif",
        "ConfigMap/nfvswitch-config",
        "DaemonSet/nfvswitch",
        "Pod/testpmd",
        "nfvswitch.conflist",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with("ok ") && l.ends_with(object)),
            "{object} not checked:\n{out}"
        );
    }

    // A broken copy: each fault found, the check fails.
    let dir = std::env::temp_dir().join(format!("nfv-deploy-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let read = |f: &str| std::fs::read_to_string(deploy_dir().join(f)).unwrap();
    let write = |f: &str, text: String| std::fs::write(dir.join(f), text).unwrap();
    write(
        "ds.yaml",
        read("nfvswitch-daemonset.yaml").replace("hostNetwork: true", "hostNetwork: \"yes\""),
    );
    write(
        "nad.yaml",
        read("network-attachment-definition.yaml").replace(
            "\"type\": \"nfvswitch-cni\",",
            "\"kind\": \"nfvswitch-cni\",",
        ),
    );
    write(
        "x.conflist",
        r#"{"cniVersion": "1.1.0", "name": "x", "plugins": []}"#.into(),
    );
    let (ok, out) = check(&python, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "{out}");
    for fault in [
        "FAIL ds.yaml[1] DaemonSet/nfvswitch: spec/template/spec/hostNetwork",
        "FAIL nad.yaml[0] NetworkAttachmentDefinition/nfv-vhost: spec.config",
        "FAIL x.conflist",
    ] {
        assert!(out.contains(fault), "{fault} not reported:\n{out}");
    }
}
