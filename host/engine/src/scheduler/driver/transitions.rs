//! Recording: the run's and its steps' transitions (each checked by the
//! state machine of `crate::state`), written to the batch with their
//! events, and the notifications they trigger.

use super::*;

impl Driver {
    pub(super) fn event(&mut self, kind: String, step: Option<usize>, item: Option<ItemIndex>, data: Value) {
        self.seq = self.seq.next();
        let step = step.map(|i| self.def.steps[i].name.clone());
        let at = self.now();
        self.batch.push(Write::Event(NewEvent { run: self.id.clone(), seq: self.seq, at, kind, step, item, data }));
    }

    pub(super) fn run_to(
        &mut self,
        ev: RunEvent,
        output: Option<Value>,
        error: Option<StepError>,
    ) -> Result<(), EngineError> {
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
        self.observe_run(self.state, to);
        self.state = to;
        let mut data = json!({"state": to});
        if let Some(e) = &error {
            data["error"] = e.to_value();
        }
        self.event(format!("run.{to}"), None, None, data);
        if !self.def.notify.is_empty() {
            self.notify_run(to, output.as_ref(), error.as_ref());
        }
        Ok(())
    }

    pub(super) fn step_to(
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
        if from == StepState::Waiting && to != StepState::Waiting {
            self.batch.push(Write::CloseWait { run: self.id.clone(), step: self.def.steps[i].name.clone() });
            self.steps[i].wake_at = None;
            self.left_wait(i, to);
        }
        self.steps[i].state = to;
        self.steps[i].output = output;
        self.steps[i].error = error.as_ref().map(|e| e.message.clone());
        let mut data = json!({"state": to});
        if let (Value::Object(d), Value::Object(x)) = (&mut data, extra) {
            d.extend(x);
        }
        if let Some(e) = error {
            data["error"] = e.to_value();
        }
        self.event(format!("step.{to}"), Some(i), None, data);
        if !self.def.notify.is_empty() {
            self.notify_step(i, from, to);
        }
        Ok(())
    }
}
