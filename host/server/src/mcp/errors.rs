//! Errors an LLM can act on: [`ToolError`] becomes an `isError` tool result
//! whose text says what was wrong, where (a JSON path into the named
//! argument), and how to fix it. Used by every tool; nothing is stored when
//! a tool answers with one.

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use weft_model::Problem;

/// One problem of a definition or an input.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ProblemOut {
    /// The tool argument the problem is in (`definition` or `input`).
    pub argument: String,
    /// JSON Pointer into that argument, e.g. `/steps/1/code` (empty: the
    /// argument as a whole).
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl ProblemOut {
    /// `p`, located in the tool argument `argument`.
    pub fn from_problem(argument: &str, p: &Problem) -> Self {
        ProblemOut { argument: argument.into(), path: p.path.clone(), message: p.message.clone(), hint: p.hint.clone() }
    }

    /// Every problem of `ps`, located in `argument`.
    pub fn all(argument: &str, ps: &[Problem]) -> Vec<Self> {
        ps.iter().map(|p| Self::from_problem(argument, p)).collect()
    }
}

/// A refused tool call: bad input the caller can fix, or a failure on our
/// side (then `message` says so).
#[derive(Debug, Clone)]
pub struct ToolError {
    /// What went wrong, one sentence.
    pub message: String,
    /// Where, when the input has located problems.
    pub problems: Vec<ProblemOut>,
    /// How to fix it.
    pub fix: Option<String>,
}

impl ToolError {
    /// An error with a message only.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError { message: message.into(), problems: vec![], fix: None }
    }

    /// An error with located problems.
    pub fn with_problems(message: impl Into<String>, problems: Vec<ProblemOut>) -> Self {
        ToolError { message: message.into(), problems, fix: None }
    }

    /// Adds how to fix it.
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    /// A failure of the server itself (the store, a worker thread).
    pub fn internal(e: impl std::fmt::Display) -> Self {
        ToolError::new(format!("internal error: {e}"))
            .fix("this is not caused by the arguments; retry, and report it if it persists")
    }

    /// The text shown to the caller.
    pub fn render(&self) -> String {
        let mut out = self.message.clone();
        for p in &self.problems {
            let at = if p.path.is_empty() { p.argument.clone() } else { format!("{}{}", p.argument, p.path) };
            out.push_str(&format!("\n- {at}: {}", p.message));
            if let Some(h) = &p.hint {
                out.push_str(&format!(" (hint: {h})"));
            }
        }
        if let Some(f) = &self.fix {
            out.push_str(&format!("\nHow to fix: {f}"));
        }
        out
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        let mut result = CallToolResult::error(vec![ContentBlock::text(self.render())]);
        if !self.problems.is_empty() {
            // The located problems in machine-readable form too (an error
            // result is not checked against the tool's output schema).
            result.structured_content = Some(serde_json::json!({
                "error": self.message, "problems": self.problems, "fix": self.fix,
            }));
        }
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_each_path_and_the_fix() {
        let e = ToolError::with_problems(
            "the definition is invalid",
            vec![ProblemOut {
                argument: "definition".into(),
                path: "/steps/0/code".into(),
                message: "unknown plugin `nope`".into(),
                hint: Some("see plugin_list".into()),
            }],
        )
        .fix("correct the definition");
        let text = e.render();
        assert!(text.contains("definition/steps/0/code: unknown plugin `nope` (hint: see plugin_list)"), "{text}");
        assert!(text.ends_with("How to fix: correct the definition"), "{text}");
        let r = e.into_call_tool_result().unwrap();
        let CallToolResponse::Complete(r) = r else { panic!("not complete") };
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content.unwrap()["problems"][0]["path"], "/steps/0/code");
    }
}

/// Why `weft serve` cannot serve (as opposed to a tool call's
/// [`ToolError`]).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address cannot be listened on (in use, not local): the user's
    /// to fix.
    #[error("{0}")]
    Listen(String),
    /// An MCP session could not start or ended badly.
    #[error("{0}")]
    Session(String),
    /// The engine (recovery) failed.
    #[error(transparent)]
    Engine(#[from] weft_engine::EngineError),
    /// The connection failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
