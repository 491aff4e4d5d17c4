//! A run's notifications changed after it started: its stored definition
//! is replaced by one with the same steps (an A2A client adds or deletes a
//! push configuration on a task that runs). Like a signal, the change goes
//! through the run's driver when there is one (it swaps its plan, writes
//! the definition and a `notify.changed` event in its next batch, and
//! answers once that is durable), or straight to the store otherwise, with
//! the run's next event seq, so that a driver starting meanwhile and this
//! write cannot both win. Notifications of transitions after the change
//! follow the new `notify`; those decided before stay as they were.

use std::sync::Arc;

use serde_json::Value;

use super::mail::{Mail, Redefined};
use super::{Engine, EngineError, Shared};
use crate::ids::RunId;
use crate::model_glue::{Definition, parse_definition};
use crate::outside::InboxKind;
use crate::store::{Batch, NewEvent, StoreError, Write};

/// Why a run's definition cannot be replaced.
fn refused(why: impl Into<String>) -> EngineError {
    EngineError::Plan(why.into())
}

/// `new` may replace `old`: it parses, and its steps are `old`'s.
pub(super) fn same_steps(old: &Definition, new: &Value) -> Result<Definition, EngineError> {
    let def = parse_definition(new).map_err(|p| refused(format!("the new definition does not parse: {p}")))?;
    if serde_json::to_value(&def.steps).ok() != serde_json::to_value(&old.steps).ok() {
        return Err(refused("only a run's `notify` can change after it started, not its steps"));
    }
    Ok(def)
}

impl Engine {
    /// Replaces run `run`'s definition by `edit` of it, which may change
    /// only its `notify` (`what` describes the change, for its event).
    /// `Ok(false)` when the run has ended: nothing changed. Two changes at
    /// once are applied one after the other, each to what the other left.
    pub async fn redefine(
        &self,
        run: &RunId,
        edit: impl Fn(&Value) -> Value,
        what: Value,
    ) -> Result<bool, EngineError> {
        for _ in 0..20 {
            let (rec, old) = self.current(run).await?;
            if rec.state.is_terminal() {
                return Ok(false);
            }
            let json = edit(&rec.definition);
            let def = Arc::new(same_steps(&old, &json)?);
            let (json, was) = (Arc::new(json), serde_json::to_value(&old.notify).unwrap_or_default());
            match self.redefine_once(run, def, json, was, what.clone()).await? {
                Redefined::Done => return Ok(true),
                Redefined::Ended => return Ok(false),
                Redefined::Moved => continue,
            }
        }
        Err(EngineError::Store(StoreError::Busy(format!("run {run}'s notify kept changing"))))
    }

    /// One try: through the driver, the store, or the worker that drives it.
    async fn redefine_once(
        &self,
        run: &RunId,
        def: Arc<Definition>,
        json: Arc<Value>,
        old: Value,
        what: Value,
    ) -> Result<Redefined, EngineError> {
        let answered = match self
            .to_run(
                run,
                |reply| Mail::Redefine {
                    def: def.clone(),
                    json: json.clone(),
                    old: old.clone(),
                    what: what.clone(),
                    reply,
                },
                || redefine_undriven(&self.sh, run, json.clone(), &old, what.clone()),
            )
            .await
        {
            // Another worker drives the run: it makes the change.
            Err(EngineError::Store(StoreError::Fenced(_))) => {
                let data = serde_json::json!({"definition": &*json, "old": old, "what": what});
                let answer = self.relay(InboxKind::Redefine { run: run.clone() }, data).await?;
                if let Some(e) = answer.get("error").and_then(Value::as_str) {
                    return Err(EngineError::Plan(e.to_string()));
                }
                return Ok(match answer["changed"].as_str() {
                    Some("done") => Redefined::Done,
                    Some("ended") => Redefined::Ended,
                    _ => Redefined::Moved,
                });
            }
            other => other?,
        };
        Ok(answered.unwrap_or(Redefined::Moved))
    }

    /// Run `run` as stored, and its plan.
    async fn current(&self, run: &RunId) -> Result<(crate::store::RunRecord, Arc<Definition>), EngineError> {
        let rec = self.sh.store.run(run).await?.ok_or_else(|| EngineError::NotFound(run.clone()))?;
        let plan = self.sh.plans.get(&rec).map_err(|p| EngineError::Plan(p.to_string()))?;
        Ok((rec, plan))
    }

    /// An inbox message of another worker's `redefine` (see [`InboxKind::Redefine`]).
    pub(super) async fn redefine_relayed(&self, run: &RunId, data: &Value) -> Value {
        let tried = async {
            let (_, old) = self.current(run).await?;
            let def = Arc::new(same_steps(&old, &data["definition"])?);
            let json = Arc::new(data["definition"].clone());
            self.redefine_once(run, def, json, data["old"].clone(), data["what"].clone()).await
        };
        match tried.await {
            Ok(Redefined::Done) => serde_json::json!({"changed": "done"}),
            Ok(Redefined::Ended) => serde_json::json!({"changed": "ended"}),
            Ok(Redefined::Moved) => serde_json::json!({"changed": "moved"}),
            Err(e) => serde_json::json!({"error": e.to_string()}),
        }
    }
}

/// The change for a run nobody drives here.
async fn redefine_undriven(
    sh: &Shared,
    run: &RunId,
    json: Arc<Value>,
    old: &Value,
    what: Value,
) -> Result<Redefined, EngineError> {
    let Some(rec) = sh.store.run(run).await? else { return Err(EngineError::NotFound(run.clone())) };
    if rec.state.is_terminal() {
        return Ok(Redefined::Ended);
    }
    let now_notify = sh.plans.get(&rec).map_err(|p| EngineError::Plan(p.to_string()))?;
    if serde_json::to_value(&now_notify.notify).ok().as_ref() != Some(old) {
        return Ok(Redefined::Moved);
    }
    let now = sh.clock.now_ms();
    let ev = NewEvent {
        run: run.clone(),
        seq: rec.last_seq.next(),
        at: now,
        kind: "notify.changed".into(),
        step: None,
        item: None,
        data: what,
    };
    sh.commit(Batch { writes: vec![Write::RunDefinition { run: run.clone(), definition: json }, Write::Event(ev)] })
        .await?;
    Ok(Redefined::Done)
}
