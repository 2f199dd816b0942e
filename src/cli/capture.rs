//! Evidence `todo update` captures: artifacts' SHA-256, and git's HEAD and changed files.

use std::path::Path;
use std::process::Command;

use super::Ctx;
use crate::kernel::bounds;
use crate::kernel::{Dur, Error, Evidence, EvidenceKind, Result, Todo, Ts};

/// `--artifact PATH`: its SHA-256, as evidence.
pub fn artifact(ctx: &Ctx, now: Ts, agent: &str, path: &str) -> Result<Evidence> {
    bounds::usage(bounds::text("--artifact", path, bounds::PATH_MAX))?;
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

/// Git HEAD and changed files outside `.loopx/`, when the project is in a work tree.
#[derive(Debug, Clone)]
pub struct Git {
    head: Option<String>,
    files: Vec<String>,
}

/// The project's git facts, or `None` outside a work tree (or without git).
pub fn git_facts(root: &Path) -> Option<Git> {
    // One git call: porcelain v2 gives HEAD (`# branch.oid`) and the changed files together.
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut head = None;
    let mut files = Vec::new();
    let mut records = out.stdout.split(|b| *b == 0);
    while let Some(rec) = records.next() {
        let rec = String::from_utf8_lossy(rec);
        if let Some(oid) = rec.strip_prefix("# branch.oid ") {
            head = Some(oid.to_string()).filter(|o| o != "(initial)");
            continue;
        }
        let path = match rec.chars().next() {
            Some('1') => rec.splitn(9, ' ').nth(8),
            Some('2') => {
                records.next(); // the original path of a rename
                rec.splitn(10, ' ').nth(9)
            }
            Some('u') => rec.splitn(11, ' ').nth(10),
            Some('?') => rec.get(2..),
            _ => None,
        };
        if let Some(f) = path.filter(|f| !f.starts_with(".loopx/") && *f != ".loopx") {
            files.push(f.to_string());
        }
    }
    Some(Git { head, files })
}

/// The evidence `todo update` captures when none is given.
pub fn auto_evidence(now: Ts, agent: &str, t: &Todo, git: Option<Git>) -> Evidence {
    let since = t.lease.as_ref().map(|l| now.since(l.acquired_at));
    let mut parts = Vec::new();
    let mut e = Evidence::new(now, agent, None, EvidenceKind::Auto, String::new());
    match &git {
        Some(g) => {
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
        None => parts.push("not a git work tree".into()),
    }
    if let Some(s) = since {
        parts.push(format!("{} since the claim", Dur(s.0 / 1000 * 1000)));
        e.since_claim_s = Some(s.0 / 1000);
    }
    if let Some(g) = git {
        e.commit = g.head;
        e.files = g.files.into_iter().take(50).collect();
    }
    e.summary = parts.join(", ");
    e
}
