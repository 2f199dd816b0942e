//! The flows: each use case once, between the faces and the store and runtime.

pub mod approved;
pub mod check;
pub mod claim;
pub mod device;
pub mod heartbeat;
pub mod monitor;
pub mod owner;
pub mod progress;
pub mod runner;
pub mod stale;
pub mod turn;
pub mod update;
