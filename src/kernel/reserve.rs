//! File reservations: the path globs a lease reserves, their checks, and the overlap test.
//!
//! A glob is a relative path of `/`-separated segments. In a segment `*` matches any run of
//! characters and `?` one character (never `/`); a segment `**` matches any number of
//! segments. A glob reserves every path it matches and everything below them: `src/store`
//! reserves `src/store/fs.rs`. The overlap test is conservative: it may answer "overlap" when
//! unsure, never "no" when one path can match both globs.

use crate::kernel::blocker::Blocker;
use crate::kernel::error::{Error, Result};
use crate::kernel::model::Snapshot;
use crate::kernel::time::Ts;

/// The most globs one lease or todo reserves.
pub const PATHS_MAX: usize = 32;
/// The most characters in one glob.
pub const GLOB_MAX: usize = 200;

/// Checks and normalises the globs of `--paths` (or a file's `paths`): drops `.` segments,
/// doubled and trailing slashes and repeats; refuses an empty, absolute or `..` glob.
pub fn normalise(key: &str, globs: &[String]) -> Result<Vec<String>> {
    if globs.len() > PATHS_MAX {
        return Err(Error::usage(format!(
            "`{key}` names {} globs; the most is {PATHS_MAX}",
            globs.len()
        ))
        .hint("reserve a parent directory instead, like `src/**`"));
    }
    let mut out: Vec<String> = Vec::with_capacity(globs.len());
    for g in globs {
        let n = glob(g).map_err(|why| {
            Error::usage(format!("`{key}` glob `{}` {why}", shown(g))).hint(
                "give a relative glob like `src/store/**` (see docs/reference.md, reservations)",
            )
        })?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// A glob as an error may show it: printable ASCII, the rest escaped, cut at `GLOB_MAX`.
fn shown(g: &str) -> String {
    g.chars()
        .take(GLOB_MAX)
        .flat_map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                vec![c]
            } else {
                c.escape_default().collect()
            }
        })
        .collect()
}

/// One glob normalised, or why it is refused.
fn glob(g: &str) -> std::result::Result<String, String> {
    if g.chars().count() > GLOB_MAX {
        return Err(format!("is longer than {GLOB_MAX} characters"));
    }
    if let Some(c) = g.chars().find(|c| !(c.is_ascii_graphic() || *c == ' ')) {
        return Err(format!(
            "holds `{}`; only printable ASCII is allowed",
            c.escape_default()
        ));
    }
    if let Some(c) = g
        .chars()
        .find(|c| matches!(c, '\\' | '[' | ']' | '{' | '}'))
    {
        return Err(format!("holds `{c}`; only `*`, `?` and `**` are wildcards"));
    }
    if g.starts_with('/') {
        return Err("is absolute; give it relative to the project's root".into());
    }
    let mut segs: Vec<&str> = Vec::new();
    for s in g.split('/') {
        match s {
            "" | "." => {}
            ".." => return Err("has a `..` segment; it must stay inside the project".into()),
            "**" if segs.last() == Some(&"**") => {}
            s if s.contains("**") && s != "**" => {
                return Err(format!("has `{s}`; `**` must be a whole segment"));
            }
            s => segs.push(s),
        }
    }
    if segs.is_empty() {
        return Err("names no path; use `**` for the whole tree".into());
    }
    Ok(segs.join("/"))
}

/// The segments of a normalised glob, with the `**` every glob ends in (what is below it).
fn segments(g: &str) -> Vec<&str> {
    let mut v: Vec<&str> = g.split('/').filter(|s| !s.is_empty()).collect();
    if v.last() != Some(&"**") {
        v.push("**");
    }
    v
}

/// The most steps one comparison of two reservations takes; past it, they count as
/// overlapping (conservative), so hostile globs cost a claim microseconds, not seconds.
pub const STEPS_MAX: usize = 20_000;

/// True when some path may match both globs (conservative: never false when one can).
pub fn overlap(a: &str, b: &str) -> bool {
    let mut steps = STEPS_MAX;
    overlap_within(a, b, &mut steps)
}

/// `overlap`, spending at most `steps` (true once they run out).
fn overlap_within(a: &str, b: &str, steps: &mut usize) -> bool {
    if !prefixes_agree(a, b) {
        return false;
    }
    if *steps == 0 {
        return true;
    }
    let (a, b) = (segments(a), segments(b));
    let same = |x: &&str, y: &&str, steps: &mut usize| seg_overlap(x, y, steps);
    Table::new(&a, &b, |s| *s == "**", same).run(steps)
}

