//! The notifications a driven run's transitions cause (its definition's
//! `notify`): written into the transition's own batch, with their body
//! resolved as the run stands (see [`crate::notices`]).

use super::*;
use crate::model_glue::NotifyOn;
use crate::notices::{self, RunFacts};

impl Driver {
    /// The run entered `to` (its event is the batch's last): the
    /// notifications it causes.
    pub(super) fn notify_run(&mut self, to: RunState, output: Option<&Value>, error: Option<&StepError>) {
        let Some(on) = notices::on_state(to) else { return };
        self.notify(on, output, error);
    }

    /// Step `i`'s wait was answered (its event is the batch's last): its
    /// notifications are written when the batch is flushed, with the run's
    /// state as the batch leaves it (a signal that answered the last wait
    /// moves the run back to `working` later in the same round).
    pub(super) fn notify_resolved(&mut self, i: usize) {
        let on = NotifyOn::Resolved(self.def.steps[i].name.clone());
        if self.def.notify.iter().any(|n| n.on.contains(&on)) {
            self.resolved.push((i, self.seq));
        }
    }

    /// The notifications of the waits resolved in this batch.
    /// They go before the batch's other notifications (one of the run's
    /// end, say): a key's notifications go out in the order written.
    pub(super) fn notify_resolved_now(&mut self) {
        if self.resolved.is_empty() {
            return;
        }
        let start = self.batch.writes.len();
        for (i, seq) in std::mem::take(&mut self.resolved) {
            self.notify_at(NotifyOn::Resolved(self.def.steps[i].name.clone()), None, None, seq);
        }
        let added: Vec<Write> = self.batch.writes.drain(start..).collect();
        let first = self.batch.writes.iter().position(|w| matches!(w, Write::PutDelivery(_)));
        let at = first.unwrap_or(self.batch.writes.len());
        self.batch.writes.splice(at..at, added);
    }

    fn notify(&mut self, on: NotifyOn, output: Option<&Value>, error: Option<&StepError>) {
        self.notify_at(on, output, error, self.seq);
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
        self.batch.writes.extend(writes);
    }

    /// The steps that wait for a signal: `{step, prompt?, schema?}` each.
    fn waiting(&self) -> Vec<Value> {
        let mut out = vec![];
        for (i, s) in self.steps.iter().enumerate() {
            let Action::Wait(w) = &self.def.steps[i].action else { continue };
            if s.state != StepState::Waiting || w.event.is_some() {
                continue;
            }
            let mut o = json!({"step": self.def.steps[i].name});
            if let Some(p) = &w.prompt {
                o["prompt"] = self.scope_eval(None, |sc| p.resolve(sc));
            }
            if let Some(schema) = &w.schema {
                o["schema"] = schema.clone();
            }
            out.push(o);
        }
        out
    }
}
