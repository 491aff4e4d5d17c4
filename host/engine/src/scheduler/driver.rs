//! One task per unfinished run: decides readiness, skips, claims, outcomes
//! and the run's end, and commits each round of decisions as one batch
//! (outcomes of finished attempts + claims of the next ones) before it
//! calls any runner.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::JoinSet;

use super::attempt::{Done, Launch, run_attempt};
use super::scope::{RunScope, Seen};
use super::{EngineError, Shared};
use crate::cancel::CancelToken;
use crate::error::{ErrorKind, StepError};
use crate::ids::{AttemptNo, ItemIndex, RunId, Seq, idempotency_key};
use crate::model_glue::{Action, Definition, EdgeOn, Graph, Join, parse_definition};
use crate::retry::{RetryDecision, decide};
use crate::runner::{EventSink, StepOutput, StepRequest};
use crate::state::{AttemptState, RunEvent, RunState, StepEvent, StepState};
use crate::store::{AttemptRecord, Batch, NewEvent, RunRecord, Write};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnitState {
    Pending,
    Running,
    Retrying,
    Succeeded,
    Failed,
    Canceled,
}

/// One thing that gets attempts: a plain step, or one item of a `for_each`.
struct Unit {
    item: Option<ItemIndex>,
    value: Value,
    state: UnitState,
    next_attempt: AttemptNo,
    retry_at: i64,
    /// The running attempt and its token.
    running: Option<(AttemptNo, CancelToken)>,
    result: Value,
}

impl Unit {
    fn new(item: Option<ItemIndex>, value: Value) -> Unit {
        Unit {
            item,
            value,
            state: UnitState::Pending,
            next_attempt: AttemptNo::FIRST,
            retry_at: 0,
            running: None,
            result: Value::Null,
        }
    }
}

struct StepRt {
    state: StepState,
    output: Value,
    /// Skipped because its `when` was false (does not cascade).
    when_skipped: bool,
    /// Its join rule and `when` passed: its units exist.
    activated: bool,
    units: Vec<Unit>,
    /// Units before this index are not pending (claiming scans from here).
    pending_from: usize,
    running: usize,
    retrying: usize,
    succeeded: usize,
}

impl StepRt {
    /// Change a unit's state, keeping the counters true.
    fn set_unit(&mut self, u: usize, to: UnitState) {
        let from = self.units[u].state;
        for (st, d) in [(from, -1i64), (to, 1)] {
            let c = match st {
                UnitState::Running => &mut self.running,
                UnitState::Retrying => &mut self.retrying,
                UnitState::Succeeded => &mut self.succeeded,
                _ => continue,
            };
            *c = (*c as i64 + d) as usize;
        }
        self.units[u].state = to;
    }

    fn recount(&mut self) {
        let n = |st: UnitState| self.units.iter().filter(|u| u.state == st).count();
        (self.running, self.retrying, self.succeeded) =
            (n(UnitState::Running), n(UnitState::Retrying), n(UnitState::Succeeded));
        self.pending_from = 0;
    }
}

enum Readiness {
    Wait,
    Run,
    Skip(String),
}

enum SinkMsg {
    Progress { step: usize, item: Option<ItemIndex>, data: Value },
    Log { step: usize, item: Option<ItemIndex>, line: String },
}

struct Sink {
    tx: mpsc::UnboundedSender<SinkMsg>,
    step: usize,
    item: Option<ItemIndex>,
}

impl EventSink for Sink {
    fn progress(&self, data: Value) {
        let _ = self.tx.send(SinkMsg::Progress { step: self.step, item: self.item, data });
    }
    fn log(&self, line: String) {
        let _ = self.tx.send(SinkMsg::Log { step: self.step, item: self.item, line });
    }
}

enum Wake {
    Canceled,
    Done(Vec<Done>),
    Sink(SinkMsg),
    Permit(OwnedSemaphorePermit),
    Timer,
}

struct Driver {
    sh: Arc<Shared>,
    id: RunId,
    def: Arc<Definition>,
    graph: Graph,
    topo: Vec<usize>,
    rank: Vec<usize>,
    names: HashMap<String, usize>,
    input: Value,
    state: RunState,
    deadline_at: Option<i64>,
    steps: Vec<StepRt>,
    seq: Seq,
    batch: Batch,
    inflight: JoinSet<Done>,
    to_launch: Vec<Launch>,
    permits: Vec<OwnedSemaphorePermit>,
    want_permit: bool,
    failures: u32,
    unhandled: Option<StepError>,
    cancel: CancelToken,
    sink_tx: mpsc::UnboundedSender<SinkMsg>,
    sink_rx: mpsc::UnboundedReceiver<SinkMsg>,
}

