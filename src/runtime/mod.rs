//! The runtime: the primitives loopx runs with (git, processes, worktrees, hooks).

pub mod git;
pub mod hook_serve;
pub mod hooks;
pub mod pairing;
pub mod process;
pub mod program;
pub mod turn_id;
pub mod watch;
pub mod worktree;
pub mod worktree_fs;
pub mod worktree_retire;
pub mod worktree_scan;
