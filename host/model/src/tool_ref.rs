//! [`ToolRef`]: an MCP tool named by its configured server and its name,
//! as a `tool` step and a `notify` target name it (its own file: both
//! `definition` and `notify` use it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounds::MAX_NAME_CHARS;

/// An MCP tool.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRef {
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub server: String,
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub name: String,
}
