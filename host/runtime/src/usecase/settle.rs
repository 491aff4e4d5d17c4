//! The one way a front end waits for a run: MCP's `run_start`/`wf_<name>`
//! and tasks, and the HTTP API's `POST /api/v1/runs` with `wait_ms`.
//!
//! A run is *settled* when it ended or waits for input (a signal, an
//! authorization). Its end comes from its driver ([`Engine::wait`]), with
//! the record the driver committed, without a read of the store; a pushed
//! change of its state into one that waits for input ([`RunChanges`]) is read
//! to answer with its waits. With progress to report (an MCP client's
//! progress token), the changes of the run are reported once the wait has
//! lasted [`PROGRESS_AFTER`]: a run that ends sooner is answered at once,
//! as one plain result with no stream of notifications before it (rmcp's
//! client asks for progress on every request). A slow timer
//! ([`FALLBACK_POLL`]) is only a fallback.
//!
//! A caller that started the run passes what it watched from before the
//! run existed ([`Fresh`]): then nothing is read before the first change,
//! and a served `wf_<name>` call costs no read of the store at all when
//! the run ends without waiting for input.
//!
//! [`Engine::wait`]: weft_engine::Engine::wait

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use weft_engine::store::{Batch, Write};
use weft_engine::{Change, EngineError, RunChanges, RunEnd, RunId, RunRecord, RunState, StepState};

use super::UseCases;

/// How often a waiting call reads the run when no change was pushed (the
/// engine pushes every committed change of the runs this process drives;
/// this only bounds how late a missed one is seen).
pub const FALLBACK_POLL: Duration = Duration::from_secs(1);

/// Whom a waiting call tells how a run moves (an MCP client's progress
/// token).
pub trait Progress: Send + Sync {
    fn report(&self, report: ProgressReport) -> BoxFuture<'_, ()>;
}

/// How a run moved: `done` of `total` steps finished, a line saying
/// which run, and the last status update a step sent (a guest's
/// `progress` with its data, a tool's progress), as its `progress` event
/// has it plus the step: `{"step", "item"?, "message", "data"?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressReport {
    /// Steps finished, increasing by fractions between them as status
    /// updates come (so each report's figure is larger than the last).
    pub progress: f64,
    pub total: usize,
    pub message: String,
    pub update: Option<serde_json::Value>,
}

/// How long a wait stays quiet before it reports progress: the limit of
/// an answer that feels immediate. Most served runs end well within it.
pub const PROGRESS_AFTER: Duration = Duration::from_millis(100);

/// Whether a waiting caller can stop waiting for a run in state `s`.
pub fn settles(s: RunState) -> bool {
    s.is_terminal() || matches!(s, RunState::InputRequired | RunState::AuthRequired)
}

fn settled(rec: &RunRecord) -> bool {
    settles(rec.state)
}

/// What the starter of a run watched from before the run existed.
pub struct Fresh {
    /// Followed before its driver started.
    pub changes: RunChanges,
    /// Its end ([`weft_engine::Engine::submit_watched`]).
    pub end: RunEnd,
}

impl UseCases {
    /// Waits up to `wait` for run `id` to settle and returns it as it is
    /// then (or when `canceled` fires).
    pub async fn settle(
        &self,
        id: &RunId,
        wait: Duration,
        fresh: Option<Fresh>,
        progress: Option<&dyn Progress>,
        canceled: &CancellationToken,
    ) -> Result<RunRecord, EngineError> {
        let deadline = Instant::now() + wait;
        let mut steps = Steps::default();
        let mut reported = None;
        // Progress is reported from PROGRESS_AFTER on: until then it waits
        // here, and the run's end answers at once.
        let (mut quiet, mut progress) = (progress, None);
        let speak = tokio::time::sleep(PROGRESS_AFTER);
        tokio::pin!(speak);
        // Followed before the first read: no change falls in between.
        let (mut changes, mut end) = match fresh {
            Some(f) => (f.changes, f.end),
            None => {
                let changes = self.engine.follow(id);
                let rec = self.read(id).await?;
                // Reported when the wait speaks (PROGRESS_AFTER), if it lasts.
                steps = Steps::of(&rec);
                if settled(&rec) || Instant::now() >= deadline {
                    return Ok(rec);
                }
                (changes, RunEnd::of(id.clone()))
            }
        };
        let ended = self.engine.ended(&mut end);
        tokio::pin!(ended);
        let look = tokio::time::sleep_until(deadline.min(Instant::now() + FALLBACK_POLL));
        tokio::pin!(look);
        loop {
            tokio::select! {
                // With progress to report, the run's last changes are
                // heard (and reported) before its end.
                r = &mut ended, if progress.is_none() => return r,
                change = changes.next() => match change {
                    // The engine is gone: nothing more will be pushed.
                    None => return self.read(id).await,
                    Some(Change::Missed) => {
                        let rec = self.read(id).await?;
                        steps = Steps::of(&rec);
                        report(&progress, &steps, rec.state, &mut reported).await;
                        if settled(&rec) {
                            return Ok(rec);
                        }
                    }
                    Some(Change::Committed(batch)) => {
                        let Some(state) = steps.apply(id, &batch) else { continue };
                        report(&progress, &steps, state, &mut reported).await;
                        if state.is_terminal() {
                            return (&mut ended).await;
                        }
                        if settles(state) {
                            // Its waits are in the store.
                            return self.read(id).await;
                        }
                    }
                },
                _ = &mut speak, if quiet.is_some() => {
                    progress = quiet.take();
                    if let Some(state) = steps.state {
                        report(&progress, &steps, state, &mut reported).await;
                    }
                }
                _ = &mut look => {
                    let rec = self.read(id).await?;
                    if settled(&rec) || Instant::now() >= deadline {
                        return Ok(rec);
                    }
                    look.as_mut().reset(deadline.min(Instant::now() + FALLBACK_POLL));
                }
                _ = canceled.cancelled() => return self.read(id).await,
            }
        }
    }

