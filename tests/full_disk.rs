//! A full disk: on a 2 MiB tmpfs filled to the last page (and then with 1 to 6 pages free,
//! so each write step in turn is the one that fails), `todo add`, `claim`, `update --evidence`
//! and `update --status done` either succeed whole or fail with exit 1 (`io`) and leave the
//! state as it was, for them and for every later command; after space is freed everything
//! works and doctor (after `--fix`) is healthy.
//!
//! Needs root and a tmpfs mount; prints a clear skip message where it cannot mount one.

mod txcheck;

use std::ffi::CString;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use txcheck::{Tmp, files_match_journal, journal, ok, run, state_files};

const PAGE: u64 = 4096;

/// A mounted tmpfs, unmounted on drop (a failing test included).
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Result<Mount, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let c = |s: &[u8]| CString::new(s).unwrap();
        let (src, target, fstype, opts) = (
            c(b"tmpfs"),
            c(at.as_os_str().as_bytes()),
            c(b"tmpfs"),
            c(format!("size={size},mode=0755").as_bytes()),
        );
        // SAFETY: valid NUL-terminated strings that outlive the call.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        Ok(Mount(at.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let p = CString::new(self.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Fills the file system with `filler` until no page is left, then frees `free` pages.
fn fill(filler: &Path, free: u64) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(filler)
        .unwrap();
    let chunk = vec![0x55u8; 64 * 1024];
    for size in [chunk.len(), PAGE as usize, 1] {
        while f.write_all(&chunk[..size]).is_ok() {}
    }
    let len = f.metadata().unwrap().len();
    // Whole pages past the new end are given back.
    let keep = (len / PAGE).saturating_sub(free) * PAGE;
    f.set_len(keep).unwrap();
}

/// What any reader sees: the state files and the journal's complete lines.
fn seen(
    lx: &Path,
) -> (
    std::collections::BTreeMap<String, Vec<u8>>,
    Vec<serde_json::Value>,
) {
    (state_files(lx), journal(lx))
}

type Seen = (
    std::collections::BTreeMap<String, Vec<u8>>,
    Vec<serde_json::Value>,
);

/// What differs between two views, for messages.
fn diff(a: &Seen, b: &Seen) -> String {
    let files: Vec<&String> =
        a.0.keys()
            .chain(b.0.keys())
            .filter(|k| a.0.get(*k) != b.0.get(*k))
            .collect();
    let lines: Vec<String> =
        b.1.iter()
            .skip(a.1.len())
            .map(|e| format!("{} {}", e["action"], e["data"]))
            .collect();
    format!(
        "files {files:?}; journal {} -> {} lines, new: {lines:?}",
        a.1.len(),
        b.1.len()
    )
}

#[test]
fn a_full_disk_fails_cleanly_and_recovers() {
    let tmp = Tmp::new("full-disk");
    let mnt = tmp.0.join("mnt");
    let _m = match Mount::tmpfs(&mnt, "2m") {
        Ok(m) => m,
        Err(e) => {
            println!("skipped: cannot mount a tmpfs here ({e}); the full-disk test needs root");
            return;
        }
    };
    let root = mnt.join("p");
    std::fs::create_dir_all(&root).unwrap();
    let key = tmp.0.join("owner.key"); // outside the small disk
    let lx = root.join(".loopx");
    ok(
        &root,
        &key,
        &["--agent", "lead", "start-goal", "--goal-text", "full"],
    );
    for i in 0..4 {
        ok(
            &root,
            &key,
            &["--agent", "lead", "todo", "add", &format!("t{i}")],
        );
    }
    let filler = mnt.join("filler");
    let mut failed = 0;
    let mut n = 0;
    for free in 0..=6 {
        for command in ["add", "claim", "update", "done"] {
            n += 1;
            // With room: what the command needs (a ready todo; a todo the agent holds).
            let _ = std::fs::remove_file(&filler);
            let ready = ok(&root, &key, &["--agent", "lead", "todo", "add", "next"])["todo"]["id"]
                .as_str()
                .unwrap()
                .to_string();
            if matches!(command, "update" | "done") {
                ok(&root, &key, &["--agent", "w", "todo", "claim", &ready]);
                if free % 2 == 1 {
                    // A log that ends just short of a page: the append needs a new page.
                    let upd = |text: &str| {
                        ok(
                            &root,
                            &key,
                            &["--agent", "w", "todo", "update", &ready, "--evidence", text],
                        );
                    };
                    upd("pre");
                    let log = lx.join(format!("evidence/{ready}.jsonl"));
                    let l = std::fs::metadata(&log).unwrap().len() as usize;
                    upd(&"x".repeat((PAGE as usize - 40).saturating_sub(2 * l - 3)));
                    let len = std::fs::metadata(&log).unwrap().len();
                    assert!(len < PAGE && len > PAGE - 100, "the log is {len} bytes");
                }
            }
            let args: Vec<&str> = match command {
                "add" => vec!["todo", "add", "on a full disk"],
                "claim" => vec!["todo", "claim", &ready],
                "update" => vec![
                    "todo",
                    "update",
                    &ready,
                    "--evidence",
                    "a line on a full disk",
                ],
                _ => vec![
                    "todo",
                    "update",
                    &ready,
                    "--status",
                    "done",
                    "--evidence",
                    "done",
                ],
            };
            fill(&filler, free);
            let before = seen(&lx);
            let mut a = vec!["--agent", "w", "--json"];
            a.extend_from_slice(&args);
            let r = run(&root, &key, &a);
            let what = format!("{command} with {free} pages free");
            println!("{what}: exit {}", r.code);
            match r.code {
                0 => {
                    let bad = files_match_journal(&lx);
                    assert!(bad.is_empty(), "{what}: succeeded, but {bad:?}");
                }
                1 => {
                    failed += 1;
                    assert_eq!(r.json()["error"]["code"], "io", "{what}: {r:?}");
                    let now = seen(&lx);
                    assert!(
                        now == before,
                        "{what}: failed, but the state changed: {}\n{r:?}",
                        diff(&before, &now)
                    );
                    // Nor does any later command see it (a load would finish a commit).
                    let s = run(&root, &key, &["status", "--json"]);
                    assert!(s.code == 0 || s.code == 1, "{what}: status after: {s:?}");
                    let now = seen(&lx);
                    assert!(
                        now == before,
                        "{what}: exited 1, but a later command sees the change: {}\n{r:?}\n{s:?}",
                        diff(&before, &now)
                    );
                }
                _ => panic!("{what}: exit {}: {r:?}", r.code),
            }
        }
    }
    println!("{n} commands on a full disk, {failed} failed with io");
    assert!(failed > 0, "the disk never filled: the test proved nothing");

    std::fs::remove_file(&filler).unwrap();
    let f = run(&root, &key, &["doctor", "--fix", "--json"]);
    println!("doctor --fix: {}", f.stdout.trim());
    let d = run(&root, &key, &["doctor", "--json"]);
    assert_eq!(d.code, 0, "doctor after freeing space and --fix: {d:?}");
    assert!(
        txcheck::temp_files(&lx).is_empty(),
        "temp files after doctor --fix"
    );
    let id = ok(&root, &key, &["--agent", "v", "todo", "add", "after"])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&root, &key, &["--agent", "v", "todo", "claim", &id]);
    ok(
        &root,
        &key,
        &["--agent", "v", "todo", "update", &id, "--evidence", "fine"],
    );
    ok(
        &root,
        &key,
        &["--agent", "v", "todo", "update", &id, "--status", "done"],
    );
    let bad = files_match_journal(&lx);
    assert!(bad.is_empty(), "after freeing space: {bad:?}");
}
