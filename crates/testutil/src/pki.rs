//! Test certificates: a CA and leaf certificates it signs, made with the
//! `openssl` command (TLS tests: OpenFlow's `pssl:`/`ssl:`).

use std::process::Command;

/// Makes a CA and, signed by it, a certificate for each name in `names`
/// (key `NAME.key`, certificate `NAME.pem`) in `dir` with `openssl`;
/// `ca` names the CA's files. Leaf certificates are v3, for both server
/// and client use, valid for 127.0.0.1. None when openssl is missing or
/// fails.
pub fn make_pki(dir: &std::path::Path, ca: &str, names: &[&str]) -> Option<()> {
    let run = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|_| ())
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        &format!("/CN={ca}"),
        "-keyout",
        &format!("{ca}.key"),
        "-out",
        &format!("{ca}.pem"),
    ])?;
    std::fs::write(
        dir.join("leaf.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
         extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1\n",
    )
    .ok()?;
    for n in names {
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={n}"),
            "-keyout",
            &format!("{n}.key"),
            "-out",
            &format!("{n}.csr"),
        ])?;
        run(&[
            "x509",
            "-req",
            "-in",
            &format!("{n}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
            "-out",
            &format!("{n}.pem"),
        ])?;
    }
    Some(())
}
