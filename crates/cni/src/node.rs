//! The node's REST API as the plugin uses it: one call per request, the
//! bearer token on every mutating one, and every answer parsed into a
//! type before anything reads it (a node, or anyone who wrote to it, must
//! not be able to make the plugin panic).

use crate::error::{
    CniError, INVALID_CONFIG, IO_ERROR, NODE_ANSWER, NOT_AUTHORIZED, TRY_AGAIN, err,
};
use crate::key::Key;
use crate::netconf::NetConf;
use serde::Deserialize;
use serde_json::Value;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A token longer than this is not one the node made.
const MAX_TOKEN: u64 = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Put,
    Delete,
    Post,
}

impl Method {
    fn mutates(self) -> bool {
        self != Method::Get
    }
}

/// The node the config names.
pub struct Node<'a> {
    api: &'a str,
    token_file: &'a Path,
    token_named: bool,
}

/// An attachment as the node answers it (`GET /api/v1/attachments`, the
/// body of a `PUT`): what the plugin reads of it.
#[derive(Deserialize, Debug, Clone, PartialEq)]
pub struct NodeAttachment {
    pub container_id: String,
    pub ifname: String,
    /// The socket's full path (the node joins its `socket_dir` and the
    /// name the plugin sent).
    pub socket: PathBuf,
    /// What the IPAM plugin answered at the first ADD, as the node kept
    /// it; checked by whoever reads it ([`crate::ipam::IpamResult`]).
    #[serde(default)]
    pub addresses: Option<Value>,
}

/// `GET /api/v1/node`: what the plugin reads of it.
#[derive(Deserialize, Debug, Clone, PartialEq, Default)]
pub struct NodeInfo {
    /// Where the node makes attachment sockets; `None`: it makes none.
    #[serde(default)]
    pub socket_dir: Option<PathBuf>,
}

fn malformed(what: &str, e: impl ToString) -> CniError {
    err(
        NODE_ANSWER,
        format!("the node's answer to {what} is not what the plugin expects"),
        e.to_string(),
    )
}

/// The attachment of `key` in the body of `GET /api/v1/attachments`
/// (`{"attachments": [...]}`). Other entries are not read, so one bad
/// entry spoils only its own key.
pub fn find_attachment(body: &Value, key: &Key) -> Result<Option<NodeAttachment>, CniError> {
    let all = body
        .get("attachments")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("GET /api/v1/attachments", "no \"attachments\" list"))?;
    let ours = all.iter().find(|a| {
        a.get("container_id").and_then(Value::as_str) == Some(key.container_id.as_str())
            && a.get("ifname").and_then(Value::as_str) == Some(key.ifname.as_str())
    });
    ours.map(|a| parse_attachment(a, "GET /api/v1/attachments"))
        .transpose()
}

/// An attachment the node answered, with an absolute socket path.
pub fn parse_attachment(v: &Value, what: &str) -> Result<NodeAttachment, CniError> {
    let a = NodeAttachment::deserialize(v).map_err(|e| malformed(what, e))?;
    if !a.socket.is_absolute() {
        return Err(malformed(
            what,
            format!("socket {} is not an absolute path", a.socket.display()),
        ));
    }
    Ok(a)
}

/// The body of `GET /api/v1/node`.
pub fn parse_node_info(body: &Value) -> Result<NodeInfo, CniError> {
    let info = NodeInfo::deserialize(body).map_err(|e| malformed("GET /api/v1/node", e))?;
    if let Some(dir) = &info.socket_dir
        && !dir.is_absolute()
    {
        return Err(malformed(
            "GET /api/v1/node",
            format!("socket_dir {} is not an absolute path", dir.display()),
        ));
    }
    Ok(info)
}

/// A refusal (any status but the one expected), with the node's own
/// message (`{"error": "..."}`) as details.
pub fn refused(status: u16, body: &Value) -> CniError {
    let msg = body
        .get("error")
        .and_then(Value::as_str)
        .or(body.as_str())
        .unwrap_or("refused")
        .to_string();
    let (code, what) = match status {
        401 | 403 => (NOT_AUTHORIZED, "the node refused the plugin's API token"),
        500.. => (TRY_AGAIN, "the node failed"),
        _ => (INVALID_CONFIG, "the node refused the request"),
    };
    err(code, format!("{what} (HTTP {status})"), msg)
}

