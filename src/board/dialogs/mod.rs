//! The board's dialogs and overlays, one component a file: each owns its state, draws itself,
//! takes its keys and names its keymap scopes (the help); `frame.rs` is what they share and
//! `reply.rs` what a key asks of the board.

pub mod chart;
pub mod confirm;
pub mod detail;
pub mod errors;
pub mod frame;
pub mod help;
pub mod input;
pub mod pair;
pub mod picker;
pub mod reply;
pub mod roster;
