//! The notifications a driven run's transitions cause (its definition's
//! `notify`): written into the transition's own batch, with their body
//! resolved as the run stands (see [`crate::notices`]).

use super::*;
use crate::model_glue::NotifyOn;
use crate::notices::{self, RunFacts};
use crate::scheduler::mail::Redefined;

impl Driver {
    /// The run entered `to` (its event is the batch's last): the
    /// notifications it causes. Asking for input is notified where a
    /// signal wait opens (see [`Driver::notify_step`]).
    pub(super) fn notify_run(&mut self, to: RunState, output: Option<&Value>, error: Option<&StepError>) {
        let Some(on) = notices::on_state(to) else { return };
        if !matches!(to, RunState::InputRequired | RunState::AuthRequired) {
            self.notify_at(on, output, error, self.seq);
        }
    }

    /// Step `i` went from `from` to `to` (its event is the batch's last).
    /// A wait answered (`resolved:STEP`) and a signal wait opened (the run
    /// asks for input: each time one opens, not only when the run's state
    /// changes) are notified at the flush, with the run's state as the
    /// batch leaves it.
    pub(super) fn notify_step(&mut self, i: usize, from: StepState, to: StepState) {
        if from == StepState::Waiting && to == StepState::Succeeded {
            let on = NotifyOn::Resolved(self.def.steps[i].name.clone());
            if self.def.notify.iter().any(|n| n.on.contains(&on)) {
                self.deferred.push((Some(i), self.seq));
            }
        }
        let signal =
            matches!(&self.def.steps[i].action, Action::Wait(w) if w.event.is_none()) || self.asked(i).is_some();
        if to == StepState::Waiting && signal && !self.deferred.iter().any(|(s, _)| s.is_none()) {
            self.deferred.push((None, self.seq));
        }
    }

    /// The run's `notify` changes from `old` (see `scheduler::redefine`):
    /// the plan is swapped, and the definition and a `notify.changed` event
    /// go in this batch; the answer waits for it. An ended run, or one
    /// whose `notify` is no longer `old`, changes nothing.
    pub(super) fn on_redefine(
        &mut self,
        def: Arc<Definition>,
        json: Arc<Value>,
        old: Value,
        what: Value,
        reply: tokio::sync::oneshot::Sender<Redefined>,
    ) {
        let answer = if self.state.is_terminal() {
            Redefined::Ended
        } else if serde_json::to_value(&self.def.notify).ok() != Some(old) {
            Redefined::Moved
        } else {
            self.def = def;
            self.batch.push(Write::RunDefinition { run: self.id.clone(), definition: json });
            self.event("notify.changed".into(), None, None, what);
            Redefined::Done
        };
        self.replies.push(Reply::Redefine(reply, answer));
    }

    /// The notifications deferred to the flush. They go before the batch's
    /// other notifications (one of the run's end, say): a key's
    /// notifications go out in the order written.
    pub(super) fn notify_deferred(&mut self) {
        if self.deferred.is_empty() {
            return;
        }
        let start = self.batch.writes.len();
        for (step, seq) in std::mem::take(&mut self.deferred) {
            match step {
                Some(i) => self.notify_at(NotifyOn::Resolved(self.def.steps[i].name.clone()), None, None, seq),
                None if matches!(self.state, RunState::InputRequired | RunState::AuthRequired) => {
                    self.notify_at(NotifyOn::Run(self.state), None, None, seq)
                }
                None => {}
            }
        }
        let added: Vec<Write> = self.batch.writes.drain(start..).collect();
        let first = self.batch.writes.iter().position(|w| matches!(w, Write::PutDelivery(_)));
        let at = first.unwrap_or(self.batch.writes.len());
        self.batch.writes.splice(at..at, added);
    }

    /// The notifications on `on` of the transition logged at `seq`.
    fn notify_at(&mut self, on: NotifyOn, output: Option<&Value>, error: Option<&StepError>, seq: Seq) {
        if !self.def.notify.iter().any(|n| n.on.contains(&on)) {
            return;
        }
        let asks = matches!(self.state, RunState::InputRequired | RunState::AuthRequired);
        let waiting = if asks { self.waiting() } else { vec![] };
        let facts = RunFacts {
            id: &self.id,
            template: &self.info.template,
            version: self.info.version,
            state: self.state,
            labels: &self.labels,
            resume: self.resume(),
            output,
            error,
            waiting,
        };
        let (at, retry) = (self.now(), self.sh.config.delivery_retry);
        let writes = self.scope_eval(None, |s| notices::writes(&self.def.notify, &on, &facts, s, seq, at, retry));
        // One whose refs led nowhere is kept failed, never sent: said in the log.
        let never: Vec<Value> = writes
            .iter()
            .filter_map(|w| match w {
                Write::PutDelivery(d) if d.state == crate::delivery::DeliveryState::Failed => {
                    Some(json!({"delivery": d.id, "on": d.on, "target": d.target, "tries": 0, "error": d.error}))
                }
                _ => None,
            })
            .collect();
        self.batch.writes.extend(writes);
        for data in never {
            self.event("notify.failed".into(), None, None, data);
        }
    }

    /// The steps that wait for a signal: `{step, item?, prompt?, schema?}`
    /// each (a `for_each` wait: each item still open).
    fn waiting(&self) -> Vec<Value> {
        let mut out = vec![];
        for (i, s) in self.steps.iter().enumerate() {
            let Action::Wait(w) = &self.def.steps[i].action else { continue };
            if s.state != StepState::Waiting || w.event.is_some() {
                continue;
            }
            // A `for_each` wait asks once per item still open.
            let items: Vec<Option<(&Value, u64)>> = match self.def.steps[i].for_each {
                None => vec![None],
                Some(_) => s
                    .units
                    .iter()
                    .filter(|u| u.state == UnitState::Parked)
                    .filter_map(|u| u.item.map(|k| Some((&u.value, k.0 as u64))))
                    .collect(),
            };
            for item in items {
                let mut o = json!({"step": self.def.steps[i].name});
                if let Some((_, k)) = item {
                    o["item"] = json!(k);
                }
                if let Some(p) = &w.prompt {
                    o["prompt"] = self.scope_eval(item, |sc| p.resolve(sc));
                }
                if let Some(schema) = &w.schema {
                    o["schema"] = schema.clone();
                }
                out.push(o);
            }
        }
        out
    }
}
