//! A definition's `notify`, turned into outbox writes for a transition:
//! which notifications it causes, with their body resolved now (what the
//! run was when it happened, not when the notification is sent), their
//! stable ids, FIFO keys and retry policies. The driver calls this as it
//! decides a transition; the store-side paths (a hibernated run canceled
//! or answered) call it with the stored run. Either way the writes go in
//! the transition's own batch.

use serde_json::{Value, json};

use crate::delivery::{DeliveryRecord, DeliveryRetry, DeliveryState, DeliveryTarget, delivery_id};
use crate::error::StepError;
use crate::ids::{RunId, Seq};
use crate::model_glue::{Notify, NotifyOn, NotifyTarget, RetryPolicy, Scope, StepOutcome};
use crate::state::RunState;
use crate::store::Write;

/// A run as its notifications describe it.
pub struct RunFacts<'a> {
    pub id: &'a RunId,
    pub template: &'a str,
    pub version: Option<u32>,
    /// Its state after the transition.
    pub state: RunState,
    /// An object of strings.
    pub labels: &'a Value,
    /// Its resume block (`{summary?, steps}`, see [`crate::resume`]).
    pub resume: Value,
    pub output: Option<&'a Value>,
    pub error: Option<&'a StepError>,
    /// The signal waits it asks input for: `{step, prompt?, schema?}` each.
    pub waiting: Vec<Value>,
}

/// Bytes of JSON above which the output, the summary or a step's result is
/// described and linked instead of sent.
pub const VALUE_BYTES: usize = crate::resume::RESULT_BYTES;

/// The resume context: what a notification sends by default and what
/// `@run.resume` reads in a notification's `input`.
pub fn context(f: &RunFacts<'_>, on: &NotifyOn) -> Value {
    let link = format!("/api/v1/runs/{}", f.id);
    let mut c = json!({
        "event": on.to_string(),
        "run_id": f.id,
        "template": f.template,
        "state": f.state,
        "labels": f.labels,
        "links": {"run": link, "events": format!("{link}/events")},
    });
    if let Some(v) = f.version {
        c["version"] = json!(v);
    }
    let mut resume = f.resume.clone();
    crate::resume::cap_all(&mut resume, VALUE_BYTES);
    if let Some(s) = resume.get("summary") {
        c["summary"] = s.clone();
    }
    c["steps"] = resume.get("steps").cloned().unwrap_or_else(|| json!([]));
    if let Some(o) = f.output {
        let mut o = o.clone();
        crate::resume::cap(&mut o, VALUE_BYTES);
        c["output"] = o;
    }
    if let Some(e) = f.error {
        c["error"] = e.to_value();
    }
    if !f.waiting.is_empty() {
        c["waiting"] = Value::Array(f.waiting.clone());
    }
    c
}

/// `@run.resume` reads the resume context; everything else as `inner`.
struct NoticeScope<'a> {
    inner: &'a dyn Scope,
    context: &'a Value,
}

impl Scope for NoticeScope<'_> {
    fn input(&self) -> &Value {
        self.inner.input()
    }
    fn step(&self, name: &str) -> Option<StepOutcome<'_>> {
        self.inner.step(name)
    }
    fn run_id(&self) -> &str {
        self.inner.run_id()
    }
    fn labels(&self) -> Value {
        self.inner.labels()
    }
    fn resume(&self) -> Value {
        self.context.clone()
    }
}

/// A step's retry policy as a delivery's.
pub fn retry_of(p: &RetryPolicy) -> DeliveryRetry {
    let fixed = matches!(p.backoff, weft_model::retry::Backoff::Fixed);
    DeliveryRetry {
        max_attempts: p.max_attempts.max(1),
        backoff_ms: p.initial_delay_ms,
        max_backoff_ms: if fixed { p.initial_delay_ms } else { p.max_delay_ms.max(p.initial_delay_ms) },
    }
}

