//! Signals and events: how outside data reaches parked `wait` steps.
//!
//! A signal or event for a run this engine drives goes to the run's driver
//! as [`Mail`], so it is decided and committed in the same order as every
//! other transition of the run; a run hibernated here is woken to take it. A run nobody drives (the store's owner is
//! a short-lived `weft signal`, or the run is not loaded) is answered
//! directly in the store; its writes carry the states they expect, so two
//! answers can never both win. Other processes leave their signals and
//! events in the store's inbox; the owner hands them over with
//! [`Engine::process_inbox`].

use crate::state::Transition as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Engine, EngineError, Shared};
use crate::ids::{AttemptNo, ItemIndex, RunId, Seq};
use crate::model_glue::{Action, Problem, Step};
use crate::outside::{InboxKind, InboxRecord, WaitKind};
use crate::state::{AttemptState, RunEvent, RunState, StepState};
use crate::store::{Batch, NewEvent, RunRecord, StoreError, Write};

/// A message for a run's driver.
pub(crate) enum Mail {
    Signal {
        step: String,
        item: Option<ItemIndex>,
        data: Value,
        inbox: Option<String>,
        reply: oneshot::Sender<SignalAnswer>,
    },
    Event {
        step: String,
        name: String,
        data: Value,
        reply: oneshot::Sender<bool>,
    },
}

/// What became of a signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SignalAnswer {
    /// The step took the data as its output.
    Accepted { output: Value },
    /// The data does not match the wait's schema; the step still waits.
    Invalid { errors: Vec<Problem> },
    /// The step was resolved before: the first valid signal won.
    AlreadyResolved { state: StepState },
    /// The step does not wait for a signal (not yet, or not at all).
    NotWaiting { message: String },
    /// No such run or step.
    NotFound { message: String },
}

impl SignalAnswer {
    pub fn accepted(&self) -> bool {
        matches!(self, SignalAnswer::Accepted { .. })
    }
}

/// A wait an event resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    pub run: RunId,
    pub step: String,
}

/// What became of an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmitAnswer {
    pub id: String,
    /// The waits it resolved (for a duplicate: those the first emit resolved).
    pub delivered: Vec<Delivered>,
    /// An event with this id was emitted before: nothing was done now.
    pub duplicate: bool,
}

/// The items of a `for_each` wait: how many, and which still wait.
pub(crate) struct ItemsOpen {
    pub n: usize,
    pub open: Vec<ItemIndex>,
}

/// Items as a reader lists them: `0, 2, 5` (the first 20, then how many more).
pub(crate) fn list_items(items: &[ItemIndex]) -> String {
    let mut s = items.iter().take(20).map(|k| k.to_string()).collect::<Vec<_>>().join(", ");
    if items.len() > 20 {
        s.push_str(&format!(" and {} more", items.len() - 20));
    }
    s
}

/// Whether `step` (in `state`) takes a signal with `data` for `item` (a
/// `for_each` wait takes one per item, named; `items` are its items):
/// `Err` says why not.
pub(crate) fn check_signal(
    step: &Step,
    state: StepState,
    item: Option<ItemIndex>,
    items: &ItemsOpen,
    data: &Value,
) -> Result<(), SignalAnswer> {
    let Action::Wait(w) = &step.action else {
        return Err(SignalAnswer::NotWaiting {
            message: format!("step `{}` is a `{}` step, not a `wait`", step.name, step.action.key()),
        });
    };
    if let Some(e) = &w.event {
        return Err(SignalAnswer::NotWaiting {
            message: format!(
                "step `{}` waits for the event `{e}`, not a signal: emit the event `{e}` instead",
                step.name
            ),
        });
    }
    match (step.for_each.is_some(), item) {
        (false, Some(_)) => {
            return Err(SignalAnswer::NotWaiting {
                message: format!("step `{}` has no `for_each`: signal it without `item`", step.name),
            });
        }
        (true, None) if state == StepState::Waiting => {
            return Err(SignalAnswer::NotWaiting {
                message: format!(
                    "step `{}` waits once per item (`for_each`): say which with `item` (waiting: {})",
                    step.name,
                    list_items(&items.open)
                ),
            });
        }
        _ => {}
    }
    match state {
        StepState::Waiting => {}
        s if s.is_terminal() => return Err(SignalAnswer::AlreadyResolved { state: s }),
        s => {
            return Err(SignalAnswer::NotWaiting {
                message: format!("step `{}` is {s}: it does not wait yet, so there is nothing to answer", step.name),
            });
        }
    }
    if let Some(k) = item {
        if k.0 as usize >= items.n {
            return Err(SignalAnswer::NotFound {
                message: format!(
                    "step `{}` has {} item(s), numbered from 0: there is no item {k} (waiting: {})",
                    step.name,
                    items.n,
                    list_items(&items.open)
                ),
            });
        }
        if !items.open.contains(&k) {
            return Err(SignalAnswer::AlreadyResolved { state: StepState::Succeeded });
        }
    }
    if let Some(schema) = &w.schema {
        weft_model::validate_against(schema, data).map_err(|errors| SignalAnswer::Invalid { errors })?;
    }
    Ok(())
}

