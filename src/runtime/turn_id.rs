//! A turn's id (given or fresh) and the texts a turn's answer shows (its command, its time).

use std::time::Duration;

use crate::kernel::should_run::cut;
use crate::kernel::{Code, Error, Result, bounds};

/// Arguments joined as a shell would need them quoted (for people; argv is kept too).
pub fn shell_join(args: &[String]) -> String {
    crate::kernel::gate_action::quote(args)
}

/// Checks a turn id given by the caller: 1 to 200 characters, letters, digits and `-_.:`.
pub fn check_turn_id(t: &str) -> Result<String> {
    let ok = !t.is_empty()
        && t.chars().count() <= bounds::NAME_MAX
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if !ok {
        return Err(Error::usage(format!(
            "`{}` is not a turn id: use 1 to {} letters, digits, `-`, `_`, `.` or `:`",
            crate::text::escape(&cut(t, 80)),
            bounds::NAME_MAX
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
