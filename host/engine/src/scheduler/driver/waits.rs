//! Parked steps: `wait` (signals and events), `sleep` and `workflow`
//! (child runs). A parked step is `waiting` with a [`WaitRecord`] opened in
//! the same batch; whatever resolves it (a signal, an event, its timer, the
//! child's end, a cancel) closes the record in the batch of its outcome
//! (see `step_to`). While a signal wait is open the run is
//! `input-required` (or `auth-required`).
//!
//! A `for_each` wait or `workflow` step parks once per item: one record
//! whose kind lists each item's wait ([`WaitKind::Items`]), one child run
//! per item. Each item is answered on its own (a signal names its item)
//! and recorded as an attempt of that item, so a restart knows which are
//! left; the step succeeds with the items' outputs in order when the last
//! one is answered, and fails at the first item that fails (a child run
//! that failed, the wait's timeout), canceling the children still running.

use super::*;
use crate::model_glue::Step;
use crate::scheduler::mail::{
    ItemsOpen, Queued, Take, Via, by_event, check_signal, list_items, no_such_step, queue_message, queue_refusal,
    queued, waits_for_event,
};
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
        self.look_early(i);
        Ok(())
    }

    /// Wait step `i` waits: once that is committed, it takes what came
    /// before it, if anything can have (see [`Engine::take_early`]).
    pub(super) fn look_early(&mut self, i: usize) {
        let Action::Wait(w) = &self.def.steps[i].action else { return };
        if w.event.is_some() || !self.queued.is_empty() {
            self.early.push(i);
        }
    }

    /// A `wait` step starts waiting: for a signal (prompt resolved now) or
    /// an event (its `match` resolved now, so later changes do not move it).
    pub(super) fn start_wait(&mut self, i: usize) -> Result<(), EngineError> {
        let until = self.wait_until(i);
        match self.wait_kind(i, None) {
            Ok(kind) => self.park(i, kind, until, json!({})),
            Err(e) => self.fail_unclaimed(i, e),
        }
    }

    /// When wait step `i`'s `timeout_ms` runs out, if it has one.
    fn wait_until(&self, i: usize) -> Option<i64> {
        let Action::Wait(spec) = &self.def.steps[i].action else { unreachable!("a wait step") };
        spec.timeout_ms.map(|t| self.now().saturating_add(t.min(i64::MAX as u64) as i64))
    }

    /// What wait step `i` waits for (for one item, with `item`).
    fn wait_kind(&self, i: usize, item: Option<(&Value, u64)>) -> Result<WaitKind, StepError> {
        let Action::Wait(spec) = &self.def.steps[i].action else { unreachable!("a wait step") };
        let resolved = |t: Option<&crate::model_glue::Template>| match t {
            Some(t) => self.scope_eval(item, |s| t.try_resolve(s)).map(Some),
            None => Ok(None),
        };
        let parts = (resolved(spec.matches.as_ref()), resolved(spec.prompt.as_ref()), resolved(spec.preview.as_ref()));
        let (matches, prompt, preview) = match parts {
            (Ok(m), Ok(p), Ok(v)) => (m, p, v),
            (Err(u), _, _) | (_, Err(u), _) | (_, _, Err(u)) => return Err(crate::model_glue::unresolved_error(u)),
        };
        Ok(match &spec.event {
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
                WaitKind::Signal { prompt, schema: spec.schema.clone(), preview, reason, resume: None }
            }
        })
    }

    /// A `for_each` wait or `workflow` step parks once per item (see the
    /// module's doc); with no item it succeeds at once with `[]`.
    pub(super) fn park_items(&mut self, i: usize) -> Result<(), EngineError> {
        if let Some(e) = self.too_deep(i) {
            return self.fail_unclaimed(i, e);
        }
        let (units, left_out) = match self.resolve_items(i) {
            Ok(x) => x,
            Err(e) => return self.fail_unclaimed(i, e),
        };
        let is_wait = matches!(self.def.steps[i].action, Action::Wait(_));
        let mut kinds = Vec::with_capacity(units.len());
        for unit in &units {
            let item = unit.item.expect("an item");
            let kind = if is_wait {
                self.wait_kind(i, Some((&unit.value, u64::from(item.0))))
            } else {
                let t = self.def.steps[i].input.clone();
                self.scope_eval(Some((&unit.value, u64::from(item.0))), |s| t.try_resolve(s))
                    .map(|_| WaitKind::Child { run: children::child_id(&self.id, &self.def.steps[i].name, Some(item)) })
                    .map_err(crate::model_glue::unresolved_error)
            };
            match kind {
                Ok(k) => kinds.push(k),
                Err(e) => {
                    let e = StepError { message: format!("item {item}: {}", e.message), ..e };
                    return self.fail_unclaimed(i, e);
                }
            }
        }
        let n = units.len();
        let counts = match self.def.steps[i].where_ {
            Some(_) => json!({"items": n, "left_out": left_out}),
            None => json!({"items": n}),
        };
        self.steps[i].units = units;
        self.steps[i].recount();
        if n == 0 {
            self.steps[i].activated = true;
            self.step_to(i, StepEvent::Claim, Value::Null, None, counts)?;
            return self.step_to(i, StepEvent::Succeed, json!([]), None, json!({}));
        }
        for u in 0..n {
            self.steps[i].set_unit(u, UnitState::Parked);
        }
        self.steps[i].parked = kinds.clone();
        let until = if is_wait { self.wait_until(i) } else { None };
        self.park(i, WaitKind::Items { items: kinds }, until, counts)?;
        if !is_wait {
            self.start_item_children(i);
        }
        Ok(())
    }

    /// Starts child runs of `for_each` workflow step `i`, in item order,
    /// while fewer than its `concurrency` run. Started children are a
    /// prefix of the items (see [`StepRt::children_started`]), so after a
    /// restart the first `concurrency` items without an answer are the
    /// ones that were running.
    pub(super) fn start_item_children(&mut self, i: usize) {
        let cap = self.def.steps[i].concurrency.map(|c| c.max(1) as usize).unwrap_or(usize::MAX);
        let mut u = self.steps[i].children_started;
        let parked = |st: &StepRt, u: usize| st.units[u].state == UnitState::Parked;
        let mut running = (0..u).filter(|&k| parked(&self.steps[i], k)).count();
        while running < cap && u < self.steps[i].units.len() {
            if parked(&self.steps[i], u) {
                let spec = self.child_spec(i, Some(u));
                self.to_spawn.push(spec);
                running += 1;
            }
            u += 1;
        }
        self.steps[i].children_started = u;
    }

    /// Item `u` of parked step `i` is answered: recorded as an attempt of
    /// the item (started and ended in one commit). The step succeeds with
    /// its last item and fails with its first failed one.
    pub(super) fn item_resolved(
        &mut self,
        i: usize,
        u: usize,
        r: Result<Value, StepError>,
        how: Value,
    ) -> Result<(), EngineError> {
        let (item, attempt, now) = (self.steps[i].units[u].item, self.steps[i].units[u].next_attempt, self.now());
        let step = self.def.steps[i].name.clone();
        let run = self.id.clone();
        self.batch.push(Write::StartAttempt { run, step, item, attempt, lease_until: now, at: now, input: None });
        match r {
            Ok(v) => {
                self.finish_attempt(i, u, attempt, AttemptState::Succeeded, Some(v.clone()), None);
                self.steps[i].set_unit(u, UnitState::Succeeded);
                self.steps[i].units[u].result = v;
                let mut data = json!({"item": item, "attempt": attempt});
                if let (Value::Object(d), Value::Object(x)) = (&mut data, how) {
                    d.extend(x);
                }
                self.event("item.succeeded".into(), Some(i), item, data);
                if self.steps[i].succeeded == self.steps[i].units.len() {
                    let out = Value::Array(self.steps[i].units.iter().map(|u| u.result.clone()).collect());
                    self.step_to(i, StepEvent::Succeed, out, None, json!({}))?;
                } else if matches!(self.def.steps[i].action, Action::Workflow(_)) {
                    self.start_item_children(i);
                }
                Ok(())
            }
            Err(e) => {
                self.finish_attempt(i, u, attempt, AttemptState::Failed, None, Some(e.clone()));
                self.steps[i].set_unit(u, UnitState::Failed);
                // The step fails at its first failed item: stop the others.
                let others = self.running_children(i);
                self.to_cancel.extend(others);
                self.event("item.failed".into(), Some(i), item, json!({"item": item, "attempt": attempt, "error": e}));
                let k = item.expect("an item");
                self.step_failed(i, StepError { message: format!("item {k}: {}", e.message), ..e })
            }
        }
    }

    /// The items of parked step `i` still waiting.
    pub(super) fn open_items(&self, i: usize) -> Vec<ItemIndex> {
        self.steps[i].units.iter().filter(|u| u.state == UnitState::Parked).filter_map(|u| u.item).collect()
    }

    /// The child runs of parked step `i` still running (to cancel).
    pub(super) fn running_children(&self, i: usize) -> Vec<RunId> {
        let name = &self.def.steps[i].name;
        match (&self.def.steps[i].action, self.steps[i].state) {
            (Action::Workflow(_), StepState::Waiting) if self.def.steps[i].for_each.is_some() => {
                let started = &self.steps[i].units[..self.steps[i].children_started];
                let open = started.iter().filter(|u| u.state == UnitState::Parked).filter_map(|u| u.item);
                open.map(|k| children::child_id(&self.id, name, Some(k))).collect()
            }
            (Action::Workflow(_), StepState::Waiting) => vec![children::child_id(&self.id, name, None)],
            _ => vec![],
        }
    }

    /// Why step `i`'s child runs cannot start: they would nest too deep.
    fn too_deep(&self, i: usize) -> Option<StepError> {
        let max = self.sh.config.max_depth;
        (matches!(self.def.steps[i].action, Action::Workflow(_)) && self.depth >= max).then(|| {
            StepError::new(
                ErrorKind::Validation,
                format!("child runs nest at most {max} deep (this run is at depth {})", self.depth),
                false,
            )
        })
    }

    /// A `workflow` step: its child run is created and awaited once the
    /// batch that parks the step is durable.
    pub(super) fn start_child(&mut self, i: usize) -> Result<(), EngineError> {
        if let Some(e) = self.too_deep(i) {
            return self.fail_unclaimed(i, e);
        }
        let t = self.def.steps[i].input.clone();
        if let Err(u) = self.scope_eval(None, |s| t.try_resolve(s)) {
            return self.fail_unclaimed(i, crate::model_glue::unresolved_error(u));
        }
        let spec = self.child_spec(i, None);
        let extra = json!({"child": spec.id});
        self.park(i, WaitKind::Child { run: spec.id.clone() }, None, extra)?;
        self.to_spawn.push(spec);
        Ok(())
    }

    /// The child run of step `i` (of its unit `unit`, for a `for_each` step).
    pub(super) fn child_spec(&self, i: usize, unit: Option<usize>) -> ChildSpec {
        let Action::Workflow(w) = &self.def.steps[i].action else { unreachable!("a workflow step") };
        let t = self.def.steps[i].input.clone();
        let item = unit.and_then(|u| self.steps[i].units[u].item);
        let scope_item = unit.zip(item).map(|(u, k)| (&self.steps[i].units[u].value, u64::from(k.0)));
        let input = self.scope_eval(scope_item, |s| t.resolve(s));
        let step = &self.def.steps[i].name;
        ChildSpec {
            step: i,
            unit,
            id: children::child_id(&self.id, step, item),
            parent: self.id.clone(),
            depth: self.depth + 1,
            template: w.template.clone(),
            version: w.version,
            input,
            traceparent: crate::trace::RunTrace::of(&self.id, self.info.trace.as_deref()).child_traceparent(),
        }
    }

    /// The child run of step `i` ended (or could not be created).
    pub(super) fn on_child(
        &mut self,
        i: usize,
        unit: Option<usize>,
        r: Result<RunRecord, StepError>,
    ) -> Result<(), EngineError> {
        if self.state.is_terminal() || self.steps[i].state != StepState::Waiting {
            return Ok(());
        }
        if let Some(u) = unit {
            if self.steps[i].units.get(u).is_none_or(|x| x.state != UnitState::Parked) {
                return Ok(());
            }
            let r = r.and_then(|rec| children::outcome(&rec).map(|v| (v, rec.id)));
            let r = r.map(|(v, child)| (v, json!({"child": child})));
            return match r {
                Ok((v, how)) => self.item_resolved(i, u, Ok(v), how),
                Err(e) => self.item_resolved(i, u, Err(e), json!({})),
            };
        }
        match r.and_then(|rec| children::outcome(&rec)) {
            Ok(v) => self.step_to(i, StepEvent::Succeed, v, None, json!({})),
            Err(e) => self.step_failed(i, e),
        }
    }

    /// A signal for step `i`, which does not wait yet: kept in the store's
    /// inbox (answered `queued`), under the run's cap, for the wait to
    /// take when it starts (see [`Engine::take_early`]).
    fn queue_signal(
        &mut self,
        i: usize,
        item: Option<ItemIndex>,
        data: Value,
        via: Via,
        reply: tokio::sync::oneshot::Sender<SignalAnswer>,
    ) -> Result<(), EngineError> {
        let step = self.def.steps[i].name.clone();
        let cap = self.sh.config.max_queued_signals;
        let answer = if let Via::Queue(id) = &via {
            // Taken from the queue, but the step does not wait after all.
            queued(&step, id)
        } else if let Some(refused) = queue_refusal(&self.queued, &step, item, cap) {
            if let Some(w) = via.answer_write(&refused) {
                self.batch.push(w);
            }
            refused
        } else {
            let (put, id, answer) = queue_message(&self.sh, &self.id, &step, item, &data, &via);
            self.batch.push(put);
            self.event("signal.queued".into(), Some(i), item, json!({"message": id}));
            self.queued.push(Queued { step, item, id });
            answer
        };
        self.replies.push(Reply::Signal(reply, answer));
        Ok(())
    }

    pub(super) fn on_mail(&mut self, m: Mail) -> Result<(), EngineError> {
        match m {
            Mail::Redefine { def, json, old, what, reply } => self.on_redefine(def, json, old, what, reply),
            Mail::Signal { step, item, data, via, reply } => {
                let answer = match self.names.get(&step).copied() {
                    None => no_such_step(&self.id, &step, self.def.steps.iter().map(|s| s.name.as_str())),
                    // A queued signal the step no longer needs.
                    Some(i) if matches!(via, Via::Queue(_)) && self.steps[i].state.is_terminal() => {
                        SignalAnswer::AlreadyResolved { state: self.steps[i].state }
                    }
                    Some(_) if self.state.is_terminal() => {
                        SignalAnswer::NotWaiting { message: format!("run {} is {}", self.id, self.state) }
                    }
                    Some(i) => {
                        let items = ItemsOpen { n: self.steps[i].units.len(), open: self.open_items(i) };
                        let asked = self.asked(i);
                        match check_signal(&self.def.steps[i], self.steps[i].state, item, &items, &data, asked) {
                            Ok(Take::Now) => {
                                match item.and_then(|k| self.steps[i].units.iter().position(|u| u.item == Some(k))) {
                                    Some(u) => self.item_resolved(i, u, Ok(data.clone()), json!({"by": "signal"}))?,
                                    None if self.asked(i).is_some() => self.answered(i, data.clone())?,
                                    None => self.step_to(
                                        i,
                                        StepEvent::Succeed,
                                        data.clone(),
                                        None,
                                        json!({"by": "signal"}),
                                    )?,
                                }
                                SignalAnswer::Accepted { output: data }
                            }
                            Ok(Take::Queue) => return self.queue_signal(i, item, data, via, reply),
                            Err(a) => a,
                        }
                    }
                };
                if let Some(w) = via.answer_write(&answer) {
                    self.batch.push(w);
                }
                if let Via::Queue(id) = &via {
                    self.queued.retain(|q| &q.id != id);
                }
                self.replies.push(Reply::Signal(reply, answer));
            }
            Mail::Event { step, name, data, id, reply } => {
                let ok = match self.names.get(&step).copied() {
                    Some(i)
                        if !self.state.is_terminal()
                            && waits_for_event(&self.def.steps[i], self.steps[i].state, &name) =>
                    {
                        let how = by_event(&name, id.as_deref());
                        if self.def.steps[i].for_each.is_none() {
                            self.step_to(i, StepEvent::Succeed, data, None, how)?;
                            true
                        } else {
                            // Every item whose `match` holds takes it.
                            let takers: Vec<usize> = (0..self.steps[i].units.len())
                                .filter(|&u| self.steps[i].units[u].state == UnitState::Parked)
                                .filter(|&u| self.steps[i].parked.get(u).is_some_and(|k| k.takes_event(&name, &data)))
                                .collect();
                            for &u in &takers {
                                self.item_resolved(i, u, Ok(data.clone()), how.clone())?;
                            }
                            !takers.is_empty()
                        }
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
                    let what = match self.def.steps[i].for_each {
                        Some(_) => format!("{what} for item(s) {}", list_items(&self.open_items(i))),
                        None => what,
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
    /// timer that lost the race), so the run can end; after a `race`, so
    /// are the dependencies still running or not started.
    pub(super) fn release_losers(&mut self, i: usize) -> Result<(), EngineError> {
        let race = self.def.steps[i].join == Join::Race;
        let deps: Vec<usize> = self.graph.dependencies(i).map(|e| e.from).collect();
        for d in deps {
            let lost = match self.steps[d].state {
                StepState::Waiting => true,
                StepState::Running | StepState::Retrying | StepState::Pending => race,
                _ => false,
            };
            if !lost {
                continue;
            }
            let needed =
                self.graph.dependents(d).any(|e| !self.steps[e.to].activated && !self.steps[e.to].state.is_terminal());
            if needed {
                continue;
            }
            let children = self.running_children(d);
            self.to_cancel.extend(children);
            let why = format!("not needed: `{}` went ahead", self.def.steps[i].name);
            self.cancel_units(d, &why);
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
            .enumerate()
            .find_map(|(i, (d, s))| match (&d.action, s.state) {
                (Action::Wait(w), StepState::Waiting) if w.event.is_none() => Some(match w.reason {
                    WaitReason::InputRequired => RunState::InputRequired,
                    WaitReason::AuthRequired => RunState::AuthRequired,
                }),
                _ => match self.asked(i) {
                    Some(WaitKind::Signal { reason, .. }) => Some(*reason),
                    _ => None,
                },
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
            && self.to_abandon.is_empty()
            && self.early.is_empty()
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
