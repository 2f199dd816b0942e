//! Journal-first transactions: stage every file, append the journal line (the commit point),
//! then put the files in place; and finish, at the next load, a commit a crash interrupted.
//!
//! A transaction's files are staged as `.NAME.tmp-txN` beside their targets (N is the `seq` of
//! the transaction's first journal line) and synced. The journal lines follow in one append and
//! one fdatasync: once they are on disk the change is committed, and its last line lists every
//! file with the hash of its new content. Then each staged file is renamed over its target (or
//! the target removed, or the bytes appended), and each directory touched is synced once.
//!
//! Nothing after the commit point may fail for want of space: the space of an append to an
//! existing log is reserved while staging (`fallocate`, keeping the size), and a new log is
//! its staged file renamed into place.
//!
//! A crash before the journal append leaves only staged files that nothing refers to: they are
//! never read, and the next transaction with the same N replaces them. A crash after it leaves
//! staged files that the last journal line names: the next load under the lock applies them
//! (`recover.rs`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::kernel::{Error, Result, TxFile, TxOp};
use crate::store::{atomic, journal};

/// One file operation of a transaction, with its bytes ready.
#[derive(Debug, Clone)]
pub struct Op {
    /// The path inside `.loopx/`.
    pub rel: String,
    /// What happens to it.
    pub kind: TxOp,
    /// The new content (`Put`) or the bytes to append (`Append`); empty for `Remove`.
    pub bytes: Vec<u8>,
}

impl Op {
    /// Replace `rel` whole with `bytes`.
    pub fn put(rel: impl Into<String>, bytes: Vec<u8>) -> Op {
        Op {
            rel: rel.into(),
            kind: TxOp::Put,
            bytes,
        }
    }

    /// Remove `rel`.
    pub fn remove(rel: impl Into<String>) -> Op {
        Op {
            rel: rel.into(),
            kind: TxOp::Remove,
            bytes: Vec::new(),
        }
    }

    /// Append `bytes` to `rel`.
    pub fn append(rel: impl Into<String>, bytes: Vec<u8>) -> Op {
        Op {
            rel: rel.into(),
            kind: TxOp::Append,
            bytes,
        }
    }
}

/// One operation a file: appends to one file are joined, and a later put or remove of a file
/// replaces an earlier one (each file has one staged name in a transaction).
pub fn coalesce(ops: Vec<Op>) -> Vec<Op> {
    let mut out: Vec<Op> = Vec::with_capacity(ops.len());
    for op in ops {
        match out.iter().position(|o| o.rel == op.rel) {
            Some(i) if out[i].kind == TxOp::Append && op.kind == TxOp::Append => {
                out[i].bytes.extend_from_slice(&op.bytes);
            }
            Some(i) => {
                out.remove(i);
                out.push(op);
            }
            None => out.push(op),
        }
    }
    out
}

/// The staged name of `rel` in transaction `tx`: `dir/.NAME.tmp-txN`.
pub fn staged_rel(rel: &str, tx: u64) -> String {
    match rel.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.{name}{}tx{tx}", atomic::TEMP_MARK),
        None => format!(".{rel}{}tx{tx}", atomic::TEMP_MARK),
    }
}

/// An error reading a state file: a link or anything but a regular file is invalid state
/// (exit 6, the file named), anything else an I/O error.
pub(super) fn state_error(path: &Path, e: &io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => crate::store::parse::symlink_error(path),
        _ => crate::store::parse::io_error(path, e),
    }
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new("."))
}

/// Creates a staged file exclusively, never through a link; a leftover of an uncommitted
/// transaction with the same number (nothing refers to it) is replaced.
fn create_staged(path: &Path) -> io::Result<File> {
    let open = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
    };
    match open() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(path)?;
            open()
        }
        other => other,
    }
}

