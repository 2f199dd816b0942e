//! The runtime: what loopx runs itself (a bounded turn, a heartbeat of turns, checks, hooks).

pub mod git;
pub mod heartbeat;
pub mod hook_serve;
pub mod hooks;
pub mod monitor;
pub mod process;
pub mod progress;
pub mod proof;
pub mod turn;
pub mod turn_id;
pub mod turn_store;
pub mod watch;
pub mod worktree;
pub mod worktree_fs;
pub mod worktree_retire;
pub mod worktree_scan;
