//! Shared by the integration tests: run a table of bad configs.
#![allow(dead_code)]

use std::path::Path;

use nfv_config::ConfigError;

/// A config that must be rejected: at `line`, with the field path
/// exactly `field` and a message containing `msg`.
pub struct Bad {
    pub name: &'static str,
    pub text: &'static str,
    pub line: usize,
    pub field: &'static str,
    pub msg: &'static str,
}

pub const CPUS: usize = 2;

pub fn parse(text: &str) -> Result<nfv_config::NodeConfig, ConfigError> {
    nfv_config::parse_str(text, Path::new("conf/node.toml"), CPUS)
}

/// Runs every case and reports all mismatches at once.
pub fn check_all(cases: &[Bad]) {
    let mut failures = Vec::new();
    for c in cases {
        match parse(c.text) {
            Ok(_) => failures.push(format!("{}: accepted", c.name)),
            Err(e) => {
                if std::env::var_os("SHOW_ERRORS").is_some() {
                    eprintln!("{:<28} {}", c.name, e);
                }
                let shown = e.to_string();
                let ConfigError::Invalid {
                    file,
                    line,
                    field,
                    message,
                } = &e
                else {
                    failures.push(format!("{}: not Invalid: {shown}", c.name));
                    continue;
                };
                let ok = file == Path::new("conf/node.toml")
                    && *line == c.line
                    && field == c.field
                    && message.contains(c.msg)
                    && shown.starts_with(&format!("conf/node.toml:{line}: "));
                if !ok {
                    failures.push(format!(
                        "{}: want line {} field {:?} msg ~{:?}; got {shown:?} (field {field:?})",
                        c.name, c.line, c.field, c.msg
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
