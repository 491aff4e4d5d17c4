//! Signals and events: what outside data says to a parked `wait` step,
//! and the answers. A signal or event for a run this engine drives goes to
//! the run's driver as [`Mail`], so it is decided and committed in the
//! same order as every other transition of the run (a run hibernated here
//! is woken to take it); the checks here ([`check_signal`]) are the ones
//! the driver and the store-side path (`mail_undriven`) both apply. Where
//! a signal came from ([`Via`]) says where its answer goes. The entry
//! points are in `inbox`; what comes before a wait, in `early`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{EngineError, Shared};
use crate::ids::{ItemIndex, RunId};
use crate::model_glue::{Action, Problem, Step};
use crate::outside::{InboxKind, InboxRecord, WaitKind};
use crate::state::StepState;
use crate::store::{Batch, StoreError, Write};

/// A message for a run's driver.
pub(crate) enum Mail {
    Signal {
        step: String,
        item: Option<ItemIndex>,
        data: Value,
        via: Via,
        reply: oneshot::Sender<SignalAnswer>,
    },
    Event {
        step: String,
        name: String,
        data: Value,
        /// The event's id (recorded with the step it resolves, so an event
        /// emitted before a wait started is taken once per run).
        id: Option<String>,
        reply: oneshot::Sender<bool>,
    },
    /// The run's `notify` changes (see `redefine`), if it is still `old`.
    Redefine {
        def: std::sync::Arc<crate::model_glue::Definition>,
        json: std::sync::Arc<Value>,
        old: Value,
        what: Value,
        reply: oneshot::Sender<Redefined>,
    },
}

/// What became of a change of a run's `notify` (see `redefine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Redefined {
    Done,
    /// The run ended: nothing changed.
    Ended,
    /// Its `notify` changed meanwhile (another change won): read it again.
    Moved,
}

/// Where a signal comes from, and so where its answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Via {
    /// A caller of [`Engine::signal`]: the answer is returned.
    Call,
    /// A pending inbox message (another process's signal): answered there.
    Inbox(String),
    /// A signal queued for a step that did not wait yet, now that it does:
    /// the queued message is settled.
    Queue(String),
}

impl Via {
    /// The write that records `answer` where the signal came from.
    pub(crate) fn answer_write(&self, answer: &SignalAnswer) -> Option<Write> {
        let answer = || serde_json::to_value(answer).unwrap_or_default();
        match self {
            Via::Call => None,
            Via::Inbox(id) => Some(Write::InboxAnswer { id: id.clone(), answer: answer() }),
            Via::Queue(id) => Some(Write::InboxSettle { id: id.clone(), answer: answer() }),
        }
    }
}

/// What a step does with a signal it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// It waits: the signal resolves it now.
    Now,
    /// It does not wait yet: the signal is queued for it.
    Queue,
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
    /// The step does not wait yet: the signal (checked against the wait's
    /// schema) is kept, and the wait takes it when it starts.
    Queued { message: String },
    /// The step does not wait for a signal (not at all, or no more).
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
/// `for_each` wait takes one per item, named; `items` are its items), now
/// or queued (a step of a live run that does not wait yet): `Err` says why
/// not.
pub(crate) fn check_signal(
    step: &Step,
    state: StepState,
    item: Option<ItemIndex>,
    items: &ItemsOpen,
    data: &Value,
    asked: Option<&WaitKind>,
) -> Result<Take, SignalAnswer> {
    // An attempt that asked (an agent step's remote task wants input).
    if let Some(WaitKind::Signal { schema, .. }) = asked {
        if item.is_some() {
            return Err(SignalAnswer::NotWaiting {
                message: format!("step `{}` has no `for_each`: signal it without `item`", step.name),
            });
        }
        if let Some(schema) = schema {
            weft_model::validate_against(schema, data).map_err(|errors| SignalAnswer::Invalid { errors })?;
        }
        return Ok(Take::Now);
    }
    let Action::Wait(w) = &step.action else {
        let message = match (&step.action, state) {
            (Action::Agent(_), s) if !s.is_terminal() => format!(
                "step `{}` is an `agent` step: it takes a signal only while its remote agent asks for input, and it \
                 does not ask now",
                step.name
            ),
            _ => format!("step `{}` is a `{}` step, not a `wait`", step.name, step.action.key()),
        };
        return Err(SignalAnswer::NotWaiting { message });
    };
    if let Some(e) = &w.event {
        return Err(SignalAnswer::NotWaiting {
            message: format!(
                "step `{}` waits for the event `{e}`, not a signal: emit the event `{e}` instead",
                step.name
            ),
        });
    }
    let take = match state {
        StepState::Waiting => Take::Now,
        // Not reached yet (or being claimed): kept for when it waits.
        StepState::Pending | StepState::Running | StepState::Retrying => Take::Queue,
        s => return Err(SignalAnswer::AlreadyResolved { state: s }),
    };
    match (step.for_each.is_some(), item) {
        (false, Some(_)) => {
            return Err(SignalAnswer::NotWaiting {
                message: format!("step `{}` has no `for_each`: signal it without `item`", step.name),
            });
        }
        (true, None) => {
            let waiting = match take {
                Take::Now => format!(" (waiting: {})", list_items(&items.open)),
                Take::Queue => String::new(),
            };
            return Err(SignalAnswer::NotWaiting {
                message: format!(
                    "step `{}` waits once per item (`for_each`): say which with `item`{waiting}",
                    step.name
                ),
            });
        }
        _ => {}
    }
    if let (Some(k), Take::Now) = (item, take) {
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
    Ok(take)
}

/// The answer to a signal queued for `step` (message `id`).
pub(crate) fn queued(step: &str, id: &str) -> SignalAnswer {
    SignalAnswer::Queued {
        message: format!(
            "step `{step}` does not wait yet: the signal is kept (message {id}) and the step takes it when it starts waiting"
        ),
    }
}

/// A signal kept for a step that does not wait yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Queued {
    pub step: String,
    pub item: Option<ItemIndex>,
    /// Its inbox message.
    pub id: String,
}

