//! A hand edit of a todo file, in place or by rename, added or removed, is seen by the very next
//! command, with both caches warm (the parsed rows and the kept listing of `todos/`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn project(name: &str, n: usize) -> (PathBuf, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("loopx-hand-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert!(
        run(&dir, &["start-goal", "--goal-text", "edits"])
            .status
            .success()
    );
    let ids = (0..n)
        .map(|i| {
            let v = json(&run(&dir, &["todo", "add", &format!("todo {i}")]));
            v["todo"]["id"].as_str().unwrap().to_string()
        })
        .collect();
    warm(&dir);
    (dir, ids)
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopx"))
        .arg("--dir")
        .arg(dir)
        .args(["--agent", "a", "--json"])
        .args(args)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .env("LOOPX_OWNER_KEY", dir.join("owner.key"))
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

/// Lets every file settle and loads until both caches are written and the next load uses them.
fn warm(dir: &Path) {
    std::thread::sleep(Duration::from_millis(60));
    for _ in 0..3 {
        assert!(run(dir, &["status"]).status.success());
    }
    for f in ["todos.bin", "todos.names"] {
        assert!(
            dir.join(".loopx/cache").join(f).is_file(),
            "{f} was written"
        );
    }
}

fn todo_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!(".loopx/todos/{id}.toml"))
}

/// The titles of the open todos, as `todo list` gives them.
fn titles(dir: &Path) -> Vec<String> {
    let v = json(&run(dir, &["todo", "list"]));
    let mut out: Vec<String> = v["todos"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|t| t["title"].as_str().unwrap_or_default().to_string())
        .collect();
    out.sort();
    out
}

fn mtime_of(p: &Path) -> std::time::SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

/// Puts an old mtime back on a file or directory, as a careful editor or `touch -r` would.
fn put_mtime(p: &Path, t: std::time::SystemTime) {
    std::fs::File::open(p).unwrap().set_modified(t).unwrap();
}