/// Writes and syncs every staged file; returns the manifest the commit line will carry.
///
/// An append records the target's length now, so a replay appends exactly once.
pub fn stage(dir: &Path, tx: u64, ops: &[Op]) -> Result<Vec<TxFile>> {
    debug_assert!(
        ops.iter()
            .enumerate()
            .all(|(i, o)| ops[..i].iter().all(|p| p.rel != o.rel)),
        "stage needs coalesced ops"
    );
    let mut files = Vec::with_capacity(ops.len());
    for op in ops {
        if !safe_rel(&op.rel) {
            return Err(Error::new(
                crate::kernel::Code::Internal,
                format!("{} is not a state file", op.rel),
            ));
        }
        let target = dir.join(&op.rel);
        let staged = dir.join(staged_rel(&op.rel, tx));
        if let Some(d) = target.parent() {
            fs::create_dir_all(d).map_err(|e| Error::io(d, &e))?;
        }
        let mut f = create_staged(&staged).map_err(|e| Error::io(&staged, &e))?;
        if op.kind != TxOp::Remove {
            f.write_all(&op.bytes)
                .and_then(|_| f.sync_data())
                .map_err(|e| Error::io(&staged, &e))?;
        }
        let at = match op.kind {
            TxOp::Append => Some(
                reserve_append(&target, op.bytes.len() as u64)
                    .map_err(|e| state_error(&target, &e))?,
            ),
            _ => None,
        };
        files.push(TxFile {
            path: op.rel.clone(),
            op: op.kind,
            sha256: (op.kind != TxOp::Remove).then(|| journal::sha256_hex(&op.bytes)),
            at,
        });
        crate::store::core::crash::point();
    }
    Ok(files)
}

/// A log's length without a torn last line (bytes after the last newline); 0 if missing.
pub fn clean_len(path: &Path) -> io::Result<u64> {
    let mut f = match atomic::open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    journal::clean_len(&mut f)
}

/// Where an append to the log `path` will go (its length without a torn last line; 0 if it is
/// missing), with the space for `n` more bytes reserved now, before the commit point: once the
/// journal says the append happened, putting it in place must not fail for want of space.
///
/// A missing log needs no reservation: its staged file is renamed into place.
fn reserve_append(path: &Path, n: u64) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut f = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    atomic::check_regular(&f)?;
    let at = journal::clean_len(&mut f)?;
    if n > 0 {
        // KEEP_SIZE: the blocks are allocated past the end, the length (what readers see)
        // stays. File systems without fallocate get no reservation.
        let (off, len) = (
            i64::try_from(at).unwrap_or(i64::MAX),
            i64::try_from(n).unwrap_or(i64::MAX),
        );
        // SAFETY: a valid open descriptor; no memory is passed.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off, len) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if !matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL)
            ) {
                return Err(e);
            }
        }
    }
    Ok(at)
}

/// Puts a committed transaction's staged files in place, then syncs each directory touched.
///
/// Idempotent: a file already in place (its staged copy gone) is left alone, so a replay after
/// a crash at any point gives the same result.
pub fn apply(dir: &Path, tx: u64, files: &[TxFile]) -> Result<()> {
    apply_all(dir, tx, files, false)
}

