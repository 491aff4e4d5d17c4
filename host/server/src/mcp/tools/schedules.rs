//! `schedule_add`, `schedule_list`, `schedule_pause`, `schedule_remove`:
//! cron schedules over MCP, with the checks `weft schedule` makes (the
//! use-case layer's, `weft_runtime::usecase::schedules`). The store's owner
//! (`weft serve` or `weft worker`) fires them.

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_runtime::usecase::{ScheduleRefused, ScheduleRequest};

use crate::WeftServer;
use crate::mcp::errors::{ProblemOut, ToolError};
use crate::schedule_view::ScheduleView;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddParams {
    /// The saved template each fire runs (its latest version then).
    pub template: String,
    /// UTC cron: `0 2 * * *` (02:00 daily), `*/10 * * * * *` (every 10 s), `@hourly`.
    pub cron: String,
    /// Each run's input, checked against the template's input_schema now.
    #[serde(default)]
    pub input: Option<Value>,
    /// Default: the template's name.
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseParams {
    pub name: String,
    /// false resumes it.
    #[serde(default = "yes")]
    pub paused: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameParams {
    pub name: String,
}

/// Every schedule.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScheduleListOut {
    pub schedules: Vec<ScheduleView>,
}

/// A schedule removed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RemovedOut {
    pub removed: String,
}

/// A refusal in MCP's terms: each problem located in its tool argument.
fn refused(e: ScheduleRefused) -> ToolError {
    match e {
        ScheduleRefused::Invalid(p) => {
            let problems: Vec<ProblemOut> =
                p.0.iter()
                    .map(|p| {
                        // `/input/qty` is argument `input`, path `/qty`.
                        let rest = p.path.strip_prefix('/').unwrap_or(&p.path);
                        let (argument, path) = match rest.split_once('/') {
                            Some((a, r)) => (a, format!("/{r}")),
                            None => (rest, String::new()),
                        };
                        ProblemOut { path, ..ProblemOut::from_problem(argument, p) }
                    })
                    .collect();
            let first = p.0.first().map(|p| p.message.clone()).unwrap_or_else(|| "refused".into());
            ToolError::with_problems(format!("the schedule was not added: {first}"), problems)
        }
        ScheduleRefused::NotFound(name) => {
            ToolError::new(format!("no schedule `{name}`")).fix("schedule_list shows the schedules")
        }
        ScheduleRefused::Failed(e) => ToolError::internal(e),
    }
}

#[tool_router(router = schedule_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = "Start a run of a saved template at every time a cron expression names (UTC). A restart never fires a time twice; after downtime it fires once, for the latest missed time.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn schedule_add(&self, Parameters(p): Parameters<AddParams>) -> Result<Json<ScheduleView>, ToolError> {
        let input = p.input.unwrap_or_else(|| Value::Object(Default::default()));
        let req = ScheduleRequest { name: p.name, template: p.template, cron: p.cron, input };
        Ok(Json(self.core.for_mcp.add_schedule(req).await.map_err(refused)?.into()))
    }

    #[tool(
        description = "Every schedule with its next and last fire and the run it last started.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn schedule_list(
        &self,
        Parameters(_): Parameters<super::recording::NoParams>,
    ) -> Result<Json<ScheduleListOut>, ToolError> {
        let all = self.core.for_mcp.schedules().await.map_err(refused)?;
        Ok(Json(ScheduleListOut { schedules: all.into_iter().map(ScheduleView::from).collect() }))
    }

    #[tool(
        description = "Pause a schedule (no fires), or resume it with paused: false (it fires at its next time; missed times are not made up).",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn schedule_pause(&self, Parameters(p): Parameters<PauseParams>) -> Result<Json<ScheduleView>, ToolError> {
        Ok(Json(self.core.for_mcp.pause_schedule(&p.name, p.paused).await.map_err(refused)?.into()))
    }

    #[tool(
        description = "Delete a schedule; the runs it started are kept.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn schedule_remove(&self, Parameters(p): Parameters<NameParams>) -> Result<Json<RemovedOut>, ToolError> {
        self.core.for_mcp.remove_schedule(&p.name).await.map_err(refused)?;
        Ok(Json(RemovedOut { removed: p.name }))
    }
}