/// Whether two segment patterns (`*`, `?`, literals) share a non-empty segment.
fn seg_overlap(a: &str, b: &str, steps: &mut usize) -> bool {
    if !a.contains(['*', '?']) && !b.contains(['*', '?']) {
        return a == b;
    }
    let same = |x: &u8, y: &u8, _: &mut usize| x == y || *x == b'?' || *y == b'?';
    Table::new(a.as_bytes(), b.as_bytes(), |c| *c == b'*', same).run(steps)
}

/// Whether two sequences with a "star" element (matching any run, `**` among segments, `*`
/// among characters) can match one same sequence: a table memoised on `(i, j)`, one step a
/// cell, true once the steps run out.
struct Table<'a, T, S, M> {
    a: &'a [T],
    b: &'a [T],
    star: S,
    same: M,
    memo: Vec<Option<bool>>,
}

impl<'a, T, S: Fn(&T) -> bool, M: Fn(&T, &T, &mut usize) -> bool> Table<'a, T, S, M> {
    fn new(a: &'a [T], b: &'a [T], star: S, same: M) -> Self {
        let memo = vec![None; (a.len() + 1) * (b.len() + 1)];
        Table {
            a,
            b,
            star,
            same,
            memo,
        }
    }

    fn run(mut self, steps: &mut usize) -> bool {
        self.at(0, 0, steps)
    }

    fn at(&mut self, i: usize, j: usize, steps: &mut usize) -> bool {
        let k = i * (self.b.len() + 1) + j;
        if let Some(v) = self.memo[k] {
            return v;
        }
        if *steps == 0 {
            return true;
        }
        *steps -= 1;
        let (x, y) = (self.a.get(i), self.b.get(j));
        let (sx, sy) = (x.is_some_and(&self.star), y.is_some_and(&self.star));
        let v = match (x, y) {
            (None, None) => true,
            _ if sx && self.at(i + 1, j, steps) => true,
            (Some(_), Some(_)) if sx => self.at(i, j + 1, steps),
            _ if sy && self.at(i, j + 1, steps) => true,
            (Some(_), Some(_)) if sy => self.at(i + 1, j, steps),
            (Some(x), Some(y)) => (self.same)(x, y, steps) && self.at(i + 1, j + 1, steps),
            _ => false,
        };
        self.memo[k] = Some(v);
        v
    }
}

/// The pairs `(mine, theirs)` of two reservations that may overlap. One comparison spends at
/// most [`STEPS_MAX`] steps and never more than `budget` has left; out of steps, a pair whose
/// literal prefixes agree counts as overlapping (conservative). A pair of globs compared once
/// under a budget gives the same answer every later time.
pub fn overlaps(mine: &[String], theirs: &[String], budget: &Budget) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let start = budget.left().min(STEPS_MAX);
    let mut steps = start;
    for a in mine {
        for b in theirs {
            if !prefixes_agree(a, b) {
                continue;
            }
            let hit = budget.remembered(a, b).unwrap_or_else(|| {
                let v = overlap_within(a, b, &mut steps);
                budget.remember(a, b, v);
                v
            });
            if hit {
                out.push((a.clone(), b.clone()));
            }
        }
    }
    budget.spend(start - steps);
    out
}

/// Whether one glob's text before its first wildcard is a prefix of the other's: every path a
/// glob reserves starts with that text, so two globs whose prefixes disagree never overlap.
fn prefixes_agree(a: &str, b: &str) -> bool {
    let lit = |g: &str| g.find(['*', '?']).map_or(g.len(), |i| i);
    let (la, lb) = (&a[..lit(a)], &b[..lit(b)]);
    la.starts_with(lb) || lb.starts_with(la)
}

/// The steps every comparison of reservations made on one snapshot may spend together, so
/// hostile globs cost one command milliseconds however many leases and todos hold them.
pub const BUDGET_STEPS: usize = 2_000_000;

/// What comparing reservations may still cost one snapshot, and the answers already given (so
/// a rule asked twice answers the same, whatever the budget had left the second time).
#[derive(Debug)]
pub struct Budget {
    left: std::sync::atomic::AtomicUsize,
    seen: std::sync::Mutex<std::collections::HashMap<(String, String), bool>>,
}