/// The answer to a signal for `step`, which run `run` does not have
/// (with the step it most likely meant among `names`).
pub(crate) fn no_such_step<'a>(run: &RunId, step: &str, names: impl IntoIterator<Item = &'a str>) -> SignalAnswer {
    let mean = crate::model_glue::did_you_mean(step, names).map(|m| format!(" ({m})")).unwrap_or_default();
    SignalAnswer::NotFound { message: format!("run {run} has no step `{step}`{mean}") }
}

/// Whether `step` (in `state`) is a wait for the event `name`.
pub(crate) fn waits_for_event(step: &Step, state: StepState, name: &str) -> bool {
    state == StepState::Waiting && matches!(&step.action, Action::Wait(w) if w.event.as_deref() == Some(name))
}

/// A new id for an inbox message or an event.
pub(crate) fn new_id(sh: &Shared, prefix: &str) -> String {
    let id = RunId::generate(sh.clock.now_ms(), sh.rng.as_ref());
    format!("{prefix}{}", &id.as_str()[2..])
}

impl Engine {
    /// Answers the `wait` step `step` of `run` with `data` (validated
    /// against the wait's schema). For the store's owner; another process
    /// uses [`Engine::post_signal`].
    pub async fn signal(&self, run: &RunId, step: &str, data: Value) -> Result<SignalAnswer, EngineError> {
        self.signal_with(run, step, None, data, None).await
    }

    /// Answers item `item` of the `for_each` wait `step` of `run` (with
    /// `None`, as [`Engine::signal`]).
    pub async fn signal_item(
        &self,
        run: &RunId,
        step: &str,
        item: Option<ItemIndex>,
        data: Value,
    ) -> Result<SignalAnswer, EngineError> {
        self.signal_with(run, step, item, data, None).await
    }

    async fn signal_with(
        &self,
        run: &RunId,
        step: &str,
        item: Option<ItemIndex>,
        data: Value,
        inbox: Option<String>,
    ) -> Result<SignalAnswer, EngineError> {
        super::over(
            &data,
            self.sh.config.size_limits.max_input_bytes,
            "/data",
            "the signal's data",
            "max_input_bytes",
        )?;
        let answered = match self
            .to_run(
                run,
                |reply| Mail::Signal { step: step.to_string(), item, data: data.clone(), inbox: inbox.clone(), reply },
                || signal_undriven(&self.sh, run, step, item, &data, inbox.as_deref()),
            )
            .await
        {
            // Another worker drives the run: it answers (a message taken
            // from the inbox is this worker's only while it owns the run).
            Err(EngineError::Store(StoreError::Fenced(_))) if inbox.is_none() => {
                let kind = InboxKind::Signal { run: run.clone(), step: step.to_string(), item };
                let answer = self.relay(kind, data).await?;
                return serde_json::from_value(answer)
                    .map_err(|e| EngineError::Plan(format!("the owner of run {run} answered oddly: {e}")));
            }
            other => other?,
        };
        answered.ok_or_else(|| {
            EngineError::Store(StoreError::Busy(format!("run {run} kept changing while step `{step}` was signaled")))
        })
    }

