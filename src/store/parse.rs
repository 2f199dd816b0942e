//! Reading and writing state files: TOML with schema checks and errors that name file and line.

use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::kernel::{Code, Error, Result, SCHEMA_VERSION};

/// The 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The name to show for a file: relative to the project when possible.
pub fn shown(path: &Path) -> String {
    let s = path.display().to_string();
    match s.find(".loopx/") {
        Some(i) => s[i..].to_string(),
        None => s,
    }
}

#[derive(serde::Deserialize)]
struct Version {
    schema_version: Option<toml::Value>,
}

/// Checks `schema_version` when the text parses as TOML at all.
fn check_version(text: &str, file: &str) -> Result<()> {
    let Ok(v) = toml::from_str::<Version>(text) else {
        return Ok(());
    };
    match v.schema_version {
        None => Ok(()),
        Some(toml::Value::Integer(n)) if n >= 1 && n <= i64::from(SCHEMA_VERSION) => Ok(()),
        Some(toml::Value::Integer(n)) if n > i64::from(SCHEMA_VERSION) => Err(Error::new(
            Code::SchemaTooNew,
            format!("{file}: schema_version {n} is newer than this loopx knows ({SCHEMA_VERSION})"),
        )
        .hint("upgrade loopx; this file was not read or changed")),
        Some(other) => Err(Error::invalid(
            file,
            None,
            format!("schema_version must be {SCHEMA_VERSION}, not {other}"),
        )),
    }
}

/// Parses a TOML state file into `T`; errors name file, line and what to do.
pub fn decode<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    let file = shown(path);
    check_version(text, &file)?;
    toml::from_str::<T>(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        Error::invalid(&file, line, e.message().trim().to_string())
    })
}

/// Reads and parses a TOML state file; `None` when it does not exist.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes)
                .map_err(|_| Error::invalid(&shown(path), None, "not valid UTF-8"))?;
            decode(path, &text).map(Some)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, &e)),
    }
}

/// Serialises a state value as TOML.
pub fn encode<T: Serialize>(value: &T) -> Result<String> {
    toml::to_string(value)
        .map_err(|e| Error::new(Code::Internal, format!("cannot write TOML: {e}")))
}
