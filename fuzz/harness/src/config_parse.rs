//! Target `config_parse`: the node config parser (`nfv_config::parse_str`:
//! TOML, validation, flows and chains) on hostile text. Checks: no panic;
//! an error always has a message; the same text parses the same way
//! twice (no hidden state).

use std::path::Path;

pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let path = Path::new("/nonexistent/fuzz/node.toml");
    let a = nfv_config::parse_str(&text, path, 2);
    let b = nfv_config::parse_str(&text, path, 2);
    match (&a, &b) {
        (Err(e), Err(f)) => {
            let (m, n) = (e.to_string(), f.to_string());
            assert!(!m.is_empty(), "an error without a message");
            assert_eq!(m, n, "the same text, two different errors");
        }
        (Ok(_), Ok(_)) => {}
        _ => panic!("the same text parsed once and refused once"),
    }
}