    /// Emits an event (store owner): every wait for `name` whose `match`
    /// holds takes `data` as its output. With an `id` seen before, nothing
    /// happens and the first emit's deliveries are returned.
    pub async fn emit(&self, name: &str, data: Value, id: Option<String>) -> Result<EmitAnswer, EngineError> {
        super::over(&data, self.sh.config.size_limits.max_input_bytes, "/data", "the event's data", "max_input_bytes")?;
        let msg = self.event_message(name, data, id);
        // Handled by this call alone, and answered before the message can
        // be seen pending. On a store shared by many workers, no other
        // worker takes it: it is taken as it is stored. In this process,
        // `process_inbox` reads the pending messages under the inbox lock,
        // which is held from before the message is stored until it is
        // answered. (Taken after the commit, the owner's poll, which this
        // very commit wakes, could read the message pending and handle it
        // first: this call then found the waits it resolved closed and
        // answered `delivered: []`.)
        let _g = self.sh.inbox.lock().await;
        let take = Write::InboxTake { id: msg.id.clone() };
        match self.sh.commit(Batch { writes: vec![Write::InboxPut(msg.clone()), take] }).await {
            Ok(()) => {}
            Err(StoreError::Conflict(_)) => return self.duplicate(&msg).await,
            Err(e) => return Err(e.into()),
        }
        self.handle_event(&msg).await
    }

    fn event_message(&self, name: &str, data: Value, id: Option<String>) -> InboxRecord {
        let id = id.unwrap_or_else(|| new_id(&self.sh, "e_"));
        InboxRecord {
            id: new_id(&self.sh, "m_"),
            kind: InboxKind::Event { event: name.to_string(), id },
            data,
            at: self.sh.clock.now_ms(),
            answer: None,
        }
    }

    async fn duplicate(&self, msg: &InboxRecord) -> Result<EmitAnswer, EngineError> {
        let InboxKind::Event { id, .. } = &msg.kind else { unreachable!("an event") };
        let first = self.sh.store.inbox_get(id, true).await?;
        let delivered = first
            .and_then(|m| m.answer)
            .and_then(|a| serde_json::from_value::<EmitAnswer>(a).ok())
            .map(|a| a.delivered)
            .unwrap_or_default();
        Ok(EmitAnswer { id: id.clone(), delivered, duplicate: true })
    }

    /// Leaves a signal in the store's inbox for the owner (any process);
    /// returns the message id to await with [`Engine::inbox_answer`].
    pub async fn post_signal(
        &self,
        run: &RunId,
        step: &str,
        item: Option<ItemIndex>,
        data: Value,
    ) -> Result<String, EngineError> {
        super::over(
            &data,
            self.sh.config.size_limits.max_input_bytes,
            "/data",
            "the signal's data",
            "max_input_bytes",
        )?;
        let msg = InboxRecord {
            id: new_id(&self.sh, "m_"),
            kind: InboxKind::Signal { run: run.clone(), step: step.to_string(), item },
            data,
            at: self.sh.clock.now_ms(),
            answer: None,
        };
        self.sh.commit(Batch { writes: vec![Write::InboxPut(msg.clone())] }).await?;
        Ok(msg.id)
    }

    /// Leaves an event in the store's inbox for the owner (any process).
    /// `Err(answer)` when its id was emitted before.
    pub async fn post_event(
        &self,
        name: &str,
        data: Value,
        id: Option<String>,
    ) -> Result<Result<String, EmitAnswer>, EngineError> {
        super::over(&data, self.sh.config.size_limits.max_input_bytes, "/data", "the event's data", "max_input_bytes")?;
        let msg = self.event_message(name, data, id);
        match self.sh.commit(Batch { writes: vec![Write::InboxPut(msg.clone())] }).await {
            Ok(()) => Ok(Ok(msg.id)),
            Err(StoreError::Conflict(_)) => Ok(Err(self.duplicate(&msg).await?)),
            Err(e) => Err(e.into()),
        }
    }

    /// The answer to an inbox message, once the owner handled it.
    pub async fn inbox_answer(&self, id: &str) -> Result<Option<Value>, EngineError> {
        Ok(self.sh.store.inbox_get(id, false).await?.and_then(|m| m.answer))
    }

