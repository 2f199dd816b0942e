//! The owner's secret key: where it lives, creating it, and signing with it.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer, SigningKey};

use crate::kernel::authority::{OwnerPub, from_hex, to_hex};
use crate::kernel::limits;
use crate::kernel::{Code, Error, Result};

const SECRET_HEADER: &str =
    "# loopx owner SECRET key (ed25519 seed, hex). Keep it out of agents' reach.";

/// The owner's signing key, loaded from its file.
pub struct OwnerKey {
    signing: SigningKey,
    path: PathBuf,
}

impl std::fmt::Debug for OwnerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OwnerKey({}, {})",
            self.path.display(),
            self.public().fingerprint()
        )
    }
}

impl OwnerKey {
    /// The public half.
    pub fn public(&self) -> OwnerPub {
        OwnerPub(self.signing.verifying_key())
    }

    /// Signs a text; the signature as hex.
    pub fn sign(&self, msg: &str) -> String {
        to_hex(&self.signing.sign(msg.as_bytes()).to_bytes())
    }

    /// Where the key was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Where this process finds the owner's secret key: resolved once by the face.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KeyAt {
    /// At this path (it may not exist yet).
    Path(std::sync::Arc<Path>),
    /// Nowhere: no `LOOPX_OWNER_KEY`, `XDG_CONFIG_HOME` or `HOME` was set.
    #[default]
    Unknown,
    /// This face serves agents only (`loopx mcp`): no owner change is signed.
    Forbidden,
}

impl KeyAt {
    /// `LOOPX_OWNER_KEY`, else `$XDG_CONFIG_HOME/loopx/owner.key`, else
    /// `$HOME/.config/loopx/owner.key`, from the values the face read (empty counts as unset).
    pub fn resolve(
        owner_key: Option<OsString>,
        xdg: Option<OsString>,
        home: Option<OsString>,
    ) -> KeyAt {
        let path = owner_key
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| config_dir(xdg, home).map(|d| d.join("owner.key")));
        path.map_or(KeyAt::Unknown, |p| KeyAt::Path(p.into()))
    }

    /// A key at this path.
    pub fn at(path: &Path) -> KeyAt {
        KeyAt::Path(path.into())
    }
}

/// loopx's config directory: `$XDG_CONFIG_HOME/loopx`, else `$HOME/.config/loopx`, from the
/// values the face read (empty counts as unset); `None` when neither is set.
pub fn config_dir(xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let set = |v: Option<OsString>| v.filter(|p| !p.is_empty()).map(PathBuf::from);
    set(xdg)
        .map(|x| x.join("loopx"))
        .or_else(|| set(home).map(|h| h.join(".config").join("loopx")))
}

/// Where the secret key is (exit 7 when there is no place for it, or owner acts are off here).
pub fn secret_path(at: &KeyAt) -> Result<PathBuf> {
    match at {
        KeyAt::Path(p) => Ok(p.to_path_buf()),
        KeyAt::Unknown => Err(Error::new(
            Code::Denied,
            "no HOME, XDG_CONFIG_HOME or LOOPX_OWNER_KEY to find the owner key",
        )),
        KeyAt::Forbidden => Err(Error::new(
            Code::Denied,
            "only the owner can do this, and the owner's acts are not offered to agents here",
        )
        .hint("the owner decides in the board or with `loopx` in their own shell")),
    }
}

/// Loads the secret key; `None` when there is no key file.
pub fn load(at: &KeyAt) -> Result<Option<OwnerKey>> {
    let path = secret_path(at)?;
    let Some(text) = read_key_file(&path)? else {
        return Ok(None);
    };
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    let seed: [u8; 32] =
        from_hex(line)
            .and_then(|v| v.try_into().ok())
            .ok_or_else(|| {
                Error::new(Code::Denied, format!("{} is not a loopx owner key", path.display()))
            .hint("restore it from your backup, or make a new one with `loopx owner init --force`")
            })?;
    Ok(Some(OwnerKey {
        signing: SigningKey::from_bytes(&seed),
        path,
    }))
}

/// Reads the key file: a regular file of at most `OWNER_KEY_MAX_BYTES`, or exit 7 (`denied`).
/// It is opened without blocking, so a FIFO or a device is refused, never waited on or read.
fn read_key_file(path: &Path) -> Result<Option<String>> {
    let max = limits::OWNER_KEY_MAX_BYTES;
    let denied = |what: String| {
        Error::new(
            Code::Denied,
            format!("the owner key {}: {what}", path.display()),
        )
        .hint("point LOOPX_OWNER_KEY at your owner key file, or unset it")
    };
    let f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(denied(format!("cannot read it: {e}"))),
    };
    let meta = f
        .metadata()
        .map_err(|e| denied(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(denied("is not a regular file".into()));
    }
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| denied(format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(denied(format!(
            "is larger than {max} bytes; it is not a loopx owner key"
        )));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| denied("is not text; it is not a loopx owner key".into()))
}

