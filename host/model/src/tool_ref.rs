//! [`ToolRef`]: an MCP tool named by its configured server and its name,
//! as a `tool` step and a `notify` target name it (its own file: both
//! `definition` and `notify` use it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounds::MAX_NAME_CHARS;

/// A remote A2A agent an agent step sends its input to: an agent the
/// operator configured in weft.toml (`[agents.NAME]`), and optionally the
/// skill it is asked for (sent as the message's `metadata.skill`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRef {
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub skill: Option<String>,
}

/// An MCP tool.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRef {
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub server: String,
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub name: String,
}
