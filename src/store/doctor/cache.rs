//! The todo cache: every row whose file still has the key it was cached under must say what the
//! file says (a row is used without reading the file, so a forged one would be invisible).

use std::os::unix::fs::MetadataExt as _;

use super::Finding;
use crate::kernel::Todo;
use crate::store::cache::{Cache, Key};
use crate::store::fs::FileStore;
use crate::store::parse;

/// Every row checked against its file.
pub(super) fn check(store: &FileStore, out: &mut Vec<Finding>) {
    let cache = Cache::read(&store.path("cache/todos.json"));
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
                ".loopx/cache/todos.json",
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
