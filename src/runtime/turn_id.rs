//! A turn's id (given or fresh), the texts a turn's answer shows (its command, its time), and
//! the evidence of a turn's command.

use std::ffi::OsString;
use std::time::Duration;

use crate::kernel::should_run::cut;
use crate::kernel::{Code, Error, Evidence, EvidenceKind, Result, Todo, Ts, limits};
use crate::runtime::process::{Exit, Finished};

/// The most arguments of the command kept in evidence, and the characters of each.
const ARGV_KEPT: usize = 32;
const ARG_CHARS: usize = 200;

/// Arguments joined as a shell would need them quoted (for people; argv is kept too).
pub fn shell_join(args: &[String]) -> String {
    crate::kernel::gate_action::quote(args)
}

/// Checks a turn id given by the caller: 1 to 200 characters, letters, digits and `-_.:`.
pub fn check_turn_id(t: &str) -> Result<String> {
    let ok = !t.is_empty()
        && t.chars().count() <= limits::NAME_MAX
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if !ok {
        return Err(Error::usage(format!(
            "`{}` is not a turn id: use 1 to {} letters, digits, `-`, `_`, `.` or `:`",
            crate::text::escape(&cut(t, 80)),
            limits::NAME_MAX
        ))
        .hint("give it like `--turn run-42`, or leave it out for a fresh one"));
    }
    Ok(t.to_string())
}

/// A fresh turn id: `u-` and twelve random base32 characters.
pub fn fresh_turn_id() -> Result<String> {
    let mut r = [0u8; 12];
    getrandom::fill(&mut r).map_err(|e| Error::new(Code::Io, format!("no randomness: {e}")))?;
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let body: String = r
        .iter()
        .map(|b| ALPHABET[usize::from(b & 31)] as char)
        .collect();
    Ok(format!("u-{body}"))
}

/// A duration for people: `850ms`, `12.3s`.
pub fn took(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The command's evidence: argv, exit code, duration and the tail of its output, all bounded.
pub(crate) fn command_evidence(
    agent: &str,
    todo: &Todo,
    turn: &str,
    argv: &[OsString],
    fin: &Finished,
) -> Evidence {
    let args: Vec<String> = argv
        .iter()
        .take(ARGV_KEPT)
        .map(|a| cut(&a.to_string_lossy(), ARG_CHARS))
        .collect();
    let command = cut(&shell_join(&args), limits::TEXT_MAX);
    let took = took(fin.duration);
    let how = match (fin.timed_out, fin.exit) {
        (true, _) => format!("timed out after {took}"),
        (false, Exit::Code(c)) => format!("exited {c} after {took}"),
        (false, Exit::Signal(s)) => format!("killed by signal {s} after {took}"),
    };
    let summary = cut(&format!("{} {how}", cut(&command, 200)), limits::TEXT_MAX);
    let mut e = Evidence::new(
        Ts::now(),
        agent,
        Some(todo.fence),
        EvidenceKind::Command,
        summary,
    );
    e.command = Some(command);
    e.argv = args;
    e.exit_code = Some(fin.exit.code());
    e.duration_ms = Some(u64::try_from(fin.duration.as_millis()).unwrap_or(u64::MAX));
    e.output = (!fin.tail.is_empty()).then(|| cut(&fin.tail, limits::TEXT_MAX));
    e.turn = Some(turn.to_string());
    e.timed_out = fin.timed_out;
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_join_quotes_what_a_shell_would_split() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(shell_join(&a(&["echo", "hi"])), "echo hi");
        assert_eq!(shell_join(&a(&["sh", "-c", "a b"])), "sh -c 'a b'");
        assert_eq!(shell_join(&a(&["it's", ""])), r"'it'\''s' ''");
    }

    #[test]
    fn turn_ids_are_checked() {
        assert!(check_turn_id("run-42:a.b_c").is_ok());
        for bad in ["", "a b", "x\n", "ü", &"x".repeat(201)] {
            assert_eq!(check_turn_id(bad).unwrap_err().code, Code::Usage, "{bad:?}");
        }
        let f = fresh_turn_id().unwrap();
        assert!(check_turn_id(&f).is_ok() && f.len() == 14);
    }
}
