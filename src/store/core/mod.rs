//! What every store shares: the journal's chain, the owner's key and signatures, gate proofs,
//! the roster's scan, the state format, safe file access, and the
//! commit protocol written once (`prepare`).

pub mod atomic;
pub mod chain;
pub mod crash;
pub mod decisions;
pub mod doctor;
pub mod owner;
pub mod parse;
pub mod prepare;
pub mod seal;
pub mod seen;

pub use prepare::{Before, Prepared, prepare};
