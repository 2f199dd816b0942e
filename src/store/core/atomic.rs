//! File primitives: atomic replacement (temp file, fsync, rename, fsync of the directory), appends, and reads that never follow a symlink.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// The marker in temp file names; such files are never state.
pub const TEMP_MARK: &str = ".tmp-";

/// True for a temp file name this store writes.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(TEMP_MARK)
}

/// Replaces `path` with `bytes` atomically and durably.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let (tmp, mut f) = create_temp(path)?;
    let result = (|| {
        f.write_all(bytes)?;
        // fdatasync: a new file's size is flushed with its data; the rename is made durable below.
        f.sync_data()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates a fresh temp file beside `path`, exclusively and never through a link.
pub fn create_temp(path: &Path) -> io::Result<(std::path::PathBuf, File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let mut last = io::Error::other("no temp name was free");
    for _ in 0..8 {
        let tmp = dir.join(temp_name(name)?);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// A fresh random temp file name for a file called `name`: `.NAME.tmp-PID-RANDOM`.
pub fn temp_name(name: &str) -> io::Result<String> {
    let mut rnd = [0u8; 8];
    getrandom::fill(&mut rnd).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(format!(
        ".{name}{TEMP_MARK}{}-{:016x}",
        std::process::id(),
        u64::from_le_bytes(rnd)
    ))
}

/// Fsyncs a directory so a rename or unlink in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?
        .sync_all()
}

/// Appends one buffer with a single write to a file opened for append, then fsyncs it.
///
/// A torn last line (no final newline) left by a crash is cut off first; the bytes cut are returned.
pub fn append_line(path: &Path, bytes: &[u8]) -> io::Result<u64> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NOFOLLOW: an append never goes through a symlink out of .loopx/; O_NONBLOCK: a FIFO
    // planted there fails at once instead of hanging.
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    check_regular(&f)?;
    let cut = crate::store::journal::cut_torn_tail(&mut f)?;
    // A test's crash mid-append: the line whole but for its newline, which parses.
    crate::store::core::crash::point_then(|| {
        let _ = f.write_all(&bytes[..bytes.len().saturating_sub(1)]);
    });
    f.write_all(bytes)?;
    f.sync_data()?;
    crate::store::core::crash::point();
    Ok(cut)
}

/// Opens a state file for reading without following a symlink (`ELOOP` if it is one), and
/// refuses at once anything that is not a regular file (a FIFO would block a reader forever).
pub fn open_nofollow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    check_regular(&f)?;
    Ok(f)
}

/// The error kind for a state path that is not a regular file.
pub const NOT_REGULAR: &str = "is not a regular file";

/// Fails unless the open file is a regular file.
pub fn check_regular(f: &File) -> io::Result<()> {
    if f.metadata()?.file_type().is_file() {
        Ok(())
    } else {
        Err(io::Error::new(io::ErrorKind::InvalidInput, NOT_REGULAR))
    }
}

/// True for the error `check_regular` gives.
pub fn is_not_regular(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidInput && e.to_string() == NOT_REGULAR
}

/// Reads a whole file opened with `open_nofollow`, refusing one larger than `max` bytes.
pub fn read_bounded(f: &mut File, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    // Sized from the file's length, so a small file is read in one call.
    let len = f.metadata().map(|m| m.len()).unwrap_or(0).min(max);
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0) + 1);
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("is larger than {max} bytes"),
        ));
    }
    Ok(bytes)
}