/// The token in `file`: its content, trimmed; visible ASCII only, so it
/// fits an HTTP header.
pub fn read_token(file: &Path, named: bool) -> Result<String, CniError> {
    let mut text = String::new();
    let read =
        std::fs::File::open(file).and_then(|f| f.take(MAX_TOKEN + 1).read_to_string(&mut text));
    let token = text.trim();
    let problem = match read {
        // The node makes the file when it first starts, and the
        // runtime may run the plugin before the node's pod is up (the
        // deployment names the file explicitly, so this holds whether the
        // config named it or not): a missing file means "try again later".
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(err(
                TRY_AGAIN,
                format!(
                    "the node's API token {} does not exist yet (nfvswitch makes it when it \
                     starts)",
                    file.display()
                ),
                e.to_string(),
            ));
        }
        Err(e) => e.to_string(),
        Ok(_) if text.len() as u64 > MAX_TOKEN => format!("longer than {MAX_TOKEN} bytes"),
        Ok(_) if token.is_empty() => "empty".into(),
        Ok(_) if !token.bytes().all(|b| b.is_ascii_graphic()) => {
            "holds characters a token does not have (white space, control or non-ASCII)".into()
        }
        Ok(_) => return Ok(token.to_string()),
    };
    // Any other failure will not go away by retrying: the config names the
    // wrong file (invalid config), or the default one is broken (I/O).
    let code = if named { INVALID_CONFIG } else { IO_ERROR };
    Err(err(
        code,
        format!("cannot use the node's API token {}", file.display()),
        problem,
    ))
}

impl<'a> Node<'a> {
    pub fn of(c: &'a NetConf) -> Node<'a> {
        let (token_file, token_named) = c.token_file();
        Node {
            api: &c.api,
            token_file,
            token_named,
        }
    }

    /// The token for a call: required when `method` changes the node,
    /// sent when readable otherwise.
    fn token(&self, method: Method) -> Result<Option<String>, CniError> {
        match read_token(self.token_file, self.token_named) {
            Ok(t) => Ok(Some(t)),
            Err(e) if method.mutates() => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// Whether a mutating call could carry a token now.
    pub fn has_token(&self) -> Result<(), CniError> {
        read_token(self.token_file, self.token_named).map(|_| ())
    }

    /// One request: (status, body as JSON, or as a JSON string when it is
    /// not JSON). A node that cannot be reached is "try again later".
    pub fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), CniError> {
        let token = self.token(method)?;
        // No proxy and no redirects: the request, and the token with it,
        // goes to the address the config names and nowhere else.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let url = format!("{}{path}", self.api.trim_end_matches('/'));
        let auth = token.map(|t| format!("Bearer {t}"));
        let body = body.map(Value::to_string);
        let r = match method {
            Method::Get => with_auth(agent.get(&url), auth.as_deref()).call(),
            Method::Delete => with_auth(agent.delete(&url), auth.as_deref()).call(),
            Method::Put => with_auth(agent.put(&url), auth.as_deref())
                .header("content-type", "application/json")
                .send(body.unwrap_or_default()),
            Method::Post => with_auth(agent.post(&url), auth.as_deref())
                .header("content-type", "application/json")
                .send(body.unwrap_or_default()),
        };
        let mut r = r.map_err(|e| {
            err(
                TRY_AGAIN,
                format!("the nfvswitch node at {} does not answer", self.api),
                e.to_string(),
            )
        })?;
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, v))
    }

    /// The node's attachment of `key`, if it has one.
    pub fn attachment(&self, key: &Key) -> Result<Option<NodeAttachment>, CniError> {
        let (status, v) = self.call(Method::Get, "/api/v1/attachments", None)?;
        if status != 200 {
            return Err(refused(status, &v));
        }
        find_attachment(&v, key)
    }

    /// `PUT` of the attachment: (whether this call made the port, the
    /// attachment as the node answers it).
    pub fn attach(&self, key: &Key, request: &Value) -> Result<(bool, NodeAttachment), CniError> {
        let (status, v) = self.call(Method::Put, &key.path(), Some(request))?;
        if status != 200 && status != 201 {
            return Err(refused(status, &v));
        }
        let made = status == 201;
        match parse_attachment(&v, "PUT of the attachment") {
            Ok(a) => Ok((made, a)),
            Err(e) => {
                if made {
                    let _ = self.detach(key);
                }
                Err(e)
            }
        }
    }

    /// `DELETE` of the attachment: success also when there was none.
    pub fn detach(&self, key: &Key) -> Result<(), CniError> {
        let (status, v) = self.call(Method::Delete, &key.path(), None)?;
        if status == 200 {
            Ok(())
        } else {
            Err(refused(status, &v))
        }
    }

    pub fn info(&self) -> Result<NodeInfo, CniError> {
        let (status, v) = self.call(Method::Get, "/api/v1/node", None)?;
        if status != 200 {
            return Err(refused(status, &v));
        }
        parse_node_info(&v)
    }
}

