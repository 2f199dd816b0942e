//! loopx: durable, auditable state for long-running AI agents, kept in `.loopx/`.
//!
//! Layers, one direction of dependency: [`kernel`] (model and pure rules), [`store`] (files or
//! PostgreSQL behind a trait), [`runtime`] (git, processes, hooks), [`flows`] (each use case
//! once), and the faces ([`cli`], [`board`], [`mcp`]), which parse, call a flow, and show.

pub mod board;
pub mod cli;
pub mod flows;
pub mod kernel;
pub mod mcp;
pub mod qr;
pub mod runtime;
pub mod store;
pub mod text;
pub mod web;
