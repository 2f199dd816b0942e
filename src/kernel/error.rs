//! Errors every layer returns: a stable code, an exit code, a message and a hint.

use std::fmt;

/// The contract's error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// I/O failure.
    Io,
    /// A bug or an unexpected state.
    Internal,
    /// Bad arguments.
    Usage,
    /// Nothing is ready to claim.
    NothingReady,
    /// The named todo is not ready.
    NotReady,
    /// Another agent holds the lease.
    LeaseConflict,
    /// The fence given is not the current one.
    StaleFence,
    /// The gate was decided already.
    AlreadyDecided,
    /// A goal exists already.
    GoalExists,
    /// An owner key exists already.
    KeyExists,
    /// No `.loopx/` found.
    NotInitialized,
    /// Unknown id.
    NotFound,
    /// A prefix matches several ids.
    AmbiguousId,
    /// A file fails to parse or validate.
    InvalidState,
    /// A file is newer than this binary.
    SchemaTooNew,
    /// Owner authority needed and not proven.
    Denied,
    /// The lock was not had in time.
    Busy,
    /// Another writer changed what a commit read; a fresh try may not meet it (shown as `busy`).
    Conflict,
    /// What the caller saw changed before its act (a gate's text after the phone showed it).
    Changed,
    /// The check that proves a todo done did not pass.
    CheckFailed,
    /// A gate's approved action ran already: it runs once.
    AlreadyUsed,
}

impl Code {
    /// The code as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Io => "io",
            Code::Internal => "internal",
            Code::Usage => "usage",
            Code::NothingReady => "nothing_ready",
            Code::NotReady => "not_ready",
            Code::LeaseConflict => "lease_conflict",
            Code::StaleFence => "stale_fence",
            Code::AlreadyDecided => "already_decided",
            Code::GoalExists => "goal_exists",
            Code::KeyExists => "key_exists",
            Code::NotInitialized => "not_initialized",
            Code::NotFound => "not_found",
            Code::AmbiguousId => "ambiguous_id",
            Code::InvalidState => "invalid_state",
            Code::SchemaTooNew => "schema_too_new",
            Code::Denied => "denied",
            Code::Busy | Code::Conflict => "busy",
            Code::CheckFailed => "check_failed",
            Code::AlreadyUsed => "already_used",
            Code::Changed => "changed",
        }
    }

    /// True for `Busy` and `Conflict`: the store could not do it now; later it may.
    pub fn is_busy(self) -> bool {
        matches!(self, Code::Busy | Code::Conflict)
    }

    /// The process exit code for this error.
    pub fn exit_code(self) -> i32 {
        match self {
            Code::Io | Code::Internal => 1,
            Code::Usage => 2,
            Code::NothingReady | Code::NotReady => 3,
            Code::LeaseConflict
            | Code::StaleFence
            | Code::AlreadyDecided
            | Code::GoalExists
            | Code::KeyExists
            | Code::AlreadyUsed
            | Code::Changed => 4,
            Code::NotInitialized | Code::NotFound | Code::AmbiguousId => 5,
            Code::InvalidState | Code::SchemaTooNew => 6,
            Code::Denied => 7,
            Code::Busy | Code::Conflict => 8,
            Code::CheckFailed => 9,
        }
    }
}

/// An error with what went wrong and what to do about it.
#[derive(Debug, Clone)]
pub struct Error {
    /// The stable code.
    pub code: Code,
    /// What went wrong.
    pub message: String,
    /// What to do next.
    pub hint: Option<String>,
    /// Structured details (reasons, candidates), shown in JSON.
    pub details: Option<Box<serde_json::Value>>,
    /// The state file (and line) the error is about, when it is about one.
    pub location: Option<Box<Location>>,
}

/// Where a state-file error is: file, line, and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file, relative to the project (`.loopx/todos/t-abc.toml`).
    pub file: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong, without the file name.
    pub what: String,
}

/// Result with the loopx error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error with a code and message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            hint: None,
            details: None,
            location: None,
        }
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds structured details.
    pub fn details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// A usage error.
    pub fn usage(message: impl Into<String>) -> Self {
        Error::new(Code::Usage, message)
    }

    /// An invalid-state error for a file (and line, when known).
    pub fn invalid(file: &str, line: Option<usize>, message: impl Into<String>) -> Self {
        Error::in_file(Code::InvalidState, file, line, message).hint(format!(
            "fix or restore {file} by hand, then run `loopx doctor`"
        ))
    }

    /// An error about a state file: the message reads `file:line: what`.
    pub fn in_file(code: Code, file: &str, line: Option<usize>, what: impl Into<String>) -> Self {
        let what = what.into();
        let at = match line {
            Some(l) => format!("{file}:{l}"),
            None => file.to_string(),
        };
        let mut e = Error::new(code, format!("{at}: {what}"));
        e.location = Some(Box::new(Location {
            file: file.to_string(),
            line,
            what,
        }));
        e
    }

    /// An I/O error on a path.
    pub fn io(path: &std::path::Path, err: &std::io::Error) -> Self {
        Error::new(Code::Io, format!("{}: {err}", path.display()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
