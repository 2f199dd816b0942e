//! Action-bound gates: the exact action a gate holds, its digest, and when it may run (once).

use sha2::Digest;

use crate::kernel::authority::to_hex;
use crate::kernel::limits::{self, Checked, Violation};
use crate::kernel::model::{Extra, Gate, GateStatus};
use crate::kernel::{Code, Error, Result};

pub use crate::kernel::model::{ActionKind, GateAction, GateUse};

/// The most bytes of a payload action.
pub const PAYLOAD_MAX: usize = 64 * 1024;

impl GateAction {
    /// A command action; the arguments are checked (printable ASCII, bounded).
    pub fn cmd(argv: Vec<String>) -> std::result::Result<GateAction, Violation> {
        let mut a = GateAction {
            kind: ActionKind::Cmd,
            argv,
            text: None,
            sha256: String::new(),
            extra: Extra::new(),
        };
        a.sha256 = a.digest();
        check(&a)?;
        Ok(a)
    }

    /// A payload action; the text is checked (at most [`PAYLOAD_MAX`] bytes).
    pub fn payload(text: String) -> std::result::Result<GateAction, Violation> {
        let mut a = GateAction {
            kind: ActionKind::Payload,
            argv: Vec::new(),
            text: Some(text),
            sha256: String::new(),
            extra: Extra::new(),
        };
        a.sha256 = a.digest();
        check(&a)?;
        Ok(a)
    }

    /// The SHA-256 of what the action holds now (`printf '%s\0' ARGS | sha256sum` for a
    /// command, `sha256sum FILE` for a payload).
    pub fn digest(&self) -> String {
        let mut h = sha2::Sha256::new();
        match self.kind {
            ActionKind::Cmd => {
                for a in &self.argv {
                    h.update(a.as_bytes());
                    h.update([0u8]);
                }
            }
            ActionKind::Payload => h.update(self.text.as_deref().unwrap_or("").as_bytes()),
        }
        to_hex(&h.finalize())
    }

    /// True when the action still matches its digest.
    pub fn intact(&self) -> bool {
        self.digest() == self.sha256
    }

    /// The action as shown to the owner: a command quoted as a shell would split it, a payload
    /// with every control or invisible character escaped.
    pub fn shown(&self) -> String {
        match self.kind {
            ActionKind::Cmd => quote(&self.argv),
            ActionKind::Payload => {
                crate::text::escape_keep_lines(self.text.as_deref().unwrap_or("")).into_owned()
            }
        }
    }

    /// The characters of a payload outside printable ASCII, tab and newline (look-alikes among
    /// them): the owner is told how many there are.
    pub fn unusual(&self) -> usize {
        self.text
            .as_deref()
            .unwrap_or("")
            .chars()
            .filter(|c| !matches!(c, ' '..='~' | '\n' | '\t'))
            .count()
    }
}

