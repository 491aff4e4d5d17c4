//! The A2A protocol, version 1.0, as it travels: the JSON form of the
//! protocol's messages (proto3's JSON mapping, camelCase fields, enums as
//! `TASK_STATE_…` names, what `a2a-sdk` 1.3 and `@a2a-js/sdk` 1.3 send) and
//! its error codes. weft's A2A endpoint (`weft-server`) answers with these
//! types and its agent steps (`weft-runtime`) send them; neither builds A2A
//! JSON by hand.
//!
//! Why our own types: the official SDKs are Python, JavaScript, Go, Java
//! and .NET; the Rust crates that exist wrap generated protobuf code (prost
//! and pbjson) and are younger than this protocol version. These are plain
//! serde structs of the fields weft reads or writes, lenient on what they
//! read (unknown fields are ignored, as the SDKs' `parse_lenient` does).
//!
//! | module | owns |
//! |---|---|
//! | [`wire`] | tasks, messages, parts, artifacts, stream events, agent cards, requests and responses |
//! | [`errors`] | [`errors::A2aError`]: the protocol's error codes (JSON-RPC) and reasons (HTTP+JSON) |

pub mod errors;
pub mod wire;

/// The protocol version weft speaks (the `A2A-Version` header, the card's
/// `protocolVersion`).
pub const PROTOCOL_VERSION: &str = "1.0";
/// The path of an agent's card under its base URL.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
