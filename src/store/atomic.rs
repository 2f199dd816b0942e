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
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let mut rnd = [0u8; 4];
    let _ = getrandom::fill(&mut rnd);
    let tmp = dir.join(format!(
        ".{name}{TEMP_MARK}{}-{:08x}",
        std::process::id(),
        u32::from_le_bytes(rnd)
    ));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
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

/// Fsyncs a directory so a rename or unlink in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Appends one buffer with a single write to a file opened for append, then fsyncs it.
///
/// A torn last line (no final newline) left by a crash is cut off first; the bytes cut are returned.
pub fn append_line(path: &Path, bytes: &[u8]) -> io::Result<u64> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NOFOLLOW: an append never goes through a symlink out of .loopx/.
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let cut = crate::store::journal::cut_torn_tail(&mut f)?;
    f.write_all(bytes)?;
    f.sync_data()?;
    Ok(cut)
}

/// Opens a state file for reading without following a symlink (`ELOOP` if it is one).
pub fn open_nofollow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}
