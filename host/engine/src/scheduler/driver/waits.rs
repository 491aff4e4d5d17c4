//! Parked steps: `wait` (signals and events), `sleep` and `workflow`
//! (child runs). A parked step is `waiting` with a [`WaitRecord`] opened in
//! the same batch; whatever resolves it (a signal, an event, its timer, the
//! child's end, a cancel) closes the record in the batch of its outcome
//! (see `step_to`). While a signal wait is open the run is
//! `input-required` (or `auth-required`).

use super::*;
use crate::model_glue::Step;
use crate::scheduler::mail::{check_signal, no_such_step, waits_for_event};
use weft_model::WaitReason;

impl Driver {
    /// Claims step `i` and parks it on `kind` (until `until`, if any).
    pub(super) fn park(
        &mut self,
        i: usize,
        kind: WaitKind,
        until: Option<i64>,
        extra: Value,
    ) -> Result<(), EngineError> {
        let now = self.now();
        self.steps[i].activated = true;
        self.step_to(i, StepEvent::Claim, Value::Null, None, json!({}))?;
        let mut data = json!({"wait": kind});
        if let Some(u) = until {
            data["next_attempt_at"] = json!(u);
        }
        if let (Value::Object(d), Value::Object(x)) = (&mut data, extra) {
            d.extend(x);
        }
        self.step_to(i, StepEvent::Park, Value::Null, None, data)?;
        self.steps[i].wake_at = until;
        let step = self.def.steps[i].name.clone();
        self.batch.push(Write::OpenWait(WaitRecord { run: self.id.clone(), step, kind, until, since: now }));
        Ok(())
    }

    /// A `wait` step starts waiting: for a signal (prompt resolved now) or
    /// an event (its `match` resolved now, so later changes do not move it).
    pub(super) fn start_wait(&mut self, i: usize) -> Result<(), EngineError> {
        let Action::Wait(spec) = &self.def.steps[i].action else { unreachable!("a wait step") };
        let spec = spec.clone();
        let until = spec.timeout_ms.map(|t| self.now().saturating_add(t.min(i64::MAX as u64) as i64));
        let resolved = |t: Option<&crate::model_glue::Template>| match t {
            Some(t) => self.scope_eval(None, |s| t.try_resolve(s)).map(Some),
            None => Ok(None),
        };
        let (matches, prompt) = match (resolved(spec.matches.as_ref()), resolved(spec.prompt.as_ref())) {
            (Ok(m), Ok(p)) => (m, p),
            (Err(u), _) | (_, Err(u)) => return self.fail_unclaimed(i, crate::model_glue::unresolved_error(u)),
        };
        let kind = match &spec.event {
            Some(event) => {
                let matches = match matches {
                    Some(Value::Object(m)) => m,
                    _ => Default::default(),
                };
                WaitKind::Event { event: event.clone(), matches }
            }
            None => {
                let prompt = prompt.map(|v| match v {
                    Value::String(s) => s,
                    v => v.to_string(),
                });
                let reason = match spec.reason {
                    WaitReason::InputRequired => RunState::InputRequired,
                    WaitReason::AuthRequired => RunState::AuthRequired,
                };
                WaitKind::Signal { prompt, schema: spec.schema.clone(), reason }
            }
        };
        self.park(i, kind, until, json!({}))
    }

    /// A `workflow` step: its child run is created and awaited once the
    /// batch that parks the step is durable.
    pub(super) fn start_child(&mut self, i: usize) -> Result<(), EngineError> {
        let max = self.sh.config.max_depth;
        if self.depth >= max {
            self.step_to(i, StepEvent::Claim, Value::Null, None, json!({}))?;
            let err = StepError::new(
                ErrorKind::Validation,
                format!("child runs nest at most {max} deep (this run is at depth {})", self.depth),
                false,
            );
            return self.step_failed(i, err);
        }
        let t = self.def.steps[i].input.clone();
        if let Err(u) = self.scope_eval(None, |s| t.try_resolve(s)) {
            return self.fail_unclaimed(i, crate::model_glue::unresolved_error(u));
        }
        let spec = self.child_spec(i);
        let extra = json!({"child": spec.id});
        self.park(i, WaitKind::Child { run: spec.id.clone() }, None, extra)?;
        self.to_spawn.push(spec);
        Ok(())
    }