/// Drive one run to its end (or until the task is aborted).
pub(super) async fn drive(
    sh: Arc<Shared>,
    id: RunId,
    def: Option<Arc<Definition>>,
    cancel: CancelToken,
) -> Result<(), EngineError> {
    let rec = sh.store.run(&id).await?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
    if rec.state.is_terminal() {
        return Ok(());
    }
    let def = match def {
        Some(d) => d,
        None => match parse_definition(&rec.definition) {
            Ok(d) => Arc::new(d),
            Err(p) => return fail_unloadable(&sh, &rec, p.to_string()).await,
        },
    };
    let mut d = Driver::new(sh, rec, def, cancel)?;
    let r = d.main().await;
    d.stop_inflight().await;
    r
}

/// A run whose stored plan no longer loads fails with a validation error.
async fn fail_unloadable(sh: &Shared, rec: &RunRecord, why: String) -> Result<(), EngineError> {
    let now = sh.clock.now_ms();
    let to = rec.state.apply(RunEvent::Fail)?;
    let err = StepError::new(ErrorKind::Validation, format!("the stored plan does not load: {why}"), false);
    let mut b = Batch::new();
    b.push(Write::RunState {
        run: rec.id.clone(),
        from: rec.state,
        to,
        output: None,
        error: Some(err.clone()),
        at: now,
    });
    b.push(Write::Event(NewEvent {
        run: rec.id.clone(),
        seq: rec.last_seq.next(),
        at: now,
        kind: format!("run.{to}"),
        step: None,
        item: None,
        data: json!({"state": to, "error": err}),
    }));
    sh.store.commit(b).await?;
    Ok(())
}

/// Cancel a run no task drives (e.g. still `submitted`).
pub(super) async fn cancel_undriven(sh: &Arc<Shared>, id: &RunId) -> Result<(), EngineError> {
    let rec = sh.store.run(id).await?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
    if rec.state.is_terminal() {
        return Ok(());
    }
    let now = sh.clock.now_ms();
    let mut b = Batch::new();
    let mut seq = rec.last_seq;
    let mut ev = |b: &mut Batch, kind: String, step: Option<String>, data: Value| {
        seq = seq.next();
        b.push(Write::Event(NewEvent { run: id.clone(), seq, at: now, kind, step, item: None, data }));
    };
    for a in rec.attempts.iter().filter(|a| a.state == AttemptState::Running) {
        b.push(Write::FinishAttempt {
            run: id.clone(),
            step: a.step.clone(),
            item: a.item,
            attempt: a.attempt,
            state: AttemptState::Canceled,
            output: None,
            error: Some(StepError::canceled("the run was canceled")),
            at: now,
        });
    }
    for s in rec.steps.iter().filter(|s| !s.state.is_terminal()) {
        let to = s.state.apply(StepEvent::Cancel)?;
        b.push(Write::StepState {
            run: id.clone(),
            step: s.name.clone(),
            from: s.state,
            to,
            output: None,
            error: None,
            next_attempt_at: None,
            at: now,
        });
        ev(&mut b, format!("step.{to}"), Some(s.name.clone()), json!({"state": to}));
    }
    let to = rec.state.apply(RunEvent::Cancel)?;
    let err = StepError::canceled("the run was canceled");
    b.push(Write::RunState { run: id.clone(), from: rec.state, to, output: None, error: Some(err.clone()), at: now });
    ev(&mut b, format!("run.{to}"), None, json!({"state": to, "error": err}));
    sh.store.commit(b).await?;
    Ok(())
}

impl Driver {
    fn new(sh: Arc<Shared>, rec: RunRecord, def: Arc<Definition>, cancel: CancelToken) -> Result<Driver, EngineError> {
        let graph = Graph::build(&def);
        let topo = graph.topo_order().map_err(|c| EngineError::Plan(format!("cycle through steps {c:?}")))?;
        let mut rank = vec![0; topo.len()];
        for (r, &i) in topo.iter().enumerate() {
            rank[i] = r;
        }
        let names = def.steps.iter().enumerate().map(|(i, s)| (s.name.clone(), i)).collect();
        let (sink_tx, sink_rx) = mpsc::unbounded_channel();
        let steps = def
            .steps
            .iter()
            .map(|_| StepRt {
                state: StepState::Pending,
                output: Value::Null,
                when_skipped: false,
                activated: false,
                units: vec![],
                pending_from: 0,
                running: 0,
                retrying: 0,
                succeeded: 0,
            })
            .collect();
        let mut d = Driver {
            sh,
            id: rec.id.clone(),
            def,
            graph,
            topo,
            rank,
            names,
            input: rec.input.clone(),
            state: rec.state,
            deadline_at: rec.deadline_at,
            steps,
            seq: rec.last_seq,
            batch: Batch::new(),
            inflight: JoinSet::new(),
            to_launch: vec![],
            permits: vec![],
            want_permit: false,
            failures: 0,
            unhandled: None,
            cancel,
            sink_tx,
            sink_rx,
        };
        d.load(&rec)?;
        Ok(d)
    }

