//! Limits: every limit on a value loopx reads or writes, as named constants, the checks of one
//! value against them (texts, counts, durations, command texts), and of each state file's values
//! (`checks.rs`). The table in `docs/state-format.md` ("Bounds") lists them all.

use std::fmt;

mod checks;
pub use checks::*;

use crate::kernel::error::{Error, Result};
use crate::kernel::time::Dur;

/// The most arguments of a command kept in evidence.
pub const ARGV_MAX: usize = 64;
/// The most characters of one argument kept in evidence.
pub const ARG_MAX: usize = 1_000;
/// The shortest quota window: 1 second.
pub const WINDOW_MIN: Dur = Dur(1000);
/// The longest quota window: 366 days.
pub const WINDOW_MAX: Dur = Dur(366 * 86_400_000);
/// The shortest cadence of a recurring todo: 1 second.
pub const EVERY_MIN: Dur = Dur(1000);
/// The longest cadence of a recurring todo: 366 days.
pub const EVERY_MAX: Dur = Dur(366 * 86_400_000);
/// The fewest slots in a quota window, and in one spend.
pub const SLOTS_MIN: u32 = 1;
/// The most slots in a quota window, and in one spend.
pub const SLOTS_MAX: u32 = 100_000;
/// The most spends `quota.toml` may hold.
pub const SPENDS_MAX: usize = 100_000;
/// The most tokens one spend may record.
pub const TOKENS_MAX: u64 = 1_000_000_000_000;
/// The most US dollars one spend may record.
pub const COST_USD_MAX: f64 = 1_000_000_000.0;
/// The smallest cost budget: one millionth of a dollar, what spends are summed in (a smaller one
/// counts as 0, a paused goal).
pub const COST_BUDGET_MIN: f64 = 0.000_001;
/// The highest fence: 2^53 - 1, so every fence is exact as a JSON number.
pub const FENCE_MAX: u64 = (1 << 53) - 1;
/// The most characters of a todo title, a success criterion or a goal id.
pub const TITLE_MAX: usize = 1_000;
/// The most characters of a long text: objective, question, reason, evidence text.
pub const TEXT_MAX: usize = 4_000;
/// The most characters of one gate option, a metric name or a turn id.
pub const NAME_MAX: usize = 200;
/// The most options of a gate.
pub const OPTIONS_MAX: usize = 20;
/// The most success criteria of a goal.
pub const CRITERIA_MAX: usize = 50;
/// The most `depends_on` entries of a todo.
pub const DEPENDS_MAX: usize = 100;
/// The most `blocks` entries of a gate.
pub const BLOCKS_MAX: usize = 1_000;
/// The most characters of an agent id (the least is 1).
pub const AGENT_MAX: usize = 64;
/// The most characters of an id a file refers to (`depends_on`, `blocks`, `status_by`).
pub const REF_MAX: usize = 64;
/// The most characters of a hex field (`journal_head`, `signature`).
pub const HEX_MAX: usize = 128;
/// The most evidence entries (`--evidence`, `--artifact`, `--metric` together) in one update.
pub const EVIDENCE_MAX: usize = 100;
/// The most characters of an artifact path.
pub const PATH_MAX: usize = 4_096;
/// The most journal lines `log --limit` shows.
pub const LOG_LIMIT_MAX: usize = 100_000;
/// The longest `LOOPX_LOCK_TIMEOUT`, in seconds (the least is 0).
pub const LOCK_TIMEOUT_MAX_S: u64 = 3_600;
/// The lock timeout when `LOOPX_LOCK_TIMEOUT` is not set, in seconds.
pub const LOCK_TIMEOUT_DEFAULT_S: u64 = 10;
/// The largest owner key file, in bytes.
pub const OWNER_KEY_MAX_BYTES: u64 = 4_096;
/// The most bytes of a watcher's check command (`[check] command`).
pub const CHECK_COMMAND_MAX: usize = 2_048;
/// The longest a check may run before `monitor poll` stops it (`--timeout`), in seconds.
pub const CHECK_TIMEOUT_MAX_S: u64 = 3_600;
/// The most bytes of a check's stdout kept and hashed.
pub const CHECK_OUTPUT_MAX: usize = 64 * 1024;
// todo context
/// The most characters of a todo's `body`.
pub const BODY_MAX: usize = 16_000;
/// The most bytes `--body-file` reads.
pub const BODY_FILE_MAX_BYTES: u64 = 64 * 1024;
/// The most links a todo has.
pub const LINKS_MAX: usize = 20;
/// The most characters of one link.
pub const LINK_MAX: usize = 2_000;
/// The most entries `evidence list` shows (`--limit`).
pub const EVIDENCE_LIST_MAX: usize = 10_000;

