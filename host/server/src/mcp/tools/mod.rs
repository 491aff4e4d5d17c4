//! The built-in MCP tools, one file per theme; each file is an rmcp
//! `#[tool_router]` over [`crate::WeftServer`], combined in `server.rs`.

pub mod compare;
pub mod notifications;
pub mod recording;
pub mod retry;
pub mod runs;
pub mod schedules;
pub mod templates;
pub mod values;
pub mod waits;
