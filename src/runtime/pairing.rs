//! The pairing channel between `loopx web pair` (the owner's terminal) and `loopx web` (the
//! phone's server): one file per pairing in a per-user directory, a one-time token, a deadline.
//!
//! The channel carries no authority: the owner compares the device's fingerprint on both
//! screens, and only the owner's key, in the terminal, enrolls it.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::kernel::authority::to_hex;
use crate::kernel::device::DeviceKey;
use crate::kernel::{Code, Error, Result, Ts};
use crate::store::core::atomic;

/// How long a pairing URL works.
pub const TTL_MS: i64 = 10 * 60_000;

/// Where a pairing stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// The URL is waiting for a phone.
    Waiting,
    /// A phone sent its key; the owner has not answered yet.
    Submitted,
    /// The owner enrolled the device.
    Enrolled,
    /// The owner said no, or the pairing ended.
    Declined,
}

/// One pairing, as its file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pairing {
    /// The device's name once enrolled (chosen in the terminal).
    pub name: String,
    /// The project the terminal enrolls it in.
    pub project: String,
    /// When the URL stops working (ms since the epoch).
    pub expires_at: i64,
    /// Where it stands.
    pub state: State,
    /// The phone's public key (hex), once sent.
    #[serde(default)]
    pub key: Option<String>,
    /// What the phone says it is.
    #[serde(default)]
    pub label: Option<String>,
}

impl Pairing {
    /// The fingerprint of the phone's key, as both screens show it.
    pub fn fingerprint(&self) -> Option<String> {
        let k = DeviceKey::parse(self.key.as_deref()?).ok()?;
        Some(k.fingerprint())
    }
}

/// The channel's directory: `$XDG_STATE_HOME/loopx/web`, else `~/.local/state/loopx/web`.
pub fn dir(
    state_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let base = match state_home.filter(|s| Path::new(s).is_absolute()) {
        Some(s) => PathBuf::from(s),
        None => PathBuf::from(home.filter(|h| Path::new(h).is_absolute())?).join(".local/state"),
    };
    Some(base.join("loopx").join("web"))
}

fn io_err(what: &str, e: io::Error) -> Error {
    Error::new(Code::Io, format!("{what}: {e}"))
}

/// Makes the directory (mode 0700) and refuses one that is a link or not a directory.
fn ensure(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_err(&format!("cannot make {}", dir.display()), e))?;
    let m = fs::symlink_metadata(dir).map_err(|e| io_err("pairing directory", e))?;
    if !m.is_dir() {
        return Err(Error::new(
            Code::InvalidState,
            format!("{} is not a directory (a link?): remove it", dir.display()),
        ));
    }
    Ok(())
}

/// A fresh token: 16 random bytes (128 bits, single use, 10 minutes) as 32 hex characters, so
/// the URL's QR code fits a terminal of 24 lines.
fn token() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Error::new(Code::Io, format!("no randomness: {e}")))?;
    Ok(to_hex(&b))
}

/// The file of the pairing a token opens; refuses a token of the wrong shape.
fn file_of(dir: &Path, token: &str) -> Result<PathBuf> {
    let ok = token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(Error::new(Code::NotFound, "no such pairing"));
    }
    let id = to_hex(&sha2::Sha256::digest(token.as_bytes()));
    Ok(dir.join(format!("p-{}.json", &id[..32])))
}

fn read(path: &Path) -> Result<Option<Pairing>> {
    let mut f = match atomic::open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("pairing", e)),
    };
    atomic::check_regular(&f).map_err(|e| io_err("pairing", e))?;
    let bytes = atomic::read_bounded(&mut f, 16 * 1024).map_err(|e| io_err("pairing", e))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::new(Code::InvalidState, format!("{}: {e}", path.display())))
}

fn write(path: &Path, p: &Pairing) -> Result<()> {
    let text = serde_json::to_vec(p).map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    atomic::write(path, &text).map_err(|e| io_err("cannot write the pairing", e))
}

