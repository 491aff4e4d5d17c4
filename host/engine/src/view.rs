//! The run views every front end shows: typed structs that serialise to the
//! documented JSON (docs/cli.md, "The run as JSON") —
//! `weft runs show --json`, the MCP tools `run_get` and `run_events`, the
//! run resources, and the HTTP API. Built straight from the store's
//! records; times as RFC 3339.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::rfc3339;
use crate::error::StepError;
use crate::ids::ItemIndex;
use crate::outside::{WaitKind, WaitRecord};
use crate::state::{RunState, StepState};
use crate::store::{ArtifactRecord, EventRecord, RunRecord, StepRecord};

/// A run: `{"id", "template", "version", "state", "input", "output",
/// "error", "parent", "created_at", "updated_at", "steps", "waits",
/// "artifacts"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunView {
    /// The run's id (`r_…`).
    pub id: String,
    pub template: String,
    pub version: Option<u32>,
    pub state: RunState,
    pub input: Value,
    pub output: Option<Value>,
    pub error: Option<StepError>,
    /// The parent run's id, for a child run.
    pub parent: Option<String>,
    /// The caller's labels (absent when none).
    #[serde(default, skip_serializing_if = "weft_model::Labels::is_empty")]
    pub labels: weft_model::Labels,
    /// How deep a child run nests (1 for a child of a top-level run);
    /// absent for a top-level run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    pub created_at: String,
    pub updated_at: String,
    /// When it times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    pub steps: Vec<StepView>,
    /// The steps parked on something outside the run: signals to answer,
    /// events to emit, child runs, timers.
    #[serde(default)]
    pub waits: Vec<WaitView>,
    /// Files the steps produced (their bytes: `weft runs artifacts`, or the
    /// MCP resource `weft://runs/{id}/artifacts/{name}`).
    #[serde(default)]
    pub artifacts: Vec<ArtifactView>,
    /// What the run did so far, for whoever picks it up (see
    /// [`crate::resume`]): `{summary?, steps: [{name, description?, state,
    /// result? | error?}]}`; also `@run.resume`.
    #[serde(default)]
    pub resume: Value,
    /// Its notifications (the definition's `notify`), with where each
    /// stands: `{id, on, target, state, attempts, error?, ...}` (absent
    /// when none; filled by the front end that reads them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<Value>,
}

/// A step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepView {
    pub name: String,
    /// What the step is for (the definition's `description`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub state: StepState,
    /// Attempts made (for a `for_each` step: of all its items together;
    /// see `items`).
    pub attempts: u32,
    /// A `for_each` step: its items by the state of their latest attempt
    /// (items not started yet are not counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<ItemCounts>,
    pub output: Option<Value>,
    pub error: Option<StepError>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// When a retrying step tries again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    /// Times its attempts were interrupted (their process died, or the host
    /// panicked) and ran again as themselves; absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptions: Option<u32>,
    /// What its latest attempt was given, refs resolved (absent for a
    /// `for_each` step: see `tries`, and for steps that ran no attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Every attempt (each item's, for a `for_each` step; the first 100)
    /// when there is more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tries: Vec<TryView>,
}

/// A `for_each` step's items by the state of their latest attempt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ItemCounts {
    pub succeeded: u32,
    pub failed: u32,
    /// Stopped as another item failed, or the run ended.
    pub canceled: u32,
    /// Running, or waiting to try again.
    pub unfinished: u32,
}

/// The most attempts a [`StepView`] lists.
pub const MAX_TRIES_SHOWN: usize = 100;

/// One attempt of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TryView {
    pub attempt: u32,
    /// The item, for a `for_each` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
    /// running, succeeded, failed, canceled or interrupted.
    pub state: String,
    /// What it was given, refs resolved (absent when a ref resolved to
    /// nothing: see `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
}

/// What a parked step waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitOn {
    /// A signal (`weft signal`, MCP `run_signal`).
    Signal,
    /// An event (`weft emit`, MCP `event_emit`).
    Event,
    /// A child run.
    Child,
    /// A durable timer.
    Sleep,
}

/// A step parked on something outside the run. A `signal` wait is answered
/// with data matching `schema`; an `event` wait by an event named `event`
/// whose data has the fields of `match`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WaitView {
    /// The waiting step.
    pub step: String,
    /// The item of a `for_each` step (each item waits on its own; a signal
    /// names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
    pub kind: WaitOn,
    /// Since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// When the wait times out or the timer fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Signal: what to ask whoever answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Signal: the JSON Schema the data must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Signal: what the answer is about, shown before the question (the
    /// wait's `preview`; a remote agent's artifact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<Value>,
    /// Signal: the run's state while it waits (input-required or auth-required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<RunState>,
    /// Event: the event's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Event: the fields the event's data must have.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<serde_json::Map<String, Value>>,
    /// Child: the child run's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
}

