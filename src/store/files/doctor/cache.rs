//! The todo cache: every row whose file still has the key it was cached under must say what the
//! file says (a row is used without reading the file, so a forged one would be invisible).

use std::os::unix::fs::MetadataExt as _;

use crate::kernel::Todo;
use crate::store::cache::{Cache, Key, listing};
use crate::store::core::doctor::Finding;
use crate::store::fs::FileStore;
use crate::store::parse;

/// Every row checked against its file, and the kept listing against the directory.
pub(super) fn check(store: &FileStore, out: &mut Vec<Finding>) {
    check_listing(store, out);
    let cache = Cache::read(&store.path(crate::store::files::load::ROWS));
    for (stem, key, row) in cache.rows() {
        let path = store.dir().join("todos").join(format!("{stem}.toml"));
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if Key::of(&meta) != key || !meta.file_type().is_file() || meta.nlink() == 0 {
            continue;
        }
        let file = parse::read_named::<Todo>(&path, stem).ok().flatten();
        if file.as_ref() != Some(&row) {
            let mut f = Finding::error(
                ".loopx/cache/todos.bin",
                None,
                format!(
                    "its row for {stem} does not say what todos/{stem}.toml says, yet would be used for it (edited by hand?); `loopx doctor --fix` deletes the cache"
                ),
            );
            f.fixable = true;
            out.push(f);
        }
    }
}

/// The kept listing of `todos/`, when it would be used, must name what the directory holds.
fn check_listing(store: &FileStore, out: &mut Vec<Finding>) {
    let dir = store.dir().join("todos");
    let kept = store.path(crate::store::files::load::NAMES);
    let Ok(Some((names, real))) = listing::kept_but_wrong(&dir, &kept) else {
        return;
    };
    let missing: Vec<&str> = real
        .iter()
        .filter(|n| !names.contains(n))
        .map(String::as_str)
        .collect();
    let mut f = Finding::error(
        ".loopx/cache/todos.names",
        None,
        format!(
            "it does not list what todos/ holds ({} there, {} listed; not listed: {}), yet would be used for it; `loopx doctor --fix` deletes the cache",
            real.len(),
            names.len(),
            missing.join(", ")
        ),
    );
    f.fixable = true;
    out.push(f);
}
