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

/// Challenges used and sessions open. A challenge is its time and a nonce, tagged with this
/// server's secret: nothing is kept until a device signs one, so nobody can fill a table of
/// challenges to keep the owner from signing in.
pub struct Auth {
    secret: [u8; 32],
    used: Mutex<HashMap<String, Instant>>,
    sessions: Mutex<(HashMap<String, Session>, VecDeque<String>)>,
}

impl Default for Auth {
    fn default() -> Self {
        let mut secret = [0u8; 32];
        // Without randomness no challenge verifies a second time: sign-ins fail, nothing opens.
        let _ = getrandom::fill(&mut secret);
        Auth {
            secret,
            used: Mutex::default(),
            sessions: Mutex::default(),
        }
    }
}

/// HMAC-SHA-256 of `msg` under `key`.
fn hmac(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let (mut ipad, mut opad) = ([0x36u8; 64], [0x5cu8; 64]);
    for (i, k) in key.iter().enumerate() {
        ipad[i] ^= k;
        opad[i] ^= k;
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize()
        .into()
}

fn now_ms() -> u64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    d.map_or(0, |d| d.as_millis() as u64)
}

/// 32 random bytes as hex.
pub fn random_hex() -> Result<String, ApiError> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|_| ApiError::internal("no randomness"))?;
    Ok(to_hex(&b))
}

impl Auth {
    /// A new challenge: the time, 16 random bytes and their tag, as hex.
    fn challenge(&self) -> Result<String, ApiError> {
        let mut body = now_ms().to_be_bytes().to_vec();
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|_| ApiError::internal("no randomness"))?;
        body.extend_from_slice(&nonce);
        let tag = hmac(&self.secret, &body);
        Ok(to_hex(&body) + &to_hex(&tag[..16]))
    }

    /// True when this server issued `id` less than a minute ago.
    fn fresh(&self, id: &str) -> bool {
        let Some(b) = crate::kernel::authority::from_hex(id).filter(|b| b.len() == 40) else {
            return false;
        };
        let tag = hmac(&self.secret, &b[..24]);
        let same = tag[..16]
            .iter()
            .zip(&b[24..])
            .fold(0u8, |d, (x, y)| d | (x ^ y))
            == 0;
        let at = u64::from_be_bytes(b[..8].try_into().unwrap_or_default());
        let age = now_ms().saturating_sub(at);
        same && at <= now_ms() + 5_000 && age < CHALLENGE_TTL.as_millis() as u64
    }

    /// Uses a fresh challenge once (after its signature verified): false when used already.
    fn spend(&self, id: &str) -> bool {
        let mut u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        u.retain(|_, at| at.elapsed() < CHALLENGE_TTL + Duration::from_secs(10));
        u.insert(id.to_string(), Instant::now()).is_none()
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
    let stale = || {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "that challenge is unknown, used or older than a minute",
            "ask for a new one",
        )
    };
    if !app.auth.fresh(&b.challenge) {
        return Err(stale());
    }
    let key = enrolled_key(&app, &b, &origin).await?;
    let key = key.ok_or_else(denied)?;
    if !app.auth.spend(&b.challenge) {
        return Err(stale());
    }
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
