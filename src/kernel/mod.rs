//! The kernel: the model and the rules, as pure functions of a snapshot and a clock.

pub mod agents;
pub mod alert;
pub mod authority;
pub mod blocker;
pub mod breaker;
pub mod device;
pub mod error;
pub mod gate_action;
pub mod id;
pub mod limits;
pub mod model;
pub mod monitor;
pub mod ops;
pub mod proof;
pub mod quota;
pub mod readiness;
pub mod reserve;
pub mod roster;
pub mod seal;
pub mod should_run;
pub mod time;

pub use action::Action;
pub use error::{Code, Error, Result};
pub use model::*;
pub use model::{action, snapshot};
pub use time::{Dur, Ts};
