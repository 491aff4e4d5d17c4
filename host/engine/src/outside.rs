//! What reaches a run from outside, as stored records: the waits a run's
//! steps are parked on ([`WaitRecord`]), the inbox of signals and events
//! other processes hand to the store's owner ([`InboxRecord`]), and cron
//! schedules ([`ScheduleRecord`]).
//!
//! Every one of them is written through a [`crate::store::Batch`], so a
//! wait opens in the same commit as its step's `waiting` transition and
//! closes in the same commit as the step's outcome; an inbox message is
//! answered in the same commit as the step it resolved; a schedule's next
//! fire time moves in the same commit as the run it fired.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{ItemIndex, RunId};
use crate::state::RunState;

/// What a parked step waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaitKind {
    /// A signal (`weft signal`, MCP `run_signal`) validated against `schema`.
    Signal {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
        /// What the answer is about, shown before the question (a wait's
        /// `preview`, resolved when it started; a remote agent's artifact).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preview: Option<Value>,
        /// The run's state while it waits: `input-required` or `auth-required`.
        reason: RunState,
        /// Set when a running attempt asked ([`crate::runner::Question`]),
        /// not a `wait` step: what its runner needs to go on, handed back
        /// with the answer, which runs the attempt again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<Value>,
    },
    /// An event of this name whose data has every `match` field (resolved
    /// when the step parked).
    Event {
        event: String,
        #[serde(rename = "match", default, skip_serializing_if = "serde_json::Map::is_empty")]
        matches: serde_json::Map<String, Value>,
    },
    /// A child run (`"child": RUN_ID` in JSON).
    Child {
        #[serde(rename = "child")]
        run: RunId,
    },
    /// A durable timer.
    Sleep,
    /// A `for_each` step parked once per item: `items[k]` is what item `k`
    /// waits for (a signal that names the item, an event, its child run).
    /// Answered items are its attempts; the wait closes with the last.
    Items { items: Vec<WaitKind> },
}

impl WaitKind {
    /// The kind's name and event name, as the stores index them (a
    /// `for_each` wait by its first item's: its items are all alike).
    pub fn index_columns(&self) -> (&'static str, Option<&str>) {
        match self {
            WaitKind::Signal { .. } => ("signal", None),
            WaitKind::Event { event, .. } => ("event", Some(event.as_str())),
            WaitKind::Child { .. } => ("child", None),
            WaitKind::Sleep => ("sleep", None),
            WaitKind::Items { items } => items.first().map_or(("items", None), WaitKind::index_columns),
        }
    }

    /// Whether an event of `name` with `data` resolves this wait (for a
    /// `for_each` wait: one of its items): every `match` field holds for
    /// the same top-level field of `data` (a key that starts with `/` is a
    /// JSON Pointer into `data`). A value holds when it equals the field,
    /// and an object when each of its fields holds (other fields of the
    /// event's object do not matter).
    pub fn takes_event(&self, name: &str, data: &Value) -> bool {
        match self {
            WaitKind::Event { event, matches } => event == name && weft_model::condition::match_holds(matches, data),
            WaitKind::Items { items } => items.iter().any(|k| k.takes_event(name, data)),
            _ => false,
        }
    }

    /// The child runs this waits for.
    pub fn children(&self) -> Vec<&RunId> {
        match self {
            WaitKind::Child { run } => vec![run],
            WaitKind::Items { items } => items.iter().flat_map(WaitKind::children).collect(),
            _ => vec![],
        }
    }

    /// Whether this is a wait for a signal (for a `for_each` wait: per item).
    pub fn is_signal(&self) -> bool {
        match self {
            WaitKind::Signal { .. } => true,
            WaitKind::Items { items } => items.first().is_some_and(WaitKind::is_signal),
            _ => false,
        }
    }
}

/// A step parked on something outside the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitRecord {
    pub run: RunId,
    pub step: String,
    #[serde(flatten)]
    pub kind: WaitKind,
    /// When the wait times out or the timer fires (ms since epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<i64>,
    pub since: i64,
}

impl WaitRecord {
    /// Whether an event of `name` with `data` resolves this wait (see
    /// [`WaitKind::takes_event`]).
    pub fn takes_event(&self, name: &str, data: &Value) -> bool {
        self.kind.takes_event(name, data)
    }
}

/// What an inbox message asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InboxKind {
    /// Answer the wait of `step` in `run` (of its item `item`, for a
    /// `for_each` wait).
    Signal {
        run: RunId,
        step: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<ItemIndex>,
    },
    /// Deliver an event to every matching wait. `id` makes it idempotent:
    /// a second message with the same id is refused by the store.
    Event {
        event: String,
        #[serde(rename = "event_id")]
        id: String,
    },
    /// Cancel `run`: left for the worker that drives it (a store shared by
    /// many workers; see [`crate::store::LeaseStore::claim_run`]).
    Cancel { run: RunId },
    /// Hand the event `event` (its data is the message's) to the wait of
    /// `step` in `run`: what an event becomes for a run another worker
    /// drives. The answer is whether the wait took it.
    Deliver {
        run: RunId,
        step: String,
        event: String,
        /// The event's id (recorded with the step it resolves).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    /// Replace `run`'s definition (its `notify` changes from `old`; the
    /// message's data is `{"definition", "old", "what"}`): left for the
    /// worker that drives it. The answer is `{"changed": "done" | "ended" |
    /// "moved"}` or `{"error"}`.
    Redefine { run: RunId },
}