    pub(super) fn child_spec(&self, i: usize) -> ChildSpec {
        let Action::Workflow(w) = &self.def.steps[i].action else { unreachable!("a workflow step") };
        let t = self.def.steps[i].input.clone();
        let input = self.scope_eval(None, |s| t.resolve(s));
        let step = &self.def.steps[i].name;
        ChildSpec {
            step: i,
            id: children::child_id(&self.id, step),
            parent: self.id.clone(),
            depth: self.depth + 1,
            template: w.template.clone(),
            version: w.version,
            input,
            traceparent: crate::trace::RunTrace::of(&self.id, self.info.trace.as_deref()).child_traceparent(),
        }
    }

    /// The child run of step `i` ended (or could not be created).
    pub(super) fn on_child(&mut self, i: usize, r: Result<RunRecord, StepError>) -> Result<(), EngineError> {
        if self.state.is_terminal() || self.steps[i].state != StepState::Waiting {
            return Ok(());
        }
        match r.and_then(|rec| children::outcome(&rec)) {
            Ok(v) => self.step_to(i, StepEvent::Succeed, v, None, json!({})),
            Err(e) => self.step_failed(i, e),
        }
    }

    pub(super) fn on_mail(&mut self, m: Mail) -> Result<(), EngineError> {
        match m {
            Mail::Signal { step, data, inbox, reply } => {
                let answer = match self.names.get(&step).copied() {
                    None => no_such_step(&self.id, &step, self.def.steps.iter().map(|s| s.name.as_str())),
                    Some(_) if self.state.is_terminal() => {
                        SignalAnswer::NotWaiting { message: format!("run {} is {}", self.id, self.state) }
                    }
                    Some(i) => match check_signal(&self.def.steps[i], self.steps[i].state, &data) {
                        Ok(()) => {
                            self.step_to(i, StepEvent::Succeed, data.clone(), None, json!({"by": "signal"}))?;
                            SignalAnswer::Accepted { output: data }
                        }
                        Err(a) => a,
                    },
                };
                if let Some(id) = inbox {
                    let answer = serde_json::to_value(&answer).unwrap_or_default();
                    self.batch.push(Write::InboxAnswer { id, answer });
                }
                self.replies.push(Reply::Signal(reply, answer));
            }
            Mail::Event { step, name, data, reply } => {
                let ok = match self.names.get(&step).copied() {
                    Some(i) if !self.state.is_terminal() => {
                        let ok = waits_for_event(&self.def.steps[i], self.steps[i].state, &name);
                        if ok {
                            self.step_to(i, StepEvent::Succeed, data, None, json!({"by": "event", "event": name}))?;
                        }
                        ok
                    }
                    _ => false,
                };
                self.replies.push(Reply::Event(reply, ok));
            }
        }
        Ok(())
    }

    /// Parked steps whose time came: a `sleep` succeeds (its output the
    /// instant it was due); a `wait` fails with a `timeout` error.
    pub(super) fn wake_timers(&mut self, now: i64) -> Result<(), EngineError> {
        for i in 0..self.steps.len() {
            let due = self.steps[i].state == StepState::Waiting && self.steps[i].wake_at.is_some_and(|w| w <= now);
            if !due {
                continue;
            }
            let at = self.steps[i].wake_at.unwrap_or(now);
            match &self.def.steps[i].action {
                Action::Sleep(_) => {
                    let out = json!({"slept_until": crate::clock::rfc3339(at)});
                    self.step_to(i, StepEvent::Succeed, out, None, json!({}))?;
                }
                Action::Wait(w) => {
                    let what = match &w.event {
                        Some(e) => format!("no `{e}` event"),
                        None => "no signal".to_string(),
                    };
                    let ms = w.timeout_ms.unwrap_or_default();
                    let err = StepError::new(ErrorKind::Timeout, format!("{what} within timeout_ms = {ms}"), false);
                    self.step_failed(i, err)?;
                }
                _ => self.steps[i].wake_at = None,
            }
            if self.state.is_terminal() {
                break;
            }
        }
        Ok(())
    }

