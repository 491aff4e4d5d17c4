//! What a run's driver tells operators as its run changes state: the
//! `weft_runs_started_total` / `weft_runs_finished_total` counters (through
//! the `metrics` facade, only when a recorder is installed), and one
//! `tracing` event when the run ends (target `weft::run`, with the run's
//! id, template, state, creation time, stored `traceparent` and trace id), from which
//! the runtime's telemetry builds the run's span. The engine itself knows
//! no exporter.

use std::sync::Arc;

use crate::state::RunState;
use crate::store::RunRecord;
use crate::trace::RUN_TARGET;

use super::Driver;

/// What a driver keeps of its run to tell about it: its template, its
/// creation time and the `traceparent` stored with it.
pub(super) struct RunInfo {
    pub template: Arc<str>,
    pub version: Option<u32>,
    pub created_at: i64,
    pub trace: Option<Arc<str>>,
}

impl RunInfo {
    pub fn of(rec: &RunRecord) -> RunInfo {
        RunInfo {
            template: rec.template.as_str().into(),
            version: rec.version,
            created_at: rec.created_at,
            trace: rec.traceparent.as_deref().map(Into::into),
        }
    }
}

impl Driver {
    /// The run went from `from` to `to` (decided; committed with the batch).
    pub(super) fn observe_run(&self, from: RunState, to: RunState) {
        if crate::trace::metrics_on() {
            if from == RunState::Submitted && to == RunState::Working {
                metrics::counter!("weft_runs_started_total", "template" => self.info.template.to_string()).increment(1);
            }
            if to.is_terminal() {
                metrics::counter!(
                    "weft_runs_finished_total",
                    "template" => self.info.template.to_string(),
                    "state" => to.as_str(),
                )
                .increment(1);
            }
        }
        if to.is_terminal() {
            tracing::info!(
                target: RUN_TARGET,
                run_id = %self.id,
                template = %self.info.template,
                state = to.as_str(),
                created_at = self.info.created_at,
                ended_at = self.now(),
                traceparent = self.info.trace.as_deref(),
                trace_id = %crate::trace::RunTrace::of(&self.id, self.info.trace.as_deref()).trace_id_hex(),
                "run ended"
            );
        }
    }
}