/// The deliveries `notify` asks for on `on`, for the transition logged at
/// `seq` (its ids are stable: one per run, notification and transition).
#[allow(clippy::too_many_arguments)]
pub fn writes(
    notify: &[Notify],
    on: &NotifyOn,
    facts: &RunFacts<'_>,
    scope: &dyn Scope,
    seq: Seq,
    at: i64,
    retry: DeliveryRetry,
) -> Vec<Write> {
    let mut out = vec![];
    let mut context = None;
    for (i, n) in notify.iter().enumerate().filter(|(_, n)| n.on.contains(on)) {
        let Some(target) = n.target() else { continue };
        let context = context.get_or_insert_with(|| self::context(facts, on));
        let scope = NoticeScope { inner: scope, context };
        // A ref that leads nowhere (a label the run was not given) is not
        // sent as null: the notification is kept failed, saying which.
        let body = match &n.input {
            Some(t) => t.try_resolve(&scope).map_err(|u| format!("its `input` does not resolve: {}", u.message)),
            None => Ok(context.clone()),
        };
        let key = match n.key.as_ref().map(|t| t.try_resolve(&scope)).transpose() {
            Ok(k) => Ok(k.and_then(|k| match k {
                Value::Null => None,
                Value::String(s) => Some(s),
                other => Some(other.to_string()),
            })),
            Err(u) => Err(format!("its `key` does not resolve: {}", u.message)),
        };
        let (body, key, unresolved) = match (body, key) {
            (Ok(b), Ok(k)) => (b, k, None),
            (Err(e), _) | (_, Err(e)) => (Value::Null, None, Some(format!("not sent: {e}"))),
        };
        let target = match target {
            NotifyTarget::Webhook(name) => DeliveryTarget::Webhook { name },
            NotifyTarget::Tool(t) => DeliveryTarget::Tool { server: t.server, name: t.name },
            NotifyTarget::Push(p) => {
                DeliveryTarget::Push { url: p.url, id: p.id, token: p.token, authorization: p.authorization }
            }
        };
        out.push(Write::PutDelivery(DeliveryRecord {
            id: delivery_id(facts.id, i, seq.0),
            run: facts.id.clone(),
            on: on.to_string(),
            target,
            key,
            body,
            retry: n.retry.as_ref().map(retry_of).unwrap_or(retry),
            state: if unresolved.is_some() { DeliveryState::Failed } else { DeliveryState::Pending },
            attempts: 0,
            next_at: at,
            lease_until: None,
            error: unresolved,
            created_at: at,
            updated_at: at,
        }));
    }
    out
}

/// [`writes`] for a stored run, as `rec` stands after the transition
/// (the store-side paths: a hibernated run canceled or answered).
pub fn for_record(
    notify: &[Notify],
    on: &NotifyOn,
    rec: &crate::store::RunRecord,
    seq: Seq,
    at: i64,
    retry: DeliveryRetry,
) -> Vec<Write> {
    if !notify.iter().any(|n| n.on.contains(on)) {
        return vec![];
    }
    let labels = serde_json::to_value(&rec.labels).unwrap_or_default();
    let mut scope = weft_model::MapScope::new(rec.input.clone());
    scope.run_id = rec.id.to_string();
    scope.labels = labels.clone();
    for s in &rec.steps {
        scope.steps.insert(s.name.clone(), (s.state, s.output.clone().unwrap_or(Value::Null)));
    }
    let waiting = rec
        .waits
        .iter()
        .filter_map(|w| match &w.kind {
            crate::outside::WaitKind::Signal { prompt, schema, .. } => {
                Some(json!({"step": w.step, "prompt": prompt, "schema": schema}))
            }
            _ => None,
        })
        .collect();
    let asks = matches!(rec.state, RunState::InputRequired | RunState::AuthRequired);
    let facts = RunFacts {
        id: &rec.id,
        template: &rec.template,
        version: rec.version,
        state: rec.state,
        labels: &labels,
        resume: crate::view::resume_of(rec),
        output: rec.output.as_ref(),
        error: rec.error.as_ref(),
        waiting: if asks { waiting } else { vec![] },
    };
    writes(notify, on, &facts, &scope, seq, at, retry)
}

