//! What a waiting MCP call ends with ([`Outcome`]: the run, or a question
//! for the client) and whom it tells how the run moves ([`ProgressTo`]:
//! the use-case layer's [`Progress`] over an MCP progress token). A leaf
//! shared by `run_start`, the `wf_<name>` tools and elicitation.

use rmcp::RoleServer;
use rmcp::model::{InputRequiredResult, ProgressToken};
use rmcp::service::{Peer, RequestContext};
use weft_runtime::usecase::{Progress, ProgressReport};

use crate::mcp::views::RunStartOut;

/// The longest a call waits for a run.
pub const MAX_WAIT_MS: u64 = 300_000;

/// What a waiting call ends with.
pub enum Outcome {
    /// The run as it is: finished, waiting for input nobody gave here, or
    /// still working when the wait ran out.
    Run(RunStartOut),
    /// 2026-07-28: ask the client, which retries the call with the answer.
    Ask(InputRequiredResult),
}

/// Whom to tell about a waiting call's progress.
pub struct ProgressTo {
    pub token: ProgressToken,
    pub peer: Peer<RoleServer>,
}

impl ProgressTo {
    /// From a request's `_meta.progressToken`, if the caller sent one.
    pub fn of(ctx: &RequestContext<RoleServer>) -> Option<Self> {
        ctx.meta.get_progress_token().map(|token| ProgressTo { token, peer: ctx.peer.clone() })
    }
}

impl Progress for ProgressTo {
    /// A `notifications/progress`: steps finished of all, the line, and the
    /// last status update of a step (a guest's `progress` with its data)
    /// in `_meta["weft/update"]`.
    fn report(&self, r: ProgressReport) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let mut param = rmcp::model::ProgressNotificationParam::new(self.token.clone(), r.progress)
                .with_total(r.total as f64)
                .with_message(r.message);
            if let Some(u) = r.update {
                let mut meta = rmcp::model::NotificationMetaObject::default();
                meta.insert("weft/update".into(), u);
                param.meta = Some(meta);
            }
            // A client that went away misses progress, nothing else.
            let _ = self.peer.notify_progress(param).await;
        })
    }
}
