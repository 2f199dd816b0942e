//! A store URL as loopx shows it: every password in it hidden, wherever the URL names one.

/// What stands for a hidden password.
const HIDDEN: &str = "***";

/// The URL with its passwords hidden, for messages and lists: the userinfo's (after its first
/// `:`, up to the last `@`, and up to the first `@` as the driver reads it), and the value of
/// each parameter whose name ends in `password` (any case, escapes decoded), in the query or in
/// a `key=value` connection string. It hides more rather than less when the URL is odd.
pub fn redact(url: &str) -> String {
    let mut hide = Vec::new();
    match url.find("://") {
        Some(s) => {
            let start = s + 3;
            userinfo(url, start, &mut hide);
            if let Some(q) = url[start..].find('?') {
                query(url, start + q + 1, &mut hide);
            }
        }
        None => key_values(url, &mut hide),
    }
    mask(url, hide)
}

/// The userinfo's password: from the first `:` to the last `@`, and to the first `@` (which is
/// where the driver ends it).
fn userinfo(url: &str, start: usize, hide: &mut Vec<(usize, usize)>) {
    let rest = &url[start..];
    for at in [rest.find('@'), rest.rfind('@')].into_iter().flatten() {
        if let Some(colon) = rest[..at].find(':') {
            hide.push((start + colon + 1, start + at));
        }
    }
}

/// The values of the password parameters in the query starting at `from` (`k=v&k=v`).
fn query(url: &str, from: usize, hide: &mut Vec<(usize, usize)>) {
    let mut at = from;
    for pair in url[from..].split('&') {
        if let Some((k, v)) = pair.split_once('=')
            && is_password(&decode(k))
        {
            let v_at = at + k.len() + 1;
            hide.push((v_at, v_at + v.len()));
        }
        at += pair.len() + 1;
    }
}

/// The values of the password keys of a `key=value` connection string (values bare up to a
/// space, or quoted with `'`, `\` escaping).
fn key_values(text: &str, hide: &mut Vec<(usize, usize)>) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // A key: up to a space or `=`.
        let k0 = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &text[k0..i];
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() || b[i] != b'=' {
            continue;
        }
        i += 1;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let v0 = i;
        if b.get(i) == Some(&b'\'') {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        if is_password(key) {
            hide.push((v0, i));
        }
    }
}

/// True for a parameter that holds a password: `password`, `sslpassword`, any case.
fn is_password(key: &str) -> bool {
    key.to_ascii_lowercase().ends_with("password")
}

/// `text` with its `%XX` escapes decoded (others kept as they are).
fn decode(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).and_then(|c| hex(*c)),
                b.get(i + 2).and_then(|c| hex(*c)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with each range of `hide` (merged where they meet) written as `***`.
fn mask(text: &str, mut hide: Vec<(usize, usize)>) -> String {
    hide.retain(|(a, b)| b > a);
    hide.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (a, b) in hide {
        if b <= at {
            continue;
        }
        if a >= at {
            out.push_str(&text[at..a]);
            out.push_str(HIDDEN);
        }
        at = b;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    /// Each URL is shown as its pair says.
    fn shown_as(cases: &[(&str, &str)]) {
        for (url, shown) in cases {
            assert_eq!(redact(url), *shown, "{url}");
        }
    }

    #[test]
    fn the_userinfo_password_is_hidden() {
        shown_as(&[
            ("postgres://u:secret@db/a", "postgres://u:***@db/a"),
            ("postgres://u@db/a", "postgres://u@db/a"),
            (
                "postgres://db:5432/a?sslmode=disable",
                "postgres://db:5432/a?sslmode=disable",
            ),
            ("postgres://u:se@cret@h/db", "postgres://u:***@h/db"),
            (
                "postgres://u:pw@h/db?password=other",
                "postgres://u:***@h/db?password=***",
            ),
        ]);
    }

    #[test]
    fn every_password_parameter_is_hidden() {
        shown_as(&[
            (
                "postgres://u@h/db?password=secret",
                "postgres://u@h/db?password=***",
            ),
            (
                "postgres://u@h/db?sslmode=disable&PassWord=secret&x=1",
                "postgres://u@h/db?sslmode=disable&PassWord=***&x=1",
            ),
            (
                "postgres://u@h/db?pass%77ord=secret",
                "postgres://u@h/db?pass%77ord=***",
            ),
            (
                "postgres://u@h/db?sslpassword=secret",
                "postgres://u@h/db?sslpassword=***",
            ),
            (
                "postgres://u@h/db?password=se@cret",
                "postgres://u@h/db?password=***",
            ),
        ]);
    }

    #[test]
    fn a_connection_string_password_is_hidden() {
        shown_as(&[
            (
                "host=db password=secret user=u",
                "host=db password=*** user=u",
            ),
            (
                "host=db password = 'se cret' user=u",
                "host=db password = *** user=u",
            ),
            ("password='it\\'s' host=db", "password=*** host=db"),
        ]);
    }

    #[test]
    fn an_odd_url_hides_more_never_the_password() {
        for url in [
            "postgres://h/db?password=se@cret",
            "postgres://u:pa?ss@h/db",
            "postgres://u:p/ss@h/db",
            "postgres://u:p@ss@h/db?password=se@cret",
        ] {
            let shown = redact(url);
            assert!(
                !shown.contains("se@cret") && !shown.contains("cret"),
                "{url} -> {shown}"
            );
            assert!(
                !shown.contains("pa?ss") && !shown.contains("p/ss"),
                "{url} -> {shown}"
            );
            assert!(!shown.contains("ss@h"), "{url} -> {shown}");
        }
    }
}