    /// Handles every pending inbox message (the store's owner calls this
    /// when it polls); returns how many it handled.
    pub async fn process_inbox(&self) -> Result<usize, EngineError> {
        let _g = self.sh.inbox.lock().await;
        let pending = self.sh.store.inbox_pending().await?;
        let n = pending.len();
        for m in pending {
            match &m.kind {
                InboxKind::Signal { run, step, item } => {
                    let answer = self.signal_with(run, step, *item, m.data.clone(), Some(m.id.clone())).await?;
                    if !answer.accepted() {
                        // Drivers and the undriven path record refusals too;
                        // this covers a run that no longer exists.
                        answer_once(&self.sh, &m.id, &answer).await?;
                    }
                }
                InboxKind::Event { .. } => {
                    self.handle_event(&m).await?;
                }
                InboxKind::Cancel { run } => {
                    let answer = match self.cancel(run).await {
                        Ok(r) => json!({"state": r.state}),
                        Err(EngineError::NotFound(_)) => json!({"error": format!("no run {run}")}),
                        Err(EngineError::Store(e)) => return Err(e.into()),
                        Err(e) => json!({"error": e.to_string()}),
                    };
                    answer_once(&self.sh, &m.id, &answer).await?;
                }
                InboxKind::Deliver { run, step, event } => {
                    let took = self.deliver_event(run, step, event, &m.data).await?;
                    answer_once(&self.sh, &m.id, &took).await?;
                }
            }
        }
        Ok(n)
    }

    /// Delivers a stored event message and records its answer.
    async fn handle_event(&self, msg: &InboxRecord) -> Result<EmitAnswer, EngineError> {
        let InboxKind::Event { event, id } = &msg.kind else { unreachable!("an event") };
        let mut delivered = vec![];
        for w in self.sh.store.event_waits(event).await? {
            if !w.takes_event(event, &msg.data) {
                continue;
            }
            if self.deliver_event(&w.run, &w.step, event, &msg.data).await? {
                delivered.push(Delivered { run: w.run.clone(), step: w.step.clone() });
            }
        }
        let answer = EmitAnswer { id: id.clone(), delivered, duplicate: false };
        answer_once(&self.sh, &msg.id, &answer).await?;
        Ok(answer)
    }

