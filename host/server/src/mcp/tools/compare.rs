//! `run_compare`: a run beside another, step by step — where a replay's
//! inputs and outputs departed from its recording (the default), or from
//! any other run of the same template. The comparison itself is the
//! engine's (`weft_engine::compare`), the one `weft runs diff` and `GET
//! /api/v1/runs/{id}/compare` show.

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use weft_engine::compare::{Comparison, counterpart};

use crate::WeftServer;
use crate::mcp::errors::ToolError;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompareParams {
    /// The run to look at (r_..., e.g. a replay of a recorded template).
    pub run: String,
    /// The run to compare it with. Default: the recording of `run`'s
    /// template, else the run of that template just before it.
    #[serde(default)]
    pub with: Option<String>,
}

#[tool_router(router = compare_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = "Compare two runs step by step: each step's state, resolved input and output in both runs, where they differ (JSON Pointers, both values), and the first step where they depart. Without `with`, `run` is compared with its template's recording: a step whose input stayed the same although the run's input changed was recorded with a literal where a ref was meant.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_compare(&self, Parameters(p): Parameters<CompareParams>) -> Result<Json<Comparison>, ToolError> {
        let run = self.core.load_run(&p.run).await?;
        let with = match p.with {
            Some(w) => self.core.load_run(&w).await?,
            None => {
                let other = counterpart(self.core.store.as_ref(), &run).await.map_err(ToolError::internal)?;
                let other = other.ok_or_else(|| {
                    ToolError::new(format!(
                        "run {} has no recording or other run of template `{}` to compare with",
                        run.id, run.template
                    ))
                    .fix("name the other run as `with` (run_list shows the runs)")
                })?;
                self.core.load_run(other.as_str()).await?
            }
        };
        Ok(Json(Comparison::of(&run, &with)))
    }
}