impl Budget {
    /// A full budget of [`BUDGET_STEPS`].
    pub fn new() -> Budget {
        Budget::with(BUDGET_STEPS)
    }

    /// A budget of `steps`.
    pub fn with(steps: usize) -> Budget {
        Budget {
            left: steps.into(),
            seen: Default::default(),
        }
    }

    /// Back to a full budget with no answers kept, as a fresh load has (a kept snapshot that
    /// answers many commands).
    pub fn reset(&self) {
        self.left
            .store(BUDGET_STEPS, std::sync::atomic::Ordering::Relaxed);
        self.seen().clear();
    }

    /// The steps left.
    pub fn left(&self) -> usize {
        self.left.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn spend(&self, n: usize) {
        let _ = self.left.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |l| Some(l.saturating_sub(n)),
        );
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, String), bool>> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn remembered(&self, a: &str, b: &str) -> Option<bool> {
        self.seen().get(&(a.to_string(), b.to_string())).copied()
    }

    fn remember(&self, a: &str, b: &str, v: bool) {
        self.seen().insert((a.to_string(), b.to_string()), v);
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new()
    }
}

impl Clone for Budget {
    fn clone(&self) -> Budget {
        Budget {
            left: self.left().into(),
            seen: std::sync::Mutex::new(self.seen().clone()),
        }
    }
}

/// The first live reservation of another agent's lease on another todo that `paths` may
/// overlap, as a blocker naming the holder, its todo and the overlapping globs. Expired leases
/// reserve nothing; the agent's own leases never conflict with it.
pub fn conflict(
    snap: &Snapshot,
    todo: &str,
    agent: &str,
    paths: &[String],
    now: Ts,
) -> Option<Blocker> {
    if paths.is_empty() {
        return None;
    }
    snap.todos.values().find_map(|t| {
        let l = t.live_lease(now)?;
        if t.id == todo || l.holder == agent || l.paths.is_empty() {
            return None;
        }
        let overlap = overlaps(paths, &l.paths, &snap.reserve_budget);
        (!overlap.is_empty()).then(|| Blocker::Reserved {
            holder: l.holder.clone(),
            todo: t.id.clone(),
            until: l.expires_at,
            overlap,
        })
    })
}

/// The most files outside a reservation one evidence entry names.
pub const OUTSIDE_MAX: usize = 50;

/// The changed `files` that no glob of a reservation covers, at most [`OUTSIDE_MAX`]; none
/// when nothing is reserved.
pub fn outside(globs: &[String], files: &[String]) -> Vec<String> {
    if globs.is_empty() {
        return Vec::new();
    }
    files
        .iter()
        .filter(|f| !covers(globs, f))
        .take(OUTSIDE_MAX)
        .cloned()
        .collect()
}

/// True when `path` (relative, `/`-separated) is inside one of `globs`.
pub fn covers(globs: &[String], path: &str) -> bool {
    let p: Vec<&str> = path
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    globs.iter().any(|g| path_match(&segments(g), &p))
}

/// Whether the glob's segments match the path's (dynamic programming: `**` never backtracks).
fn path_match(g: &[&str], p: &[&str]) -> bool {
    // ok[j]: the glob so far matches the path's first j segments.
    let mut ok = vec![false; p.len() + 1];
    ok[0] = true;
    for s in g {
        let mut next = vec![false; p.len() + 1];
        for j in 0..=p.len() {
            next[j] = if *s == "**" {
                ok[j] || (j > 0 && next[j - 1])
            } else {
                j > 0 && ok[j - 1] && seg_match(s.as_bytes(), p[j - 1].as_bytes())
            };
        }
        ok = next;
    }
    ok[p.len()]
}

/// Whether a segment pattern matches a segment (dynamic programming over the pattern).
fn seg_match(g: &[u8], s: &[u8]) -> bool {
    let mut ok = vec![false; s.len() + 1];
    ok[0] = true;
    for c in g {
        let mut next = vec![false; s.len() + 1];
        for j in 0..=s.len() {
            next[j] = if *c == b'*' {
                ok[j] || (j > 0 && next[j - 1])
            } else {
                j > 0 && ok[j - 1] && (*c == b'?' || *c == s[j - 1])
            };
        }
        ok = next;
    }
    ok[s.len()]
}

#[cfg(test)]
#[path = "reserve_tests.rs"]
mod tests;