    async fn deliver_event(&self, run: &RunId, step: &str, name: &str, data: &Value) -> Result<bool, EngineError> {
        let mail = |reply| Mail::Event { step: step.to_string(), name: name.to_string(), data: data.clone(), reply };
        match self.to_run(run, mail, || event_undriven(&self.sh, run, step, name, data)).await {
            Ok(took) => Ok(took.unwrap_or(false)),
            // Another worker drives the run: handed to it (it waits for the
            // event: the wait was open when the event was matched).
            Err(EngineError::Store(StoreError::Fenced(_))) => {
                let kind = InboxKind::Deliver { run: run.clone(), step: step.to_string(), event: name.to_string() };
                self.post(kind, data.clone()).await?;
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// Leaves a message for the worker that drives its run.
    async fn post(&self, kind: InboxKind, data: Value) -> Result<String, EngineError> {
        let msg = InboxRecord { id: new_id(&self.sh, "m_"), kind, data, at: self.sh.clock.now_ms(), answer: None };
        self.sh.commit(Batch { writes: vec![Write::InboxPut(msg.clone())] }).await?;
        Ok(msg.id)
    }

    /// Leaves a message for the worker that drives its run and waits for
    /// its answer (woken by the store's watch; without one, it looks every
    /// 20 ms), at most [`super::EngineConfig::relay_timeout_ms`].
    pub(super) async fn relay(&self, kind: InboxKind, data: Value) -> Result<Value, EngineError> {
        let what = format!("{} for run {}", kind.name(), kind.run().map(|r| r.as_str()).unwrap_or("-"));
        let mut watch = self.sh.store.watch();
        let id = self.post(kind, data).await?;
        let until = tokio::time::Instant::now() + std::time::Duration::from_millis(self.sh.config.relay_timeout_ms);
        loop {
            if let Some(a) = self.inbox_answer(&id).await? {
                return Ok(a);
            }
            let tick = tokio::time::sleep(std::time::Duration::from_millis(if watch.is_some() { 1000 } else { 20 }));
            tokio::select! {
                ok = async { match &mut watch { Some(w) => w.changed().await, None => std::future::pending().await } } => {
                    if !ok {
                        watch = None;
                    }
                }
                _ = tick => {}
                _ = tokio::time::sleep_until(until) => {
                    return Err(EngineError::Store(StoreError::Busy(format!(
                        "the worker driving the run did not answer the {what} within {} ms",
                        self.sh.config.relay_timeout_ms
                    ))));
                }
            }
        }
    }

    /// Hands something to run `run`: to its driver when one runs here (as
    /// the mail `mail` builds), else straight to the store (`undriven`),
    /// trying again while the run changes meanwhile (a driver starting or
    /// stopping, a store conflict), up to 20 times: `None` then.
    async fn to_run<T, F>(
        &self,
        run: &RunId,
        mail: impl Fn(oneshot::Sender<T>) -> Mail,
        undriven: impl Fn() -> F,
    ) -> Result<Option<T>, EngineError>
    where
        F: std::future::Future<Output = Result<T, EngineError>>,
    {
        for _ in 0..20 {
            if let Some(tx) = self.mailbox(run) {
                let (reply, rx) = oneshot::channel();
                let sent = tx.send(mail(reply)).is_ok();
                // Not held while the answer is awaited: a message sent just
                // as the driver hibernated (its receiver dropped, its queue
                // drained) is freed, with its reply, only when the last
                // sender goes; holding this one would wait for ever.
                drop(tx);
                if sent && let Ok(a) = rx.await {
                    return Ok(Some(a));
                }
                // The driver stopped meanwhile: ask again.
                tokio::task::yield_now().await;
                continue;
            }
            match undriven().await {
                Err(EngineError::Store(StoreError::Conflict(_))) => {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                other => return other.map(Some),
            }
        }
        Ok(None)
    }
}

/// Records the answer to an inbox message unless one is recorded.
async fn answer_once<T: Serialize>(sh: &Shared, id: &str, answer: &T) -> Result<(), EngineError> {
    let answer = serde_json::to_value(answer).unwrap_or(Value::Null);
    match sh.commit(Batch { writes: vec![Write::InboxAnswer { id: id.to_string(), answer }] }).await {
        Ok(()) | Err(StoreError::Conflict(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The items of `step`'s `for_each` wait in a stored run: how many it
/// has (its wait record lists them) and which have no answer yet (an
/// answered item has a succeeded attempt).
fn stored_items(rec: &RunRecord, step: &str) -> (Vec<WaitKind>, ItemsOpen) {
    let kinds = match rec.waits.iter().find(|w| w.step == step).map(|w| &w.kind) {
        Some(WaitKind::Items { items }) => items.clone(),
        _ => vec![],
    };
    let done = |k: ItemIndex| {
        rec.attempts.iter().any(|a| a.step == step && a.item == Some(k) && a.state == AttemptState::Succeeded)
    };
    let open = (0..kinds.len() as u32).map(ItemIndex).filter(|k| !done(*k)).collect();
    (kinds.clone(), ItemsOpen { n: kinds.len(), open })
}

/// The writes that resolve a waiting step of a run nobody drives: the step
/// succeeds with `output`, its wait closes, and the run resumes `working`
/// when no other signal wait is left. For a `for_each` wait, `items` take
/// `output` (each as an attempt of its item, as a driver records it), and
/// the step succeeds only once no item is left.
async fn resolve_undriven(
    sh: &Shared,
    rec: &RunRecord,
    step: &str,
    items: &[ItemIndex],
    output: &Value,
    how: Value,
    mut extra: Vec<Write>,
) -> Result<(), EngineError> {
    let run = &rec.id;
    let now = sh.clock.now_ms();
    let mut seq = rec.last_seq;
    let mut ev = |kind: String, item: Option<ItemIndex>, data: Value| {
        seq = Seq(seq.0 + 1);
        Write::Event(NewEvent { run: run.clone(), seq, at: now, kind, step: Some(step.to_string()), item, data })
    };
    let mut b = Batch::new();
    let mut step_output = Some(output.clone());
    if !items.is_empty() {
        let (kinds, open) = stored_items(rec, step);
        for &k in items {
            let mine = rec.attempts.iter().filter(|a| a.step == step && a.item == Some(k));
            let attempt = mine.map(|a| a.attempt.next()).max().unwrap_or(AttemptNo::FIRST);
            let (run, step, item) = (run.clone(), step.to_string(), Some(k));
            b.push(Write::StartAttempt {
                run: run.clone(),
                step: step.clone(),
                item,
                attempt,
                lease_until: now,
                at: now,
                input: None,
            });
            b.push(Write::FinishAttempt {
                run,
                step,
                item,
                attempt,
                state: AttemptState::Succeeded,
                output: Some(output.clone()),
                error: None,
                fuel: None,
                blame: 0,
                at: now,
            });
            let mut data = json!({"item": k, "attempt": attempt});
            if let (Value::Object(d), Value::Object(x)) = (&mut data, how.clone()) {
                d.extend(x);
            }
            b.push(ev("item.succeeded".into(), item, data));
        }
        step_output = open.open.iter().all(|k| items.contains(k)).then(|| {
            let answer = |k: ItemIndex| {
                let stored = rec
                    .attempts
                    .iter()
                    .find(|a| a.step == step && a.item == Some(k) && a.state == AttemptState::Succeeded);
                stored.and_then(|a| a.output.clone()).unwrap_or_else(|| output.clone())
            };
            Value::Array((0..kinds.len() as u32).map(|k| answer(ItemIndex(k))).collect())
        });
    }
    if let Some(output) = step_output {
        b.push(Write::StepState {
            run: run.clone(),
            step: step.to_string(),
            from: StepState::Waiting,
            to: StepState::Succeeded,
            output: Some(output),
            error: None,
            next_attempt_at: None,
            at: now,
        });
        b.push(Write::CloseWait { run: run.clone(), step: step.to_string() });
        let mut data = json!({"state": "succeeded"});
        if let (Value::Object(d), Value::Object(x)) = (&mut data, how) {
            d.extend(x);
        }
        b.push(ev("step.succeeded".into(), None, data));
        let signals_left = rec.waits.iter().any(|w| w.step != step && w.kind.is_signal());
        if matches!(rec.state, RunState::InputRequired | RunState::AuthRequired) && !signals_left {
            let to = rec.state.apply(RunEvent::Resume)?;
            b.push(Write::RunState { run: run.clone(), from: rec.state, to, output: None, error: None, at: now });
            seq = Seq(seq.0 + 1);
            let data = json!({"state": to});
            b.push(Write::Event(NewEvent {
                run: run.clone(),
                seq,
                at: now,
                kind: format!("run.{to}"),
                step: None,
                item: None,
                data,
            }));
        }
    }
    b.writes.append(&mut extra);
    sh.commit(b).await?;
    Ok(())
}

async fn signal_undriven(
    sh: &Shared,
    run: &RunId,
    step: &str,
    item: Option<ItemIndex>,
    data: &Value,
    inbox: Option<&str>,
) -> Result<SignalAnswer, EngineError> {
    let Some(rec) = sh.store.run(run).await? else {
        return Ok(SignalAnswer::NotFound { message: format!("no run {run}") });
    };
    let def = sh.plans.get(&rec).map_err(|p| EngineError::Plan(p.to_string()))?;
    let found = def.steps.iter().zip(&rec.steps).find(|(s, _)| s.name == step);
    let answer = match found {
        None => no_such_step(run, step, def.steps.iter().map(|s| s.name.as_str())),
        Some((s, r)) => match check_signal(s, r.state, item, &stored_items(&rec, step).1, data) {
            Ok(()) => SignalAnswer::Accepted { output: data.clone() },
            Err(a) => a,
        },
    };
    let answer_write = |a: &SignalAnswer| {
        inbox.map(|id| Write::InboxAnswer { id: id.to_string(), answer: serde_json::to_value(a).unwrap_or_default() })
    };
    if answer.accepted() {
        let extra = answer_write(&answer).into_iter().collect();
        let items: Vec<ItemIndex> = item.into_iter().collect();
        resolve_undriven(sh, &rec, step, &items, data, json!({"by": "signal"}), extra).await?;
    } else if let Some(id) = inbox {
        answer_once(sh, id, &answer).await?;
    }
    Ok(answer)
}

async fn event_undriven(sh: &Shared, run: &RunId, step: &str, name: &str, data: &Value) -> Result<bool, EngineError> {
    let Some(rec) = sh.store.run(run).await? else { return Ok(false) };
    let def = sh.plans.get(&rec).map_err(|p| EngineError::Plan(p.to_string()))?;
    let Some((s, _)) =
        def.steps.iter().zip(&rec.steps).find(|(s, r)| s.name == step && waits_for_event(s, r.state, name))
    else {
        return Ok(false);
    };
    // A `for_each` wait: every item still waiting whose `match` holds.
    let items: Vec<ItemIndex> = match s.for_each {
        None => vec![],
        Some(_) => {
            let (kinds, open) = stored_items(&rec, step);
            let takers: Vec<ItemIndex> =
                open.open.into_iter().filter(|k| kinds[k.0 as usize].takes_event(name, data)).collect();
            if takers.is_empty() {
                return Ok(false);
            }
            takers
        }
    };
    resolve_undriven(sh, &rec, step, &items, data, json!({"by": "event", "event": name}), vec![]).await?;
    Ok(true)
}
