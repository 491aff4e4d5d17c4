//! What a waiting MCP call ends with ([`Outcome`]: the run, or a question
//! for the client) and whom it tells how the run moves ([`ProgressTo`]:
//! the use-case layer's [`Progress`] over an MCP progress token). A leaf
//! shared by `run_start`, the `wf_<name>` tools and elicitation.

use rmcp::RoleServer;
use rmcp::model::{InputRequiredResult, ProgressToken};
use rmcp::service::{Peer, RequestContext};
use weft_runtime::usecase::Progress;

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
    fn report(&self, done: usize, total: usize, message: String) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let param = rmcp::model::ProgressNotificationParam::new(self.token.clone(), done as f64)
                .with_total(total as f64)
                .with_message(message);
            // A client that went away misses progress, nothing else.
            let _ = self.peer.notify_progress(param).await;
        })
    }
}
