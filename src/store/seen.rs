//! Who wrote the journal and when, read fast: each line's `at` and `actor` found by position,
//! without a full JSON parse (the roster's source).

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};

use crate::kernel::{Error, Result, Ts};
use crate::store::{FileStore, atomic};

/// The most bytes of the journal's end the roster reads.
pub const SEEN_MAX_BYTES: u64 = 32 * 1024 * 1024;

impl FileStore {
    /// Every actor of the journal's last `SEEN_MAX_BYTES` and the time of its latest line.
    pub fn journal_seen(&self) -> Result<BTreeMap<String, Ts>> {
        let p = self.journal_path();
        let mut f = match atomic::open_nofollow(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(Error::io(&p, &e)),
        };
        let len = f.metadata().map_err(|e| Error::io(&p, &e))?.len();
        let start = len.saturating_sub(SEEN_MAX_BYTES);
        let mut bytes = Vec::with_capacity(usize::try_from(len - start).unwrap_or(0));
        f.seek(SeekFrom::Start(start))
            .and_then(|_| f.take(SEEN_MAX_BYTES).read_to_end(&mut bytes))
            .map_err(|e| Error::io(&p, &e))?;
        // A read that starts mid-file drops its first, partial line.
        let body = if start > 0 {
            bytes
                .iter()
                .position(|b| *b == b'\n')
                .map_or(&bytes[..0], |i| &bytes[i + 1..])
        } else {
            &bytes[..]
        };
        Ok(seen_in(body))
    }
}

/// The latest `at` of each actor in these journal lines (a line that cannot be read is skipped).
pub fn seen_in(body: &[u8]) -> BTreeMap<String, Ts> {
    // The canonical `at` text sorts like the time it names, so it is compared as bytes and
    // parsed once per actor at the end.
    let mut latest: HashMap<&[u8], &[u8]> = HashMap::new();
    let mut other: BTreeMap<String, Ts> = BTreeMap::new();
    for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match fast_fields(line) {
            Some((at, actor)) => {
                let e = latest.entry(actor).or_insert(at);
                if at > *e {
                    *e = at;
                }
            }
            None => {
                if let Some((actor, at)) = slow_fields(line) {
                    let e = other.entry(actor).or_insert(at);
                    *e = (*e).max(at);
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
        let e = other.entry(a.to_string()).or_insert(t);
        *e = (*e).max(t);
    }
    other
}

/// `{"seq":N,"at":"YYYY-MM-DDTHH:MM:SS.mmmZ","actor":"NAME",...`: the `at` and actor texts, when
/// the line has exactly this shape and the actor has no escapes.
fn fast_fields(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = rest[digits..].strip_prefix(b",\"at\":\"")?;
    let at = rest.get(..24)?;
    if at.get(23) != Some(&b'Z') || at.get(10) != Some(&b'T') {
        return None;
    }
    let rest = rest[24..].strip_prefix(b"\",\"actor\":\"")?;
    let end = rest.iter().position(|b| *b == b'"' || *b == b'\\')?;
    (rest.get(end) == Some(&b'"')).then(|| (at, &rest[..end]))
}

/// Any other line: a full parse of its `at` and `actor`.
fn slow_fields(line: &[u8]) -> Option<(String, Ts)> {
    #[derive(serde::Deserialize)]
    struct Line {
        at: Ts,
        actor: String,
    }
    let l: Line = serde_json::from_slice(line).ok()?;
    Some((l.actor, l.at))
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
        let s = seen_in(body);
        assert_eq!(s.len(), 2);
        assert_eq!(s["ann"].to_string(), "2026-01-01T00:00:09.000Z");
        assert_eq!(s["bob"].to_string(), "2026-01-01T00:00:05.000Z");
    }
}
