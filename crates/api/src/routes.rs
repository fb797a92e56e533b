//! The routes. Each handler turns HTTP into a typed node operation and
//! back; node operations run on tokio's blocking threads (they take the
//! control plane's locks and may open files and sockets).

use crate::attachments;
use crate::handler::{ApiError, AppState, St, blocking};
use crate::served::Served;
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use nfv_control::Request;
use nfv_control::rates::HISTORY;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Largest request body (a big add-flows batch fits), as on the control
/// socket.
const MAX_BODY: usize = 16 << 20;

type ApiResult = Result<axum::Json<Value>, ApiError>;

pub fn router(served: Arc<Served>, guard: Arc<crate::guard::Guard>) -> Router {
    let state = Arc::new(AppState {
        metrics: crate::metrics::registry(served.clone()),
        served,
    });
    Router::new()
        .route("/api/v1", get(index))
        .route("/api/v1/node", get(show_node))
        .route("/api/v1/controllers", get(show_controllers))
        .route("/api/v1/ports", get(show_ports).post(add_port))
        .route("/api/v1/ports/{port}", delete(del_port))
        .route("/api/v1/attachments", get(attachments::list))
        .route("/api/v1/attachments/gc", post(attachments::gc))
        .route(
            "/api/v1/attachments/{container_id}/{ifname}",
            put(attachments::attach).delete(attachments::detach),
        )
        .route("/api/v1/pmd", get(show_pmd))
        .route("/api/v1/rxqs", get(show_rxqs))
        .route("/api/v1/pmd/rebalance", post(pmd_rebalance))
        .route("/api/v1/pmd/rxq-move", post(pmd_rxq_move))
        .route("/api/v1/chains", get(show_chains))
        .route("/api/v1/traffic", get(show_traffic))
        .route(
            "/api/v1/flows",
            get(dump_flows).post(add_flows).delete(del_flows),
        )
        .route(
            "/api/v1/groups",
            get(dump_groups).post(add_group).put(mod_group),
        )
        .route("/api/v1/groups/{id}", delete(del_group))
        .route(
            "/api/v1/conntrack",
            get(dump_conntrack).delete(flush_conntrack),
        )
        .route("/api/v1/trace", get(trace))
        .route("/api/v1/stats/clear", post(clear_stats))
        .route("/api/v1/timeseries", get(timeseries))
        .route("/api/v1/demo", get(demo))
        .route("/metrics", get(metrics))
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            guard,
            crate::guard::check,
        ))
        .with_state(state)
}

/// A control request through [`Node::handle`](nfv_control::Node::handle),
/// as `nfvswitch ctl` sends it.
async fn handle(st: &Arc<AppState>, req: Request) -> ApiResult {
    match blocking(st, move |n| n.handle(&req)).await? {
        nfv_control::Response::Ok { data } => Ok(axum::Json(data)),
        nfv_control::Response::Error { message } => Err(ApiError::bad(message)),
    }
}

async fn index() -> axum::Json<Value> {
    axum::Json(json!({
        "endpoints": [
            "GET /api/v1/node",
            "GET /api/v1/ports",
            "POST /api/v1/ports",
            "DELETE /api/v1/ports/{name or number}",
            "GET /api/v1/attachments",
            "PUT /api/v1/attachments/{container_id}/{ifname}",
            "DELETE /api/v1/attachments/{container_id}/{ifname}",
            "POST /api/v1/attachments/gc",
            "GET /api/v1/pmd",
            "GET /api/v1/rxqs",
            "POST /api/v1/pmd/rebalance?dry_run=true",
            "POST /api/v1/pmd/rxq-move {port, queue, pmd}",
            "GET /api/v1/chains",
            "GET /api/v1/traffic",
            "GET /api/v1/flows?filter=F",
            "POST /api/v1/flows",
            "DELETE /api/v1/flows?filter=F",
            "GET /api/v1/groups",
            "POST /api/v1/groups (add-group text)",
            "PUT /api/v1/groups (mod-group text)",
            "DELETE /api/v1/groups/{group_id}",
            "GET /api/v1/conntrack?zone=N&limit=N",
            "DELETE /api/v1/conntrack?zone=N",
            "GET /api/v1/trace?flow=PACKET&ct_next=FLAGS;FLAGS",
            "GET /api/v1/controllers",
            "POST /api/v1/stats/clear",
            "GET /api/v1/timeseries?seconds=N",
            "GET /api/v1/demo",
            "GET /metrics",
        ]
    }))
}

async fn show_node(State(st): St) -> ApiResult {
    handle(&st, Request::ShowNode).await
}
async fn show_controllers(State(st): St) -> ApiResult {
    handle(&st, Request::ShowControllers).await
}
async fn show_ports(State(st): St) -> ApiResult {
    handle(&st, Request::ShowPorts).await
}
async fn show_pmd(State(st): St) -> ApiResult {
    handle(&st, Request::ShowPmd).await
}
async fn show_rxqs(State(st): St) -> ApiResult {
    handle(&st, Request::ShowRxqs).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RebalanceQuery {
    #[serde(default)]
    dry_run: bool,
}

async fn pmd_rebalance(
    State(st): St,
    q: Result<Query<RebalanceQuery>, QueryRejection>,
) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad(e.body_text()))?;
    handle(&st, Request::PmdRebalance { dry_run: q.dry_run }).await
}

