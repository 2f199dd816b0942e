//! The page: one HTML file, its script and its style, built into the binary (no build step).

use axum::http::header;
use axum::response::IntoResponse;

/// The page's HTML: no inline script or style, so the CSP can forbid both.
pub const HTML: &str = include_str!("assets/index.html");
/// The page's script: it builds the DOM with `textContent` only.
pub const JS: &str = include_str!("assets/app.js");
/// The page's style.
pub const CSS: &str = include_str!("assets/app.css");

/// `GET /` and `GET /pair`.
pub async fn page() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], HTML)
}

/// `GET /app.js`.
pub async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        JS,
    )
}

/// `GET /app.css`.
pub async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS)
}
