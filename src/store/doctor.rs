//! doctor: checks every file of `.loopx/`, the journal's chain, leases, temp files and the lock.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use serde::Serialize;

use crate::kernel::authority;
use crate::kernel::{Config, Event, Gate, GoalStatus, QuotaFile, Result, Todo, Ts};
use crate::store::fs::FileStore;
use crate::store::parse::{self, shown};
use crate::store::{Store, atomic, journal};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The state is wrong: exit 6.
    Error,
    /// Worth knowing; healthy anyway.
    Warning,
}

/// One thing doctor found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// The file, relative to the project.
    pub file: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong and what to do.
    pub message: String,
    /// `doctor --fix` repairs it.
    pub fixable: bool,
}

fn finding(
    severity: Severity,
    file: impl Into<String>,
    line: Option<usize>,
    message: impl Into<String>,
    fixable: bool,
) -> Finding {
    Finding {
        severity,
        file: file.into(),
        line,
        message: message.into(),
        fixable,
    }
}

/// Splits an error message `file:line: text` back into its parts.
fn from_error(e: &crate::kernel::Error, fallback: &str) -> Finding {
    match e.location.as_deref() {
        Some(l) => finding(
            Severity::Error,
            l.file.clone(),
            l.line,
            l.what.clone(),
            false,
        ),
        None => finding(Severity::Error, fallback, None, e.message.clone(), false),
    }
}

fn entries(dir: &Path) -> Vec<(String, std::path::PathBuf)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().map(|n| (n.to_string(), e.path())))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The `*.toml` state files of a directory (no temp files), as (id, path).
fn toml_entries(dir: &Path) -> Vec<(String, std::path::PathBuf)> {
    entries(dir)
        .into_iter()
        .filter(|(name, _)| !name.starts_with('.'))
        .filter_map(|(name, path)| name.strip_suffix(".toml").map(|s| (s.to_string(), path)))
        .collect()
}

