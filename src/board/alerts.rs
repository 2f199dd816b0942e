//! The banner under the header: what an operator must know about the files. A load that failed
//! (the last good state stays), each quarantined todo or gate file with its line, and each place
//! a file disagrees with the owner's seal.

use std::collections::BTreeMap;

use crate::kernel::{Problem, Snapshot};

/// The most rows the banner takes on a wide screen (one on a narrow one).
pub const MAX_ROWS: u16 = 3;

/// Files that failed to load, then quarantined files (the file errors, as the banner orders them).
pub fn problems<'a>(
    load: &'a BTreeMap<String, Problem>,
    snap: Option<&'a Snapshot>,
) -> Vec<&'a Problem> {
    let quarantined = snap.into_iter().flat_map(|s| s.quarantined.values());
    load.values().chain(quarantined).collect()
}

/// How many rows the banner needs: one a line, at most [`MAX_ROWS`].
pub fn rows(load: &BTreeMap<String, Problem>, snap: Option<&Snapshot>) -> u16 {
    let n = load.len() + snap.map_or(0, |s| s.quarantined.len() + s.owner_notes.len());
    n.min(usize::from(MAX_ROWS)) as u16
}

/// How broken the files are: whether agents are refused, or only some files' own work stops.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Broken {
    /// Nothing is broken.
    #[default]
    No,
    /// Agents are refused: a file every command reads does not load (each command fails), or a
    /// gate file is unreadable (it counts as pending on every todo).
    Refused,
    /// Only these files' own work stops (a todo no agent can claim, an agent's declaration); the
    /// other todos still run.
    Quarantined(Vec<String>),
}

impl Broken {
    /// What the status bar says in place of `● live`, if anything is broken.
    pub fn label(&self) -> Option<String> {
        match self {
            Broken::No => None,
            Broken::Refused => Some("⚠ agents refused".into()),
            Broken::Quarantined(ids) if ids.len() == 1 => Some(format!("⚠ {} quarantined", ids[0])),
            Broken::Quarantined(ids) => Some(format!("⚠ {} files quarantined", ids.len())),
        }
    }
}

/// Which case the files are in (see [`Broken`]).
pub fn broken(load: &BTreeMap<String, Problem>, snap: Option<&Snapshot>) -> Broken {
    let gate_bad = snap.is_some_and(|s| s.quarantined.keys().any(|id| s.gates.contains_key(id)));
    if !load.is_empty() || gate_bad {
        return Broken::Refused;
    }
    match snap {
        Some(s) if !s.quarantined.is_empty() => {
            Broken::Quarantined(s.quarantined.keys().cloned().collect())
        }
        _ => Broken::No,
    }
}

/// The banner's lines, most urgent first: what refuses agents (failed loads, unreadable gates),
/// then quarantined files, then owner notes. Each line says its case first, so that a cut line
/// still says it.
pub fn lines<'a>(load: impl Iterator<Item = &'a Problem>, snap: Option<&Snapshot>) -> Vec<String> {
    let mut out: Vec<String> = load
        .map(|p| {
            format!(
                "AGENTS REFUSED: {} does not load, so every command fails until it is fixed: {} (the board shows the last good state)",
                p.at(),
                p.message
            )
        })
        .collect();
    let Some(s) = snap else { return out };
    let mut quarantined = Vec::new();
    for (id, p) in &s.quarantined {
        if s.gates.contains_key(id) {
            out.push(format!(
                "AGENTS REFUSED: gate {id} is unreadable and counts as pending on every todo: {}: {}",
                p.at(),
                p.message
            ));
        } else if let Some(agent) = id.strip_prefix("agents/") {
            quarantined.push(format!(
                "{agent}'s declaration is unreadable (routed as declaring nothing); the others still run: {}: {}",
                p.at(),
                p.message
            ));
        } else {
            quarantined.push(format!(
                "{id} QUARANTINED, the other todos still run: {}: {}",
                p.at(),
                p.message
            ));
        }
    }
    out.extend(quarantined);
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
