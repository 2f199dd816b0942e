//! Whether HEAD moved past a done todo's check: the one place a face reads the project's HEAD.

use crate::store::Store;

/// The commit the project's work tree is at; `None` for a database or outside git.
pub fn head<S: Store + ?Sized>(store: &S) -> Option<String> {
    let root = store.local_root()?;
    crate::runtime::git::head(root).ok().flatten()
}
