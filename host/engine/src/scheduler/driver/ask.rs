//! Attempts that ask: a runner's [`StepOutput::Ask`] (a remote agent's
//! task wants input) parks its step on a signal wait, like a `wait` step's,
//! whose record carries the runner's `resume`; the run is `input-required`
//! (or `auth-required`). The answer, checked against the question's
//! schema, runs the same attempt again as itself (same number, same
//! idempotency key), carrying [`StepRequest::answer`].
//!
//! Nothing is lost across a crash:
//! - the question is the wait record, opened in the commit that records
//!   the attempt `interrupted` (by the question) and the step `waiting`;
//! - the answer is kept as the step's stored output while the step is
//!   retrying or running (`{"answer": data, "resume": ...}`), written in
//!   the commit that closes the wait, and carried by every write of the
//!   step until the attempt ends, so an attempt cut short after the answer
//!   runs again with it. A failed attempt's retry is a new attempt with a
//!   new key: it starts over, without the answer.
//!
//! A step that ends while it asks (its run canceled, a race lost) has its
//! runner told after the commit ([`crate::runner::StepRunner::abandon`]).
//! A `for_each` item cannot ask: its attempt fails, saying so.

use super::*;
use crate::runner::{Answer, Question};

impl Driver {
    /// Attempt `attempt` of unit `u` of step `i` asks `q`.
    pub(super) fn on_ask(&mut self, i: usize, u: usize, attempt: AttemptNo, q: Question) -> Result<(), EngineError> {
        let said = q.prompt.clone().unwrap_or_else(|| "(no question given)".into());
        if let Some(k) = self.steps[i].units[u].item {
            let e = StepError::new(
                ErrorKind::ToolError,
                format!(
                    "item {k} asked for input ({said}); only a step without `for_each` can wait for an answer: give \
                     each item what it needs in its input"
                ),
                false,
            );
            return self.attempt_failed(i, u, attempt, e);
        }
        let unit = &mut self.steps[i].units[u];
        (unit.interruptions, unit.blame) = (0, 0);
        let why = format!("asked for input: {said}; the attempt runs again, as itself, with the answer");
        self.finish_attempt(
            i,
            u,
            attempt,
            AttemptState::Interrupted,
            None,
            Some(StepError::new(ErrorKind::Interrupted, why, true)),
        );
        self.steps[i].set_unit(u, UnitState::Parked);
        self.steps[i].units[u].next_attempt = attempt;
        let reason = match q.reason {
            RunState::AuthRequired => RunState::AuthRequired,
            _ => RunState::InputRequired,
        };
        let kind =
            WaitKind::Signal { prompt: q.prompt, schema: q.schema, preview: q.preview, reason, resume: Some(q.resume) };
        self.steps[i].parked = vec![kind.clone()];
        let now = self.now();
        self.step_to(i, StepEvent::Park, Value::Null, None, json!({"wait": kind, "attempt": attempt}))?;
        let step = self.def.steps[i].name.clone();
        self.batch.push(Write::OpenWait(WaitRecord { run: self.id.clone(), step, kind, until: None, since: now }));
        Ok(())
    }

    /// The question step `i` asked, while it waits for the answer.
    pub(super) fn asked(&self, i: usize) -> Option<&WaitKind> {
        if self.steps[i].state != StepState::Waiting {
            return None;
        }
        match self.steps[i].parked.as_slice() {
            [k @ WaitKind::Signal { resume: Some(_), .. }] => Some(k),
            _ => None,
        }
    }

    /// Step `i` asking, loaded: its one unit parked on `kind` (its wait
    /// record), its attempt to run again as itself once answered.
    pub(super) fn load_asking(&mut self, i: usize, kind: WaitKind, rec: &RunRecord) {
        let name = &self.def.steps[i].name;
        let last = rec.attempts.iter().filter(|a| &a.step == name && a.item.is_none()).map(|a| a.attempt).max();
        let mut unit = Unit::new(None, Value::Null);
        unit.state = UnitState::Parked;
        unit.next_attempt = last.unwrap_or(AttemptNo::FIRST);
        self.steps[i].units = vec![unit];
        self.steps[i].parked = vec![kind];
        self.steps[i].recount();
    }

    /// Step `i`'s question is answered with `data` (valid against its
    /// schema): the attempt that asked runs again at once, carrying it.
    pub(super) fn answered(&mut self, i: usize, data: Value) -> Result<(), EngineError> {
        let Some(WaitKind::Signal { resume: Some(resume), .. }) = self.steps[i].parked.pop() else {
            unreachable!("step {i} asks")
        };
        let now = self.now();
        self.steps[i].set_unit(0, UnitState::Retrying);
        let unit = &mut self.steps[i].units[0];
        unit.retry_at = now;
        let attempt = unit.next_attempt;
        let carried = json!({"answer": data, "resume": resume});
        let extra = json!({"by": "signal", "attempt": attempt, "next_attempt_at": now});
        self.step_to(i, StepEvent::ScheduleRetry, carried, None, extra)
    }

    /// The answer step `i` carries into its attempt (see the module's doc).
    pub(super) fn carried_answer(&self, i: usize) -> Option<Answer> {
        if !matches!(self.steps[i].state, StepState::Retrying | StepState::Running) {
            return None;
        }
        let o = self.steps[i].output.as_object()?;
        Some(Answer { resume: o.get("resume")?.clone(), data: o.get("answer")?.clone() })
    }

    /// Step `i` left its wait for `to`: a question left unanswered is
    /// abandoned (its runner told once the batch is durable).
    pub(super) fn left_wait(&mut self, i: usize, to: StepState) {
        if self.def.steps[i].for_each.is_some() {
            return;
        }
        if let Some(WaitKind::Signal { resume: Some(resume), .. }) = self.steps[i].parked.pop()
            && to.is_terminal()
        {
            self.to_abandon.push((self.def.steps[i].action.clone(), resume));
        }
    }

    /// Tells the runners of the questions abandoned in a durable batch.
    pub(super) fn abandon_questions(&mut self) {
        for (action, resume) in self.to_abandon.drain(..) {
            let runner = self.sh.runner.clone();
            tokio::spawn(async move { runner.abandon(&action, &resume).await });
        }
    }
}
