//! The attachment routes (`nfv_control::attachments`), what the CNI
//! plugin calls: one resource per container id and interface name.
//!
//! * `GET /api/v1/attachments`: every attachment.
//! * `PUT /api/v1/attachments/{container_id}/{ifname}` with
//!   `{"type": "vhost-user"|"memif", "mode": "server"|"client", "socket": PATH,
//!   "network": NAME}` (`network`: the CNI network's name, what GC is
//!   scoped by): 201 and the attachment when the port was made, 200 when
//!   the same request had made it before, 409 when the key holds another
//!   request.
//! * `DELETE /api/v1/attachments/{container_id}/{ifname}`: 200 with
//!   `{"deleted": true|false}` (false: nothing was attached; not an error,
//!   as CNI DEL requires).
//! * `POST /api/v1/attachments/gc` with
//!   `{"network": NAME, "valid": [{"container_id", "ifname"}, ...]}`: every
//!   other attachment of that network is removed (other networks' stay);
//!   200 with `{"removed": [...]}`.

use crate::handler::{ApiError, St, blocking};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nfv_control::attachments::{AttachError, AttachRequest, AttachmentKey};
use serde::Deserialize;
use serde_json::json;

fn refused(e: AttachError) -> ApiError {
    let status = match e {
        AttachError::Invalid(_) | AttachError::Port(_) => StatusCode::BAD_REQUEST,
        AttachError::Conflict { .. } => StatusCode::CONFLICT,
        AttachError::NoFreeId => StatusCode::SERVICE_UNAVAILABLE,
        AttachError::State { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError(status, e.to_string())
}

fn json_body<T: for<'de> Deserialize<'de>>(body: &[u8], shape: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad(format!("the body must be {shape}: {e}")))
}

pub async fn list(State(st): St) -> Result<Response, ApiError> {
    let all = blocking(&st, |n| n.list_attachments()).await?;
    Ok(axum::Json(json!({ "attachments": all })).into_response())
}

pub async fn attach(
    State(st): St,
    Path((container_id, ifname)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let req: AttachRequest = json_body(
        &body,
        "{\"type\": \"vhost-user\" or \"memif\", \"mode\": \"server\" or \"client\", \"socket\": PATH, \"network\": NAME}",
    )?;
    let key = AttachmentKey {
        container_id,
        ifname,
    };
    let (a, made) = blocking(&st, move |n| n.attach(key, req))
        .await?
        .map_err(refused)?;
    let status = if made {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(json!(a))).into_response())
}

pub async fn detach(
    State(st): St,
    Path((container_id, ifname)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let key = AttachmentKey {
        container_id,
        ifname,
    };
    let gone = blocking(&st, move |n| n.detach(&key))
        .await?
        .map_err(refused)?;
    Ok(axum::Json(json!({ "deleted": gone.is_some(), "attachment": gone })).into_response())
}

pub async fn gc(State(st): St, body: axum::body::Bytes) -> Result<Response, ApiError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        network: String,
        valid: Vec<AttachmentKey>,
    }
    let b: Body = json_body(
        &body,
        "{\"network\": NAME, \"valid\": [{\"container_id\": ID, \"ifname\": NAME}, ...]}",
    )?;
    let removed = blocking(&st, move |n| n.gc_attachments(&b.network, &b.valid))
        .await?
        .map_err(refused)?;
    Ok(axum::Json(json!({ "removed": removed })).into_response())
}
