//! What reaches a wait before it waits (docs/waits.md, "Early signals and
//! events"): the race where the other side answers before the run reaches
//! its `wait` step.
//!
//! - A signal for a step of a live run that does not wait yet is checked
//!   against the wait's schema and kept in the store's inbox with the
//!   answer `queued` (and a `signal.queued` event in the run's log), up to
//!   [`EngineConfig::max_queued_signals`] per run. When the step starts
//!   waiting, it takes the oldest one (a `for_each` wait: each item its
//!   own); the others are answered `already_resolved`, and those older than
//!   [`EngineConfig::early_ttl_ms`] `not_waiting` (expired). Each queued
//!   message is settled once.
//! - An event is stored when it is emitted (its id makes emits idempotent),
//!   so a wait that starts later looks at the events of its name emitted
//!   since its run began (and within the TTL), oldest first, at most
//!   [`EngineConfig::max_early_events`], and takes the first whose `match`
//!   holds and that no step of its run took before: an event is taken once
//!   per run (each resolution records the event's id).
//!
//! Signals still queued when the run ends are answered `not_waiting`.
//!
//! Both are looked up after the commit that opens the wait, by a task that
//! hands them to the run as any signal or event is handed (so a crash
//! between the two is repaired when the run loads again: a loaded wait
//! looks again). An event emitted meanwhile finds the wait open.
//!
//! [`EngineConfig::max_queued_signals`]: super::EngineConfig::max_queued_signals
//! [`EngineConfig::early_ttl_ms`]: super::EngineConfig::early_ttl_ms
//! [`EngineConfig::max_early_events`]: super::EngineConfig::max_early_events

use std::collections::HashSet;

use serde_json::{Value, json};

use super::mail::{Queued, SignalAnswer, Via};
use super::{Engine, EngineError};
use crate::ids::{RunId, Seq};
use crate::model_glue::{Action, Definition};
use crate::outside::{InboxKind, WaitKind};
use crate::state::RunState;
use crate::store::Batch;

/// How many events of a run are read to learn which events it took.
const TAKEN_SCAN: usize = 100_000;

impl Engine {
    /// The signals queued for run `id`'s steps (only a definition with a
    /// signal wait can have any: the store is not asked for the others).
    pub(crate) async fn queued_for(&self, id: &RunId, def: &Definition) -> Result<Vec<Queued>, EngineError> {
        let signal_waits = def.steps.iter().any(|s| matches!(&s.action, Action::Wait(w) if w.event.is_none()));
        if !signal_waits {
            return Ok(vec![]);
        }
        Ok(self.sh.store.inbox_queued(id).await?.iter().filter_map(Queued::of).collect())
    }

    /// A task that hands wait `step` of `run` what came before it.
    pub(crate) fn spawn_take_early(self, run: &RunId, step: &str) {
        let (run, step) = (run.clone(), step.to_string());
        tokio::spawn(async move {
            if let Err(e) = self.take_early(&run, &step).await {
                tracing::warn!(run = %run, step, error = %e, "cannot hand a wait what came before it");
            }
        });
    }

    /// Answers the signals still queued for `run`, which ended (`state`);
    /// a failure is logged (they stay queued, and go with the run).
    pub(crate) async fn answer_queued(&self, run: &RunId, state: RunState) {
        if let Err(e) = self.drop_queued(run, state).await {
            tracing::warn!(run = %run, error = %e, "cannot answer the signals still queued for the ended run");
        }
    }

    /// Hands the wait of `step` in `run` what came before it: the signals
    /// queued for it, or the events it waits for emitted since its run
    /// began (see the module's doc).
    pub(crate) async fn take_early(&self, run: &RunId, step: &str) -> Result<(), EngineError> {
        let Some(rec) = self.sh.store.run(run).await? else { return Ok(()) };
        if rec.state.is_terminal() {
            return Ok(());
        }
        let Some(wait) = rec.waits.iter().find(|w| w.step == step) else { return Ok(()) };
        let now = self.sh.clock.now_ms();
        let ttl = i64::try_from(self.sh.config.early_ttl_ms).unwrap_or(i64::MAX);
        let since = now.saturating_sub(ttl);
        if wait.kind.is_signal() {
            for m in self.sh.store.inbox_queued(run).await? {
                let InboxKind::Signal { step: s, item, .. } = &m.kind else { continue };
                if s != step {
                    continue;
                }
                if m.at < since {
                    let answer = SignalAnswer::NotWaiting {
                        message: format!(
                            "the signal waited for step `{step}` longer than `[limits] early_ttl_ms` ({} ms) and was dropped",
                            self.sh.config.early_ttl_ms
                        ),
                    };
                    let settle = Via::Queue(m.id.clone()).answer_write(&answer);
                    self.sh.commit(Batch { writes: settle.into_iter().collect() }).await?;
                    continue;
                }
                self.signal_with(run, step, *item, m.data.clone(), Via::Queue(m.id.clone())).await?;
            }
            return Ok(());
        }
        let Some(name) = wait.kind.index_columns().1.map(str::to_string) else { return Ok(()) };
        let one = matches!(wait.kind, WaitKind::Event { .. });
        let emitted = self.sh.store.events_emitted(&name, since.max(rec.created_at), self.sh.config.max_early_events);
        let emitted = emitted.await?;
        if emitted.is_empty() {
            return Ok(());
        }
        let taken = self.events_taken(run).await?;
        for m in emitted {
            let InboxKind::Event { id, .. } = &m.kind else { continue };
            if taken.contains(id.as_str()) || !wait.takes_event(&name, &m.data) {
                continue;
            }
            if self.deliver_event(run, step, &name, &m.data, Some(id)).await? && one {
                break;
            }
        }
        Ok(())
    }

    /// Answers the signals still queued for steps of `run`, which ended
    /// (`state`) before they waited.
    pub(crate) async fn drop_queued(&self, run: &RunId, state: RunState) -> Result<(), EngineError> {
        let left = self.sh.store.inbox_queued(run).await?;
        if left.is_empty() {
            return Ok(());
        }
        let rec = self.sh.store.run(run).await?;
        let step_state = |name: &str| rec.as_ref()?.steps.iter().find(|s| s.name == name).map(|s| s.state);
        let writes = left.iter().filter_map(|m| {
            let InboxKind::Signal { step, .. } = &m.kind else { return None };
            let answer = match step_state(step) {
                // It was answered (by another signal, or ended otherwise).
                Some(s) if s.is_terminal() => SignalAnswer::AlreadyResolved { state: s },
                _ => SignalAnswer::NotWaiting {
                    message: format!(
                        "run {run} ended ({state}) before step `{step}` waited: the queued signal was not used"
                    ),
                },
            };
            Via::Queue(m.id.clone()).answer_write(&answer)
        });
        let batch = Batch { writes: writes.collect() };
        if !batch.is_empty() {
            self.sh.commit(batch).await?;
        }
        Ok(())
    }

    /// The ids of the events steps of `run` took (as their events record).
    async fn events_taken(&self, run: &RunId) -> Result<HashSet<String>, EngineError> {
        let events = self.sh.store.events_after(run, Seq(0), TAKEN_SCAN).await?;
        let by_event = |d: &Value| d.get("by") == Some(&json!("event"));
        Ok(events
            .into_iter()
            .filter(|e| e.kind == "step.succeeded" || e.kind == "item.succeeded")
            .filter(|e| by_event(&e.data))
            .filter_map(|e| e.data.get("event_id").and_then(Value::as_str).map(str::to_string))
            .collect())
    }
}
