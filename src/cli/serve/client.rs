//! The asking side: `quota should-run` and `monitor poll`, before the command line is parsed
//! the usual way, ask a `loopx serve` that keeps the project warm. Anything unusual (another
//! flag, a database, no server, another binary, a decline) and the command runs as usual.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use super::wire::{self, Ask, Asked, Reply};
use crate::kernel::Dur;
use crate::store::FileStore;

/// How long an asker waits for the answer before it runs the command itself.
const WAIT: Duration = Duration::from_secs(30);

/// A command line the server may answer.
#[derive(Debug, Default)]
struct Line {
    words: Vec<String>,
    json: bool,
    agent: Option<String>,
    dir: Option<PathBuf>,
    timeout: Option<Dur>,
}

/// Asks the project's server, when there is one, and prints its answer; gives the exit code,
/// or `None` when the command is to run the usual way.
pub fn ask(args: &[OsString]) -> Option<i32> {
    let line = scan(args.get(1..)?)?;
    let cmd = match (line.words.as_slice(), line.timeout) {
        ([q, s], None) if q == "quota" && s == "should-run" => Asked::ShouldRun,
        ([m, p], t) if m == "monitor" && p == "poll" => Asked::Poll {
            timeout_ms: t.unwrap_or(Dur::from_secs(30)).0,
        },
        _ => return None,
    };
    // The environment the usual way reads: a database, or a lock wait, is its business.
    // LOOPX_NO_SERVE: never ask (to compare, or to rule the server out).
    for var in ["LOOPX_STORE", "LOOPX_LOCK_TIMEOUT", "LOOPX_NO_SERVE"] {
        if std::env::var_os(var).is_some() {
            return None;
        }
    }
    let agent = match line.agent {
        Some(a) => a,
        None => match std::env::var_os("LOOPX_AGENT") {
            Some(a) => a.into_string().ok()?,
            None => "local".to_string(),
        },
    };
    let dir = match line.dir {
        Some(d) => Some(d),
        None => std::env::var_os("LOOPX_DIR").map(PathBuf::from),
    };
    if dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
        return None;
    }
    let cwd = std::env::current_dir().ok()?;
    let store = FileStore::discover(dir.as_deref(), &cwd).ok()?;
    let ask = Ask {
        v: wire::VERSION,
        exe: wire::exe_id().ok()?,
        cmd,
        agent,
        json: line.json,
        dir: store.dir().to_str()?.to_string(),
    };
    let reply = exchange(&store, &ask)?;
    match reply {
        Reply::Answer {
            exit,
            stdout,
            stderr,
        } => {
            let _ = std::io::stdout().lock().write_all(stdout.as_bytes());
            let _ = std::io::stderr().lock().write_all(stderr.as_bytes());
            Some(exit)
        }
        Reply::Decline { .. } => None,
    }
}

/// Sends the question and reads the answer; `None` on any failure.
fn exchange(store: &FileStore, ask: &Ask) -> Option<Reply> {
    let mut s = wire::connect(&wire::name(store.dir()).ok()?).ok()?;
    if !wire::same_user(&s) {
        return None;
    }
    s.set_write_timeout(Some(WAIT)).ok()?;
    let body = serde_json::to_vec(ask).ok()?;
    s.write_all(&body).ok()?;
    s.shutdown(std::net::Shutdown::Write).ok()?;
    let got = wire::read_all(&mut s, wire::REPLY_MAX, WAIT).ok()?;
    serde_json::from_slice(&got).ok()
}

/// The words and the flags a server may see; `None` for anything else (help, another flag, a
/// flag given twice, a value that is not UTF-8 or looks like a flag).
fn scan(args: &[OsString]) -> Option<Line> {
    let mut line = Line::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.to_str()?;
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        let mut value = || -> Option<String> {
            let v = match inline.clone() {
                Some(v) => v,
                None => it.next()?.to_str()?.to_string(),
            };
            (!v.starts_with('-')).then_some(v)
        };
        match flag {
            "--json" if inline.is_none() && !line.json => line.json = true,
            "--agent" | "--agent-id" if line.agent.is_none() => line.agent = Some(value()?),
            "--dir" if line.dir.is_none() => line.dir = Some(PathBuf::from(value()?)),
            // A flag of `poll`'s own: after it only, as clap takes it.
            "--timeout" if line.timeout.is_none() && line.words == ["monitor", "poll"] => {
                line.timeout = Some(value()?.parse().ok()?);
            }
            w if !w.starts_with('-') && inline.is_none() => line.words.push(w.to_string()),
            _ => return None,
        }
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> Option<Line> {
        let v: Vec<OsString> = args.iter().map(OsString::from).collect();
        scan(&v)
    }

    #[test]
    fn takes_the_flags_a_server_answers_for() {
        let l = line(&["--agent", "a1", "quota", "should-run", "--json"]).unwrap();
        assert_eq!(
            (l.words.len(), l.json, l.agent.as_deref()),
            (2, true, Some("a1"))
        );
        let l = line(&["monitor", "poll", "--timeout=1m", "--dir=/p"]).unwrap();
        assert_eq!(l.timeout, Some(Dur::from_secs(60)));
        assert_eq!(l.dir, Some(PathBuf::from("/p")));
    }

    #[test]
    fn leaves_anything_else_to_the_usual_way() {
        for bad in [
            &["quota", "should-run", "--help"][..],
            &["quota", "should-run", "--json", "--json"],
            &["--agent", "--json", "quota", "should-run"],
            &["--agent"],
            &["--store", "x", "quota", "should-run"],
            &["monitor", "poll", "--timeout", "soon"],
            &["--json=1", "quota", "should-run"],
            &["--timeout", "1m", "monitor", "poll"],
            &["monitor", "--timeout", "1m", "poll"],
            &["quota", "should-run", "--timeout", "1m"],
        ] {
            assert!(line(bad).is_none(), "{bad:?}");
        }
    }
}
