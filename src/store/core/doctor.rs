//! What doctor finds on any store: a finding, and the relations between records that every
//! store checks the same way.

mod relations;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::kernel::{Config, Gate, QuotaFile, Todo};
use crate::store::parse::shown;

pub use relations::check as check_relations;

/// How far a spend may be dated ahead of this machine's clock before doctor calls it an error:
/// agents on one machine share a clock, so 5 minutes covers skew between containers or VMs.
pub const CLOCK_SKEW_MS: i64 = 5 * 60 * 1000;

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

impl Finding {
    /// An error that `--fix` does not repair.
    pub(crate) fn error(
        file: impl Into<String>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            severity: Severity::Error,
            file: file.into(),
            line,
            message: message.into(),
            fixable: false,
        }
    }

    /// A warning that `--fix` does not repair.
    pub(crate) fn warning(
        file: impl Into<String>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            severity: Severity::Warning,
            ..Finding::error(file, line, message)
        }
    }

    /// The same finding, marked as repaired by `--fix`.
    pub(crate) fn fixable(self) -> Finding {
        Finding {
            fixable: true,
            ..self
        }
    }

    /// A store error as a finding, at its file and line; `fallback` names the file otherwise.
    pub(crate) fn from_error(e: &crate::kernel::Error, fallback: &str) -> Finding {
        match e.location.as_deref() {
            Some(l) => Finding::error(l.file.clone(), l.line, l.what.clone()),
            None => Finding::error(fallback, None, e.message.clone()),
        }
    }
}

/// A parsed state file and where it is.
pub struct Doc<T> {
    /// The value.
    pub value: T,
    /// Its path.
    pub path: PathBuf,
}

impl<T> Doc<T> {
    /// The path as shown in findings (`.loopx/todos/t-abc.toml`).
    pub fn file(&self) -> String {
        shown(&self.path)
    }
}

/// Everything that parsed.
pub struct State {
    /// `loopx.toml`.
    pub config: Option<Doc<Config>>,
    /// `todos/*.toml`.
    pub todos: Vec<Doc<Todo>>,
    /// `archive/*.toml`.
    pub archived: Vec<Doc<Todo>>,
    /// `gates/*.toml`.
    pub gates: Vec<Doc<Gate>>,
    /// `quota.toml`.
    pub quota: Option<Doc<QuotaFile>>,
}

/// The 1-based line of `key = ...` in a TOML file, inside the `n`-th (0-based) table named
/// `header` (like `[lease]` or `[[spend]]`), or at the top level when `header` is None.
pub(crate) fn key_line(path: &Path, header: Option<(&str, usize)>, key: &str) -> Option<usize> {
    let bytes = crate::store::parse::read_bytes(path).ok().flatten()?;
    let text = String::from_utf8(bytes).ok()?;
    let mut seen = 0;
    let mut inside = header.is_none();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = match header {
                Some((h, n)) if t.starts_with(h) => {
                    seen += 1;
                    seen == n + 1
                }
                _ => false,
            };
            continue;
        }
        let is_key = t
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if inside && is_key {
            return Some(i + 1);
        }
    }
    None
}
