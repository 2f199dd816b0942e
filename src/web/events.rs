//! `GET /api/events`: server-sent events, one `change` whenever a project the session sees
//! changes, heard through the store's follow feed. At most [`super::MAX_STREAMS`] at once.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tokio::sync::{OwnedSemaphorePermit, watch};

use super::App;
use super::auth;
use super::error::ApiError;

/// One open stream: what it follows, and its place among the bounded ones.
struct Open {
    app: Arc<App>,
    headers: HeaderMap,
    feeds: Vec<(String, watch::Receiver<u64>)>,
    first: bool,
    _permit: OwnedSemaphorePermit,
}

/// `GET /api/events`.
pub async fn stream(State(app): State<Arc<App>>, h: HeaderMap) -> Result<Response, ApiError> {
    let (_, names) = auth::visible(&app, &h).await?;
    let permit = app.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live pages are open on this server",
            "close another tab, or reload in a while",
        )
    })?;
    let feeds = names
        .iter()
        .filter_map(|n| app.project(n).map(|p| (n.clone(), p.changes())))
        .collect();
    let open = Open {
        app: app.clone(),
        headers: h,
        feeds,
        first: true,
        _permit: permit,
    };
    let keep = KeepAlive::new()
        .interval(Duration::from_secs(15))
        .text("keepalive");
    Ok(Sse::new(events(open)).keep_alive(keep).into_response())
}

/// The stream's events: `ready` first, then `change` with the project's name.
fn events(open: Open) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(open, |mut o| async move {
        if o.first {
            o.first = false;
            for (_, rx) in o.feeds.iter_mut() {
                rx.borrow_and_update();
            }
            return Some((Ok(Event::default().event("ready").data("{}")), o));
        }
        let name = next_change(&mut o.feeds).await?;
        // A revoked device's page hears nothing more.
        auth::visible(&o.app, &o.headers).await.ok()?;
        Some((Ok(Event::default().event("change").data(name)), o))
    })
}

/// Waits for the next change of any project; `None` when every feed is gone.
async fn next_change(feeds: &mut [(String, watch::Receiver<u64>)]) -> Option<String> {
    if feeds.is_empty() {
        return None;
    }
    let waits = feeds.iter_mut().map(|(n, rx)| {
        Box::pin(async move {
            let r = rx.changed().await;
            rx.borrow_and_update();
            r.ok().map(|_| n.clone())
        })
    });
    let (r, _, _) = futures_util::future::select_all(waits).await;
    // Let a burst of changes settle into one event.
    tokio::time::sleep(Duration::from_millis(20)).await;
    for (_, rx) in feeds.iter_mut() {
        rx.borrow_and_update();
    }
    r
}
