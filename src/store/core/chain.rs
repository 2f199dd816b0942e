//! The journal's chain: each line holds the SHA-256 of the one before; the lines of a commit
//! built, chained and signed the same way for every store.

use sha2::{Digest, Sha256};

use crate::kernel::{Error, Event, EventDraft, Result};
use crate::store::core::owner::OwnerKey;

/// The `prev` of line 1.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// SHA-256 of bytes, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The `seq` of a journal line (0 when it has none).
pub fn seq_of(line: &[u8]) -> u64 {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("seq").and_then(|s| s.as_u64()))
        .unwrap_or(0)
}

/// The journal lines that follow `last` (none: the journal is empty), chained and signed, as
/// events and as the bytes to store (each line ends in a newline). With `files`, the lines are
/// one transaction, and the last one lists the files.
pub fn build_lines(
    last: Option<&[u8]>,
    drafts: Vec<EventDraft>,
    signer: Option<&OwnerKey>,
    files: Option<Vec<crate::kernel::TxFile>>,
) -> Result<(Vec<Event>, Vec<u8>)> {
    let (mut seq, mut prev) = match last {
        Some(line) => (seq_of(line), sha256_hex(line)),
        None => (0, GENESIS.to_string()),
    };
    let tx = files.as_ref().map(|_| seq + 1);
    let count = drafts.len();
    let mut files = files;
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for (i, d) in drafts.into_iter().enumerate() {
        seq += 1;
        let mut ev = Event {
            seq,
            at: d.at,
            actor: d.actor,
            action: d.action,
            target: d.target,
            data: d.data,
            prev: prev.clone(),
            tx,
            files: if i + 1 == count { files.take() } else { None },
            sig: None,
        };
        if let Some(k) = signer {
            ev.sig = Some(k.sign(&crate::kernel::authority::event_message(&ev)));
        }
        let line = serde_json::to_vec(&ev)
            .map_err(|e| Error::new(crate::kernel::Code::Internal, e.to_string()))?;
        prev = sha256_hex(&line);
        buf.extend_from_slice(&line);
        buf.push(b'\n');
        out.push(ev);
    }
    Ok((out, buf))
}

/// A problem found while verifying the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Break {
    /// The 1-based line at fault.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Verifies the whole chain; returns the first break and whether the last line is torn.
pub fn verify(bytes: &[u8]) -> (Option<Break>, bool) {
    let torn = !bytes.is_empty() && bytes.last() != Some(&b'\n');
    let complete_end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut prev = GENESIS.to_string();
    let body = &bytes[..complete_end.saturating_sub(1)];
    for (i, line) in body.split(|b| *b == b'\n').enumerate() {
        let n = i + 1;
        if complete_end == 0 {
            break;
        }
        if line.is_empty() {
            return (
                Some(Break {
                    line: n,
                    message: "an empty line".into(),
                }),
                torn,
            );
        }
        let v: serde_json::Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                return (
                    Some(Break {
                        line: n,
                        message: format!("not a JSON object ({e})"),
                    }),
                    torn,
                );
            }
        };
        let got_prev = v.get("prev").and_then(|p| p.as_str()).unwrap_or("");
        if got_prev != prev {
            let at = if n == 1 { 1 } else { n - 1 };
            return (
                Some(Break {
                    line: at,
                    message: format!(
                        "the chain breaks after line {at}: line {n} does not follow from it (edited, removed or reordered lines)"
                    ),
                }),
                torn,
            );
        }
        let seq = v.get("seq").and_then(|s| s.as_u64()).unwrap_or(0);
        let expect_seq = n as u64;
        if seq != expect_seq {
            return (
                Some(Break {
                    line: n,
                    message: format!("seq is {seq}, expected {expect_seq}"),
                }),
                torn,
            );
        }
        prev = sha256_hex(line);
    }
    (None, torn)
}
