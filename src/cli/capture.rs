//! Evidence `todo update` reads from the given files: artifacts' SHA-256.

use std::path::Path;

use super::Ctx;
use crate::kernel::limits;
use crate::kernel::{Error, Evidence, EvidenceKind, Result, Ts};

/// `--artifact PATH`: its SHA-256, as evidence.
pub fn artifact(ctx: &Ctx, now: Ts, agent: &str, path: &str) -> Result<Evidence> {
    limits::usage(limits::text("--artifact", path, limits::PATH_MAX))?;
    let p = Path::new(path);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        ctx.cwd.join(p)
    };
    let sha256 = hash_file(&full).map_err(|e| {
        Error::usage(format!("--artifact {path}: {e}"))
            .hint("give the path of a regular file that exists")
    })?;
    let mut e = Evidence::new(
        now,
        agent,
        None,
        EvidenceKind::Artifact,
        format!("artifact {path}"),
    );
    e.path = Some(path.to_string());
    e.sha256 = Some(sha256);
    Ok(e)
}

/// The SHA-256 of a regular file, read in pieces (a FIFO or device is refused, never read).
fn hash_file(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf)? {
            0 => break,
            n => h.update(&buf[..n]),
        }
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
