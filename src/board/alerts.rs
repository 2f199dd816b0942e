//! The banner under the header: what an operator must know about the files. A load that failed
//! (the last good state stays), each quarantined todo or gate file with its line, and each place
//! a file disagrees with the owner's seal.

use std::collections::BTreeMap;

use crate::kernel::{Problem, Snapshot};

/// The most rows the banner takes on a wide screen (one on a narrow one).
pub const MAX_ROWS: u16 = 3;

/// How many rows the banner needs: one a line, at most [`MAX_ROWS`].
pub fn rows(load: &BTreeMap<String, Problem>, snap: Option<&Snapshot>) -> u16 {
    let n = load.len() + snap.map_or(0, |s| s.quarantined.len() + s.owner_notes.len());
    n.min(usize::from(MAX_ROWS)) as u16
}

/// The banner's lines, most urgent first: failed loads, quarantined files, then owner notes.
pub fn lines<'a>(load: impl Iterator<Item = &'a Problem>, snap: Option<&Snapshot>) -> Vec<String> {
    let mut out: Vec<String> = load
        .map(|p| {
            format!(
                "{}: load failed, showing the last good state: {}",
                p.at(),
                p.message
            )
        })
        .collect();
    let Some(s) = snap else { return out };
    for (id, p) in &s.quarantined {
        let what = if s.gates.contains_key(id) {
            "unreadable gate, counts as pending on every todo"
        } else {
            "quarantined, no agent can claim it"
        };
        out.push(format!("{}: {what}: {}", p.at(), p.message));
    }
    out.extend(s.owner_notes.iter().map(|n| format!("owner's seal: {n}")));
    out
}

/// The lines that fit in `rows`, the last one saying how many more there are.
pub fn fit(mut lines: Vec<String>, rows: usize) -> Vec<String> {
    if lines.len() <= rows || rows == 0 {
        lines.truncate(rows);
        return lines;
    }
    let more = lines.len() - rows + 1;
    lines.truncate(rows);
    if let Some(last) = lines.last_mut() {
        *last = format!("(+{more} more; `loopx doctor` lists them) {last}");
    }
    lines
}
