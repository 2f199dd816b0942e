//! Safe text for people: stored text shown with every control character escaped; counts with
//! their noun.
//!
//! Titles, questions, reasons, agent ids and evidence come from files any agent can write.
//! Printed raw, an `ESC` starts a terminal escape sequence (an OSC can set the window title or
//! write to the clipboard), a bidi override reorders what the owner reads, and a newline adds a
//! line (in STATE.md, a heading or a list item). Human output and STATE.md pass stored text
//! through [`escape`]; `--json` keeps exact values (JSON escapes control characters itself).
//!
//! Escaped: C0 (`U+0000`-`U+001F`), DEL, C1 (`U+0080`-`U+009F`), the bidi controls
//! (`U+061C`, `U+200E`, `U+200F`, `U+202A`-`U+202E`, `U+2066`-`U+2069`) and the line and
//! paragraph separators `U+2028`, `U+2029`, and the invisible ones: `U+00AD`, `U+180E`,
//! `U+200B`-`U+200D`, `U+2060`-`U+2064`, `U+FEFF` and the tags `U+E0000`-`U+E007F`. A backslash is not escaped, so the shown form of a
//! text that already holds `\x1b` as four characters is the same: it is for reading only.

use std::borrow::Cow;
use std::fmt::Write as _;

/// True for a character that must never reach a terminal or STATE.md as is.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        // Invisible: soft hyphen, Mongolian vowel separator, zero-width space and joiners,
        // word joiner and invisible operators, BOM, and the tag block ("ASCII smuggling").
        | '\u{ad}'
        | '\u{180e}'
        | '\u{200b}'..='\u{200d}'
        | '\u{2060}'..='\u{2064}'
        | '\u{feff}'
        | '\u{e0000}'..='\u{e007f}')
}

/// `s` with every unsafe character escaped: `\n`, `\r`, `\t`, `\x1b`, `\u{202e}`.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_but(s, &[])
}

/// Like [`escape`], but keeps newlines and tabs: for whole messages built by loopx itself.
pub fn escape_keep_lines(s: &str) -> Cow<'_, str> {
    escape_but(s, &['\n', '\t'])
}

fn escape_but<'a>(s: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !s.chars().any(|c| is_unsafe(c) && !keep.contains(&c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !is_unsafe(c) || keep.contains(&c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// Stored text for one line of Markdown: escaped, and unable to start a block.
///
/// With no newline a text cannot open a line of its own; a leading `#`, `>`, `-`, `+`, `*`,
/// `=`, `` ` ``, `~`, `|`, `<`, `[`, or `1.`/`1)` gets a backslash so that where the text begins a
/// line or a list item (the objective, a success criterion) it cannot become a heading, quote,
/// list, fence, table or HTML block. Leading spaces (an indented code block) are dropped.
pub fn md_line(s: &str) -> String {
    let e = escape(s);
    let t = e.trim_start_matches([' ', '\u{a0}']);
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let at = if digits > 0 && matches!(t.as_bytes().get(digits), Some(b'.' | b')')) {
        digits
    } else if t.starts_with(['#', '>', '-', '+', '*', '=', '`', '~', '|', '<', '[', '_']) {
        0
    } else {
        return t.to_string();
    };
    format!("{}\\{}", &t[..at], &t[at..])
}

/// A count and its noun: `1 gate`, `2 gates` (`many` for a plural not made with `s`).
pub fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// One word quoted for the shell: as it is when plain, else in single quotes.
pub fn sh_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_with_their_noun() {
        assert_eq!(count(1, "gate", "gates"), "1 gate");
        assert_eq!(count(0, "gate", "gates"), "0 gates");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
    }

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(escape("fix the build ✓"), Cow::Borrowed(_)));
    }

    #[test]
    fn controls_are_escaped() {
        assert_eq!(escape("a\x1b]0;x\x07b"), "a\\x1b]0;x\\x07b");
        assert_eq!(escape("a\nb\r\tc\x7f"), "a\\nb\\r\\tc\\x7f");
        assert_eq!(escape("\u{85}\u{9b}"), "\\u{85}\\u{9b}");
        assert_eq!(
            escape("x\u{202e}y\u{2028}z\u{2069}"),
            "x\\u{202e}y\\u{2028}z\\u{2069}"
        );
        // Invisible characters: a zero-width joiner, a BOM and a tag letter.
        assert_eq!(
            escape("main\u{200d}\u{feff}\u{e0072} --force"),
            "main\\u{200d}\\u{feff}\\u{e0072} --force"
        );
    }

    #[test]
    fn keep_lines_keeps_only_newline_and_tab() {
        assert_eq!(escape_keep_lines("a\nb\tc\x1bd"), "a\nb\tc\\x1bd");
    }

    #[test]
    fn markdown_cannot_start_a_block() {
        assert_eq!(md_line("# Heading"), "\\# Heading");
        assert_eq!(md_line("x\n# Heading"), "x\\n# Heading");
        assert_eq!(md_line("    code"), "code");
        assert_eq!(md_line("```rust"), "\\```rust");
        assert_eq!(md_line("12. item"), "12\\. item");
        assert_eq!(md_line("fix `a` #3"), "fix `a` #3");
        assert_eq!(md_line(""), "");
    }
}