impl InboxKind {
    /// The run a message is for (`None` for an event: it goes to every
    /// matching wait). On a store shared by many workers, the worker that
    /// drives that run handles the message.
    pub fn run(&self) -> Option<&RunId> {
        match self {
            InboxKind::Signal { run, .. }
            | InboxKind::Cancel { run }
            | InboxKind::Deliver { run, .. }
            | InboxKind::Redefine { run } => Some(run),
            InboxKind::Event { .. } => None,
        }
    }

    /// The kind's name, as stored.
    pub fn name(&self) -> &'static str {
        match self {
            InboxKind::Signal { .. } => "signal",
            InboxKind::Event { .. } => "event",
            InboxKind::Cancel { .. } => "cancel",
            InboxKind::Deliver { .. } => "deliver",
            InboxKind::Redefine { .. } => "redefine",
        }
    }

    /// An event's id (unique among events).
    pub fn event_id(&self) -> Option<&str> {
        match self {
            InboxKind::Event { id, .. } => Some(id),
            _ => None,
        }
    }
}

/// Whether an inbox answer says `queued`: a signal for a step that did
/// not wait yet, kept for it (stores match `$.status = 'queued'` too).
pub fn is_queued_answer(answer: &Value) -> bool {
    answer.get("status").and_then(Value::as_str) == Some("queued")
}

/// A message to the store's owner, with its answer once handled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxRecord {
    /// Chosen by the sender (unique).
    pub id: String,
    #[serde(flatten)]
    pub kind: InboxKind,
    pub data: Value,
    pub at: i64,
    /// `None` while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
}

/// A cron schedule that starts runs of a template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// `[a-z0-9][a-z0-9_-]*`, unique.
    pub name: String,
    pub template: String,
    /// Five fields (minute hour day month weekday) or six (seconds first), UTC.
    pub cron: String,
    pub input: Value,
    /// The next instant it fires (ms since epoch).
    pub next_fire_at: i64,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fire_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<RunId>,
    /// A paused schedule does not fire; resumed, it fires at its next time
    /// after the resume (the times it was paused over are not made up).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_match_by_name_and_fields() {
        let mut m = serde_json::Map::new();
        m.insert("channel".into(), json!("c1"));
        m.insert("n".into(), json!(1));
        let w = WaitRecord {
            run: RunId::generate(1, &crate::SeededRng::new(1)),
            step: "reply".into(),
            kind: WaitKind::Event { event: "chat.reply".into(), matches: m },
            until: None,
            since: 1,
        };
        assert!(w.takes_event("chat.reply", &json!({"channel": "c1", "n": 1.0, "text": "hi"})));
        assert!(!w.takes_event("chat.reply", &json!({"channel": "c2", "n": 1})));
        assert!(!w.takes_event("chat.reply", &json!({"channel": "c1"})));
        assert!(!w.takes_event("chat.other", &json!({"channel": "c1", "n": 1})));
        // Nested objects match a subset; a key may be a JSON Pointer.
        let nested = |m: Value| WaitKind::Event { event: "e".into(), matches: m.as_object().unwrap().clone() };
        let data = json!({"raw": {"discord": {"replyToMessageId": "m1", "guild": "g"}, "other": 1}});
        assert!(nested(json!({"raw": {"discord": {"replyToMessageId": "m1"}}})).takes_event("e", &data));
        assert!(nested(json!({"/raw/discord/replyToMessageId": "m1"})).takes_event("e", &data));
        assert!(!nested(json!({"raw": {"discord": {"replyToMessageId": "m2"}}})).takes_event("e", &data));
        assert!(!nested(json!({"/raw/discord/missing": "m1"})).takes_event("e", &data));
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["kind"], "event");
        assert_eq!(v["match"]["channel"], "c1");
        assert_eq!(serde_json::from_value::<WaitRecord>(v).unwrap(), w);
    }

    /// Flattened kinds must not reuse their record's field names.
    #[test]
    fn records_round_trip_through_json() {
        let run = RunId::generate(1, &crate::SeededRng::new(1));
        let child = RunId::generate(2, &crate::SeededRng::new(2));
        let w = WaitRecord {
            run: run.clone(),
            step: "c".into(),
            kind: WaitKind::Child { run: child },
            until: None,
            since: 1,
        };
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(serde_json::from_value::<WaitRecord>(v).unwrap(), w);
        let m = InboxRecord {
            id: "m1".into(),
            kind: InboxKind::Event { event: "e".into(), id: "e1".into() },
            data: json!(1),
            at: 1,
            answer: None,
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!((v["id"].as_str(), v["event_id"].as_str()), (Some("m1"), Some("e1")));
        assert_eq!(serde_json::from_value::<InboxRecord>(v).unwrap(), m);
        let s = InboxRecord { kind: InboxKind::Signal { run, step: "s".into(), item: Some(ItemIndex(2)) }, ..m };
        assert_eq!(serde_json::from_value::<InboxRecord>(serde_json::to_value(&s).unwrap()).unwrap(), s);
    }
}
