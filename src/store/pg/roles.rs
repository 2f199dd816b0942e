//! The names the schema and the store share: the two roles, the journal's lock, a row's limit.

use crate::kernel::{Error, Result};

/// The advisory lock every commit holds while it writes (commits are ordered by it).
pub const JOURNAL_LOCK: i64 = 0x6c6f_6f70_786a;

/// The most bytes of a row's body or a journal line an agent's login may write (loopx's own
/// are far smaller: the kernel bounds every value).
pub const ROW_MAX: usize = 1 << 20;

/// The names of the two roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    /// May do what the owner does.
    pub owner: String,
    /// What every agent login is a member of.
    pub agent: String,
}

impl Roles {
    /// `PREFIX_owner` and `PREFIX_agent`; the prefix is 1 to 40 of `a-z`, `0-9` and `_`.
    pub fn with_prefix(prefix: &str) -> Result<Roles> {
        let ok = !prefix.is_empty()
            && prefix.len() <= 40
            && prefix.starts_with(|c: char| c.is_ascii_lowercase())
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(Error::usage(format!(
                "role prefix {prefix:?} must be 1 to 40 of a-z, 0-9 and _, starting with a letter"
            )));
        }
        Ok(Roles {
            owner: format!("{prefix}_owner"),
            agent: format!("{prefix}_agent"),
        })
    }
}
