//! The file store: `.loopx/` as TOML files a person can read and edit, one lock, atomic writes,
//! the journal file, the todo cache, doctor, and the `Store` trait on all of it.

mod as_store;
pub mod cache;
pub(crate) mod commit;
pub mod doctor;
pub mod evidence;
pub mod follow;
pub mod fs;
pub mod journal;
pub(crate) mod load;
pub mod lock;
pub mod logs;
pub mod poll;
pub mod recover;
pub(crate) mod sealing;
pub mod seen;
pub mod tx;
pub mod view;