fn with_auth<B>(r: ureq::RequestBuilder<B>, auth: Option<&str>) -> ureq::RequestBuilder<B> {
    match auth {
        Some(a) => r.header("authorization", a),
        None => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> Key {
        Key::new("0123456789abcdef", "net1").unwrap()
    }

    #[test]
    fn attachment_lists_of_any_shape_give_an_answer_or_an_error() {
        let good = json!({"container_id": "0123456789abcdef", "ifname": "net1",
                          "socket": "/run/pods/0123456789ab-net1.sock", "type": "vhost-user"});
        let cases: Vec<(&str, Value, Result<bool, u32>)> = vec![
            ("ours", json!({"attachments": [good.clone()]}), Ok(true)),
            ("none", json!({"attachments": []}), Ok(false)),
            (
                "others only",
                json!({"attachments": [{"container_id": "x"}, 1, "s", null]}),
                Ok(false),
            ),
            (
                "ours after garbage",
                json!({"attachments": [1, [], good.clone()]}),
                Ok(true),
            ),
            ("not an object", json!([good.clone()]), Err(NODE_ANSWER)),
            ("a string", json!("x"), Err(NODE_ANSWER)),
            (
                "list not a list",
                json!({"attachments": {"a": 1}}),
                Err(NODE_ANSWER),
            ),
            (
                "ours without socket",
                json!({"attachments": [
                {"container_id": "0123456789abcdef", "ifname": "net1"}]}),
                Err(NODE_ANSWER),
            ),
            (
                "ours with a relative socket",
                json!({"attachments": [
                {"container_id": "0123456789abcdef", "ifname": "net1", "socket": "a.sock"}]}),
                Err(NODE_ANSWER),
            ),
            (
                "ours with socket a number",
                json!({"attachments": [
                {"container_id": "0123456789abcdef", "ifname": "net1", "socket": 7}]}),
                Err(NODE_ANSWER),
            ),
        ];
        for (name, body, want) in cases {
            let got = find_attachment(&body, &key());
            match (got, want) {
                (Ok(a), Ok(found)) => assert_eq!(a.is_some(), found, "{name}"),
                (Err(e), Err(code)) => assert_eq!(e.code, code, "{name}: {e:?}"),
                (got, want) => panic!("{name}: {got:?}, wanted {want:?}"),
            }
        }
        // Addresses of any shape are kept as they are: their reader checks.
        let mut odd = good.clone();
        odd["addresses"] = json!("garbage");
        let a = find_attachment(&json!({"attachments": [odd]}), &key())
            .unwrap()
            .unwrap();
        assert_eq!(a.addresses, Some(json!("garbage")));
    }

    #[test]
    fn node_info_of_any_shape() {
        let cases: Vec<(Value, Result<Option<&str>, u32>)> = vec![
            (
                json!({"name": "n", "socket_dir": "/run/pods"}),
                Ok(Some("/run/pods")),
            ),
            (json!({"name": "n", "socket_dir": null}), Ok(None)),
            (json!({"name": "n"}), Ok(None)),
            (json!({"socket_dir": "pods"}), Err(NODE_ANSWER)),
            (json!({"socket_dir": 3}), Err(NODE_ANSWER)),
            (json!("up"), Err(NODE_ANSWER)),
            (json!(null), Err(NODE_ANSWER)),
        ];
        for (body, want) in cases {
            let got = parse_node_info(&body);
            match (got, want) {
                (Ok(i), Ok(dir)) => assert_eq!(i.socket_dir.as_deref(), dir.map(Path::new)),
                (Err(e), Err(code)) => assert_eq!(e.code, code, "{body}"),
                (got, want) => panic!("{body}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn refusals_carry_the_nodes_message() {
        let cases: &[(u16, Value, u32, &str)] = &[
            (
                401,
                json!({"error": "a token is needed"}),
                NOT_AUTHORIZED,
                "a token is needed",
            ),
            (
                403,
                json!({"error": "wrong token"}),
                NOT_AUTHORIZED,
                "wrong token",
            ),
            (
                400,
                json!({"error": "socket: not a file name"}),
                INVALID_CONFIG,
                "socket: not a file name",
            ),
            (409, json!("plain text"), INVALID_CONFIG, "plain text"),
            (503, json!({"error": 5}), TRY_AGAIN, "refused"),
            (404, json!([1]), INVALID_CONFIG, "refused"),
        ];
        for (status, body, code, details) in cases {
            let e = refused(*status, body);
            assert_eq!(
                (e.code, e.details.as_str()),
                (*code, *details),
                "{status} {body}"
            );
            assert!(e.msg.contains(&status.to_string()));
        }
    }

    #[test]
    fn tokens_are_read_or_refused_with_a_code() {
        let dir = std::env::temp_dir().join(format!("nfv-cni-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, content: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, content).unwrap();
            p
        };
        let good = file("good", b"  s3cr3t-token\n");
        assert_eq!(read_token(&good, true).unwrap(), "s3cr3t-token");
        let missing = dir.join("missing");
        for named in [true, false] {
            assert_eq!(read_token(&missing, named).unwrap_err().code, TRY_AGAIN);
        }
        let cases: Vec<(std::path::PathBuf, &str)> = vec![
            (file("empty", b" \n"), "empty"),
            (file("spaces", b"two words"), "white space"),
            (file("binary", b"\x01\x02"), "control"),
            (file("utf8", "tökén".as_bytes()), "non-ASCII"),
            (file("long", &[b'a'; 5000]), "longer"),
            (dir.clone(), "directory"),
        ];
        for (path, why) in cases {
            let e = read_token(&path, true).unwrap_err();
            assert_eq!(e.code, INVALID_CONFIG, "{why}: {e:?}");
            assert!(
                e.details.contains(why) || why == "directory",
                "{why}: {e:?}"
            );
            assert_eq!(
                read_token(&path, false).unwrap_err().code,
                IO_ERROR,
                "{why}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
