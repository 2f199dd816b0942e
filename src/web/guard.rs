//! What every request passes before a handler: its Host (no DNS rebinding), a POST's Origin
//! (no cross-site requests), its body's size; and the headers every answer carries.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::App;
use super::error::ApiError;
use crate::kernel::{Error, Result};

/// The page's rules: no script but its own, nothing framed, nothing sent elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How long a request (but an event stream) may take before it is answered 503.
const HANDLER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The Host values this server answers to, and the origins its page has.
pub struct Guard {
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl Guard {
    /// The hosts of the listen address, of localhost at its port, and of `--public-url`.
    pub fn new(local: &SocketAddr, public_url: Option<&str>, tls: bool) -> Result<Guard> {
        let port = local.port();
        let mut hosts = vec![
            local.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        let scheme = if tls { "https" } else { "http" };
        let mut origins: Vec<String> = hosts.iter().map(|h| format!("{scheme}://{h}")).collect();
        if let Some(u) = public_url {
            // The public URL's origin is its own scheme's only (a proxy may add the TLS).
            let host = public_host(u)?;
            let (s, _) = u.split_once("://").unwrap_or(("https", u));
            origins.push(format!("{}://{host}", s.to_ascii_lowercase()));
            hosts.push(host);
        }
        hosts.dedup();
        Ok(Guard { hosts, origins })
    }

    /// True when `host` is one this server answers to (case aside).
    pub fn host_ok(&self, host: &str) -> bool {
        let h = host.to_ascii_lowercase();
        self.hosts.contains(&h)
    }

    /// True when `origin` is the page's own.
    pub fn origin_ok(&self, origin: &str) -> bool {
        let o = origin.to_ascii_lowercase();
        self.origins.contains(&o)
    }
}

/// The host (and port, when given) of a public URL, lower case.
fn public_host(url: &str) -> Result<String> {
    let rest = url
        .split_once("://")
        .filter(|(s, _)| *s == "http" || *s == "https")
        .map(|(_, r)| r)
        .ok_or_else(|| {
            Error::usage(format!("--public-url {url} is not an http(s) URL"))
                .hint("for example: --public-url https://phone-gate.example.net")
        })?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err(Error::usage(format!("--public-url {url} names no host")));
    }
    Ok(host.to_ascii_lowercase())
}

/// The middleware: Host, Origin and size first; then the handler; then the headers.
pub async fn check(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let api = req.uri().path().starts_with("/api/");
    let stream = req.uri().path() == "/api/events";
    let mut res = match refuse(&app, req.headers(), req.method()) {
        Some(e) => e.into_response(),
        None if stream => next.run(req).await,
        None => match tokio::time::timeout(HANDLER_WAIT, next.run(req)).await {
            Ok(r) => r,
            Err(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the project did not answer in time (is its lock held?)",
                "try again",
            )
            .into_response(),
        },
    };
    let h = res.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    if api {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

/// Why a request is refused before its handler, if it is.
fn refuse(app: &App, h: &HeaderMap, method: &Method) -> Option<ApiError> {
    let host = h.get(header::HOST).and_then(|v| v.to_str().ok());
    if !host.is_some_and(|v| app.guard.host_ok(v)) {
        return Some(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "this server does not answer to that Host",
            "open the address `loopx web` printed, or give it --public-url",
        ));
    }
    if *method != Method::GET && *method != Method::HEAD {
        let origin = h.get(header::ORIGIN).and_then(|v| v.to_str().ok());
        if !origin.is_some_and(|o| app.guard.origin_ok(o)) {
            return Some(ApiError::new(
                StatusCode::FORBIDDEN,
                "a change must come from this server's own page (Origin)",
                "",
            ));
        }
    }
    let len = h
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if len.is_some_and(|n| n > super::MAX_BODY as u64) {
        return Some(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request's body is over 16 KiB",
            "",
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins_are_the_servers_own() {
        let local: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        let g = Guard::new(&local, Some("https://Phone.example.net/loopx"), false).unwrap();
        for h in [
            "127.0.0.1:7878",
            "localhost:7878",
            "[::1]:7878",
            "phone.example.net",
        ] {
            assert!(g.host_ok(h), "{h}");
        }
        for h in [
            "127.0.0.1:7879",
            "localhost",
            "evil.example",
            "phone.example.net.evil",
            "",
        ] {
            assert!(!g.host_ok(h), "{h}");
        }
        assert!(g.origin_ok("http://127.0.0.1:7878"));
        assert!(g.origin_ok("https://phone.example.net"));
        assert!(!g.origin_ok("https://127.0.0.1:7878"), "the scheme counts");
        assert!(
            !g.origin_ok("http://phone.example.net"),
            "the scheme counts"
        );
        assert!(!g.origin_ok("null"));
    }

    #[test]
    fn a_public_url_must_be_http_with_a_host() {
        let local: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        for bad in [
            "phone.example.net",
            "ftp://x",
            "https://",
            "https://user@evil/",
        ] {
            assert!(Guard::new(&local, Some(bad), false).is_err(), "{bad}");
        }
    }
}
