//! Who may talk to the API, checked before any route runs:
//!
//! 1. **`Host`** must name the address the API is bound to (an IP
//!    literal; any on a wildcard bind), `localhost` or a loopback address
//!    on a loopback bind, or a name in `[node] api_hosts`. Anything else
//!    is 421: a DNS-rebinding page reaches us under its own name.
//! 2. **`Origin`**, when sent, must be this origin (`http://` + the
//!    `Host` given), and **`Sec-Fetch-Site`**, when sent, `same-origin` or
//!    `none`: a page elsewhere is refused with 403 whatever it carries.
//! 3. **A credential**: every request that is not a GET or HEAD, and
//!    every request when reads are not open, carries `Authorization:
//!    Bearer TOKEN` (401 otherwise). A browser sends that header
//!    cross-site only after a CORS preflight, which this API never
//!    grants, so no "simple" cross-site request can change the node.

use crate::token::same_token;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The checks' settings.
pub struct Guard {
    token: String,
    bound: SocketAddr,
    /// `[node] api_hosts`, lower case.
    hosts: Vec<String>,
    /// GETs and HEADs without a token.
    open_reads: bool,
}

/// A refusal of the guard: status, message, and whether to ask for the
/// bearer token.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal(pub StatusCode, pub String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut r = (self.0, axum::Json(json!({ "error": self.1 }))).into_response();
        if self.0 == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"nfvswitch\""),
            );
        }
        r
    }
}

impl Guard {
    pub fn new(token: String, bound: SocketAddr, access: &nfv_config::AccessConfig) -> Guard {
        Guard {
            token,
            bound,
            hosts: access.api_hosts.clone(),
            open_reads: access.api_open_reads.unwrap_or(bound.ip().is_loopback()),
        }
    }

    /// Admits the request or says why not (module doc).
    pub fn admit(&self, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
        let text = |name: header::HeaderName| {
            headers
                .get(name)
                .map(|v| v.to_str().map(str::trim).unwrap_or("\u{fffd}"))
        };
        let host = text(header::HOST).unwrap_or("");
        if !self.allowed_host(host) {
            return Err(Refusal(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "Host {host:?} is not this node's API ({}); add the name to [node] api_hosts \
                     to use it",
                    self.bound
                ),
            ));
        }
        if let Some(origin) = text(header::ORIGIN) {
            let authority = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            if !authority.is_some_and(|a| a.eq_ignore_ascii_case(host)) {
                return Err(Refusal(
                    StatusCode::FORBIDDEN,
                    format!("cross-origin request from {origin:?} refused"),
                ));
            }
        }
        if let Some(site) = headers.get("sec-fetch-site").map(|v| v.as_bytes())
            && site != b"same-origin"
            && site != b"none"
        {
            return Err(Refusal(
                StatusCode::FORBIDDEN,
                format!(
                    "cross-site request (Sec-Fetch-Site: {}) refused",
                    String::from_utf8_lossy(site)
                ),
            ));
        }
        let reading = *method == Method::GET || *method == Method::HEAD;
        let bearer = headers
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .map(|v| v.strip_prefix(b"Bearer ").unwrap_or(b""));
        match bearer {
            Some(t) if same_token(t, self.token.as_bytes()) => Ok(()),
            Some(_) => Err(Refusal(
                StatusCode::UNAUTHORIZED,
                "the bearer token is wrong".into(),
            )),
            None if reading && self.open_reads => Ok(()),
            None => Err(Refusal(
                StatusCode::UNAUTHORIZED,
                format!(
                    "{} needs the node's token: Authorization: Bearer TOKEN (the token is in \
                     [node] api_token_file; `nfvswitch ctl show node` names the file)",
                    if reading { "reading" } else { "a change" }
                ),
            )),
        }
    }

    fn allowed_host(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else {
            return false;
        };
        if self.hosts.contains(&name) {
            return true;
        }
        let bound = self.bound.ip();
        match name.parse::<IpAddr>() {
            Ok(ip) => {
                ip == bound || bound.is_unspecified() || (bound.is_loopback() && ip.is_loopback())
            }
            Err(_) => name == "localhost" && bound.is_loopback(),
        }
    }
}

