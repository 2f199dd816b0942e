//! loopx: durable, auditable state for long-running AI agents, kept in `.loopx/`.
//!
//! Three layers, one direction of dependency: [`kernel`] (model and pure rules),
//! [`store`] (the file store behind a trait), and the faces ([`cli`], [`board`]); [`runtime`]
//! runs commands for the faces (a turn, checks, hooks).

pub mod board;
pub mod cli;
pub mod kernel;
pub mod mcp;
pub mod runtime;
pub mod store;
pub mod text;