async fn pmd_rxq_move(State(st): St, body: axum::body::Bytes) -> ApiResult {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Move {
        port: String,
        queue: usize,
        pmd: usize,
    }
    let m: Move = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad(format!("expected {{\"port\", \"queue\", \"pmd\"}}: {e}")))?;
    handle(
        &st,
        Request::PmdRxqMove {
            port: m.port,
            queue: m.queue,
            pmd: m.pmd,
        },
    )
    .await
}

async fn show_chains(State(st): St) -> ApiResult {
    handle(&st, Request::ShowChains).await
}
async fn show_traffic(State(st): St) -> ApiResult {
    handle(&st, Request::ShowTraffic).await
}
async fn dump_flows(State(st): St, q: Result<Query<FlowsQuery>, QueryRejection>) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad(e.body_text()))?;
    handle(
        &st,
        Request::DumpFlows {
            filter: q.filter.unwrap_or_default(),
        },
    )
    .await
}

/// `GET /trace?flow=...[&ct_next=S1;S2...]`: what the datapath would do
/// with the packet; `ct_next`, the tracker's answers for the tracked
/// copies in the order they are looked up (`ctl trace --ct-next`, once per
/// copy), separated by `;` (each `trk,new`-style: commas are taken).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceQuery {
    flow: String,
    ct_next: Option<String>,
}

async fn trace(State(st): St, q: Result<Query<TraceQuery>, QueryRejection>) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad(e.body_text()))?;
    let ct_next = q
        .ct_next
        .map(|s| s.split(';').map(str::to_string).collect())
        .unwrap_or_default();
    handle(
        &st,
        Request::Trace {
            flow: q.flow,
            ct_next,
        },
    )
    .await
}

/// `GET /flows?filter=...`: the rules a del-flows filter selects.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowsQuery {
    filter: Option<String>,
}
async fn clear_stats(State(st): St) -> ApiResult {
    handle(&st, Request::ClearStats).await
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

fn body_text(body: axum::body::Bytes) -> Result<String, ApiError> {
    String::from_utf8(body.to_vec()).map_err(|_| ApiError::bad("the body is not UTF-8"))
}

/// Rules from a JSON body (`["...", ...]` or `{"flows": [...]}`) or from
/// text, one per line, blank lines and `#` comments skipped.
fn parse_flows(headers: &HeaderMap, body: axum::body::Bytes) -> Result<Vec<String>, ApiError> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Body {
        List(Vec<String>),
        Object { flows: Vec<String> },
    }
    let flows = if is_json(headers) {
        match serde_json::from_slice::<Body>(&body) {
            Ok(Body::List(f) | Body::Object { flows: f }) => f,
            Err(_) => {
                return Err(ApiError::bad(
                    "a JSON body must be a list of rules or {\"flows\": [rules]}",
                ));
            }
        }
    } else {
        body_text(body)?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(String::from)
            .collect()
    };
    if flows.is_empty() {
        return Err(ApiError::bad("no flows given"));
    }
    Ok(flows)
}

async fn add_flows(State(st): St, headers: HeaderMap, body: axum::body::Bytes) -> ApiResult {
    let flows = parse_flows(&headers, body)?;
    handle(&st, Request::AddFlows { flows }).await
}

#[derive(Deserialize)]
struct FilterQuery {
    filter: Option<String>,
}

async fn del_flows(State(st): St, q: Result<Query<FilterQuery>, QueryRejection>) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad(e.body_text()))?;
    let Some(filter) = q.filter else {
        return Err(ApiError::bad(
            "give ?filter=RULES (an empty filter, ?filter=, deletes every rule)",
        ));
    };
    handle(&st, Request::DelFlows { filter }).await
}

/// A group from a JSON body (`{"group": "group_id=1,..."}`) or as text.
fn group_body(headers: &HeaderMap, body: axum::body::Bytes) -> Result<String, ApiError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        group: String,
    }
    let text = if is_json(headers) {
        serde_json::from_slice::<Body>(&body)
            .map_err(|_| ApiError::bad("a JSON body must be {\"group\": \"group_id=N,...\"}"))?
            .group
    } else {
        body_text(body)?
    };
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(ApiError::bad("no group given"));
    }
    Ok(text)
}

/// `GET /conntrack?zone=N&limit=N`, `DELETE /conntrack?zone=N`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConntrackQuery {
    zone: Option<u16>,
    limit: Option<usize>,
}