    /// A run [`UseCases::start`] just started, once it settled or `wait`
    /// passed (no wait: as it is now).
    pub async fn settle_started(
        &self,
        started: super::Started,
        wait: Duration,
        progress: Option<&dyn Progress>,
        canceled: &CancellationToken,
    ) -> Result<RunRecord, EngineError> {
        if wait.is_zero() {
            return self.read(&started.id).await;
        }
        self.settle(&started.id, wait, started.fresh, progress, canceled).await
    }

    async fn read(&self, id: &RunId) -> Result<RunRecord, EngineError> {
        self.store.run(id).await?.ok_or_else(|| EngineError::NotFound(id.clone()))
    }
}

/// What a progress report says of a run's steps, kept up to date from the
/// pushed changes (no read of the store per change).
#[derive(Default)]
struct Steps {
    /// Each step in plan order: its state and whether it has started.
    all: Vec<(String, StepState, bool)>,
    state: Option<RunState>,
    /// The last status update of a step, and how many came.
    update: Option<serde_json::Value>,
    updates: usize,
}

impl Steps {
    fn of(rec: &RunRecord) -> Steps {
        let all = rec.steps.iter().map(|s| (s.name.clone(), s.state, s.started_at.is_some())).collect();
        Steps { all, state: Some(rec.state), update: None, updates: 0 }
    }

    /// Applies the writes of `batch` to run `id`: its state when they
    /// touched the run, `None` when they did not.
    fn apply(&mut self, id: &RunId, batch: &Batch) -> Option<RunState> {
        let mut touched = false;
        for w in &batch.writes {
            match w {
                Write::CreateRun { run, steps } if &run.id == id => {
                    self.all = steps.iter().map(|s| (s.clone(), StepState::Pending, false)).collect();
                    self.state = Some(RunState::Submitted);
                }
                Write::RunState { run, to, .. } if run == id => self.state = Some(*to),
                Write::StepState { run, step, to, .. } if run == id => {
                    if let Some(s) = self.all.iter_mut().find(|s| &s.0 == step) {
                        s.1 = *to;
                        s.2 |= *to == StepState::Running;
                    }
                }
                Write::Event(e) if &e.run == id && e.kind == "progress" => {
                    let mut u = e.data.clone();
                    if let (serde_json::Value::Object(m), Some(step)) = (&mut u, &e.step) {
                        m.insert("step".into(), step.as_str().into());
                        if let Some(k) = e.item {
                            m.insert("item".into(), serde_json::json!(k));
                        }
                    }
                    self.update = Some(u);
                    self.updates += 1;
                }
                w if w.run_id() == Some(id) => {}
                _ => continue,
            }
            touched = true;
        }
        if touched { self.state } else { None }
    }
}

/// What was last reported: steps finished, and status updates seen.
#[derive(Default, Clone, Copy, PartialEq)]
struct Reported {
    done: usize,
    updates: usize,
    /// Updates since `done` last moved (the fraction of the figure).
    since_done: usize,
}

/// Sends progress (finished steps of all steps, and the last status
/// update) when it moved.
async fn report(to: &Option<&dyn Progress>, steps: &Steps, state: RunState, reported: &mut Option<Reported>) {
    let Some(p) = to else { return };
    let total = steps.all.len();
    let done = steps.all.iter().filter(|s| s.1.is_terminal()).count();
    let last = reported.unwrap_or_default();
    if reported.is_some() && last.done == done && last.updates == steps.updates {
        return;
    }
    let since_done = if reported.is_some() && last.done == done { last.since_done + 1 } else { 0 };
    *reported = Some(Reported { done, updates: steps.updates, since_done });
    let running: Vec<&str> = steps.all.iter().filter(|s| !s.1.is_terminal() && s.2).map(|s| s.0.as_str()).collect();
    let mut message = if running.is_empty() {
        format!("{done}/{total} steps finished; run {state}")
    } else {
        format!("{done}/{total} steps finished; running: {}", running.join(", "))
    };
    let update = steps.update.clone().filter(|_| !running.is_empty());
    if let Some(u) = &update
        && let (Some(step), Some(said)) = (u["step"].as_str(), u["message"].as_str())
    {
        message.push_str(&format!(" ({step}: {said})"));
    }
    // Below the next whole step: each report's figure is larger.
    let progress = done as f64 + since_done.min(99) as f64 / 100.0;
    p.report(ProgressReport { progress, total, message, update }).await;
}