/// A file a step produced, kept with its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactView {
    pub name: String,
    pub mime: String,
    /// Bytes.
    pub size: u64,
    /// Hex sha256 of its bytes.
    pub sha256: String,
    /// The step (and item, for a for_each step) whose attempt made it.
    pub step: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
    pub attempt: u32,
    pub created_at: String,
    /// Where a reader of this front end gets its bytes (MCP: the resource
    /// `weft://runs/{id}/artifacts/{name}`), when it has such an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// One event of a run's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventView {
    /// Its position in the log (the first is 1).
    pub seq: u64,
    /// When.
    pub at: String,
    /// `run.<state>`, `step.<state>`, `item.<state>`, `attempt.*`, `progress`, `log`, ...
    pub kind: String,
    pub step: Option<String>,
    pub item: Option<u32>,
    pub data: Value,
}

/// A page of a run's events: what MCP `run_events` and `GET
/// /api/v1/runs/{id}/events` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventPage {
    pub run_id: String,
    pub events: Vec<EventView>,
    /// Pass this as the next page's `after` (`after_seq`).
    pub last_seq: u64,
    /// More events are stored after `last_seq` (this page stopped at its
    /// limit).
    pub more: bool,
    /// The run's state now.
    pub state: RunState,
    /// The run reached a final state (no event follows its last).
    pub finished: bool,
}

impl EventPage {
    /// The page of `run`'s events after `after`, at most `limit`, from
    /// `read`: up to `limit + 1` events read after `after` (the one more
    /// says whether more are stored).
    pub fn of(run: &RunRecord, mut read: Vec<EventRecord>, after: u64, limit: usize) -> EventPage {
        let more = read.len() > limit;
        read.truncate(limit);
        let events: Vec<EventView> = read.iter().map(EventView::of).collect();
        let last_seq = events.last().map(|e| e.seq).unwrap_or(after);
        EventPage {
            run_id: run.id.to_string(),
            events,
            last_seq,
            more,
            state: run.state,
            finished: run.state.is_terminal(),
        }
    }
}

impl RunView {
    /// The view of a stored run.
    pub fn of(r: &RunRecord) -> RunView {
        RunView {
            id: r.id.to_string(),
            template: r.template.clone(),
            version: r.version,
            state: r.state,
            input: r.input.clone(),
            output: r.output.clone(),
            error: r.error.clone(),
            parent: r.parent.as_ref().map(ToString::to_string),
            depth: (r.depth > 0).then_some(r.depth),
            labels: r.labels.clone(),
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            deadline: r.deadline_at.map(rfc3339),
            steps: r.steps.iter().map(|s| StepView::of(r, s)).collect(),
            waits: WaitView::all(r),
            artifacts: r.artifacts.iter().map(ArtifactView::of).collect(),
            resume: resume_of(r),
            notifications: vec![],
        }
    }
}

/// The resume block of a stored run: its `summary` rendered with the
/// stored values (refs that lead nowhere give null).
pub fn resume_of(r: &RunRecord) -> Value {
    let summary = r.definition.get("summary").map(|t| match weft_model::Template::compile(t.clone()) {
        Ok(t) => {
            let mut scope = weft_model::MapScope::new(r.input.clone());
            scope.run_id = r.id.to_string();
            scope.labels = serde_json::to_value(&r.labels).unwrap_or_default();
            for s in &r.steps {
                let output = s.output.clone().filter(|_| s.state.is_terminal());
                scope.steps.insert(s.name.clone(), (s.state, output.unwrap_or(Value::Null)));
            }
            t.resolve(&scope)
        }
        Err(_) => t.clone(),
    });
    let steps = r.steps.iter().map(|s| crate::resume::StepSeen {
        name: &s.name,
        description: crate::resume::description(&r.definition, &s.name),
        state: s.state,
        output: s.output.as_ref().filter(|_| s.state.is_terminal()).unwrap_or(&Value::Null),
        error: s.error.as_ref().map(|e| e.message.as_str()),
    });
    crate::resume::build(summary, steps)
}

