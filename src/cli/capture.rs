//! Evidence `todo update` captures: artifacts' SHA-256, and git's HEAD and changed files.

pub use crate::runtime::git::facts as git_facts;

use std::path::Path;

use super::Ctx;
use crate::kernel::limits;
use crate::kernel::{Dur, Error, Evidence, EvidenceKind, Result, Todo, Ts};
use crate::runtime::git::GitFacts;

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

/// The evidence `todo update` captures when none is given.
pub fn auto_evidence(now: Ts, agent: &str, t: &Todo, git: GitFacts) -> Evidence {
    let since = t.lease.as_ref().map(|l| now.since(l.acquired_at));
    let mut parts = Vec::new();
    let mut e = Evidence::new(now, agent, None, EvidenceKind::Auto, String::new());
    match &git {
        Ok(Some(g)) => {
            match &g.head {
                Some(h) => parts.push(format!("HEAD {}", &h[..h.len().min(12)])),
                None => parts.push("no commits yet".into()),
            }
            parts.push(format!(
                "{} changed file{}",
                g.files.len(),
                if g.files.len() == 1 { "" } else { "s" }
            ));
        }
        Ok(None) => parts.push("not a git work tree".into()),
        Err(why) => parts.push(format!("no git facts: {why}")),
    }
    if let Some(s) = since {
        parts.push(format!("{} since the claim", Dur(s.0 / 1000 * 1000)));
        e.since_claim_s = Some(s.0 / 1000);
    }
    if let Ok(Some(g)) = git {
        // Outside the reservation: of every changed file, not only the 50 recorded.
        if let Some(l) = t.lease.as_ref() {
            e.outside = crate::kernel::reserve::outside(&l.paths, &g.files);
        }
        if !e.outside.is_empty() {
            parts.push(format!("{} outside the reservation", e.outside.len()));
        }
        e.commit = g.head;
        e.files = g.files.into_iter().take(50).collect();
    }
    e.summary = parts.join(", ");
    e
}

/// The warning for auto evidence that names changed files outside the lease's reservation.
pub fn outside_warning(id: &str, t: &Todo, e: &Evidence) -> Option<String> {
    let l = t.lease.as_ref()?;
    let first = e.outside.first()?;
    let more = match e.outside.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Some(format!(
        "{id}: changed outside its reservation ({}): {first}{more}",
        l.paths.join(" ")
    ))
}
