//! The routes: the page, the state, a device's decision, pairing; kernel errors as HTTP.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::{App, assets, auth, events, guard, view};
use crate::kernel::ops::DeviceDecision;
use crate::kernel::{Error, GateStatus, Ts};
use crate::runtime::pairing;

/// Every route, behind the guard.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(assets::page))
        .route("/pair", get(assets::page))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route("/api/challenge", get(auth::challenge))
        .route("/api/session", post(auth::session))
        .route("/api/state", get(state))
        .route("/api/events", get(events::stream))
        .route("/api/gates/{project}/{gate}/decide", post(decide))
        .route("/api/pair", post(pair))
        .route("/api/pair/status", get(pair_status))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such page", "") })
        .layer(DefaultBodyLimit::max(super::MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            guard::check,
        ))
        .with_state(app)
}

/// `GET /api/state`: every project the session's device is enrolled in.
async fn state(State(app): State<Arc<App>>, h: HeaderMap) -> Result<Response, ApiError> {
    let (s, names) = auth::visible(&app, &h).await?;
    let mut projects = Vec::new();
    for name in names {
        let Some(p) = app.project(&name) else {
            continue;
        };
        let n = name.clone();
        projects.push(p.call(move |st| view::project(st, &n, Ts::now())).await?);
    }
    let now = Ts::now();
    Ok(
        Json(json!({"device": s.device, "now": now, "now_ms": now.0, "projects": projects}))
            .into_response(),
    )
}

/// A device's decision, as the page posts it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Decide {
    device: String,
    status: String,
    #[serde(default)]
    option: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    digest: String,
    decided_at: i64,
    signature: String,
}

/// `POST /api/gates/{project}/{gate}/decide`: the device's signed decision, committed by the
/// device flow after the kernel checks it on the fresh state.
async fn decide(
    State(app): State<Arc<App>>,
    Path((project, gate)): Path<(String, String)>,
    h: HeaderMap,
    Json(b): Json<Decide>,
) -> Result<Response, ApiError> {
    let (s, names) = auth::visible(&app, &h).await?;
    if s.device != b.device {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "a session decides only with its own device",
            "",
        ));
    }
    let p = app
        .project(&project)
        .filter(|p| names.contains(&p.name))
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such project here", ""))?;
    let status = match b.status.as_str() {
        "approved" => GateStatus::Approved,
        "rejected" => GateStatus::Rejected,
        _ => return Err(Error::usage("status is approved or rejected").into()),
    };
    let d = DeviceDecision {
        device: b.device,
        gate,
        status,
        option: b.option.filter(|o| !o.is_empty()),
        reason: b.reason.filter(|r| !r.is_empty()),
        digest: b.digest,
        at_ms: b.decided_at,
        signature: b.signature,
    };
    let g = p
        .call(move |st| crate::flows::device::decide(st, &d, Ts::now()))
        .await?;
    Ok(Json(json!({"gate": g.id, "status": g.status, "decided_by": g.decided_by})).into_response())
}

/// What a phone sends to pair.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pair {
    token: String,
    key: String,
    #[serde(default)]
    label: Option<String>,
}

/// The pairing channel's directory, or why there is none.
fn pairing_dir(app: &App) -> Result<&std::path::Path, ApiError> {
    app.pairing_dir.as_deref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "pairing is off: no state directory (set HOME or XDG_STATE_HOME)",
            "",
        )
    })
}

/// `POST /api/pair`: a phone sends its public key for a pairing URL's token.
async fn pair(State(app): State<Arc<App>>, Json(b): Json<Pair>) -> Result<Response, ApiError> {
    let dir = pairing_dir(&app)?.to_path_buf();
    let p = tokio::task::spawn_blocking(move || {
        pairing::submit(&dir, &b.token, &b.key, b.label.as_deref(), Ts::now())
    })
    .await
    .map_err(|_| ApiError::internal("pairing failed"))??;
    Ok(Json(pairing_json(&p)).into_response())
}

/// The token of a status poll.
#[derive(Debug, Deserialize)]
struct Token {
    t: String,
}

/// `GET /api/pair/status?t=TOKEN`: where a pairing stands.
async fn pair_status(
    State(app): State<Arc<App>>,
    Query(q): Query<Token>,
) -> Result<Response, ApiError> {
    let dir = pairing_dir(&app)?.to_path_buf();
    let p = tokio::task::spawn_blocking(move || pairing::status(&dir, &q.t, Ts::now()))
        .await
        .map_err(|_| ApiError::internal("pairing failed"))??;
    Ok(Json(pairing_json(&p)).into_response())
}

/// A pairing as the phone reads it: its state, the key's fingerprint, and the device's name
/// once enrolled.
fn pairing_json(p: &pairing::Pairing) -> Value {
    let enrolled = p.state == pairing::State::Enrolled;
    json!({
        "state": p.state,
        "fingerprint": p.fingerprint(),
        "device": enrolled.then_some(&p.name),
        "expires_at_ms": p.expires_at,
    })
}