    fn now(&self) -> i64 {
        self.sh.clock.now_ms()
    }

    // ---- loading and recovery -------------------------------------------

    fn load(&mut self, rec: &RunRecord) -> Result<(), EngineError> {
        if self.state == RunState::Submitted {
            self.run_to(RunEvent::Start, None, None)?;
        }
        let mut interrupted: Vec<(usize, usize, AttemptNo)> = vec![];
        for (i, sr) in rec.steps.iter().enumerate() {
            if self.def.steps.get(i).map(|s| s.name.as_str()) != Some(sr.name.as_str()) {
                return Err(EngineError::Plan(format!("stored step {} does not match the plan", sr.name)));
            }
            let st = &mut self.steps[i];
            st.state = sr.state;
            st.output = sr.output.clone().unwrap_or(Value::Null);
            st.when_skipped = sr.state == StepState::Skipped && sr.error.is_none();
            if sr.state == StepState::Failed {
                self.failures += 1;
                if !self.handled(i) && self.unhandled.is_none() {
                    self.unhandled = sr.error.clone();
                }
            }
            if !matches!(sr.state, StepState::Running | StepState::Retrying | StepState::Waiting) {
                continue;
            }
            // An activated step: rebuild its units from its attempts.
            let atts: Vec<&AttemptRecord> = rec.attempts.iter().filter(|a| a.step == sr.name).collect();
            let units = if self.def.steps[i].for_each.is_some() {
                match self.resolve_items(i) {
                    Ok(items) => items,
                    Err(e) => return Err(EngineError::Plan(e.message)),
                }
            } else {
                vec![Unit::new(None, Value::Null)]
            };
            self.steps[i].units = units;
            self.steps[i].activated = true;
            for (u, unit) in self.steps[i].units.iter_mut().enumerate() {
                let mine: Vec<&&AttemptRecord> = atts.iter().filter(|a| a.item == unit.item).collect();
                if let Some(last) = mine.iter().map(|a| a.attempt).max() {
                    unit.next_attempt = last.next();
                }
                if let Some(ok) = mine.iter().find(|a| a.state == AttemptState::Succeeded) {
                    unit.state = UnitState::Succeeded;
                    unit.result = ok.output.clone().unwrap_or(Value::Null);
                } else if let Some(run) = mine.iter().find(|a| a.state == AttemptState::Running) {
                    interrupted.push((i, u, run.attempt));
                } else if !mine.is_empty() {
                    // Failed with a retry scheduled (its time is on the step
                    // record for plain steps; items retry at once).
                    unit.state = UnitState::Retrying;
                    unit.retry_at = sr.next_attempt_at.unwrap_or(0);
                }
            }
            self.steps[i].recount();
        }
        // Attempts of the previous owner: failed attempts, retried per policy.
        for (i, u, attempt) in interrupted {
            self.steps[i].set_unit(u, UnitState::Running);
            self.steps[i].units[u].running = Some((attempt, CancelToken::new()));
            let err = StepError::timeout("lease expired: the process running this attempt stopped");
            self.attempt_failed(i, u, attempt, err)?;
            if self.state.is_terminal() {
                break;
            }
        }
        Ok(())
    }

    // ---- the loop -------------------------------------------------------

    async fn main(&mut self) -> Result<(), EngineError> {
        loop {
            if !self.state.is_terminal() {
                self.advance()?;
            }
            self.flush().await?;
            self.launch();
            if self.state.is_terminal() {
                return Ok(());
            }
            match self.next_wake().await {
                Wake::Canceled => {
                    self.end_run(RunEvent::Cancel, None, StepError::canceled("the run was canceled"), true)?
                }
                Wake::Done(done) => {
                    for d in done {
                        self.on_done(d)?;
                    }
                }
                Wake::Sink(m) => self.on_sink(m),
                Wake::Permit(p) => {
                    self.permits.push(p);
                    self.want_permit = false;
                }
                Wake::Timer => {}
            }
        }
    }

