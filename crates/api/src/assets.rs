//! The dashboard's files, compiled into the binary (no CDN, nothing read
//! at run time). Adding a file = one line in [`ASSETS`].

/// (URL path without the leading `/`, content type, contents).
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../assets/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../assets/style.css"),
    ),
];

/// The file served at `path` (`/` is `index.html`): (content type, body).
pub fn lookup(path: &str) -> Option<(&'static str, &'static str)> {
    let name = match path.trim_start_matches('/') {
        "" => "index.html",
        n => n,
    };
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, ty, body)| (*ty, *body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_index_and_unknown_files_are_absent() {
        let (ty, body) = lookup("/").unwrap();
        assert!(ty.starts_with("text/html"));
        assert!(body.contains("<html"));
        assert_eq!(lookup("/index.html").unwrap().1, body);
        assert!(lookup("/app.js").unwrap().0.starts_with("text/javascript"));
        assert!(lookup("/style.css").unwrap().0.starts_with("text/css"));
        assert!(lookup("/missing.js").is_none());
        assert!(lookup("/../Cargo.toml").is_none());
    }
}
