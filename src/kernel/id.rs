//! Ids: random short todo and gate ids, agent ids, and the checks that keep them out of paths.

use crate::kernel::error::{Error, Result};

/// The base32 alphabet ids are drawn from (lowercase, no 0/1/8/9 confusion handled by design).
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The kind of an id, by its prefix letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `t-`: a todo.
    Todo,
    /// `g-`: a gate.
    Gate,
}

impl Kind {
    /// The prefix letter and dash.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Todo => "t-",
            Kind::Gate => "g-",
        }
    }
}

/// A new random id of this kind from six random bytes (6 base32 characters).
pub fn new_id(kind: Kind, random: [u8; 6]) -> String {
    let mut s = String::from(kind.prefix());
    for b in random {
        s.push(ALPHABET[(b & 31) as usize] as char);
    }
    s
}

/// Refuses input that looks like a path, with exit 2.
pub fn check_not_path(input: &str) -> Result<()> {
    if input.is_empty() {
        return Err(Error::usage("an id cannot be empty"));
    }
    if input.contains('/') || input.contains('\\') || input.contains("..") || input.contains('\0') {
        return Err(
            Error::usage(format!("`{input}` looks like a path, not an id"))
                .hint("give an id such as t-4kq9zx, or a unique prefix of it"),
        );
    }
    Ok(())
}

/// True when `s` is a well-formed full id of this kind.
pub fn is_full_id(kind: Kind, s: &str) -> bool {
    s.len() == 8 && s.starts_with(kind.prefix()) && s[2..].bytes().all(|b| ALPHABET.contains(&b))
}

/// Normalises user input to an id prefix of this kind (`4kq` becomes `t-4kq`).
pub fn normalize(kind: Kind, input: &str) -> Result<String> {
    check_not_path(input)?;
    let s = input.trim().to_ascii_lowercase();
    let p = kind.prefix();
    let body = s.strip_prefix(p).unwrap_or(&s);
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(Error::usage(format!(
            "`{input}` is not a {} id",
            kind_name(kind)
        )));
    }
    if body.len() < 3 {
        return Err(Error::usage(format!(
            "`{input}` is too short; give at least 3 characters of the id"
        )));
    }
    Ok(format!("{p}{body}"))
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Todo => "todo",
        Kind::Gate => "gate",
    }
}

/// Resolves a prefix against known ids: one match, or not found / ambiguous (exit 5).
pub fn resolve<'a>(kind: Kind, input: &str, ids: impl Iterator<Item = &'a str>) -> Result<String> {
    let want = normalize(kind, input)?;
    let mut hits: Vec<&str> = ids.filter(|id| id.starts_with(&want)).collect();
    hits.sort();
    hits.dedup();
    match hits.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(Error::new(
            crate::kernel::Code::NotFound,
            format!("no {} matches `{input}`", kind_name(kind)),
        )
        .hint(match kind {
            Kind::Todo => "list them with `loopx todo list`",
            Kind::Gate => "list them with `loopx gate list`",
        })),
        many => Err(Error::new(
            crate::kernel::Code::AmbiguousId,
            format!("`{input}` matches {}: {}", many.len(), many.join(", ")),
        )
        .hint("give more characters of the id")),
    }
}

/// Names loopx writes as actors itself; no agent may take them (compared case-insensitively).
pub const RESERVED_AGENTS: &[&str] = &["owner", "doctor", "loopx"];

/// True for an actor only loopx writes: a reserved name, or one with `:` (such as `gate:ID`).
pub fn is_reserved_actor(name: &str) -> bool {
    name.contains(':') || RESERVED_AGENTS.iter().any(|r| r.eq_ignore_ascii_case(name))
}

/// Checks an agent id: 1-64 of `[A-Za-z0-9._@-]`, not a reserved name (exit 2 otherwise).
pub fn check_agent(id: &str) -> Result<()> {
    if RESERVED_AGENTS.iter().any(|r| r.eq_ignore_ascii_case(id)) {
        return Err(Error::usage(format!(
            "`{id}` is a reserved name: loopx writes it for its own and the owner's actions, \
             so no agent may use it"
        ))
        .hint(reserved_hint()));
    }
    if id.contains(':') {
        return Err(Error::usage(format!(
            "`{id}` contains `:`, which is reserved for names loopx writes itself (`gate:ID`)"
        ))
        .hint(format!(
            "use letters, digits and . _ @ - only, such as `{}`",
            id.replace(':', "-")
        )));
    }
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b))
        && id != "."
        && id != "..";
    if ok {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "`{id}` is not a valid agent id: use 1-64 of letters, digits and . _ @ -"
        )))
    }
}

fn reserved_hint() -> &'static str {
    "name the agent something else, such as `agent-1`; owner commands need no --agent: \
     the owner's key proves them"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_safe_and_resolve_by_prefix() {
        let id = new_id(Kind::Todo, [0, 1, 2, 31, 32, 255]);
        assert!(is_full_id(Kind::Todo, &id), "{id}");
        let ids = ["t-abcdef", "t-abczzz", "t-qqqqqq"];
        assert_eq!(
            resolve(Kind::Todo, "qqq", ids.into_iter()).unwrap(),
            "t-qqqqqq"
        );
        assert_eq!(
            resolve(Kind::Todo, "t-abcd", ids.into_iter()).unwrap(),
            "t-abcdef"
        );
        let amb = resolve(Kind::Todo, "abc", ids.into_iter()).unwrap_err();
        assert_eq!(amb.code, crate::kernel::Code::AmbiguousId);
        let none = resolve(Kind::Todo, "xyz", ids.into_iter()).unwrap_err();
        assert_eq!(none.code, crate::kernel::Code::NotFound);
        for bad in ["../x", "a/b", "c\\d", ".."] {
            assert_eq!(
                resolve(Kind::Todo, bad, ids.into_iter())
                    .unwrap_err()
                    .code
                    .exit_code(),
                2
            );
        }
    }

    #[test]
    fn agent_ids() {
        assert!(check_agent("agent-a@host-1.x_y").is_ok());
        for bad in [
            "owner",
            "OWNER",
            "Doctor",
            "loopx",
            "gate:g-abcdef",
            "a:b",
            ":",
        ] {
            let e = check_agent(bad).unwrap_err();
            assert_eq!(e.code.exit_code(), 2, "{bad}");
            assert!(e.message.contains("reserved"), "{bad}: {}", e.message);
            assert!(is_reserved_actor(bad), "{bad}");
        }
        assert!(check_agent("owner2").is_ok() && !is_reserved_actor("owner2"));
        assert!(check_agent("").is_err());
        assert!(check_agent("a b").is_err());
        assert!(check_agent(&"a".repeat(65)).is_err());
        assert!(check_agent("a/b").is_err());
    }
}
