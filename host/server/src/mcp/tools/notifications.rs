//! `notification_resend`: a failed notification (a definition's `notify`)
//! goes out again from its first try, with the same id. Where each of a
//! run's notifications stands shows in run_get's `notifications`.

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use weft_runtime::usecase::{NotificationView, ResendRefused};

use crate::WeftServer;
use crate::mcp::errors::ToolError;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ResendParams {
    /// Its id (dlv_...).
    pub id: String,
}

#[tool_router(router = notification_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = "Send a failed notification (run_get's `notifications`) again from its first try, same id.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    async fn notification_resend(
        &self,
        Parameters(p): Parameters<ResendParams>,
    ) -> Result<Json<NotificationView>, ToolError> {
        match self.core.for_mcp.resend(&p.id).await {
            Ok(v) => Ok(Json(v)),
            Err(ResendRefused::NotFound(id)) => Err(ToolError::new(format!("no notification `{id}`"))
                .fix("run_get shows a run's notifications with their ids")),
            Err(e @ ResendRefused::NotFailed { .. }) => {
                Err(ToolError::new(e.to_string())
                    .fix("nothing to do: a pending one is still being tried, a delivered one arrived"))
            }
            Err(e @ ResendRefused::NeverSent { .. }) => Err(ToolError::new(e.to_string()).fix(
                "fix the refs of the definition's `notify` (write `@run.labels.KEY?` where a label may be missing) for later runs",
            )),
            Err(ResendRefused::Failed(e)) => Err(ToolError::internal(e)),
        }
    }
}