#[test]
fn an_edit_in_place_with_size_and_mtime_kept_is_seen_next() {
    let (dir, ids) = project("inplace", 30);
    let path = todo_path(&dir, &ids[3]);
    let before = std::fs::read_to_string(&path).unwrap();
    let old = mtime_of(&path);
    let edited = before.replace("title = \"todo 3\"", "title = \"todo X\"");
    assert_eq!(edited.len(), before.len());
    // Written in place (the same inode, as nano or VS Code do), the old mtime put back.
    std::fs::write(&path, &edited).unwrap();
    put_mtime(&path, old);
    assert!(titles(&dir).contains(&"todo X".to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_edit_by_rename_is_seen_next_even_with_the_directory_mtime_put_back() {
    let (dir, ids) = project("rename", 30);
    let todos = dir.join(".loopx/todos");
    let old_dir = mtime_of(&todos);
    let path = todo_path(&dir, &ids[5]);
    let text = std::fs::read_to_string(&path).unwrap();
    // A new file renamed over the old one (as `sed -i` or vim do).
    let tmp = todos.join(".edit.tmp");
    std::fs::write(
        &tmp,
        text.replace("title = \"todo 5\"", "title = \"renamed\""),
    )
    .unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    put_mtime(&todos, old_dir);
    assert!(titles(&dir).contains(&"renamed".to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_edit_by_rename_with_size_and_mtimes_kept_is_seen_next() {
    let (dir, ids) = project("rename-same", 30);
    let todos = dir.join(".loopx/todos");
    let path = todo_path(&dir, &ids[7]);
    let (old_file, old_dir) = (mtime_of(&path), mtime_of(&todos));
    let before = std::fs::read_to_string(&path).unwrap();
    let edited = before.replace("title = \"todo 7\"", "title = \"todo Y\"");
    assert_eq!(edited.len(), before.len());
    // The same size, the old file's mtime to the nanosecond, renamed over it, and the
    // directory's mtime put back: only the inode and the ctimes tell.
    let tmp = todos.join(".edit.tmp");
    std::fs::write(&tmp, &edited).unwrap();
    put_mtime(&tmp, old_file);
    std::fs::rename(&tmp, &path).unwrap();
    put_mtime(&todos, old_dir);
    assert_eq!(mtime_of(&path), old_file);
    assert!(titles(&dir).contains(&"todo Y".to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_added_or_removed_by_hand_is_seen_next() {
    let (dir, ids) = project("addremove", 30);
    let from = todo_path(&dir, &ids[0]);
    let text = std::fs::read_to_string(&from).unwrap();
    let new_id = "t-zzzzzz";
    let added = text
        .replace(&ids[0], new_id)
        .replace("title = \"todo 0\"", "title = \"by hand\"");
    std::fs::write(todo_path(&dir, new_id), added).unwrap();
    let now = titles(&dir);
    assert!(now.contains(&"by hand".to_string()), "{now:?}");
    assert_eq!(now.len(), 31);
    warm(&dir);
    std::fs::remove_file(todo_path(&dir, &ids[1])).unwrap();
    let now = titles(&dir);
    assert!(!now.contains(&"todo 1".to_string()), "{now:?}");
    assert_eq!(now.len(), 30);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_replaced_by_a_link_is_quarantined_next() {
    let (dir, ids) = project("link", 30);
    let path = todo_path(&dir, &ids[2]);
    let outside = dir.join("outside.toml");
    std::fs::copy(&path, &outside).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&outside, &path).unwrap();
    let v = json(&run(&dir, &["quota", "should-run"]));
    assert!(v["problems"].to_string().contains(ids[2].as_str()), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_forged_listing_or_cache_is_never_trusted() {
    let (dir, ids) = project("forged", 30);
    let cache = dir.join(".loopx/cache");
    // A listing that leaves a todo out, and rows of garbage: both are misses.
    std::fs::write(cache.join("todos.names"), b"loopxn\0\0\x01\0\0\0garbage").unwrap();
    std::fs::write(cache.join("todos.bin"), vec![0xffu8; 4096]).unwrap();
    assert_eq!(titles(&dir).len(), ids.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A listing kept under the directory's real key but leaving a todo out: what a forger with
/// write access to `.loopx/cache/` can do. Doctor names it and `--fix` deletes it.
#[test]
fn a_listing_forged_under_the_real_key_is_named_by_doctor() {
    use std::os::unix::fs::MetadataExt as _;
    let (dir, ids) = project("forgedkey", 5);
    let m = std::fs::metadata(dir.join(".loopx/todos")).unwrap();
    let mut b = b"loopxn\0\0".to_vec();
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&m.ino().to_le_bytes());
    b.extend_from_slice(&m.size().to_le_bytes());
    b.extend_from_slice(&(m.ctime() * 1_000_000_000 + m.ctime_nsec()).to_le_bytes());
    b.extend_from_slice(&(m.mtime() * 1_000_000_000 + m.mtime_nsec()).to_le_bytes());
    let mut kept: Vec<&String> = ids.iter().skip(1).collect();
    kept.sort();
    b.extend_from_slice(&u32::try_from(kept.len()).unwrap().to_le_bytes());
    for n in kept {
        b.extend_from_slice(&u32::try_from(n.len()).unwrap().to_le_bytes());
        b.extend_from_slice(n.as_bytes());
    }
    std::fs::write(dir.join(".loopx/cache/todos.names"), b).unwrap();
    let out = run(&dir, &["doctor"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    assert!(json(&out)["findings"].to_string().contains(ids[0].as_str()));
    assert!(run(&dir, &["doctor", "--fix"]).status.success());
    assert!(run(&dir, &["doctor"]).status.success());
    assert_eq!(titles(&dir).len(), 5);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Past 256 todos the files are stat-ed on a second thread while the rows are decoded: an edit
/// in place, an edit by rename, an added and a removed file are each still seen next.
#[test]
fn hand_edits_are_seen_next_in_a_large_working_set() {
    let (dir, ids) = project("large", 300);
    let todos = dir.join(".loopx/todos");
    let mut sorted = ids.clone();
    sorted.sort();
    let title = |id: &str| format!("todo {}", ids.iter().position(|x| x == id).unwrap());
    // In place, the size and mtime kept, in the last chunk of 64.
    let a = todo_path(&dir, &sorted[290]);
    let (before, old) = (std::fs::read_to_string(&a).unwrap(), mtime_of(&a));
    let t = title(&sorted[290]);
    let edited = before.replace(&format!("\"{t}\""), &format!("\"{}\"", "Q".repeat(t.len())));
    assert_eq!(edited.len(), before.len());
    std::fs::write(&a, &edited).unwrap();
    put_mtime(&a, old);
    // By rename, the size, the file's and the directory's mtimes kept, in a middle chunk.
    let b = todo_path(&dir, &sorted[150]);
    let (before, old, old_dir) = (
        std::fs::read_to_string(&b).unwrap(),
        mtime_of(&b),
        mtime_of(&todos),
    );
    let t = title(&sorted[150]);
    let edited = before.replace(&format!("\"{t}\""), &format!("\"{}\"", "R".repeat(t.len())));
    let tmp = todos.join(".edit.tmp");
    std::fs::write(&tmp, &edited).unwrap();
    put_mtime(&tmp, old);
    std::fs::rename(&tmp, &b).unwrap();
    put_mtime(&todos, old_dir);
    let now = titles(&dir);
    assert_eq!(now.len(), 300);
    assert!(now.iter().any(|t| t.starts_with("QQQ")), "in place");
    assert!(now.iter().any(|t| t.starts_with("RRR")), "by rename");
    warm(&dir);
    std::fs::remove_file(todo_path(&dir, &sorted[10])).unwrap();
    let text = std::fs::read_to_string(todo_path(&dir, &sorted[0])).unwrap();
    let added = text
        .replace(&sorted[0], "t-zzzzzz")
        .replace(&format!("\"{}\"", title(&sorted[0])), "\"by hand\"");
    std::fs::write(todo_path(&dir, "t-zzzzzz"), added).unwrap();
    let now = titles(&dir);
    assert_eq!(now.len(), 300);
    assert!(now.contains(&"by hand".to_string()));
    assert!(!now.contains(&title(&sorted[10])));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A load of 256 todos or more starts a thread to stat them; when the system gives none (a
/// container's pids limit, here a stack too large to map) the load must still work.
#[test]
fn a_large_load_without_a_second_thread_still_works() {
    let (dir, _) = project("nothread", 260);
    let out = Command::new(env!("CARGO_BIN_EXE_loopx"))
        .arg("--dir")
        .arg(&dir)
        .args(["--agent", "a", "--json", "status"])
        .env("RUST_MIN_STACK", "1000000000000000")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
