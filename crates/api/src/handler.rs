//! What every route handler shares: the state the router hands it, the
//! refusal it returns, and the way it runs node operations (on a
//! blocking thread). `routes` and `attachments` both use it; it imports
//! neither.

use crate::served::Served;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nfv_control::Node;
use serde_json::json;
use std::sync::Arc;

pub struct AppState {
    pub(crate) served: Arc<Served>,
    pub(crate) metrics: prometheus_client::registry::Registry,
}

pub type St = State<Arc<AppState>>;

/// A refusal: status and message, sent as `{"error": message}`.
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub fn bad(msg: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, msg.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(json!({ "error": self.1 }))).into_response()
    }
}

/// Runs `f` on a blocking thread.
pub async fn blocking<T: Send + 'static>(
    st: &Arc<AppState>,
    f: impl FnOnce(&Node) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let node = st.served.node();
    tokio::task::spawn_blocking(move || f(&node))
        .await
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