impl StepView {
    /// Step `s` of run `r`.
    pub fn of(r: &RunRecord, s: &StepRecord) -> StepView {
        // Attempts that ran again because their process died.
        let interruptions: u32 = r.attempts.iter().filter(|a| a.step == s.name).map(|a| a.interruptions).sum();
        let mine: Vec<&crate::store::AttemptRecord> = r.attempts.iter().filter(|a| a.step == s.name).collect();
        let latest = mine.iter().filter(|a| a.item.is_none()).max_by_key(|a| a.attempt);
        let tries = if mine.len() > 1 {
            mine.iter()
                .take(MAX_TRIES_SHOWN)
                .map(|a| TryView {
                    attempt: a.attempt.get(),
                    item: a.item.map(|i| i.0),
                    state: a.state.as_str().to_string(),
                    input: a.input.clone(),
                    error: a.error.clone(),
                })
                .collect()
        } else {
            vec![]
        };
        let mut latest_of_item: std::collections::BTreeMap<ItemIndex, &crate::store::AttemptRecord> =
            Default::default();
        for a in mine.iter().filter(|a| a.item.is_some()) {
            let e = latest_of_item.entry(a.item.expect("an item")).or_insert(a);
            if a.attempt > e.attempt {
                *e = a;
            }
        }
        let items = (!latest_of_item.is_empty()).then(|| {
            let mut c = ItemCounts::default();
            for a in latest_of_item.values() {
                match a.state {
                    crate::state::AttemptState::Succeeded => c.succeeded += 1,
                    crate::state::AttemptState::Failed => c.failed += 1,
                    crate::state::AttemptState::Canceled => c.canceled += 1,
                    _ => c.unfinished += 1,
                }
            }
            c
        });
        StepView {
            name: s.name.clone(),
            description: crate::resume::description(&r.definition, &s.name).map(String::from),
            state: s.state,
            attempts: s.attempts,
            items,
            // A step not ended has no output (one that asked keeps its
            // answer there until its attempt ends: not an output).
            output: s.output.clone().filter(|_| s.state.is_terminal()),
            error: s.error.clone(),
            started_at: s.started_at.map(rfc3339),
            ended_at: s.ended_at.map(rfc3339),
            next_attempt_at: s.next_attempt_at.map(rfc3339),
            interruptions: (interruptions > 0).then_some(interruptions),
            input: latest.and_then(|a| a.input.clone()),
            tries,
        }
    }
}

impl WaitView {
    /// One open wait (for a `for_each` step, one per item still waiting).
    pub fn of(w: &WaitRecord, r: &RunRecord) -> Vec<WaitView> {
        let base = WaitView {
            step: w.step.clone(),
            item: None,
            kind: WaitOn::Sleep,
            since: Some(rfc3339(w.since)),
            until: w.until.map(rfc3339),
            prompt: None,
            schema: None,
            preview: None,
            reason: None,
            event: None,
            matches: None,
            child: None,
        };
        let answered = |k: u32| {
            r.attempts.iter().any(|a| {
                a.step == w.step && a.item == Some(ItemIndex(k)) && a.state == crate::state::AttemptState::Succeeded
            })
        };
        match &w.kind {
            WaitKind::Items { items } => (0..items.len() as u32)
                .filter(|k| !answered(*k))
                .map(|k| WaitView { item: Some(k), ..base.clone() }.on(&items[k as usize]))
                .collect(),
            kind => vec![base.on(kind)],
        }
    }

    /// This view waiting on `kind`.
    fn on(mut self, kind: &WaitKind) -> WaitView {
        match kind {
            WaitKind::Signal { prompt, schema, preview, reason, .. } => {
                self.kind = WaitOn::Signal;
                self.prompt = prompt.clone();
                self.schema = schema.clone();
                self.preview = preview.clone();
                self.reason = Some(*reason);
            }
            WaitKind::Event { event, matches } => {
                self.kind = WaitOn::Event;
                self.event = Some(event.clone());
                self.matches = (!matches.is_empty()).then(|| matches.clone());
            }
            WaitKind::Child { run } => {
                self.kind = WaitOn::Child;
                self.child = Some(run.to_string());
            }
            WaitKind::Sleep | WaitKind::Items { .. } => {}
        }
        self
    }

    /// The open waits of a run, in definition order.
    pub fn all(r: &RunRecord) -> Vec<WaitView> {
        r.waits.iter().flat_map(|w| WaitView::of(w, r)).collect()
    }
}

impl ArtifactView {
    /// One artifact's description.
    pub fn of(a: &ArtifactRecord) -> ArtifactView {
        ArtifactView {
            name: a.name.clone(),
            mime: a.mime.clone(),
            size: a.size,
            sha256: a.sha256.clone(),
            step: a.step.clone(),
            item: a.item.map(|i| i.0),
            attempt: a.attempt.get(),
            created_at: rfc3339(a.created_at),
            uri: None,
        }
    }
}

impl EventView {
    /// One event.
    pub fn of(e: &EventRecord) -> EventView {
        EventView {
            seq: e.seq.0,
            at: rfc3339(e.at),
            kind: e.kind.clone(),
            step: e.step.clone(),
            item: e.item.map(|i| i.0),
            data: e.data.clone(),
        }
    }
}

/// [`RunView`] as JSON.
pub fn run_json(r: &RunRecord) -> Value {
    serde_json::to_value(RunView::of(r)).expect("views serialize")
}

/// [`ArtifactView`] as JSON.
pub fn artifact_json(a: &ArtifactRecord) -> Value {
    serde_json::to_value(ArtifactView::of(a)).expect("views serialize")
}

/// [`EventView`] as JSON (`runs events --json`).
pub fn event_json(e: &EventRecord) -> Value {
    serde_json::to_value(EventView::of(e)).expect("views serialize")
}
