//! `run_value`: one stored value of a run — its input or output, or a
//! step's — page by page, at a JSON Pointer. `run_get` keeps its answer
//! small by trimming large values (`weft_engine::bounded`); each trimmed
//! value names the `run_value` call that reads it.

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::bounded::{self, Page, ReadWith};
use weft_engine::view::StepView;

use crate::WeftServer;
use crate::mcp::errors::ToolError;

/// Which of a value's sides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Of {
    #[default]
    Output,
    Input,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValueParams {
    pub run_id: String,
    /// A step (absent: the run's own input or output).
    #[serde(default)]
    pub step: Option<String>,
    /// `output` (default) or `input` (a step's: its latest attempt's, refs resolved).
    #[serde(default)]
    pub of: Of,
    /// One item of a for_each step: its input, or its output.
    #[serde(default)]
    pub item: Option<usize>,
    /// A JSON Pointer into the value (`/3/name`).
    #[serde(default)]
    pub pointer: Option<String>,
    /// The first item (entry, character) of the page.
    #[serde(default)]
    pub offset: Option<usize>,
    /// At most this many items (the page also stops at 32 KB).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// One page of a run's value.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ValueOut {
    pub run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    pub of: Of,
    #[serde(flatten)]
    pub page: Page,
}

/// The input or output of step `s` of `rec` (of one `item` of a for_each
/// step, when given).
fn step_value(
    rec: &weft_engine::RunRecord,
    s: &weft_engine::store::StepRecord,
    of: Of,
    item: Option<usize>,
) -> Result<Option<Value>, ToolError> {
    let for_each = rec.attempts.iter().any(|a| a.step == s.name && a.item.is_some());
    match (of, item) {
        (Of::Input, None) if for_each => {
            Err(ToolError::new(format!("step `{}` is a for_each step: each item had its own input", s.name))
                .fix("pass `item` (0 for the first) to read one item's input"))
        }
        (Of::Input, Some(k)) => {
            let latest = rec
                .attempts
                .iter()
                .filter(|a| a.step == s.name && a.item.map(|i| i.0 as usize) == Some(k))
                .max_by_key(|a| a.attempt);
            match latest {
                Some(a) => Ok(a.input.clone()),
                None => Err(ToolError::new(format!("step `{}` ran no item {k}", s.name))
                    .fix("items count from 0; run_get shows how many the step has")),
            }
        }
        (Of::Input, None) => Ok(StepView::of(rec, s).input),
        (Of::Output, None) => Ok(s.output.clone()),
        (Of::Output, Some(k)) => match &s.output {
            Some(Value::Array(a)) if for_each => a.get(k).cloned().map(Some).ok_or_else(|| {
                ToolError::new(format!("step `{}` has {} items; no item {k}", s.name, a.len()))
                    .fix("items count from 0")
            }),
            _ => Err(ToolError::new(format!("step `{}` has no items (it is not a for_each step)", s.name))
                .fix("leave `item` out")),
        },
    }
}

#[tool_router(router = value_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = "Read a run's input or output, or a step's, page by page (at most 32 KB each; next_offset continues), optionally at a JSON Pointer into it: what run_get shows trimmed.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_value(&self, Parameters(p): Parameters<ValueParams>) -> Result<Json<ValueOut>, ToolError> {
        let rec = self.core.load_run(&p.run_id).await?;
        let value: Option<Value> = match &p.step {
            None => match p.of {
                Of::Input => Some(rec.input.clone()),
                Of::Output => rec.output.clone(),
            },
            Some(name) => {
                let s = rec.steps.iter().find(|s| &s.name == name).ok_or_else(|| {
                    let names: Vec<&str> = rec.steps.iter().map(|s| s.name.as_str()).collect();
                    ToolError::new(format!("run {} has no step `{name}`", rec.id))
                        .fix(format!("its steps: {}", names.join(", ")))
                })?;
                step_value(&rec, s, p.of, p.item)?
            }
        };
        let Some(value) = value else {
            let of = match p.of {
                Of::Input => "input",
                Of::Output => "output",
            };
            let why = match (&p.step, rec.state.is_terminal()) {
                (None, true) => format!("run {} ended with no {of}", rec.id),
                (None, false) => format!("run {} has no {of} yet (it is {})", rec.id, rec.state),
                (Some(s), _) => format!("step `{s}` has no stored {of} (it has not run, was skipped, or takes none)"),
            };
            return Err(ToolError::new(why).fix("run_get shows the run's and its steps' states"));
        };
        let pointer = p.pointer.unwrap_or_default();
        let (run_id, step, of, item) = (rec.id.to_string(), p.step.clone(), p.of, p.item);
        let read_with = |inner: String| {
            let mut a = serde_json::json!({"run_id": run_id, "pointer": inner});
            if let Some(s) = &step {
                a["step"] = Value::String(s.clone());
            }
            if let Some(k) = item {
                a["item"] = Value::from(k);
            }
            if of == Of::Input {
                a["of"] = Value::String("input".into());
            }
            ReadWith { tool: "run_value".into(), arguments: a }
        };
        let page = bounded::page(&value, &pointer, p.offset.unwrap_or(0), p.limit, read_with)
            .map_err(|e| ToolError::new(e.to_string()).fix("leave `pointer` out to read the value from its top"))?;
        Ok(Json(ValueOut { run_id: rec.id.to_string(), step: p.step, of: p.of, page }))
    }
}
