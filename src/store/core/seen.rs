//! The roster's scan of journal lines: each line's `at` and `actor` found by position, without
//! a full JSON parse; the few lines that record a lapsed lease are parsed whole.

use std::collections::HashMap;

use crate::kernel::Ts;
use crate::kernel::roster::Seen;

/// The latest `at` of each actor in these journal lines, and the lapsed leases they record (a
/// line that cannot be read is skipped).
pub fn seen_in(body: &[u8]) -> Seen {
    // The canonical `at` text sorts like the time it names, so it is compared as bytes and
    // parsed once per actor at the end.
    let mut latest: HashMap<&[u8], &[u8]> = HashMap::new();
    let mut seen = Seen::default();
    for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match fast_fields(line).filter(|(_, _, action)| !may_lapse(action, line)) {
            Some((at, actor, _)) => {
                let e = latest.entry(actor).or_insert(at);
                if at > *e {
                    *e = at;
                }
            }
            None => {
                if let Some(l) = slow_fields(line) {
                    seen.add(&l.actor, l.at, &l.action, &l.data);
                }
            }
        }
    }
    for (actor, at) in latest {
        let (Ok(a), Some(t)) = (
            std::str::from_utf8(actor),
            std::str::from_utf8(at)
                .ok()
                .and_then(|s| s.parse::<Ts>().ok()),
        ) else {
            continue;
        };
        let e = seen.last.entry(a.to_string()).or_insert(t);
        *e = (*e).max(t);
    }
    seen
}

/// True for a line that may record a lapsed lease: `lease.expire`, or a claim that reclaimed one
/// (only claims are searched, so the other lines cost nothing more).
fn may_lapse(action: &[u8], line: &[u8]) -> bool {
    const RECLAIMED: &[u8] = b"\"reclaimed_from\":{";
    match action {
        b"lease.expire" => true,
        b"todo.claim" => line.windows(RECLAIMED.len()).any(|w| w == RECLAIMED),
        _ => false,
    }
}

/// `{"seq":N,"at":"YYYY-MM-DDTHH:MM:SS.mmmZ","actor":"NAME","action":"A",...`: the `at`, actor
/// and action texts, when the line has exactly this shape and the names have no escapes.
fn fast_fields(line: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = rest[digits..].strip_prefix(b",\"at\":\"")?;
    let at = rest.get(..24)?;
    if at.get(23) != Some(&b'Z') || at.get(10) != Some(&b'T') {
        return None;
    }
    let rest = rest[24..].strip_prefix(b"\",\"actor\":\"")?;
    let (actor, rest) = name(rest)?;
    let (action, _) = name(rest.strip_prefix(b",\"action\":\"")?)?;
    Some((at, actor, action))
}

/// A JSON string's text up to its closing quote (none if it holds an escape), and what follows.
fn name(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = s.iter().position(|b| *b == b'"' || *b == b'\\')?;
    (s[end] == b'"').then(|| (&s[..end], &s[end + 1..]))
}

/// The fields of a journal line the roster reads.
#[derive(serde::Deserialize)]
struct Line {
    at: Ts,
    actor: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    data: serde_json::Value,
}

/// Any other line: a full parse of its `at`, `actor`, `action` and `data`.
fn slow_fields(line: &[u8]) -> Option<Line> {
    serde_json::from_slice(line).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_and_slow_lines_agree() {
        let body =
            b"{\"seq\":1,\"at\":\"2026-01-01T00:00:00.000Z\",\"actor\":\"ann\",\"action\":\"x\"}\n\
{\"seq\":2,\"at\":\"2026-01-01T00:00:05.000Z\",\"actor\":\"bob\"}\n\
{\"actor\":\"ann\",\"at\":\"2026-01-01T00:00:09.000Z\",\"seq\":3}\n\
{\"seq\":4,\"at\":\"2026-01-01T00:00:07.000Z\",\"actor\":\"ann\"}\n\
not json\n";
        let s = seen_in(body).last;
        assert_eq!(s.len(), 2);
        assert_eq!(s["ann"].to_string(), "2026-01-01T00:00:09.000Z");
        assert_eq!(s["bob"].to_string(), "2026-01-01T00:00:05.000Z");
    }

    #[test]
    fn lapsed_leases_are_read_from_their_lines() {
        let body = b"{\"seq\":1,\"at\":\"2026-01-01T00:00:00.000Z\",\"actor\":\"bob\",\"action\":\"todo.claim\",\"data\":{\"reclaimed_from\":{\"holder\":\"ann\",\"fence\":1,\"expired_at\":\"2025-12-31T23:59:00.000Z\"}}}\n\
{\"seq\":2,\"at\":\"2026-01-01T00:00:01.000Z\",\"actor\":\"doctor\",\"action\":\"lease.expire\",\"data\":{\"holder\":\"cat\",\"fence\":3,\"expired_at\":\"2025-12-31T23:58:00.000Z\"}}\n";
        let s = seen_in(body);
        assert_eq!(s.last["bob"].to_string(), "2026-01-01T00:00:00.000Z");
        assert_eq!(s.lapsed["ann"].to_string(), "2025-12-31T23:59:00.000Z");
        assert_eq!(s.lapsed["cat"].to_string(), "2025-12-31T23:58:00.000Z");
    }
}
