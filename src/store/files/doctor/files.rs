//! Reading every file doctor checks: each must be where it belongs, of the right kind, and parse.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::is_regular;
use crate::kernel::{Config, Evidence, Gate, QuotaFile, Todo};
use crate::store::core::doctor::{Doc, Finding, State};
use crate::store::fs::FileStore;
use crate::store::parse::{self, Named, shown};
use crate::store::{atomic, journal};

/// The state directories inside `.loopx/`.
pub(super) const DIRS: [&str; 6] = ["todos", "archive", "gates", "evidence", "cache", "agents"];

/// The entries of a directory, sorted, as (name, path); none when it cannot be read.
pub(super) fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
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

/// True when `dir` is a real directory (a symlink to one is not).
pub(super) fn is_real_dir(dir: &Path) -> bool {
    fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_dir())
}

/// Reads and checks every file; findings for what is wrong with a file on its own.
pub(super) fn read_all(store: &FileStore, out: &mut Vec<Finding>) -> State {
    let d = store.dir();
    check_kinds(d, out);
    check_temps(d, out);
    let config = read_config(store, out);
    let todos = read_named::<Todo>(&d.join("todos"), out);
    let archived = read_named::<Todo>(&d.join("archive"), out);
    let gates = read_named::<Gate>(&d.join("gates"), out);
    let quota = read_quota(store, out);
    // Agents' declarations (routing): each file checked on its own.
    read_named::<crate::kernel::model::AgentInfo>(&d.join("agents"), out);
    let known: HashSet<&str> = todos
        .iter()
        .chain(&archived)
        .map(|t| t.value.id.as_str())
        .collect();
    check_evidence(d, &known, out);
    check_journal(store, out);
    State {
        config,
        todos,
        archived,
        gates,
        quota,
    }
}

/// The state directories must be directories, and fixed files regular files.
fn check_kinds(d: &Path, out: &mut Vec<Finding>) {
    for sub in DIRS {
        let p = d.join(sub);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => out.push(Finding::error(
                shown(&p),
                None,
                "is a symlink; loopx does not follow links inside .loopx/: make it a directory",
            )),
            Ok(m) if !m.is_dir() => out.push(Finding::error(
                shown(&p),
                None,
                "is not a directory; move it away and run `loopx doctor` again",
            )),
            _ => {}
        }
    }
    for name in ["loopx.toml", "quota.toml", "journal.jsonl", "owner.pub"] {
        let p = d.join(name);
        if fs::symlink_metadata(&p).is_ok() && !is_regular(&p) {
            out.push(not_regular(&p));
        }
    }
}

fn not_regular(p: &Path) -> Finding {
    Finding::error(
        shown(p),
        None,
        "is not a regular file (a link, FIFO, socket or directory); replace it with the file",
    )
}

/// Temp files anywhere in the state directories.
fn check_temps(d: &Path, out: &mut Vec<Finding>) {
    for sub in std::iter::once("").chain(DIRS) {
        let dir = d.join(sub);
        if !sub.is_empty() && !is_real_dir(&dir) {
            continue;
        }
        for (name, path) in entries(&dir) {
            if atomic::is_temp_name(&name) {
                out.push(
                    Finding::warning(
                        shown(&path),
                        None,
                        "a leftover temp file from an interrupted write",
                    )
                    .fixable(),
                );
            }
        }
    }
}

fn read_config(store: &FileStore, out: &mut Vec<Finding>) -> Option<Doc<Config>> {
    let path = store.path("loopx.toml");
    if fs::symlink_metadata(&path).is_ok() && !is_regular(&path) {
        return None;
    }
    match store.read_config() {
        Ok(value) => Some(Doc { value, path }),
        Err(e) => {
            out.push(Finding::from_error(&e, ".loopx/loopx.toml"));
            None
        }
    }
}

fn read_quota(store: &FileStore, out: &mut Vec<Finding>) -> Option<Doc<QuotaFile>> {
    let path = store.path("quota.toml");
    if !is_regular(&path) {
        return None;
    }
    match parse::read::<QuotaFile>(&path) {
        Ok(v) => v.map(|value| Doc { value, path }),
        Err(e) => {
            out.push(Finding::from_error(&e, ".loopx/quota.toml"));
            None
        }
    }
}

/// The `*.toml` files of a state directory (no temp files), parsed; the id must match the name.
fn read_named<T: serde::de::DeserializeOwned + Named>(
    dir: &Path,
    out: &mut Vec<Finding>,
) -> Vec<Doc<T>> {
    if !is_real_dir(dir) {
        return Vec::new();
    }
    let mut docs = Vec::new();
    for (stem, path) in regular_files(dir, ".toml", out) {
        match parse::read_named::<T>(&path, &stem) {
            Ok(Some(value)) => docs.push(Doc { value, path }),
            Ok(None) => {}
            Err(e) => out.push(Finding::from_error(&e, &shown(&path))),
        }
    }
    docs
}

/// The `STEM.SUFFIX` files of a directory (no dotfiles), as (stem, path); anything there that is
/// not a regular file is a finding.
fn regular_files(dir: &Path, suffix: &str, out: &mut Vec<Finding>) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    for (name, path) in entries(dir) {
        let Some(stem) = name.strip_suffix(suffix).filter(|_| !name.starts_with('.')) else {
            continue;
        };
        if is_regular(&path) {
            files.push((stem.to_string(), path));
        } else {
            out.push(not_regular(&path));
        }
    }
    files
}

/// Every evidence log parses line by line, and belongs to a todo that exists.
fn check_evidence(d: &Path, known: &HashSet<&str>, out: &mut Vec<Finding>) {
    let dir = d.join("evidence");
    if !is_real_dir(&dir) {
        return;
    }
    for (stem, path) in regular_files(&dir, ".jsonl", out) {
        match parse::read_bytes(&path) {
            Ok(Some(bytes)) => check_jsonl(out, &shown(&path), &bytes, |l| {
                serde_json::from_slice::<Evidence>(l).map(|_| ())
            }),
            Ok(None) => continue,
            Err(e) => out.push(Finding::from_error(&e, &shown(&path))),
        }
        if !known.contains(stem.as_str()) {
            out.push(Finding::warning(
                shown(&path),
                None,
                format!("evidence of {stem}, which does not exist"),
            ));
        }
    }
}

/// The journal's hash chain, and a torn last line.
fn check_journal(store: &FileStore, out: &mut Vec<Finding>) {
    let jp = store.journal_path();
    if fs::symlink_metadata(&jp).is_ok() && !is_regular(&jp) {
        return;
    }
    let file = ".loopx/journal.jsonl";
    match parse::read_bytes(&jp) {
        Ok(Some(bytes)) => {
            let (brk, torn) = journal::verify(&bytes);
            if let Some(b) = brk {
                out.push(Finding::error(file, Some(b.line), b.message));
            }
            if torn {
                let line = bytes.iter().filter(|b| **b == b'\n').count() + 1;
                out.push(
                    Finding::error(file, Some(line), "a torn last line (a crash mid-append)")
                        .fixable(),
                );
            }
        }
        Ok(None) => out.push(Finding::warning(file, None, "no journal yet")),
        Err(e) => out.push(Finding::from_error(&e, file)),
    }
}

/// Each complete line must parse; a last line without a newline is torn.
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
            out.push(Finding::error(
                file,
                Some(i + 1),
                format!("not a valid entry ({e})"),
            ));
        }
    }
    if complete_end < bytes.len() {
        let line = bytes[..complete_end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        out.push(
            Finding::error(file, Some(line), "a torn last line (a crash mid-append)").fixable(),
        );
    }
}
