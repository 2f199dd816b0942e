//! The flows: each use case once, between the faces and the store and runtime.

pub mod owner;
pub mod stale;
