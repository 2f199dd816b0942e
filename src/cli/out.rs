//! What a command gives back: its answer (`Out`), how it is printed as text or JSON, and how a
//! refused command line or an error is told.

use std::io::Write as _;

use serde_json::{Map, Value, json};

use crate::kernel::Error;

/// A command's result: JSON fields (without `ok`), text for people, and the exit code.
#[derive(Debug, Default)]
pub struct Out {
    /// Fields of the JSON answer.
    pub json: Map<String, Value>,
    /// The text answer.
    pub text: String,
    /// 0, or 3 for a should-run that says not now.
    pub exit: i32,
}

impl Out {
    /// Adds where files disagree with the owner's seal: `owner_notes` in JSON, a line each in text.
    pub fn noted(mut self, notes: Vec<String>) -> Out {
        if !notes.is_empty() {
            for n in &notes {
                self.text.push_str(&format!("\nnote: {n}"));
            }
            self.json
                .insert("owner_notes".into(), serde_json::json!(notes));
        }
        self
    }

    /// Adds warnings: `warnings` in JSON; on stderr, a line each, for text.
    pub fn warned(mut self, warnings: Vec<String>) -> Out {
        if warnings.is_empty() {
            return self;
        }
        let all = self
            .json
            .entry("warnings")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(a) = all {
            a.extend(warnings.into_iter().map(Value::String));
        }
        self
    }

    /// An answer with one JSON field and text.
    pub fn new(key: &str, value: Value, text: impl Into<String>) -> Out {
        let mut json = Map::new();
        json.insert(key.to_string(), value);
        Out {
            json,
            text: text.into(),
            exit: 0,
        }
    }

    /// Adds a JSON field.
    pub fn with(mut self, key: &str, value: Value) -> Out {
        self.json.insert(key.to_string(), value);
        self
    }
}

/// A command line clap refused, as one usage error: its first line, with the arguments it
/// names (`<TITLE>`) taken from the error's context, and its usage line as the hint.
pub fn usage_error(e: &clap::Error) -> Error {
    use clap::error::{ContextKind, ContextValue};
    let rendered = e.to_string();
    let usage = rendered
        .lines()
        .find_map(|l| l.strip_prefix("Usage: "))
        .map(str::trim);
    let hint = match usage {
        Some(u) => format!("usage: {u} (more with --help)"),
        None => "see `loopx --help`".to_string(),
    };
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // Rendered, this is the command's whole help: say what is missing instead.
        let u = usage.unwrap_or("loopx");
        let cmd = u
            .split(" [")
            .next()
            .unwrap_or(u)
            .split(" <")
            .next()
            .unwrap_or(u);
        let what = if u.contains("<COMMAND>") {
            "a subcommand"
        } else {
            "arguments"
        };
        return Error::usage(format!("'{cmd}' requires {what} but none was provided")).hint(hint);
    }
    let mut lines = rendered.lines();
    let first = lines
        .next()
        .unwrap_or("bad arguments")
        .trim_start_matches("error: ")
        .trim_end();
    let message = match first.strip_suffix(':') {
        // A list follows on the next lines: name what it lists.
        Some(head) => {
            let named: Vec<String> = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::Strings(v)) => v.clone(),
                Some(ContextValue::String(v)) => vec![v.clone()],
                _ => lines
                    .clone()
                    .map(str::trim)
                    .take_while(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect(),
            };
            if named.is_empty() {
                first.to_string()
            } else {
                format!("{head}: {}", named.join(", "))
            }
        }
        None => first.to_string(),
    };
    Error::usage(message).hint(hint)
}

pub(super) fn emit(json: bool, fields: Map<String, Value>, text: &str) {
    let (out, err) = render(json, fields, text);
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    let _ = std::io::stderr().lock().write_all(err.as_bytes());
}

/// What a command's answer prints: on stdout, and on stderr.
fn render(json: bool, fields: Map<String, Value>, text: &str) -> (String, String) {
    let warnings: Vec<String> = match fields.get("warnings") {
        Some(Value::Array(ws)) if !json => ws
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    let mut stdout = String::new();
    if json {
        stdout = format!("{}\n", answer_json(fields));
    } else if !text.is_empty() {
        // Stored text in `text` is escaped where it is formatted; this is the backstop, so no
        // control character but a newline or tab ever reaches the terminal.
        stdout = format!("{}\n", crate::text::escape_keep_lines(text));
    }
    let stderr = warnings
        .iter()
        .map(|w| format!("loopx: warning: {}\n", crate::text::escape(w)))
        .collect();
    (stdout, stderr)
}

/// A command's `--json` answer: `ok` first (true unless the command said otherwise), then its fields.
pub fn answer_json(fields: Map<String, Value>) -> Value {
    let mut obj = Map::new();
    obj.insert(
        "ok".into(),
        fields.get("ok").cloned().unwrap_or(Value::Bool(true)),
    );
    for (k, v) in fields {
        if k != "ok" {
            obj.insert(k, v);
        }
    }
    Value::Object(obj)
}

/// An error's `--json` answer: `{"ok": false, "error": {...}}`.
pub fn error_json(e: &Error) -> Value {
    let mut err = json!({"code": e.code.as_str(), "message": e.message, "hint": e.hint});
    if let Some(l) = &e.location {
        err["file"] = json!(l.file);
        err["line"] = json!(l.line);
    }
    if let Some(d) = &e.details {
        err["details"] = (**d).clone();
    }
    json!({"ok": false, "error": err})
}

/// Prints an error: JSON on stdout with `--json`, and a line for people on stderr.
pub fn emit_error(json: bool, e: &Error) {
    if json {
        let _ = writeln!(std::io::stdout().lock(), "{}", error_json(e));
    }
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "loopx: {}", crate::text::escape(&e.message));
    if let Some(h) = &e.hint {
        let _ = writeln!(stderr, "  hint: {}", crate::text::escape(h));
    }
}