/// Quotes arguments so that a POSIX shell splits the line into exactly these arguments.
pub fn quote(args: &[String]) -> String {
    let plain = |a: &str| {
        !a.is_empty()
            && a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    };
    args.iter()
        .map(|a| match plain(a) {
            true => a.clone(),
            false => format!("'{}'", a.replace('\'', r"'\''")),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The bounds of an action as a file holds it (its digest is checked apart, by [`runnable`]).
pub fn check(a: &GateAction) -> Checked {
    if !is_sha256(&a.sha256) {
        return Err(Violation::new(
            "action.sha256",
            "`action.sha256` must be 64 lowercase hex characters",
        ));
    }
    match a.kind {
        ActionKind::Cmd => {
            if a.text.is_some() {
                return Err(Violation::new(
                    "action.text",
                    "a `cmd` action has `argv`, not `text`",
                ));
            }
            if a.argv.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(Violation::new(
                    "action.argv",
                    "`action.argv` needs a program",
                ));
            }
            limits::count("action.argv", a.argv.len(), limits::ARGV_MAX)?;
            for arg in &a.argv {
                if arg.len() > limits::ARG_MAX {
                    return Err(Violation::new(
                        "action.argv",
                        format!(
                            "an argument of `action.argv` is {} bytes long; the most is {}",
                            arg.len(),
                            limits::ARG_MAX
                        ),
                    ));
                }
                limits::plain_command("action.argv", arg)?;
            }
            Ok(())
        }
        ActionKind::Payload => {
            if !a.argv.is_empty() {
                return Err(Violation::new(
                    "action.argv",
                    "a `payload` action has `text`, not `argv`",
                ));
            }
            let n = a.text.as_deref().map_or(0, str::len);
            if n > PAYLOAD_MAX {
                return Err(Violation::new(
                    "action.text",
                    format!("`action.text` is {n} bytes long; the most is {PAYLOAD_MAX}"),
                ));
            }
            Ok(())
        }
    }
}

/// The bounds of a use record.
pub fn check_use(u: &GateUse) -> Checked {
    limits::agent("used.by", &u.by)?;
    if let Some(t) = &u.turn {
        limits::text("used.turn", t, limits::NAME_MAX)?;
    }
    Ok(())
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The action of `g` when it may run now: approved by the owner (a signed decision), intact,
/// and not used yet (neither in its file nor, `journal_used`, in the journal).
pub fn runnable(g: &Gate, journal_used: bool) -> Result<&GateAction> {
    let id = &g.id;
    let Some(a) = &g.action else {
        return Err(Error::usage(format!("gate {id} holds no action to run"))
            .hint("open one with `loopx gate open QUESTION --action-cmd -- CMD ...`"));
    };
    if !a.intact() {
        return Err(Error::new(
            Code::Denied,
            format!("the action of gate {id} no longer matches its sha256: gates/{id}.toml was edited after it was opened; nothing runs"),
        )
        .hint("open a new gate for the action you mean"));
    }
    // Options (added by hand: `gate open` refuses them with an action) make no approval a yes.
    if !g.options.is_empty() || g.option.is_some() {
        return Err(Error::new(
            Code::Denied,
            format!("gate {id} offers options beside its action; an option never runs it"),
        )
        .hint("open a new gate for the action, without options"));
    }
    approved(g, a)?;
    if let Some(u) = &g.used {
        let turn = u
            .turn
            .as_deref()
            .map(|t| format!(" (turn {t})"))
            .unwrap_or_default();
        return Err(Error::new(
            Code::AlreadyUsed,
            format!(
                "the approval of gate {id} was used by {} at {}{turn}; it runs once",
                u.by, u.at
            ),
        )
        .hint("open a new gate to run it again"));
    }
    if journal_used {
        return Err(Error::new(
            Code::AlreadyUsed,
            format!("the journal records a use of gate {id}'s approval; it runs once (its file no longer says so: edited by hand)"),
        )
        .hint("open a new gate to run it again"));
    }
    Ok(a)
}

/// Ok when the owner approved `g` with a signed decision; else why its action `a` cannot run.
fn approved(g: &Gate, a: &GateAction) -> Result<()> {
    let id = &g.id;
    match g.effective_status() {
        GateStatus::Approved => Ok(()),
        GateStatus::Pending => {
            let why = match g.status != GateStatus::Pending {
                true => "its decision is not signed by the owner's key, so it counts as pending",
                false => "the owner has not decided it",
            };
            let hint = format!(
                "the owner runs `loopx gate approve {id} --sha {}`",
                a.sha256
            );
            Err(Error::new(Code::NotReady, format!("gate {id} is not approved: {why}")).hint(hint))
        }
        other => Err(Error::new(
            Code::Denied,
            format!("gate {id} was {}; its action never runs", other.as_str()),
        )),
    }
}

/// Checks the digest the owner read against the action: approving needs `--sha`, equal to the
/// action's, and an action that still matches it.
pub fn approve_sha(g: &Gate, sha: Option<&str>) -> Result<()> {
    let Some(a) = &g.action else {
        return match sha {
            Some(_) => Err(Error::usage(format!(
                "gate {} holds no action; approve it without --sha",
                g.id
            ))),
            None => Ok(()),
        };
    };
    let id = &g.id;
    if !a.intact() {
        return Err(Error::new(
            Code::Denied,
            format!("the action of gate {id} no longer matches its sha256: gates/{id}.toml was edited; it cannot be approved"),
        )
        .hint("reject it, and have the agent open a new gate"));
    }
    match sha.map(str::trim) {
        Some(s) if s.eq_ignore_ascii_case(&a.sha256) => Ok(()),
        Some(s) => Err(Error::new(
            Code::Denied,
            format!(
                "--sha {s} is not the action's sha256 ({}): the action is not the one you read",
                a.sha256
            ),
        )
        .hint(format!("read it again with `loopx gate show {id}`"))),
        None => Err(Error::usage(format!(
            "gate {id} holds an action; approve its digest with --sha {}",
            a.sha256
        ))
        .hint(format!("read it first: `loopx gate show {id}`"))
        .details(serde_json::json!({"sha256": a.sha256}))),
    }
}

/// A pending gate, not yet used, asking the same question with the same action: opening it
/// again returns this one.
pub fn same_open<'a>(
    gates: impl Iterator<Item = &'a Gate>,
    question: &str,
    action: &GateAction,
) -> Option<&'a Gate> {
    gates
        .filter(|g| g.question == question && g.used.is_none())
        .filter(|g| {
            matches!(
                g.effective_status(),
                GateStatus::Pending | GateStatus::Approved
            )
        })
        .find(|g| {
            g.action
                .as_ref()
                .is_some_and(|a| a.kind == action.kind && a.sha256 == action.sha256 && a.intact())
        })
}

#[cfg(test)]
mod tests;