impl Queued {
    /// A queued signal's inbox message, as kept.
    pub(crate) fn of(m: &InboxRecord) -> Option<Queued> {
        match &m.kind {
            InboxKind::Signal { step, item, .. } => Some(Queued { step: step.clone(), item: *item, id: m.id.clone() }),
            _ => None,
        }
    }
}

/// Why a signal for `step` (`item`) cannot be queued beside `queued`: one
/// is queued for it already (the first is the one its wait takes), or the
/// run holds `cap`.
pub(crate) fn queue_refusal(
    queued: &[Queued],
    step: &str,
    item: Option<ItemIndex>,
    cap: usize,
) -> Option<SignalAnswer> {
    let which = match item {
        Some(k) => format!("step `{step}` (item {k})"),
        None => format!("step `{step}`"),
    };
    if let Some(q) = queued.iter().find(|q| q.step == step && q.item == item) {
        return Some(SignalAnswer::NotWaiting {
            message: format!(
                "{which} does not wait yet and a signal for it is already queued (message {}): the step takes that one when it waits, so this one was not kept",
                q.id
            ),
        });
    }
    (queued.len() >= cap).then(|| SignalAnswer::NotWaiting {
        message: format!(
            "{which} does not wait yet, and the run already holds {cap} queued signal(s) (`[limits] max_queued_signals`): signal it once it waits"
        ),
    })
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

/// Records the answer to an inbox message unless one is recorded.
pub(crate) async fn answer_once<T: Serialize>(sh: &Shared, id: &str, answer: &T) -> Result<(), EngineError> {
    let answer = serde_json::to_value(answer).unwrap_or(Value::Null);
    match sh.commit(Batch { writes: vec![Write::InboxAnswer { id: id.to_string(), answer }] }).await {
        Ok(()) | Err(StoreError::Conflict(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// How a signal for a step that does not wait yet is kept: its inbox
/// message (a new one for a call; another process's message, answered
/// `queued`), the message's id, and the answer.
pub(crate) fn queue_message(
    sh: &Shared,
    run: &RunId,
    step: &str,
    item: Option<ItemIndex>,
    data: &Value,
    via: &Via,
) -> (Write, String, SignalAnswer) {
    let id = match via {
        Via::Inbox(id) | Via::Queue(id) => id.clone(),
        Via::Call => new_id(sh, "m_"),
    };
    let answer = queued(step, &id);
    let stored = serde_json::to_value(&answer).unwrap_or_default();
    let write = match via {
        Via::Call => Write::InboxPut(InboxRecord {
            id: id.clone(),
            kind: InboxKind::Signal { run: run.clone(), step: step.to_string(), item },
            data: data.clone(),
            at: sh.clock.now_ms(),
            answer: Some(stored),
        }),
        _ => Write::InboxAnswer { id: id.clone(), answer: stored },
    };
    (write, id, answer)
}

/// How an event resolved a wait, as its events record it (with the
/// event's id, so an event is taken once per run).
pub(crate) fn by_event(name: &str, id: Option<&str>) -> Value {
    match id {
        Some(id) => json!({"by": "event", "event": name, "event_id": id}),
        None => json!({"by": "event", "event": name}),
    }
}