async fn dump_conntrack(
    State(st): St,
    q: Result<Query<ConntrackQuery>, QueryRejection>,
) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad(e.body_text()))?;
    handle(
        &st,
        Request::DumpConntrack {
            zone: q.zone,
            limit: q.limit,
        },
    )
    .await
}

async fn flush_conntrack(
    State(st): St,
    q: Result<Query<ConntrackQuery>, QueryRejection>,
) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad(e.body_text()))?;
    if q.limit.is_some() {
        return Err(ApiError::bad("a flush takes zone=N only"));
    }
    handle(&st, Request::FlushConntrack { zone: q.zone }).await
}

async fn dump_groups(State(st): St) -> ApiResult {
    handle(&st, Request::DumpGroups).await
}

async fn add_group(State(st): St, headers: HeaderMap, body: axum::body::Bytes) -> ApiResult {
    let group = group_body(&headers, body)?;
    handle(&st, Request::AddGroup { group }).await
}

async fn mod_group(State(st): St, headers: HeaderMap, body: axum::body::Bytes) -> ApiResult {
    let group = group_body(&headers, body)?;
    handle(&st, Request::ModGroup { group }).await
}

async fn del_group(State(st): St, Path(id): Path<String>) -> ApiResult {
    let id: u32 = id
        .parse()
        .map_err(|_| ApiError::bad(format!("{id:?} is not a group id")))?;
    handle(&st, Request::DelGroups { group_id: Some(id) }).await
}

async fn add_port(State(st): St, headers: HeaderMap, body: axum::body::Bytes) -> ApiResult {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        port: String,
    }
    let port = if is_json(&headers) {
        serde_json::from_slice::<Body>(&body)
            .map_err(|_| {
                ApiError::bad("a JSON body must be {\"port\": \"name=..., id=..., type=...\"}")
            })?
            .port
    } else {
        body_text(body)?
    };
    if port.trim().is_empty() {
        return Err(ApiError::bad(
            "no port given: send its keys as an inline TOML table, e.g. name=\"s2\",id=3,type=\"sink\"",
        ));
    }
    match blocking(&st, move |n| {
        n.add_port_as(&port, nfv_control::Caller::RestApi)
    })
    .await?
    {
        Ok(added) => Ok(axum::Json(json!({ "added": added }))),
        Err(e @ nfv_control::RequestError::Forbidden(_)) => {
            Err(ApiError(StatusCode::FORBIDDEN, e.to_string()))
        }
        Err(e) => Err(ApiError::bad(e.to_string())),
    }
}

async fn del_port(State(st): St, Path(port): Path<String>) -> ApiResult {
    let p = port.clone();
    if blocking(&st, move |n| n.datapath().resolve_port(&p))
        .await?
        .is_none()
    {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no port {port:?}")));
    }
    handle(&st, Request::DelPort { port }).await
}

#[derive(Deserialize)]
struct SecondsQuery {
    seconds: Option<u64>,
}

async fn timeseries(State(st): St, q: Result<Query<SecondsQuery>, QueryRejection>) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad(e.body_text()))?;
    let seconds = q.seconds.unwrap_or(HISTORY as u64);
    if seconds == 0 {
        return Err(ApiError::bad(format!(
            "seconds: give 1 to {HISTORY} (more is cut to {HISTORY})"
        )));
    }
    let n = seconds.min(HISTORY as u64) as usize;
    let samples = blocking(&st, move |node| node.rate_history(n)).await?;
    Ok(axum::Json(json!({
        "interval_secs": nfv_control::rates::INTERVAL.as_secs_f64(),
        "capacity": HISTORY,
        "samples": samples,
    })))
}

/// The demo's progress; 404 when this node is not run by `nfvswitch demo`.
async fn demo(State(st): St) -> Result<axum::Json<crate::DemoStatus>, ApiError> {
    st.served.demo().map(axum::Json).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            "no demo: this node is not run by `nfvswitch demo`".into(),
        )
    })
}

/// Prometheus text 0.0.4 by default (what `promtool` and most tools
/// read); OpenMetrics 1.0 when the scraper's `Accept` asks for it, as
/// Prometheus does.
async fn metrics(State(st): St, headers: HeaderMap) -> Result<Response, ApiError> {
    let open_metrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let s = st.clone();
    let text = blocking(&st, move |_| crate::metrics::encode(&s.metrics))
        .await?
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let (ty, body) = if open_metrics {
        (crate::metrics::OPENMETRICS_TYPE, text)
    } else {
        (
            crate::metrics::TEXT_TYPE,
            crate::metrics::to_text_004(&text),
        )
    };
    Ok(([(header::CONTENT_TYPE, ty)], body).into_response())
}

async fn fallback(method: Method, uri: Uri) -> Response {
    if (method == Method::GET || method == Method::HEAD)
        && let Some((ty, body)) = crate::assets::lookup(uri.path())
    {
        return ([(header::CONTENT_TYPE, ty)], body).into_response();
    }
    ApiError(
        StatusCode::NOT_FOUND,
        format!("no such endpoint: {method} {}", uri.path()),
    )
    .into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