    async fn next_wake(&mut self) -> Wake {
        let timer = self.next_timer().map(|t| self.sh.clock.sleep_until(t));
        let permits = self.sh.permits.clone();
        tokio::select! {
            biased;
            _ = self.cancel.canceled() => Wake::Canceled,
            Some(first) = self.inflight.join_next(), if !self.inflight.is_empty() => {
                let mut all = vec![];
                for r in std::iter::once(first).chain(std::iter::from_fn(|| self.inflight.try_join_next())) {
                    match r {
                        Ok(d) => all.push(d),
                        Err(e) if e.is_cancelled() => {}
                        Err(e) => std::panic::resume_unwind(e.into_panic()),
                    }
                }
                Wake::Done(all)
            }
            Some(m) = self.sink_rx.recv() => Wake::Sink(m),
            Ok(p) = permits.acquire_owned(), if self.want_permit => Wake::Permit(p),
            _ = async { timer.expect("guarded").await }, if timer.is_some() => Wake::Timer,
        }
    }

    fn next_timer(&self) -> Option<i64> {
        let now = self.now();
        let retries = self.steps.iter().enumerate().filter(|(_, s)| s.retrying > 0).flat_map(|(i, s)| {
            let cap = self.def.steps[i].concurrency.map(|c| c.max(1) as usize).unwrap_or(usize::MAX);
            // A due retry held back by a missing permit or by the
            // step's concurrency waits for an attempt to end, not for
            // time: no timer for it (no spinning). Any other due retry
            // wakes the loop at once.
            let held = self.want_permit || s.running >= cap;
            s.units
                .iter()
                .filter(move |u| u.state == UnitState::Retrying && (u.retry_at > now || !held))
                .map(|u| u.retry_at)
        });
        retries.chain(self.deadline_at).min()
    }