/// Runs every check; never writes.
pub fn check(store: &FileStore, now: Ts) -> Vec<Finding> {
    let mut out = Vec::new();
    let d = store.dir();
    let rel = |p: &Path| shown(p);

    let config = match store.read_config() {
        Ok(c) => Some(c),
        Err(e) => {
            out.push(from_error(&e, ".loopx/loopx.toml"));
            None
        }
    };

    // The state directories must be directories (not files, not symlinks).
    for sub in ["todos", "archive", "gates", "evidence", "cache"] {
        let p = d.join(sub);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => out.push(finding(
                Severity::Error,
                rel(&p),
                None,
                "is a symlink; loopx does not follow links inside .loopx/: make it a directory",
                false,
            )),
            Ok(m) if !m.is_dir() => out.push(finding(
                Severity::Error,
                rel(&p),
                None,
                "is not a directory; move it away and run `loopx doctor` again",
                false,
            )),
            _ => {}
        }
    }

    // Temp files anywhere in the state directories.
    for sub in ["", "todos", "archive", "gates", "evidence", "cache"] {
        for (name, path) in entries(&d.join(sub)) {
            if atomic::is_temp_name(&name) {
                out.push(finding(
                    Severity::Warning,
                    rel(&path),
                    None,
                    "a leftover temp file from an interrupted write",
                    true,
                ));
            }
        }
    }

    let mut todos: Vec<Todo> = Vec::new();
    let mut open_ids: HashSet<String> = HashSet::new();
    for (stem, path) in toml_entries(&d.join("todos")) {
        let stem = stem.as_str();
        match parse::read_named::<Todo>(&path, stem) {
            Ok(Some(t)) => {
                open_ids.insert(t.id.clone());
                todos.push(t);
            }
            Ok(None) => {}
            Err(e) => out.push(from_error(&e, &rel(&path))),
        }
    }
    let mut archived: HashSet<String> = HashSet::new();
    for (stem, path) in toml_entries(&d.join("archive")) {
        let stem = stem.as_str();
        match parse::read_named::<Todo>(&path, stem) {
            Ok(Some(t)) => {
                if open_ids.contains(stem) {
                    out.push(finding(Severity::Error, format!(".loopx/todos/{stem}.toml"), None,
                        format!("{stem} is both open and archived (an interrupted archive); the archived copy is kept"), true));
                }
                if !t.status.is_final() {
                    out.push(finding(
                        Severity::Warning,
                        rel(&path),
                        None,
                        format!("an archived todo with status {}", t.status.as_str()),
                        false,
                    ));
                }
                archived.insert(stem.to_string());
            }
            Ok(None) => {}
            Err(e) => out.push(from_error(&e, &rel(&path))),
        }
    }
    let known = |id: &str| open_ids.contains(id) || archived.contains(id);
    for t in &todos {
        let file = format!(".loopx/todos/{}.toml", t.id);
        for dep in &t.depends_on {
            if !known(dep) {
                out.push(finding(
                    Severity::Error,
                    file.clone(),
                    None,
                    format!("depends on {dep}, which does not exist; remove it from depends_on"),
                    false,
                ));
            }
        }
        if let Some(l) = &t.lease {
            if !l.is_live(now) {
                out.push(finding(
                    Severity::Warning,
                    file.clone(),
                    None,
                    format!(
                        "the lease of {} (fence {}) expired at {}",
                        l.holder, l.fence, l.expires_at
                    ),
                    true,
                ));
            }
            if l.fence != t.fence {
                out.push(finding(
                    Severity::Error,
                    file.clone(),
                    None,
                    format!(
                        "the lease's fence {} differs from the todo's fence {}",
                        l.fence, t.fence
                    ),
                    false,
                ));
            }
        }
    }

    let mut gates: Vec<Gate> = Vec::new();
    for (stem, path) in toml_entries(&d.join("gates")) {
        let stem = stem.as_str();
        match parse::read_named::<Gate>(&path, stem) {
            Ok(Some(g)) => {
                for b in &g.blocks {
                    if !known(b) {
                        out.push(finding(
                            Severity::Error,
                            rel(&path),
                            None,
                            format!("blocks {b}, which does not exist; remove it from blocks"),
                            false,
                        ));
                    }
                }
                gates.push(g);
            }
            Ok(None) => {}
            Err(e) => out.push(from_error(&e, &rel(&path))),
        }
    }

    if let Err(e) = parse::read::<QuotaFile>(&store.path("quota.toml")) {
        out.push(from_error(&e, ".loopx/quota.toml"));
    }

    for (name, path) in entries(&d.join("evidence")) {
        let Some(stem) = name
            .strip_suffix(".jsonl")
            .filter(|_| !name.starts_with('.'))
        else {
            continue;
        };
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                out.push(finding(
                    Severity::Error,
                    rel(&path),
                    None,
                    format!("cannot read: {e}"),
                    false,
                ));
                continue;
            }
        };
        check_jsonl(&mut out, &rel(&path), &bytes, |l| {
            serde_json::from_slice::<crate::kernel::Evidence>(l).map(|_| ())
        });
        if !known(stem) {
            out.push(finding(
                Severity::Warning,
                rel(&path),
                None,
                format!("evidence of {stem}, which does not exist"),
                false,
            ));
        }
    }

    let jp = store.journal_path();
    match fs::read(&jp) {
        Ok(bytes) => {
            let (brk, torn) = journal::verify(&bytes);
            if let Some(b) = brk {
                out.push(finding(
                    Severity::Error,
                    ".loopx/journal.jsonl",
                    Some(b.line),
                    b.message,
                    false,
                ));
            }
            if torn {
                let line = bytes.iter().filter(|b| **b == b'\n').count() + 1;
                out.push(finding(
                    Severity::Error,
                    ".loopx/journal.jsonl",
                    Some(line),
                    "a torn last line (a crash mid-append)",
                    true,
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => out.push(finding(
            Severity::Warning,
            ".loopx/journal.jsonl",
            None,
            "no journal yet",
            false,
        )),
        Err(e) => out.push(finding(
            Severity::Error,
            ".loopx/journal.jsonl",
            None,
            format!("cannot read: {e}"),
            false,
        )),
    }

    check_owner(&mut out, store, config.as_ref(), &gates);
    check_lock(&mut out, store);
    out
}

fn goal_word(s: GoalStatus) -> &'static str {
    match s {
        GoalStatus::Active => "active",
        GoalStatus::Paused => "paused",
        GoalStatus::Complete => "complete",
    }
}

/// Owner authority: decisions proven, owner lines signed, owner.pub still the owner's,
/// and the goal, quota and gates as the owner's signed journal left them.
fn check_owner(out: &mut Vec<Finding>, store: &FileStore, config: Option<&Config>, gates: &[Gate]) {
    let key = match store.owner_pub() {
        Ok(k) => k,
        Err(e) => {
            out.push(from_error(&e, ".loopx/owner.pub"));
            return;
        }
    };
    // Where the owner's secret is here, owner.pub must be that key.
    if let (Ok(Some(secret)), Some(k)) = (crate::store::owner::load(), &key)
        && secret.public() != *k
    {
        out.push(finding(Severity::Error, ".loopx/owner.pub", None, format!(
            "owner.pub holds {}, not your key {}: it was replaced, and decisions signed with it are not yours; \
             restore it with `loopx owner init --force` and re-decide the gates",
            k.fingerprint(), secret.public().fingerprint()), false));
    }
    for g in gates {
        if !authority::gate_proven(g, key.as_ref()) {
            let why = if key.is_none() {
                "there is no owner.pub to prove it"
            } else if g.signature.is_none() {
                "it has no signature"
            } else {
                "its signature does not verify"
            };
            out.push(finding(Severity::Error, format!(".loopx/gates/{}.toml", g.id), None, format!(
                "tampered: {} says {} but {why}; it counts as pending until the owner decides it",
                g.id, g.status.as_str()), false));
        }
    }
    let Ok(text) = fs::read_to_string(store.journal_path()) else {
        return;
    };
    let mut goal_status: Option<(usize, GoalStatus)> = None;
    let mut quota_set: Option<(usize, serde_json::Value)> = None;
    let mut opened: Vec<(usize, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Ok(ev) = serde_json::from_str::<Event>(line) else {
            continue;
        };
        let n = i + 1;
        let owner_action = authority::OWNER_ACTIONS.contains(&ev.action.as_str())
            || (ev.actor == crate::kernel::ops::OWNER && ev.sig.is_some());
        if !owner_action {
            if ev.action == "gate.open" {
                opened.push((n, ev.target.clone()));
            }
            continue;
        }
        if !authority::event_proven(&ev, key.as_ref()) {
            out.push(finding(
                Severity::Error,
                ".loopx/journal.jsonl",
                Some(n),
                format!(
                    "{} on {} is an owner action without a valid owner signature",
                    ev.action, ev.target
                ),
                false,
            ));
            continue;
        }
        match ev.action.as_str() {
            "goal.pause" => goal_status = Some((n, GoalStatus::Paused)),
            "goal.resume" => goal_status = Some((n, GoalStatus::Active)),
            "goal.complete" => goal_status = Some((n, GoalStatus::Complete)),
            "quota.set" => quota_set = Some((n, ev.data.clone())),
            _ => {}
        }
    }
    if let Some(cfg) = config {
        let (line, want) = goal_status.map_or((None, GoalStatus::Active), |(n, s)| (Some(n), s));
        if cfg.goal.status != want {
            out.push(finding(Severity::Error, ".loopx/loopx.toml", None, format!(
                "the goal is {} here, but the owner's last signed decision{} left it {}: it was edited by hand",
                goal_word(cfg.goal.status), line.map(|n| format!(" (journal.jsonl:{n})")).unwrap_or_default(), goal_word(want)),
                false));
        }
        if let Some((n, data)) = quota_set {
            let now = serde_json::json!({"slots": cfg.quota.slots, "window": cfg.quota.window, "min_interval": cfg.quota.min_interval});
            if now != data {
                out.push(finding(Severity::Error, ".loopx/loopx.toml", None, format!(
                    "[quota] is {now} here, but the owner set {data} (journal.jsonl:{n}): it was edited by hand"), false));
            }
        }
    }
    for (n, id) in opened {
        if !gates.iter().any(|g| g.id == id) {
            out.push(finding(Severity::Error, format!(".loopx/gates/{id}.toml"), None, format!(
                "gate {id} was opened (journal.jsonl:{n}) but its file is gone: a deleted gate unblocks its todos"), false));
        }
    }
}

fn check_jsonl(
    out: &mut Vec<Finding>,
    file: &str,
    bytes: &[u8],
    parse: impl Fn(&[u8]) -> serde_json::Result<()>,
) {
    let complete_end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    for (i, line) in bytes[..complete_end].split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        if let Err(e) = parse(line) {
            out.push(finding(
                Severity::Error,
                file,
                Some(i + 1),
                format!("not a valid entry ({e})"),
                false,
            ));
        }
    }
    if complete_end < bytes.len() {
        let line = bytes[..complete_end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        out.push(finding(
            Severity::Error,
            file,
            Some(line),
            "a torn last line (a crash mid-append)",
            true,
        ));
    }
}

fn check_lock(out: &mut Vec<Finding>, store: &FileStore) {
    let p = store.path("lock");
    match crate::store::lock::acquire(&p, true) {
        Ok(_g) => {}
        Err(e) => out.push(finding(
            Severity::Warning,
            ".loopx/lock",
            None,
            format!("{} ({})", e.message, e.hint.unwrap_or_default()),
            false,
        )),
    }
    if let Some(fs_type) = crate::store::lock::network_fs(store.dir()) {
        out.push(finding(Severity::Warning, ".loopx/lock", None,
            format!(".loopx/ is on {fs_type}: locks may not be shared between machines; run agents on one machine"), false));
    }
}

/// Repairs what is safe, under the exclusive lock; returns what it did.
pub fn fix(store: &FileStore, now: Ts) -> Result<Vec<String>> {
    use crate::kernel::Error;
    let _g = store.lock(true)?;
    let d = store.dir();
    let mut did = Vec::new();
    for sub in ["", "todos", "archive", "gates", "evidence", "cache"] {
        for (name, path) in entries(&d.join(sub)) {
            if atomic::is_temp_name(&name) && fs::remove_file(&path).is_ok() {
                did.push(format!("removed temp file {}", shown(&path)));
            }
        }
    }
    for (name, path) in entries(&d.join("evidence"))
        .into_iter()
        .chain([("journal.jsonl".to_string(), store.journal_path())])
    {
        if !name.ends_with(".jsonl") || name.starts_with('.') {
            continue;
        }
        let Ok(mut f) = fs::OpenOptions::new().read(true).write(true).open(&path) else {
            continue;
        };
        let cut = journal::cut_torn_tail(&mut f).map_err(|e| Error::io(&path, &e))?;
        if cut > 0 {
            did.push(format!(
                "removed a torn last line ({cut} bytes) from {}",
                shown(&path)
            ));
        }
    }
    for (name, _) in entries(&d.join("archive")) {
        let Some(stem) = name.strip_suffix(".toml") else {
            continue;
        };
        let open = d.join("todos").join(&name);
        if open.exists()
            && matches!(store.archived_todo(stem), Ok(Some(t)) if t.status.is_final())
            && fs::remove_file(&open).is_ok()
        {
            did.push(format!("removed {} (it is archived)", shown(&open)));
        }
    }
    match store.load_unlocked() {
        Ok(snap) => {
            let change = crate::kernel::ops::expire_leases(&snap, "doctor", now);
            for e in &change.events {
                did.push(format!("cleared the expired lease on {}", e.target));
            }
            store.apply_change(change)?;
        }
        Err(e) => did.push(format!("left expired leases alone: {}", e.message)),
    }
    Ok(did)
}