/// One step of a key path: a key name or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A key of a table.
    Name(String),
    /// An element of an array (or array of tables).
    Index(usize),
}

/// A value outside its bound: where it is (`quota.window`, `spend[2].cost_usd`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The key path, from the top of the file.
    pub key: Vec<Key>,
    /// What is wrong, naming the bound.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(key: &str, message: impl Into<String>) -> Violation {
        Violation {
            key: key.split('.').map(|k| Key::Name(k.to_string())).collect(),
            message: message.into(),
        }
    }

    /// Puts this violation under `prefix` (a table name, or an index).
    pub(crate) fn under(mut self, prefix: Vec<Key>) -> Violation {
        let mut key = prefix;
        key.append(&mut self.key);
        self.key = key;
        self
    }

    /// The key path as people read it: `spend[2].cost_usd`.
    pub fn path(&self) -> String {
        let mut s = String::new();
        for k in &self.key {
            match k {
                Key::Name(n) if s.is_empty() => s.push_str(n),
                Key::Name(n) => {
                    s.push('.');
                    s.push_str(n);
                }
                Key::Index(i) => s.push_str(&format!("[{i}]")),
            }
        }
        s
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The result of a bounds check.
pub type Checked = std::result::Result<(), Violation>;

/// A bounds check as a usage error (exit 2): for values that come from a command.
pub fn usage(r: Checked) -> Result<()> {
    r.map_err(|v| Error::usage(v.message).hint("see the Bounds table in docs/state-format.md"))
}

pub(crate) fn chars(s: &str) -> usize {
    s.chars().count()
}

/// A text of at most `max` characters.
pub fn text(key: &str, s: &str, max: usize) -> Checked {
    let n = chars(s);
    if n > max {
        return Err(Violation::new(
            key,
            format!("`{key}` is {n} characters long; the most is {max}"),
        ));
    }
    Ok(())
}

/// A text of 1 to `max` characters, not only spaces.
pub fn required_text(key: &str, s: &str, max: usize) -> Checked {
    if s.trim().is_empty() {
        return Err(Violation::new(key, format!("`{key}` cannot be empty")));
    }
    text(key, s, max)
}

pub(crate) fn opt_text(key: &str, s: &Option<String>, max: usize) -> Checked {
    s.as_deref().map_or(Ok(()), |s| text(key, s, max))
}

/// An agent id as a file holds it: 1 to 64 characters.
pub fn agent(key: &str, s: &str) -> Checked {
    if s.is_empty() || chars(s) > AGENT_MAX {
        return Err(Violation::new(
            key,
            format!("`{key}` must be an agent id of 1 to {AGENT_MAX} characters"),
        ));
    }
    Ok(())
}

/// A number of entries of at most `max`.
pub fn count(key: &str, n: usize, max: usize) -> Checked {
    if n > max {
        return Err(Violation::new(
            key,
            format!("`{key}` has {n} entries; the most is {max}"),
        ));
    }
    Ok(())
}

/// A duration in `min..=max`.
pub fn duration(key: &str, d: Dur, min: Dur, max: Dur) -> Checked {
    if d < min || d > max {
        return Err(Violation::new(
            key,
            format!("`{key}` must be {min} to {max}, not {d}"),
        ));
    }
    Ok(())
}

/// An integer in `min..=max`.
pub fn int(key: &str, n: u64, min: u64, max: u64) -> Checked {
    if n < min || n > max {
        return Err(Violation::new(
            key,
            format!("`{key}` must be {min} to {max}, not {n}"),
        ));
    }
    Ok(())
}

/// A cost in US dollars: a finite number from 0 to `COST_USD_MAX`.
pub fn cost_usd(key: &str, c: f64) -> Checked {
    if !c.is_finite() || !(0.0..=COST_USD_MAX).contains(&c) {
        return Err(Violation::new(
            key,
            format!("`{key}` must be a number from 0 to {COST_USD_MAX}, not {c}"),
        ));
    }
    Ok(())
}

pub(crate) fn each<T>(key: &str, items: &[T], check: impl Fn(&T) -> Checked) -> Checked {
    for (i, item) in items.iter().enumerate() {
        check(item).map_err(|v| {
            let mut v = v;
            v.key = vec![Key::Name(key.to_string()), Key::Index(i)];
            v
        })?;
    }
    Ok(())
}

pub(crate) fn refs(key: &str, ids: &[String], max: usize) -> Checked {
    count(key, ids.len(), max)?;
    each(key, ids, |id| required_text(key, id, REF_MAX))
}

/// A link: `scheme://rest`, a scheme of letters, digits, `+`, `-` or `.`, at most `LINK_MAX`
/// characters, no white space or control character.
pub fn link(key: &str, s: &str) -> Checked {
    text(key, s, LINK_MAX)?;
    let ok_scheme = |sc: &str| {
        sc.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && sc
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    };
    let well_formed = s
        .split_once("://")
        .is_some_and(|(sc, rest)| ok_scheme(sc) && !rest.is_empty());
    if !well_formed
        || s.chars()
            .any(|c| c.is_whitespace() || crate::text::is_unsafe(c))
    {
        return Err(Violation::new(
            key,
            format!(
                "`{key}` must be a URL like https://host/path, with no spaces or control characters"
            ),
        ));
    }
    Ok(())
}

/// A check command: not empty, at most `CHECK_COMMAND_MAX` bytes, no control character (see
/// `crate::text::is_unsafe`).
pub fn check_command(key: &str, s: &str) -> Checked {
    if s.trim().is_empty() {
        return Err(Violation::new(key, format!("`{key}` cannot be empty")));
    }
    if s.len() > CHECK_COMMAND_MAX {
        return Err(Violation::new(
            key,
            format!(
                "`{key}` is {} bytes long; the most is {CHECK_COMMAND_MAX}",
                s.len()
            ),
        ));
    }
    plain_command(key, s)
}

/// A command text the owner approves by reading it: printable ASCII only (U+0020 to U+007E).
/// Anything else can show one way and run another: a newline reads as `\n` while `sh -c` runs
/// a new line; U+2800 or a no-break space reads as a space, but the shell does not split on it,
/// so `x=1<NBSP>#;touch f` runs `touch f`; a Cyrillic `а` reads as a Latin `a`. One rule for
/// checks, hooks and every command text the owner approves (docs/security.md).
pub fn plain_command(key: &str, s: &str) -> Checked {
    let Some((at, c)) = s.char_indices().find(|(_, c)| !matches!(c, ' '..='~')) else {
        return Ok(());
    };
    Err(Violation::new(
        key,
        format!(
            "`{key}` cannot hold U+{:04X} (byte {at}): a command the owner approves is printable ASCII, so the text shown is the text run (write other characters as printf escapes, or approve a script that holds them)",
            c as u32
        ),
    ))
}

/// Cuts text to at most `n` characters, marking the cut with an ellipsis.
pub fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}