/// Holds the channel's lock while `f` reads and writes a pairing: a regular file, never
/// followed through a link, waited for at most 5 s.
fn locked<T>(dir: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    use std::os::unix::fs::OpenOptionsExt;
    ensure(dir)?;
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join("lock"))
        .map_err(|e| io_err("pairing lock", e))?;
    atomic::check_regular(&lock).map_err(|e| io_err("pairing lock", e))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while lock.try_lock().is_err() {
        if std::time::Instant::now() > deadline {
            return Err(Error::new(
                Code::Busy,
                "the pairing files are locked by another process",
            )
            .hint(format!("see who holds {}", dir.join("lock").display())));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    f()
}

/// Starts a pairing for device `name` in `project`; returns its token. Expired pairings go.
pub fn start(dir: &Path, name: &str, project: &str, now: Ts) -> Result<(String, Pairing)> {
    crate::kernel::device::check_name(name)?;
    locked(dir, || {
        sweep(dir, now);
        let t = token()?;
        let p = Pairing {
            name: name.to_string(),
            project: project.to_string(),
            expires_at: now.0 + TTL_MS,
            state: State::Waiting,
            key: None,
            label: None,
        };
        write(&file_of(dir, &t)?, &p)?;
        Ok((t, p))
    })
}

/// Removes the files of pairings that expired more than a minute ago.
fn sweep(dir: &Path, now: Ts) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let ours = e.file_name().to_str().is_some_and(|n| n.starts_with("p-"));
        if ours
            && let Ok(Some(p)) = read(&path)
            && p.expires_at + 60_000 < now.0
        {
            let _ = fs::remove_file(&path);
        }
    }
}

/// The phone sends its public key for the pairing `token` opened: once, before the deadline.
pub fn submit(
    dir: &Path,
    token: &str,
    key_hex: &str,
    label: Option<&str>,
    now: Ts,
) -> Result<Pairing> {
    let key = DeviceKey::parse(key_hex)?;
    let path = file_of(dir, token)?;
    locked(dir, || {
        let mut p = read(&path)?.ok_or_else(|| Error::new(Code::NotFound, "no such pairing"))?;
        if p.expires_at < now.0 {
            return Err(Error::new(Code::Denied, "this pairing URL has expired")
                .hint("run `loopx web pair` again"));
        }
        if p.state != State::Waiting {
            return Err(
                Error::new(Code::Denied, "this pairing URL was used already")
                    .hint("run `loopx web pair` again"),
            );
        }
        p.state = State::Submitted;
        p.key = Some(key.hex());
        p.label = label.map(|l| l.chars().filter(|c| !c.is_control()).take(64).collect());
        write(&path, &p)?;
        Ok(p)
    })
}

/// Where the pairing `token` opened stands (an expired one reads as declined).
pub fn status(dir: &Path, token: &str, now: Ts) -> Result<Pairing> {
    let path = file_of(dir, token)?;
    let mut p = read(&path)?.ok_or_else(|| Error::new(Code::NotFound, "no such pairing"))?;
    if p.expires_at < now.0 && matches!(p.state, State::Waiting | State::Submitted) {
        p.state = State::Declined;
    }
    Ok(p)
}

/// The terminal's answer: `Some(name)` enrolled as that name, `None` declined.
pub fn finish(dir: &Path, token: &str, enrolled: Option<&str>) -> Result<()> {
    let path = file_of(dir, token)?;
    locked(dir, || {
        let mut p = read(&path)?.ok_or_else(|| Error::new(Code::NotFound, "no such pairing"))?;
        match enrolled {
            Some(name) => {
                p.state = State::Enrolled;
                p.name = name.to_string();
            }
            None => p.state = State::Declined,
        }
        write(&path, &p)
    })
}

/// What `loopx web` writes so that `loopx web pair` finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Server {
    /// The base URL a phone opens.
    pub url: String,
    /// The server's process id.
    pub pid: u32,
}

/// Announces a running server's base URL.
pub fn announce(dir: &Path, url: &str) -> Result<()> {
    ensure(dir)?;
    let s = Server {
        url: url.to_string(),
        pid: std::process::id(),
    };
    let text = serde_json::to_vec(&s).map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    atomic::write(&dir.join("server.json"), &text).map_err(|e| io_err("server.json", e))
}

/// Removes this process's announcement.
pub fn retire(dir: &Path) {
    if announced(dir).is_some_and(|s| s.pid == std::process::id()) {
        let _ = fs::remove_file(dir.join("server.json"));
    }
}

/// The announced server, if its process still runs and runs this very binary (an agent can
/// write `server.json`; it cannot make another program pass for this one).
pub fn announced(dir: &Path) -> Option<Server> {
    let mut f = atomic::open_nofollow(&dir.join("server.json")).ok()?;
    atomic::check_regular(&f).ok()?;
    let bytes = atomic::read_bounded(&mut f, 4096).ok()?;
    let s: Server = serde_json::from_slice(&bytes).ok()?;
    let url_ok = s.url.starts_with("http://") || s.url.starts_with("https://");
    (url_ok && same_program(s.pid)).then_some(s)
}

/// True when process `pid` runs the same executable file as this process.
fn same_program(pid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &str| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    pid != 0 && id(&format!("/proc/{pid}/exe")).is_some_and(|x| Some(x) == id("/proc/self/exe"))
}