    async fn flush(&mut self) -> Result<(), EngineError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        let mut tries = 0;
        loop {
            match self.sh.store.commit(batch.clone()).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_retryable() && tries < self.sh.config.commit_retries => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(5 << tries)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn launch(&mut self) {
        for l in self.to_launch.drain(..) {
            self.inflight.spawn(run_attempt(self.sh.runner.clone(), self.sh.clock.clone(), l));
        }
    }

    /// Attempts still in flight when the run ended were recorded canceled
    /// and their tokens fired; give their runners a grace period to wind
    /// down (interrupt the guest, tell the MCP server), then drop them.
    async fn stop_inflight(&mut self) {
        for s in &self.steps {
            for u in &s.units {
                if let Some((_, t)) = &u.running {
                    t.cancel();
                }
            }
        }
        if self.inflight.is_empty() {
            return;
        }
        let grace = std::time::Duration::from_millis(self.sh.config.cancel_grace_ms);
        let _ = tokio::time::timeout(grace, async { while self.inflight.join_next().await.is_some() {} }).await;
        self.inflight.abort_all();
    }

    // ---- recording ------------------------------------------------------

    fn event(&mut self, kind: String, step: Option<usize>, item: Option<ItemIndex>, data: Value) {
        self.seq = self.seq.next();
        let step = step.map(|i| self.def.steps[i].name.clone());
        let at = self.now();
        self.batch.push(Write::Event(NewEvent { run: self.id.clone(), seq: self.seq, at, kind, step, item, data }));
    }

    fn run_to(&mut self, ev: RunEvent, output: Option<Value>, error: Option<StepError>) -> Result<(), EngineError> {
        let to = self.state.apply(ev)?;
        let at = self.now();
        self.batch.push(Write::RunState {
            run: self.id.clone(),
            from: self.state,
            to,
            output: output.clone(),
            error: error.clone(),
            at,
        });
        self.state = to;
        let mut data = json!({"state": to});
        if let Some(e) = error {
            data["error"] = e.to_value();
        }
        self.event(format!("run.{to}"), None, None, data);
        Ok(())
    }

    fn step_to(
        &mut self,
        i: usize,
        ev: StepEvent,
        output: Value,
        error: Option<StepError>,
        extra: Value,
    ) -> Result<(), EngineError> {
        let from = self.steps[i].state;
        let to = from.apply(ev)?;
        let next_attempt_at = extra.get("next_attempt_at").and_then(Value::as_i64);
        self.batch.push(Write::StepState {
            run: self.id.clone(),
            step: self.def.steps[i].name.clone(),
            from,
            to,
            output: (!output.is_null()).then(|| output.clone()),
            error: error.clone(),
            next_attempt_at,
            at: self.now(),
        });
        self.steps[i].state = to;
        self.steps[i].output = output;
        let mut data = json!({"state": to});
        if let (Value::Object(d), Value::Object(x)) = (&mut data, extra) {
            d.extend(x);
        }
        if let Some(e) = error {
            data["error"] = e.to_value();
        }
        self.event(format!("step.{to}"), Some(i), None, data);
        Ok(())
    }

    // ---- deciding -------------------------------------------------------

    fn advance(&mut self) -> Result<(), EngineError> {
        let now = self.now();
        if self.deadline_at.is_some_and(|d| now >= d) {
            let err = StepError::new(ErrorKind::Deadline, "the run's timeout_ms passed", false);
            return self.end_run(RunEvent::Fail, None, err, false);
        }
        for k in 0..self.topo.len() {
            let i = self.topo[k];
            if self.steps[i].state != StepState::Pending || self.steps[i].activated {
                continue;
            }
            match self.readiness(i) {
                Readiness::Wait => {}
                Readiness::Skip(why) => {
                    let err = StepError::new(ErrorKind::DependencyFailed, why, false);
                    self.step_to(i, StepEvent::Skip, Value::Null, Some(err), json!({}))?;
                }
                Readiness::Run => self.activate(i)?,
            }
            if self.state.is_terminal() {
                return Ok(());
            }
        }
        self.claim_ready(now)?;
        // A permit won for a unit that no longer needs it goes back.
        self.permits.clear();
        if !self.state.is_terminal() && self.steps.iter().all(|s| s.state.is_terminal()) {
            self.finish()?;
        }
        Ok(())
    }

    fn edge_met(&self, from: usize, on: EdgeOn) -> bool {
        let s = &self.steps[from];
        let coe = self.def.steps[from].continue_on_error;
        match on {
            EdgeOn::Success => {
                s.state == StepState::Succeeded
                    || (s.state == StepState::Skipped && s.when_skipped)
                    || (s.state == StepState::Failed && coe)
            }
            EdgeOn::Failure => s.state == StepState::Failed,
            EdgeOn::Always => s.state.is_terminal(),
        }
    }

    fn readiness(&self, i: usize) -> Readiness {
        let deps: Vec<(usize, EdgeOn)> = self.graph.dependencies(i).map(|e| (e.from, e.on)).collect();
        if deps.is_empty() {
            return Readiness::Run;
        }
        let terminal = |d: usize| self.steps[d].state.is_terminal();
        let unmet = |deps: &[(usize, EdgeOn)]| {
            deps.iter()
                .filter(|(d, on)| terminal(*d) && !self.edge_met(*d, *on))
                .map(|(d, on)| {
                    format!("`{}` is {} (edge on {})", self.def.steps[*d].name, self.steps[*d].state, on.as_str())
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self.def.steps[i].join {
            Join::All => {
                if !deps.iter().all(|(d, _)| terminal(*d)) {
                    Readiness::Wait
                } else if deps.iter().all(|(d, on)| self.edge_met(*d, *on)) {
                    Readiness::Run
                } else {
                    Readiness::Skip(format!("skipped: {}", unmet(&deps)))
                }
            }
            Join::Any | Join::Race => {
                let any_met = deps.iter().any(|(d, on)| terminal(*d) && self.edge_met(*d, *on));
                let any_terminal = deps.iter().any(|(d, _)| terminal(*d));
                let all_terminal = deps.iter().all(|(d, _)| terminal(*d));
                if any_met {
                    Readiness::Run
                } else if all_terminal || (self.def.steps[i].join == Join::Race && any_terminal) {
                    Readiness::Skip(format!("skipped: {}", unmet(&deps)))
                } else {
                    Readiness::Wait
                }
            }
        }
    }

    fn scope_eval<T>(&self, item: Option<(&Value, u64)>, f: impl FnOnce(&dyn crate::model_glue::Scope) -> T) -> T {
        let steps = &self.steps;
        let scope = RunScope {
            run_id: self.id.as_str(),
            input: &self.input,
            names: &self.names,
            seen: |i: usize| Seen { state: steps[i].state, output: &steps[i].output },
            item,
        };
        f(&scope)
    }

    fn resolve_items(&self, i: usize) -> Result<Vec<Unit>, StepError> {
        let t = self.def.steps[i].for_each.as_ref().expect("for_each step");
        match self.scope_eval(None, |s| t.resolve(s)) {
            Value::Array(items) => {
                Ok(items.into_iter().enumerate().map(|(k, v)| Unit::new(Some(ItemIndex(k as u32)), v)).collect())
            }
            other => Err(StepError::new(
                ErrorKind::Validation,
                format!("for_each must resolve to an array, got {}", type_name(&other)),
                false,
            )),
        }
    }

    fn activate(&mut self, i: usize) -> Result<(), EngineError> {
        let step = &self.def.steps[i];
        if let Some(cond) = &step.when {
            let cond = cond.clone();
            if !self.scope_eval(None, |s| cond.evaluate(s)) {
                self.steps[i].when_skipped = true;
                return self.step_to(i, StepEvent::Skip, Value::Null, None, json!({"reason": "when"}));
            }
        }
        match &self.def.steps[i].action {
            Action::Return => {
                let input = self.def.steps[i].input.clone();
                let value = self.scope_eval(None, |s| input.resolve(s));
                self.step_to(i, StepEvent::Claim, Value::Null, None, json!({}))?;
                self.step_to(i, StepEvent::Succeed, value.clone(), None, json!({}))?;
                let output = match self.def.output.clone() {
                    Some(t) => self.scope_eval(None, |s| t.resolve(s)),
                    None => value,
                };
                let err = StepError::canceled(format!("the run returned at step `{}`", self.def.steps[i].name));
                return self.end_run(RunEvent::Complete, Some(output), err, false);
            }
            Action::Code(_) | Action::Tool(_) => {}
            other => {
                let key = other.key();
                self.step_to(i, StepEvent::Claim, Value::Null, None, json!({}))?;
                let err = StepError::new(ErrorKind::Validation, format!("not yet supported: {key}"), false);
                return self.step_failed(i, err);
            }
        }
        if self.def.steps[i].for_each.is_some() {
            match self.resolve_items(i) {
                Ok(units) => {
                    let n = units.len();
                    self.steps[i].units = units;
                    self.steps[i].activated = true;
                    self.step_to(i, StepEvent::Claim, Value::Null, None, json!({"items": n}))?;
                    if n == 0 {
                        self.step_to(i, StepEvent::Succeed, json!([]), None, json!({}))?;
                    }
                }
                Err(e) => {
                    self.step_to(i, StepEvent::Claim, Value::Null, None, json!({}))?;
                    self.step_failed(i, e)?;
                }
            }
        } else {
            self.steps[i].units = vec![Unit::new(None, Value::Null)];
            self.steps[i].activated = true;
        }
        Ok(())
    }

    fn claim_ready(&mut self, now: i64) -> Result<(), EngineError> {
        let mut ready: Vec<(i64, usize, usize, usize)> = vec![];
        for (i, s) in self.steps.iter_mut().enumerate() {
            if !s.activated || s.state.is_terminal() {
                continue;
            }
            let cap = self.def.steps[i].concurrency.map(|c| c.max(1) as usize).unwrap_or(usize::MAX);
            let mut running = s.running;
            let key = (-self.def.steps[i].priority, self.rank[i]);
            // Retries first (they are older), then pending units in order.
            if s.retrying > 0 {
                for (u, unit) in s.units.iter().enumerate() {
                    if running >= cap {
                        break;
                    }
                    if unit.state == UnitState::Retrying && unit.retry_at <= now {
                        running += 1;
                        ready.push((key.0, key.1, u, i));
                    }
                }
            }
            while s.pending_from < s.units.len() && s.units[s.pending_from].state != UnitState::Pending {
                s.pending_from += 1;
            }
            let mut u = s.pending_from;
            while running < cap && u < s.units.len() {
                if s.units[u].state == UnitState::Pending {
                    running += 1;
                    ready.push((key.0, key.1, u, i));
                }
                u += 1;
            }
        }
        ready.sort_unstable();
        for (_, _, u, i) in ready {
            let permit = match self.permits.pop() {
                Some(p) => p,
                None => match self.sh.permits.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => {
                        self.want_permit = true;
                        break;
                    }
                },
            };
            self.claim(i, u, permit, now)?;
        }
        Ok(())
    }

    fn claim(&mut self, i: usize, u: usize, permit: OwnedSemaphorePermit, now: i64) -> Result<(), EngineError> {
        let attempt = self.steps[i].units[u].next_attempt;
        let item = self.steps[i].units[u].item;
        let timeout_ms = self.def.steps[i].effective_timeout_ms();
        let timeout_at = timeout_ms.map(|t| now.saturating_add(t as i64));
        let lease_until = match timeout_ms {
            Some(t) => now.saturating_add((t + self.sh.config.lease_slack_ms) as i64),
            None => now.saturating_add(self.sh.config.default_lease_ms as i64),
        };
        if item.is_none() {
            self.step_to(i, StepEvent::Claim, Value::Null, None, json!({"attempt": attempt}))?;
        } else {
            self.event("item.running".into(), Some(i), item, json!({"item": item, "attempt": attempt}));
        }
        let name = self.def.steps[i].name.clone();
        self.batch.push(Write::StartAttempt {
            run: self.id.clone(),
            step: name.clone(),
            item,
            attempt,
            lease_until,
            at: now,
        });
        let input = {
            let t = self.def.steps[i].input.clone();
            let value = &self.steps[i].units[u].value;
            let it = item.map(|k| (value, k.0 as u64));
            self.scope_eval(it, |s| t.resolve(s))
        };
        let token = CancelToken::new();
        self.steps[i].set_unit(u, UnitState::Running);
        self.steps[i].units[u].running = Some((attempt, token.clone()));
        let deadline_ms = match (timeout_at, self.deadline_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let req = StepRequest {
            run: self.id.clone(),
            step: name.clone(),
            item,
            attempt,
            idempotency_key: idempotency_key(&self.id, &name, item, attempt),
            deadline_ms,
            action: self.def.steps[i].action.clone(),
            input,
            limits: self.def.steps[i].limits,
            events: Arc::new(Sink { tx: self.sink_tx.clone(), step: i, item }),
        };
        self.to_launch.push(Launch { step: i, unit: u, req, token, timeout_at, timeout_ms, permit });
        Ok(())
    }

    // ---- outcomes -------------------------------------------------------

    fn on_sink(&mut self, m: SinkMsg) {
        match m {
            SinkMsg::Progress { step, item, data } => self.event("progress".into(), Some(step), item, data),
            SinkMsg::Log { step, item, line } => self.event("log".into(), Some(step), item, json!({"line": line})),
        }
    }

    fn finish_attempt(
        &mut self,
        i: usize,
        u: usize,
        attempt: AttemptNo,
        state: AttemptState,
        output: Option<Value>,
        error: Option<StepError>,
    ) {
        let unit = &mut self.steps[i].units[u];
        unit.running = None;
        let item = unit.item;
        let at = self.now();
        self.batch.push(Write::FinishAttempt {
            run: self.id.clone(),
            step: self.def.steps[i].name.clone(),
            item,
            attempt,
            state,
            output,
            error,
            at,
        });
    }

    fn on_done(&mut self, d: Done) -> Result<(), EngineError> {
        if self.state.is_terminal() {
            return Ok(());
        }
        let Some(unit) = self.steps.get(d.step).and_then(|s| s.units.get(d.unit)) else { return Ok(()) };
        if unit.state != UnitState::Running || unit.running.as_ref().map(|r| r.0) != Some(d.attempt) {
            return Ok(()); // already recorded (canceled)
        }
        let (i, u) = (d.step, d.unit);
        match d.result {
            Ok(StepOutput::Done(v)) => {
                self.finish_attempt(i, u, d.attempt, AttemptState::Succeeded, Some(v.clone()), None);
                let item = self.steps[i].units[u].item;
                self.steps[i].set_unit(u, UnitState::Succeeded);
                self.steps[i].units[u].result = v.clone();
                if item.is_none() {
                    self.step_to(i, StepEvent::Succeed, v, None, json!({"attempt": d.attempt}))?;
                } else {
                    self.event("item.succeeded".into(), Some(i), item, json!({"item": item, "attempt": d.attempt}));
                    if self.steps[i].succeeded == self.steps[i].units.len() {
                        let out = Value::Array(self.steps[i].units.iter().map(|u| u.result.clone()).collect());
                        self.step_to(i, StepEvent::Succeed, out, None, json!({}))?;
                    }
                }
            }
            Ok(StepOutput::Reject(reason)) => {
                let err = StepError::new(ErrorKind::Validation, format!("rejected: {reason}"), false);
                self.finish_attempt(i, u, d.attempt, AttemptState::Failed, None, Some(err.clone()));
                self.steps[i].set_unit(u, UnitState::Failed);
                self.step_to(i, StepEvent::Fail, Value::Null, Some(err), json!({"attempt": d.attempt}))?;
                let run_err = StepError::new(ErrorKind::Validation, reason, false);
                self.end_run(RunEvent::Reject, None, run_err, false)?;
            }
            Err(e) => self.attempt_failed(i, u, d.attempt, e)?,
        }
        Ok(())
    }

    fn attempt_failed(&mut self, i: usize, u: usize, attempt: AttemptNo, err: StepError) -> Result<(), EngineError> {
        self.finish_attempt(i, u, attempt, AttemptState::Failed, None, Some(err.clone()));
        let policy = self.def.steps[i].retry_policy();
        let now = self.now();
        let item = self.steps[i].units[u].item;
        match decide(&policy, attempt, &err, now, self.sh.rng.as_ref()) {
            RetryDecision::RetryAt { at_ms, attempt: next } => {
                self.steps[i].set_unit(u, UnitState::Retrying);
                let unit = &mut self.steps[i].units[u];
                unit.retry_at = at_ms;
                unit.next_attempt = next;
                if item.is_none() {
                    let extra = json!({"attempt": attempt, "next_attempt_at": at_ms});
                    self.step_to(i, StepEvent::ScheduleRetry, Value::Null, Some(err), extra)?;
                } else {
                    let data = json!({"item": item, "attempt": attempt, "next_attempt_at": at_ms, "error": err});
                    self.event("item.retrying".into(), Some(i), item, data);
                }
            }
            RetryDecision::GiveUp => {
                self.steps[i].set_unit(u, UnitState::Failed);
                if item.is_some() {
                    self.event(
                        "item.failed".into(),
                        Some(i),
                        item,
                        json!({"item": item, "attempt": attempt, "error": err}),
                    );
                    // The step fails at its first failed item: stop the others.
                    for k in 0..self.steps[i].units.len() {
                        if let Some((a, t)) = self.steps[i].units[k].running.clone() {
                            t.cancel();
                            let e = StepError::canceled("another item of the step failed");
                            self.finish_attempt(i, k, a, AttemptState::Canceled, None, Some(e));
                            self.steps[i].set_unit(k, UnitState::Canceled);
                        }
                    }
                }
                let err = match item {
                    Some(k) => StepError { message: format!("item {k}: {}", err.message), ..err },
                    None => err,
                };
                self.step_failed(i, err)?;
            }
        }
        Ok(())
    }

    /// A dependent with a `failure`/`always` edge, or `continue_on_error`,
    /// handles a step's failure.
    fn handled(&self, i: usize) -> bool {
        self.def.steps[i].continue_on_error || self.graph.dependents(i).any(|e| e.on != EdgeOn::Success)
    }

    /// The step's failure is final (the step is running).
    fn step_failed(&mut self, i: usize, err: StepError) -> Result<(), EngineError> {
        let coe = self.def.steps[i].continue_on_error;
        let output = if coe { err.to_value() } else { Value::Null };
        self.step_to(i, StepEvent::Fail, output, Some(err.clone()), json!({}))?;
        self.failures += 1;
        let name = &self.def.steps[i].name;
        let run_err = StepError { message: format!("step `{name}` failed: {}", err.message), ..err };
        if let Some(max) = self.def.max_step_failures
            && self.failures >= max
        {
            let e =
                StepError { message: format!("{} (max_step_failures = {max} reached)", run_err.message), ..run_err };
            return self.end_run(RunEvent::Fail, None, e, false);
        }
        if !self.handled(i) {
            if self.def.fail_open {
                self.unhandled.get_or_insert(run_err);
            } else {
                return self.end_run(RunEvent::Fail, None, run_err, false);
            }
        }
        Ok(())
    }

    // ---- the end --------------------------------------------------------

    /// Every step is terminal.
    fn finish(&mut self) -> Result<(), EngineError> {
        if let Some(e) = self.unhandled.clone() {
            return self.run_to(RunEvent::Fail, None, Some(e));
        }
        let output = match self.def.output.clone() {
            Some(t) => self.scope_eval(None, |s| t.resolve(s)),
            None => {
                let mut m = serde_json::Map::new();
                for i in self.graph.sinks() {
                    m.insert(self.def.steps[i].name.clone(), self.steps[i].output.clone());
                }
                Value::Object(m)
            }
        };
        self.run_to(RunEvent::Complete, Some(output), None)
    }

    /// End the run now: running attempts are canceled and recorded, steps
    /// not yet terminal become canceled (pending ones skipped unless
    /// `cancel_pending`), then the run takes `ev`.
    fn end_run(
        &mut self,
        ev: RunEvent,
        output: Option<Value>,
        err: StepError,
        cancel_pending: bool,
    ) -> Result<(), EngineError> {
        let why = match ev {
            RunEvent::Cancel => "the run was canceled".to_string(),
            RunEvent::Complete => err.message.clone(),
            _ => format!("the run ended: {}", err.message),
        };
        for i in 0..self.steps.len() {
            for u in 0..self.steps[i].units.len() {
                if let Some((a, t)) = self.steps[i].units[u].running.clone() {
                    t.cancel();
                    self.finish_attempt(i, u, a, AttemptState::Canceled, None, Some(StepError::canceled(why.clone())));
                    self.steps[i].set_unit(u, UnitState::Canceled);
                }
            }
            match self.steps[i].state {
                StepState::Pending if !cancel_pending => {
                    let e = StepError::new(ErrorKind::DependencyFailed, why.clone(), false);
                    self.step_to(i, StepEvent::Skip, Value::Null, Some(e), json!({}))?;
                }
                s if !s.is_terminal() => {
                    self.step_to(i, StepEvent::Cancel, Value::Null, Some(StepError::canceled(why.clone())), json!({}))?;
                }
                _ => {}
            }
        }
        let error = (ev != RunEvent::Complete).then_some(err);
        self.run_to(ev, output, error)
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