/// The host of a `Host` value, lower case, without port, brackets or a
/// trailing dot; `None` when it is not one.
fn host_name(host: &str) -> Option<String> {
    let h = host.to_ascii_lowercase();
    let name = if let Some(rest) = h.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        ip.to_string()
    } else {
        match h.rsplit_once(':') {
            Some((name, port)) if is_port(port) && !name.contains(':') => name.to_string(),
            Some(_) => return None,
            None => h,
        }
    };
    let name = name.strip_suffix('.').unwrap_or(&name).to_string();
    (!name.is_empty()).then_some(name)
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// The middleware: [`Guard::admit`] before every route.
pub async fn check(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    match g.admit(req.method(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(refusal) => {
            tracing::debug!(
                "REST API: {} {}: {}",
                req.method(),
                req.uri().path(),
                refusal.1
            );
            refusal.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(bound: &str, hosts: &[&str], open_reads: Option<bool>) -> Guard {
        let access = nfv_config::AccessConfig {
            api_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            api_open_reads: open_reads,
            ..Default::default()
        };
        Guard::new("t0k3n-t0k3n-t0k3n".into(), bound.parse().unwrap(), &access)
    }

    /// (method, headers) → status; 200 = admitted.
    #[test]
    fn requests_are_admitted_by_host_origin_and_token() {
        let local = guard("127.0.0.1:9180", &[], None);
        let named = guard("10.1.2.3:9180", &["node1.example"], None);
        let wildcard = guard("0.0.0.0:9180", &[], None);
        let closed = guard("127.0.0.1:9180", &[], Some(false));
        let auth = "Bearer t0k3n-t0k3n-t0k3n";
        let cases: &[(&Guard, &str, &[(&str, &str)], u16)] = &[
            (&local, "GET", &[("host", "127.0.0.1:9180")], 200),
            (&local, "GET", &[("host", "localhost:9180")], 200),
            (&local, "GET", &[("host", "LocalHost.:9180")], 200),
            (&local, "GET", &[("host", "[::1]:9180")], 200),
            (&local, "GET", &[], 421),
            (&local, "GET", &[("host", "evil.example:9180")], 421),
            (&local, "GET", &[("host", "10.0.0.1:9180")], 421),
            (&local, "GET", &[("host", "127.0.0.1:9180:1")], 421),
            (&local, "POST", &[("host", "127.0.0.1:9180")], 401),
            (
                &local,
                "POST",
                &[("host", "127.0.0.1:9180"), ("authorization", auth)],
                200,
            ),
            (
                &local,
                "DELETE",
                &[("host", "127.0.0.1:9180"), ("authorization", "Bearer x")],
                401,
            ),
            (
                &local,
                "POST",
                &[
                    ("host", "127.0.0.1:9180"),
                    ("authorization", "t0k3n-t0k3n-t0k3n"),
                ],
                401,
            ),
            (
                &local,
                "GET",
                &[("host", "127.0.0.1:9180"), ("authorization", "Bearer x")],
                401,
            ),
            // A page elsewhere: refused even with the token.
            (
                &local,
                "POST",
                &[
                    ("host", "127.0.0.1:9180"),
                    ("origin", "http://evil.example"),
                    ("authorization", auth),
                ],
                403,
            ),
            (
                &local,
                "GET",
                &[("host", "127.0.0.1:9180"), ("origin", "null")],
                403,
            ),
            (
                &local,
                "POST",
                &[
                    ("host", "127.0.0.1:9180"),
                    ("origin", "http://127.0.0.1:8000"),
                    ("authorization", auth),
                ],
                403,
            ),
            (
                &local,
                "GET",
                &[
                    ("host", "127.0.0.1:9180"),
                    ("origin", "http://127.0.0.1:9180"),
                ],
                200,
            ),
            (
                &local,
                "POST",
                &[
                    ("host", "127.0.0.1:9180"),
                    ("sec-fetch-site", "cross-site"),
                    ("authorization", auth),
                ],
                403,
            ),
            (
                &local,
                "GET",
                &[("host", "127.0.0.1:9180"), ("sec-fetch-site", "same-site")],
                403,
            ),
            (
                &local,
                "GET",
                &[
                    ("host", "127.0.0.1:9180"),
                    ("sec-fetch-site", "same-origin"),
                ],
                200,
            ),
            // DNS rebinding: the page's name with our address behind it.
            (
                &local,
                "POST",
                &[
                    ("host", "rebind.example:9180"),
                    ("origin", "http://rebind.example:9180"),
                ],
                421,
            ),
            (&named, "GET", &[("host", "node1.example:9180")], 401),
            (
                &named,
                "GET",
                &[("host", "node1.example:9180"), ("authorization", auth)],
                200,
            ),
            (
                &named,
                "GET",
                &[("host", "10.1.2.3"), ("authorization", auth)],
                200,
            ),
            (
                &named,
                "GET",
                &[("host", "localhost:9180"), ("authorization", auth)],
                421,
            ),
            (
                &wildcard,
                "GET",
                &[("host", "192.168.7.7:9180"), ("authorization", auth)],
                200,
            ),
            (
                &wildcard,
                "GET",
                &[("host", "rebind.example:9180"), ("authorization", auth)],
                421,
            ),
            (&closed, "GET", &[("host", "127.0.0.1:9180")], 401),
            (
                &closed,
                "GET",
                &[("host", "127.0.0.1:9180"), ("authorization", auth)],
                200,
            ),
        ];
        for (g, method, headers, want) in cases {
            let mut h = HeaderMap::new();
            for (k, v) in *headers {
                h.insert(
                    header::HeaderName::from_static(k),
                    header::HeaderValue::from_str(v).unwrap(),
                );
            }
            let got = match g.admit(&method.parse().unwrap(), &h) {
                Ok(()) => 200,
                Err(Refusal(s, _)) => s.as_u16(),
            };
            assert_eq!(got, *want, "{method} {headers:?} (bound {})", g.bound);
        }
    }
}