/// Creates a new secret key file (mode 0600, its directory 0700); fails if one exists.
pub fn create(path: &Path) -> Result<OwnerKey> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| Error::new(Code::Io, format!("no randomness: {e}")))?;
    // Only a directory made here is set to 0700: the key's may be one that others share (/tmp).
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, &e))?;
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(path, &e))?;
    f.write_all(format!("{SECRET_HEADER}\n{}\n", to_hex(&seed)).as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(path, &e))?;
    Ok(OwnerKey {
        signing: SigningKey::from_bytes(&seed),
        path: path.to_path_buf(),
    })
}

/// The key to sign an owner change with, checked against the project's `owner.pub` (exit 7 otherwise).
pub fn signer_for(at: &KeyAt, project_pub: Option<&OwnerPub>) -> Result<OwnerKey> {
    let path = secret_path(at)?;
    let Some(key) = load(at)? else {
        return Err(Error::new(
            Code::Denied,
            format!("only the owner can do this, and there is no owner key at {}", path.display()),
        )
        .hint("the owner runs this where their key is; `loopx owner init` creates one (LOOPX_OWNER_KEY names another file)"));
    };
    let Some(p) = project_pub else {
        return Err(Error::new(
            Code::Denied,
            "this project has no owner key yet (.loopx/owner.pub)",
        )
        .hint("the owner runs `loopx owner init` first"));
    };
    if key.public() != *p {
        return Err(Error::new(
            Code::Denied,
            format!(
                "your key ({}) is not this project's owner key ({} in .loopx/owner.pub)",
                key.public().fingerprint(),
                p.fingerprint()
            ),
        )
        .hint("if owner.pub was replaced behind your back, run `loopx doctor`; if you replaced your key, run `loopx owner init --force`"));
    }
    Ok(key)
}

/// Where the owner keeps, beside the key, the last line it signed in a goal's journal.
fn memory_path(key: &OwnerKey, goal: &str) -> Option<PathBuf> {
    crate::kernel::id::check_not_path(goal).ok()?;
    Some(
        key.path()
            .parent()?
            .join("seals")
            .join(format!("{goal}.last")),
    )
}

/// Remembers the owner's last signed journal line of a goal (`seq` and hash), outside the
/// project, so the owner's doctor can tell when history it signed was cut or put back.
/// Best effort: a failure here never fails the owner's command.
pub fn remember_last(key: &OwnerKey, goal: &str, seq: u64, hash: &str) {
    let Some(p) = memory_path(key, goal) else {
        return;
    };
    if let Some(d) = p.parent() {
        let _ = fs::create_dir_all(d);
    }
    let _ = crate::store::atomic::write(&p, format!("{seq} {hash}\n").as_bytes());
}

/// The owner's last signed journal line of a goal, as remembered here.
pub fn remembered_last(key: &OwnerKey, goal: &str) -> Option<(u64, String)> {
    let p = memory_path(key, goal)?;
    let mut f = crate::store::atomic::open_nofollow(&p).ok()?;
    let bytes = crate::store::atomic::read_bounded(&mut f, 256).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (seq, hash) = text.trim().split_once(' ')?;
    Some((seq.parse().ok()?, hash.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> Option<OsString> {
        Some(OsString::from(s))
    }

    #[test]
    fn the_key_is_found_by_the_first_of_its_three_places_that_is_set() {
        let at = |k, x, h| KeyAt::resolve(k, x, h);
        assert_eq!(at(os("/k"), os("/x"), os("/h")), KeyAt::at(Path::new("/k")));
        assert_eq!(
            at(os(""), os("/x"), os("/h")),
            KeyAt::at(Path::new("/x/loopx/owner.key"))
        );
        assert_eq!(
            at(None, os(""), os("/h")),
            KeyAt::at(Path::new("/h/.config/loopx/owner.key"))
        );
        assert_eq!(at(None, None, os("")), KeyAt::Unknown);
        assert_eq!(secret_path(&KeyAt::Unknown).unwrap_err().code, Code::Denied);
        let e = signer_for(&KeyAt::Forbidden, None).unwrap_err();
        assert_eq!(e.code, Code::Denied);
        assert!(e.message.contains("not offered to agents"), "{}", e.message);
    }
}