/// What a run's state change notifies on, if anything.
pub fn on_state(to: RunState) -> Option<NotifyOn> {
    weft_model::notify::NOTIFY_STATES.contains(&to).then_some(NotifyOn::Run(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notify(v: Value) -> Vec<Notify> {
        let def = json!({"name": "n", "steps": [{"name": "a", "return": 1}], "notify": v});
        weft_model::from_value(&def, &weft_model::NoSchemas).unwrap().notify
    }

    #[test]
    fn a_transition_writes_one_delivery_per_matching_notification() {
        let n = notify(json!([
            {"on": ["completed"], "webhook": "ops"},
            {"on": ["failed"], "webhook": "ops"},
            {"on": ["completed"], "tool": {"server": "agent", "name": "resume"},
             "input": {"session": "@run.labels.session", "context": "@run.resume"}, "key": "@run.labels.session",
             "retry": {"max_attempts": 3, "initial_delay_ms": 10, "backoff": "fixed"}}
        ]));
        let id: RunId = "r_0000000000000000000000000a".parse().unwrap();
        let labels = json!({"session": "s1"});
        let facts = RunFacts {
            id: &id,
            template: "t",
            version: Some(2),
            state: RunState::Completed,
            labels: &labels,
            resume: json!({"summary": "did it", "steps": [{"name": "a", "state": "succeeded", "result": 1}]}),
            output: Some(&json!({"x": "y".repeat(2000)})),
            error: None,
            waiting: vec![],
        };
        let mut scope = weft_model::MapScope::new(json!({}));
        scope.labels = labels.clone();
        let default = DeliveryRetry { max_attempts: 8, backoff_ms: 1000, max_backoff_ms: 60_000 };
        let on = on_state(RunState::Completed).unwrap();
        let w = writes(&n, &on, &facts, &scope, Seq(9), 5, default);
        let ds: Vec<&DeliveryRecord> = w
            .iter()
            .map(|w| match w {
                Write::PutDelivery(d) => d,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ds.len(), 2, "the `failed` one is not sent on completed");
        assert_eq!(ds[0].target, DeliveryTarget::Webhook { name: "ops".into() });
        assert_eq!(ds[0].body["summary"], "did it");
        assert_eq!(ds[0].body["event"], "completed");
        assert_eq!(ds[0].body["links"]["run"], "/api/v1/runs/r_0000000000000000000000000a");
        assert_eq!(ds[0].body["output"]["large"]["type"], "object", "a large output is described");
        assert_eq!(ds[0].retry, default);
        assert_eq!(ds[1].key.as_deref(), Some("s1"));
        assert_eq!(ds[1].body["session"], "s1");
        assert_eq!(ds[1].body["context"]["run_id"], "r_0000000000000000000000000a", "@run.resume is the context");
        assert_eq!(ds[1].retry, DeliveryRetry { max_attempts: 3, backoff_ms: 10, max_backoff_ms: 10 });
        assert_ne!(ds[0].id, ds[1].id);
        assert_eq!(ds[0].id, delivery_id(&id, 0, 9), "stable: the same transition gives the same id");
        // A label the run was not given: kept failed, not sent as null.
        let mut bare = weft_model::MapScope::new(json!({}));
        bare.labels = json!({});
        let w = writes(&n, &on, &facts, &bare, Seq(9), 5, default);
        let Write::PutDelivery(d) = &w[1] else { panic!() };
        assert_eq!((d.state, &d.body), (DeliveryState::Failed, &Value::Null));
        assert!(d.error.as_deref().unwrap().contains("`input` does not resolve"), "{:?}", d.error);
    }
}