pub(super) fn apply_all(dir: &Path, tx: u64, files: &[TxFile], verify: bool) -> Result<()> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for f in files {
        // An append in place changes no directory entry that matters: the log is fsynced
        // itself, and a staged file left by a crash after it is a no-op to replay.
        let in_place = f.op == TxOp::Append && f.at.is_some_and(|a| a > 0);
        let applied = apply_checked(dir, tx, f, verify)?;
        crate::store::core::crash::point();
        if applied && !in_place {
            let d = parent(&dir.join(&f.path)).to_path_buf();
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    for d in dirs {
        atomic::sync_dir(&d).map_err(|e| Error::io(&d, &e))?;
    }
    Ok(())
}

/// True for a path a transaction may write: a state file of `.loopx/`, never outside it.
pub fn safe_rel(rel: &str) -> bool {
    const TOP: &[&str] = &[
        "loopx.toml",
        "quota.toml",
        "owner.pub",
        "owner.proofs",
        "owner.seal",
        ".gitignore",
    ];
    const DIRS: &[&str] = &["todos", "archive", "gates", "evidence", "agents"];
    match rel.split_once('/') {
        None => TOP.contains(&rel),
        Some((d, name)) => {
            DIRS.contains(&d)
                && !name.is_empty()
                && !name.starts_with('.')
                && !name.contains(['/', '\\', '\0'])
        }
    }
}

/// Puts one staged file of a committed transaction in place (without syncing its directory);
/// false when there was nothing to do (it is in place already, or the path is not a state file).
pub fn apply_one(dir: &Path, tx: u64, f: &TxFile) -> Result<bool> {
    apply_checked(dir, tx, f, false)
}

/// `apply_one`; with `verify`, a staged file is first checked against the commit line's hash
/// (recovery: the staged files were not written by this process).
fn apply_checked(dir: &Path, tx: u64, f: &TxFile, verify: bool) -> Result<bool> {
    if !safe_rel(&f.path) {
        return Ok(false);
    }
    let target = dir.join(&f.path);
    let staged = dir.join(staged_rel(&f.path, tx));
    let present = match fs::symlink_metadata(&staged) {
        Ok(m) => m.file_type().is_file(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(Error::io(&staged, &e)),
    };
    if !present {
        return Ok(false);
    }
    // Only the bytes the commit line names are put in place: a staged file planted by hand
    // under a committed name is removed, never applied.
    if verify && f.op != TxOp::Remove && !staged_matches(&staged, f.sha256.as_deref()) {
        remove_if_there(&staged)?;
        return Ok(false);
    }
    match f.op {
        TxOp::Put => fs::rename(&staged, &target).map_err(|e| Error::io(&target, &e))?,
        TxOp::Remove => {
            remove_if_there(&target)?;
            remove_if_there(&staged)?;
        }
        TxOp::Append => {
            append_once(&target, &staged, f.at.unwrap_or(0))?;
            remove_if_there(&staged)?;
        }
    }
    Ok(true)
}

/// True when the staged file's bytes hash to what the commit line says.
fn staged_matches(staged: &Path, sha256: Option<&str>) -> bool {
    let Some(want) = sha256 else { return false };
    let Ok(mut f) = atomic::open_nofollow(staged) else {
        return false;
    };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).is_ok() && journal::sha256_hex(&bytes) == want
}

fn remove_if_there(p: &Path) -> Result<()> {
    match fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(p, &e)),
    }
}

/// Appends the staged bytes at offset `at` of the target, once: bytes already there (a replay)
/// are not appended again, and anything after `at` that is not them (a torn line) is cut.
///
/// A log that is missing or empty where the append starts at 0 gets the staged file renamed
/// into place: nothing to allocate after the commit point.
fn append_once(target: &Path, staged: &Path, at: u64) -> Result<()> {
    let io_err = |e: io::Error| state_error(target, &e);
    if at == 0 {
        match fs::symlink_metadata(target) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return fs::rename(staged, target).map_err(io_err);
            }
            Ok(m) if m.file_type().is_file() && m.len() == 0 => {
                return fs::rename(staged, target).map_err(io_err);
            }
            _ => {}
        }
    }
    let mut bytes = Vec::new();
    atomic::open_nofollow(staged)
        .and_then(|mut s| s.read_to_end(&mut bytes))
        .map_err(|e| Error::io(staged, &e))?;
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(target)
        .map_err(io_err)?;
    atomic::check_regular(&f).map_err(io_err)?;
    let len = f.metadata().map_err(io_err)?.len();
    if len >= at + bytes.len() as u64 {
        let mut have = vec![0u8; bytes.len()];
        f.seek(SeekFrom::Start(at)).map_err(io_err)?;
        f.read_exact(&mut have).map_err(io_err)?;
        if have == bytes {
            return Ok(());
        }
    }
    if len != at {
        f.set_len(at.min(len)).map_err(io_err)?;
    }
    f.seek(SeekFrom::End(0)).map_err(io_err)?;
    f.write_all(&bytes)
        .and_then(|_| f.sync_data())
        .map_err(io_err)
}
