//! Reading needs an enrolled device: a one-time challenge it signs, then a session cookie.
//! Challenges and sessions live in memory, bounded; each request checks the device again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::App;
use super::error::ApiError;
use crate::kernel::authority::to_hex;

/// How long a challenge may wait for its signature.
const CHALLENGE_TTL: Duration = Duration::from_secs(60);
/// The most challenges waiting at once.
const MAX_CHALLENGES: usize = 1024;
/// How long a session lasts.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// The most sessions at once (the oldest goes).
const MAX_SESSIONS: usize = 256;
/// The session cookie's name.
pub const COOKIE: &str = "loopx_session";

/// A session: the device that opened it and its key then.
#[derive(Debug, Clone)]
pub struct Session {
    /// The device's name.
    pub device: String,
    /// Its key (hex) when the session opened: a device enrolled again under a new key is
    /// another device.
    pub key: String,
    at: Instant,
}

/// Challenges waiting and sessions open.
#[derive(Default)]
pub struct Auth {
    challenges: Mutex<HashMap<String, Instant>>,
    sessions: Mutex<(HashMap<String, Session>, VecDeque<String>)>,
}

/// 32 random bytes as hex.
pub fn random_hex() -> Result<String, ApiError> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|_| ApiError::internal("no randomness"))?;
    Ok(to_hex(&b))
}

impl Auth {
    /// A new challenge, or none while too many wait.
    fn challenge(&self) -> Result<String, ApiError> {
        let mut c = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        c.retain(|_, at| at.elapsed() < CHALLENGE_TTL);
        if c.len() >= MAX_CHALLENGES {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many sign-ins at once",
                "try again in a minute",
            ));
        }
        let id = random_hex()?;
        c.insert(id.clone(), Instant::now());
        Ok(id)
    }

    /// Takes a challenge once: true when it was issued and is fresh.
    fn take(&self, id: &str) -> bool {
        let mut c = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        c.remove(id).is_some_and(|at| at.elapsed() < CHALLENGE_TTL)
    }

    /// Opens a session; the oldest goes when there are too many.
    fn open(&self, device: String, key: String) -> Result<String, ApiError> {
        let id = random_hex()?;
        let mut s = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *s;
        while map.len() >= MAX_SESSIONS {
            match order.pop_front() {
                Some(old) => map.remove(&old),
                None => break,
            };
        }
        let at = Instant::now();
        map.insert(id.clone(), Session { device, key, at });
        order.push_back(id.clone());
        Ok(id)
    }

    /// The session a request's cookie names, while it lasts.
    pub fn session(&self, h: &HeaderMap) -> Option<Session> {
        let id = cookie(h)?;
        let mut s = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *s;
        match map.get(&id) {
            Some(x) if x.at.elapsed() < SESSION_TTL => Some(x.clone()),
            Some(_) => {
                map.remove(&id);
                order.retain(|o| *o != id);
                None
            }
            None => None,
        }
    }
}

/// The session cookie's value.
fn cookie(h: &HeaderMap) -> Option<String> {
    h.get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `GET /api/challenge`.
pub async fn challenge(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    Ok(Json(json!({ "challenge": app.auth.challenge()? })).into_response())
}

/// What a device sends to open a session.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    device: String,
    challenge: String,
    signature: String,
}

/// `POST /api/session`: the device's signature over the challenge for this page's origin.
pub async fn session(
    State(app): State<Arc<App>>,
    h: HeaderMap,
    Json(b): Json<SignIn>,
) -> Result<Response, ApiError> {
    let origin = h
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let denied = || {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "this device is not enrolled, or the signature is not its own",
            "pair it again: `loopx web pair` in the terminal",
        )
    };
    if !app.auth.take(&b.challenge) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "that challenge is unknown, used or older than a minute",
            "ask for a new one",
        ));
    }
    let key = enrolled_key(&app, &b, &origin).await?;
    let key = key.ok_or_else(denied)?;
    let id = app.auth.open(b.device.clone(), key)?;
    let secure = if app.secure { "; Secure" } else { "" };
    let c = format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        SESSION_TTL.as_secs()
    );
    let mut res = Json(json!({ "device": b.device })).into_response();
    if let Ok(v) = HeaderValue::from_str(&c) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(res)
}

/// The key of the first project where the device is enrolled and its signature holds.
async fn enrolled_key(app: &App, b: &SignIn, origin: &str) -> Result<Option<String>, ApiError> {
    for p in &app.projects {
        let (d, c, o, s) = (
            b.device.clone(),
            b.challenge.clone(),
            origin.to_string(),
            b.signature.clone(),
        );
        let found = p
            .call(move |st| {
                let snap = st.load()?;
                let ok = crate::flows::device::session_ok(&snap, &d, &c, &o, &s);
                Ok(ok
                    .then(|| snap.config.devices.get(&d).map(|x| x.key.clone()))
                    .flatten())
            })
            .await?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// The projects a session's device is still enrolled in with the same key; refused (401)
/// without a session, or when it is enrolled nowhere any more (the session then ends).
pub async fn visible(app: &App, h: &HeaderMap) -> Result<(Session, Vec<String>), ApiError> {
    let unauth = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "sign in first",
            "the page signs in with this device's key",
        )
    };
    let s = app.auth.session(h).ok_or_else(unauth)?;
    let mut out = Vec::new();
    for p in &app.projects {
        let (d, k) = (s.device.clone(), s.key.clone());
        let ok = p
            .call(move |st| {
                let snap = st.load()?;
                Ok(snap.config.devices.get(&d).is_some_and(|x| x.key == k))
            })
            .await?;
        if ok {
            out.push(p.name.clone());
        }
    }
    if out.is_empty() {
        app.auth.end(h);
        return Err(unauth());
    }
    Ok((s, out))
}

impl Auth {
    /// Ends the session a request's cookie names.
    fn end(&self, h: &HeaderMap) {
        if let Some(id) = cookie(h) {
            let mut s = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            s.0.remove(&id);
            s.1.retain(|o| *o != id);
        }
    }
}