    /// After a `join: any | race` step went ahead: parked dependencies that
    /// nothing else needs any more are canceled (the other approver, the
    /// timer that lost the race), so the run can end.
    pub(super) fn release_losers(&mut self, i: usize) -> Result<(), EngineError> {
        let deps: Vec<usize> = self.graph.dependencies(i).map(|e| e.from).collect();
        for d in deps {
            if self.steps[d].state != StepState::Waiting {
                continue;
            }
            let needed =
                self.graph.dependents(d).any(|e| !self.steps[e.to].activated && !self.steps[e.to].state.is_terminal());
            if needed {
                continue;
            }
            if let Action::Workflow(_) = &self.def.steps[d].action {
                self.to_cancel.push(children::child_id(&self.id, &self.def.steps[d].name));
            }
            let why = format!("not needed: `{}` went ahead", self.def.steps[i].name);
            self.step_to(d, StepEvent::Cancel, Value::Null, Some(StepError::canceled(why)), json!({}))?;
        }
        Ok(())
    }

    /// The run is `input-required` / `auth-required` while a signal wait is
    /// open (the first one's reason), `working` otherwise.
    pub(super) fn sync_waiting(&mut self) -> Result<(), EngineError> {
        let want = self
            .def
            .steps
            .iter()
            .zip(&self.steps)
            .find_map(|(d, s)| match (&d.action, s.state) {
                (Action::Wait(w), StepState::Waiting) if w.event.is_none() => Some(match w.reason {
                    WaitReason::InputRequired => RunState::InputRequired,
                    WaitReason::AuthRequired => RunState::AuthRequired,
                }),
                _ => None,
            })
            .unwrap_or(RunState::Working);
        if self.state == want || self.state == RunState::Submitted {
            return Ok(());
        }
        if self.state != RunState::Working {
            self.run_to(RunEvent::Resume, None, None)?;
        }
        match want {
            RunState::InputRequired => self.run_to(RunEvent::NeedInput, None, None),
            RunState::AuthRequired => self.run_to(RunEvent::NeedAuth, None, None),
            _ => Ok(()),
        }
    }

    /// Whether the run only waits for outside input (no attempt in flight,
    /// no retry or timer due, nothing ready).
    pub(super) fn is_parked(&self) -> bool {
        self.inflight.is_empty()
            && self.def.steps.iter().zip(&self.steps).all(|(d, s): (&Step, &StepRt)| match s.state {
                StepState::Pending => !s.activated,
                StepState::Waiting => !matches!(d.action, Action::Sleep(_)),
                StepState::Running | StepState::Retrying => false,
                _ => true,
            })
    }

    /// Whether the driver may end and leave the run hibernated: it is not
    /// ended, everything decided is committed and answered, nothing is in
    /// flight or due, and every unfinished step is a signal or event `wait`
    /// that waits (or a step that is not ready).
    pub(super) fn can_hibernate(&self) -> bool {
        !self.state.is_terminal()
            && self.batch.is_empty()
            && self.replies.is_empty()
            && self.inflight.is_empty()
            && self.children.is_empty()
            && self.to_launch.is_empty()
            && self.done_now.is_empty()
            && self.to_spawn.is_empty()
            && self.to_cancel.is_empty()
            && !self.want_permit
            && self.steps.iter().any(|s| s.state == StepState::Waiting)
            && self.def.steps.iter().zip(&self.steps).all(|(d, s)| match s.state {
                StepState::Pending => !s.activated,
                StepState::Waiting => matches!(d.action, Action::Wait(_)),
                StepState::Running | StepState::Retrying => false,
                _ => true,
            })
    }
}
