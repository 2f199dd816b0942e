//! `web pair`: a one-time URL (and its QR code) for a phone, then the owner's yes in the terminal,
//! where the owner's key enrolls the phone's key.

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::{Ctx, Out};
use crate::flows::device;
use crate::flows::owner::Owner;
use crate::kernel::{Code, Error, Result, Ts};
use crate::runtime::pairing::{self, State};

/// The pairing channel's directory for this user.
pub fn pairing_dir() -> Result<PathBuf> {
    pairing::dir(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME")).ok_or_else(|| {
        Error::usage("cannot tell where the pairing files go: set HOME or XDG_STATE_HOME")
    })
}

/// Runs `web pair`: prints the URL, waits for the phone, asks the owner, enrolls.
pub fn run(ctx: &Ctx, name: Option<String>, url: Option<String>, json: bool) -> Result<Out> {
    let store = ctx.open()?;
    let owner = Owner::detect(&*store);
    if !owner.verified {
        return Err(
            Error::new(Code::Denied, "only the owner enrolls a device").hint(
                "run this where the owner's key is (LOOPX_OWNER_KEY or ~/.config/loopx/owner.key)",
            ),
        );
    }
    let dir = pairing_dir()?;
    let started = device::pair_start(&*store, &dir, name, url, Ts::now())?;
    show_link(&started.url, started.expires_at, json)?;
    let sent = wait(&dir, &started)?;
    let fp = sent.fingerprint().unwrap_or_default();
    let yes = ask(&started.name, &fp, sent.label.as_deref(), json)?;
    let enrolled = device::pair_answer(&*store, &owner.actor, &dir, &started, yes, Ts::now())?;
    let Some(p) = enrolled else {
        return Err(Error::new(
            Code::Denied,
            "not enrolled: you did not confirm",
        ));
    };
    let name = started.name;
    Ok(Out::new(
        "device",
        json!({"name": name, "fingerprint": fp, "key": p.key, "enrolled": true}),
        format!("enrolled {name} ({fp}); the phone may decide gates now"),
    ))
}

/// Prints the URL first (a JSON line, or a QR code and the URL), before the wait.
fn show_link(link: &str, expires_at: Ts, json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let text = if json {
        json!({"url": link, "expires_at": expires_at}).to_string() + "\n"
    } else {
        format!(
            "{}\nOpen this on the phone (works once, for 10 minutes):\n  {link}\nwaiting for the phone...\n",
            crate::qr::half_blocks(link)
                .iter()
                .map(|r| format!("{r}\n"))
                .collect::<String>()
        )
    };
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Error::new(Code::Io, format!("stdout: {e}")))
}

/// Waits until the phone sends its key, or the URL expires.
fn wait(dir: &std::path::Path, s: &device::Started) -> Result<pairing::Pairing> {
    loop {
        let p = device::pair_poll(dir, s, Ts::now())?;
        match p.state {
            State::Submitted => return Ok(p),
            State::Waiting => std::thread::sleep(Duration::from_millis(150)),
            State::Enrolled | State::Declined => {
                return Err(Error::new(Code::Denied, "the pairing URL expired unused")
                    .hint("run `loopx web pair` again"));
            }
        }
    }
}

/// Shows the phone's fingerprint and reads the owner's answer (`y` or `yes`) from stdin.
fn ask(name: &str, fp: &str, label: Option<&str>, json: bool) -> Result<bool> {
    let label = crate::text::escape(label.unwrap_or("a phone")).into_owned();
    let prompt = if json {
        json!({"fingerprint": fp, "label": label, "name": name, "confirm": "y/N"}).to_string()
            + "\n"
    } else {
        format!(
            "{label} sent the key {fp}.\nDoes the phone show the same fingerprint? Enroll it as {name}? [y/N] "
        )
    };
    let mut out = std::io::stdout().lock();
    out.write_all(prompt.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Error::new(Code::Io, format!("stdout: {e}")))?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .take(64)
        .read_line(&mut line)
        .map_err(|e| Error::new(Code::Io, format!("stdin: {e}")))?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
