//! Deciding what runs next: edges and joins, skips and their cascade,
//! `when`, `for_each` items, and claiming ready units (running + attempt +
//! lease, committed before any runner is called). A ref that resolves to
//! nothing (see `weft_model::refs`) fails its step with kind `validation`
//! instead of passing `null` on.

use super::*;
use crate::model_glue::unresolved_error;

impl Driver {
    // ---- deciding -------------------------------------------------------

    pub(super) fn advance(&mut self) -> Result<(), EngineError> {
        let now = self.now();
        if self.deadline_at.is_some_and(|d| now >= d) {
            let err = StepError::new(ErrorKind::Deadline, "the run's timeout_ms passed", false);
            return self.end_run(RunEvent::Fail, None, err, false);
        }
        self.wake_timers(now)?;
        if self.state.is_terminal() {
            return Ok(());
        }
        for k in 0..self.topo.len() {
            let i = self.topo[k];
            if self.steps[i].state != StepState::Pending || self.steps[i].activated {
                continue;
            }
            match self.readiness(i) {
                Readiness::Wait => {}
                Readiness::Skip(why) => {
                    let err = StepError::new(ErrorKind::DependencyFailed, why, false);
                    self.step_to(i, StepEvent::Skip, Value::Null, Some(err), json!({}))?;
                }
                Readiness::SkipQuiet(why) => {
                    self.steps[i].when_skipped = true;
                    self.step_to(i, StepEvent::Skip, Value::Null, None, why)?;
                }
                Readiness::Fail(err) => self.fail_unclaimed(i, err)?,
                Readiness::Run => {
                    self.activate(i)?;
                    if self.def.steps[i].join != Join::All {
                        self.release_losers(i)?;
                    }
                }
            }
            if self.state.is_terminal() {
                return Ok(());
            }
        }
        self.claim_ready(now)?;
        // A permit won for a unit that no longer needs it goes back.
        self.permits.clear();
        if !self.state.is_terminal() && self.steps.iter().all(|s| s.state.is_terminal()) {
            self.finish()?;
        }
        if !self.state.is_terminal() {
            self.sync_waiting()?;
        }
        Ok(())
    }

    pub(super) fn edge_met(&self, from: usize, on: EdgeOn) -> bool {
        let s = &self.steps[from];
        let coe = self.def.steps[from].continue_on_error;
        match on {
            EdgeOn::Success => {
                s.state == StepState::Succeeded
                    || (s.state == StepState::Skipped && s.when_skipped)
                    || (s.state == StepState::Failed && coe)
            }
            EdgeOn::Failure => s.state == StepState::Failed,
            EdgeOn::Always => s.state.is_terminal(),
            EdgeOn::Skipped => s.state == StepState::Skipped,
        }
    }

    /// Whether the edge from terminal step `from` into step `i` fires: its
    /// `on` holds and its `when` (if any) is true.
    fn edge_fires(&self, from: usize, i: usize, on: EdgeOn) -> EdgeFires {
        if !self.edge_met(from, on) {
            return EdgeFires::No;
        }
        let Some(cond) = self.def.steps[i].edge_when(&self.def.steps[from].name) else { return EdgeFires::Yes };
        match self.scope_eval(None, |s| cond.try_evaluate(s)) {
            Ok(true) => EdgeFires::Yes,
            Ok(false) => {
                let value = self.scope_eval(None, |s| cond.tested_value(s));
                let edge = &self.def.steps[from].name;
                EdgeFires::NotWhen(json!({"reason": "edge when", "edge": edge, "ref": cond.ref_text, "value": value}))
            }
            Err(u) => {
                let e = unresolved_error(u);
                let m = format!("the `when` of the edge from `{}`: {}", self.def.steps[from].name, e.message);
                EdgeFires::Unresolved(StepError { message: m, ..e })
            }
        }
    }

    pub(super) fn readiness(&self, i: usize) -> Readiness {
        let deps: Vec<(usize, EdgeOn)> = self.graph.dependencies(i).map(|e| (e.from, e.on)).collect();
        if deps.is_empty() {
            return Readiness::Run;
        }
        let terminal = |d: usize| self.steps[d].state.is_terminal();
        let name = |d: usize| &self.def.steps[d].name;
        let unmet = |deps: &[(usize, EdgeOn)]| {
            deps.iter()
                .filter(|(d, on)| terminal(*d) && !self.edge_met(*d, *on))
                .map(|(d, on)| format!("`{}` is {} (edge on {})", name(*d), self.steps[*d].state, on.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // The terminal dependencies' edges: which fire, and why not.
        let mut fired = 0;
        let (mut quiet, mut held) = (None, false);
        for &(d, on) in deps.iter().filter(|(d, _)| terminal(*d)) {
            match self.edge_fires(d, i, on) {
                EdgeFires::Yes => fired += 1,
                EdgeFires::No => held = true,
                EdgeFires::NotWhen(v) => quiet = quiet.or(Some(v)),
                EdgeFires::Unresolved(e) => return Readiness::Fail(e),
            }
        }
        let all_terminal = deps.iter().all(|(d, _)| terminal(*d));
        let not_going = |held: bool| match (held, quiet.clone()) {
            (false, Some(v)) => Readiness::SkipQuiet(v),
            _ => Readiness::Skip(format!("skipped: {}", unmet(&deps))),
        };
        match self.def.steps[i].join {
            Join::All if !all_terminal => Readiness::Wait,
            Join::All if fired == deps.len() => Readiness::Run,
            Join::All => not_going(held),
            Join::Any | Join::Race if fired > 0 => Readiness::Run,
            Join::Any | Join::Race => {
                let race_over = self.def.steps[i].join == Join::Race && deps.iter().any(|(d, _)| terminal(*d));
                if !all_terminal && !race_over {
                    return Readiness::Wait;
                }
                // None can succeed any more: a dependency that failed where
                // success was wanted fails this step, with every error.
                let failed: Vec<String> = deps
                    .iter()
                    .filter(|(d, on)| {
                        *on == EdgeOn::Success
                            && self.steps[*d].state == StepState::Failed
                            && !self.def.steps[*d].continue_on_error
                    })
                    .map(|(d, _)| {
                        let why = self.steps[*d].error.clone().unwrap_or_default();
                        format!("`{}` failed: {why}", name(*d))
                    })
                    .collect();
                if failed.is_empty() {
                    return not_going(held);
                }
                let join = self.def.steps[i].join.as_str();
                let m = format!("no dependency of this `join: {join}` step succeeded: {}", failed.join("; "));
                Readiness::Fail(StepError::new(ErrorKind::DependencyFailed, m, false))
            }
        }
    }

    pub(super) fn scope_eval<T>(
        &self,
        item: Option<(&Value, u64)>,
        f: impl FnOnce(&dyn crate::model_glue::Scope) -> T,
    ) -> T {
        let resume = || self.resume();
        self.scope_with(item, Some(&resume), f)
    }

    /// The scope refs resolve in (`resume`: what `@run.resume` reads; none
    /// while the summary itself is rendered).
    fn scope_with<T>(
        &self,
        item: Option<(&Value, u64)>,
        resume: Option<&dyn Fn() -> Value>,
        f: impl FnOnce(&dyn crate::model_glue::Scope) -> T,
    ) -> T {
        let steps = &self.steps;
        let scope = RunScope {
            run_id: self.id.as_str(),
            input: &self.input,
            labels: &self.labels,
            names: &self.names,
            seen: |i: usize| Seen { state: steps[i].state, output: &steps[i].output },
            item,
            resume,
        };
        f(&scope)
    }

    /// The run's resume block as it stands (see [`crate::resume`]).
    pub(super) fn resume(&self) -> Value {
        let summary = self.def.summary.as_ref().map(|t| self.scope_with(None, None, |s| t.resolve(s)));
        let steps = self.def.steps.iter().zip(&self.steps).map(|(d, s)| crate::resume::StepSeen {
            name: &d.name,
            description: d.description.as_deref(),
            state: s.state,
            output: &s.output,
            error: s.error.as_deref(),
        });
        crate::resume::build(summary, steps)
    }

    /// The units of `for_each` step `i`: its items, those `where` keeps
    /// (with how many it left out).
    pub(super) fn resolve_items(&self, i: usize) -> Result<(Vec<Unit>, usize), StepError> {
        let t = self.def.steps[i].for_each.as_ref().expect("for_each step");
        match self.scope_eval(None, |s| t.try_resolve(s)).map_err(unresolved_error)? {
            Value::Array(items) => {
                let all = items.len();
                let kept = match &self.def.steps[i].where_ {
                    None => items,
                    Some(cond) => {
                        let mut kept = vec![];
                        for (k, v) in items.into_iter().enumerate() {
                            let keep =
                                self.scope_eval(Some((&v, k as u64)), |s| cond.try_evaluate(s)).map_err(|u| {
                                    let e = unresolved_error(u);
                                    StepError { message: format!("`where`, item {k}: {}", e.message), ..e }
                                })?;
                            if keep {
                                kept.push(v);
                            }
                        }
                        kept
                    }
                };
                let left_out = all - kept.len();
                let units =
                    kept.into_iter().enumerate().map(|(k, v)| Unit::new(Some(ItemIndex(k as u32)), v)).collect();
                Ok((units, left_out))
            }
            // A skipped step, an optional ref to a field that is not there.
            Value::Null => Ok((vec![], 0)),
            other => Err(StepError::new(
                ErrorKind::Validation,
                format!("for_each must resolve to an array, got {}", type_name(&other)),
                false,
            )),
        }
    }

    pub(super) fn activate(&mut self, i: usize) -> Result<(), EngineError> {
        let step = &self.def.steps[i];
        if let Some(cond) = &step.when {
            let cond = cond.clone();
            match self.scope_eval(None, |s| cond.try_evaluate(s)) {
                Ok(true) => {}
                Ok(false) => {
                    self.steps[i].when_skipped = true;
                    // The skip says what was tested: the ref, and the value
                    // it had (or its type and size, when large).
                    let value = self.scope_eval(None, |s| cond.tested_value(s));
                    let text = value.to_string();
                    let seen = if text.len() <= 256 {
                        value
                    } else {
                        json!(format!("{} of {} bytes", type_name(&value), text.len()))
                    };
                    let why = json!({"reason": "when", "ref": cond.ref_text, "value": seen});
                    return self.step_to(i, StepEvent::Skip, Value::Null, None, why);
                }
                Err(u) => return self.fail_unclaimed(i, unresolved_error(u)),
            }
        }
        match &self.def.steps[i].action {
            Action::Return => {
                let input = self.def.steps[i].input.clone();
                let value = match self.scope_eval(None, |s| input.try_resolve(s)) {
                    Ok(v) => v,
                    Err(u) => return self.fail_unclaimed(i, unresolved_error(u)),
                };
                self.step_to(i, StepEvent::Claim, Value::Null, None, json!({}))?;
                // What a return builds from stored values is stored too: it
                // is capped like any step output, and nothing of it is kept.
                let cap = self.sh.config.size_limits.max_output_bytes;
                if let Err(over) = crate::size_limits::check(&value, cap) {
                    return self.step_failed(i, over.step_error());
                }
                self.step_to(i, StepEvent::Succeed, value.clone(), None, json!({}))?;
                let output = match self.def.output.clone() {
                    Some(t) => match self.scope_eval(None, |s| t.try_resolve(s)) {
                        Ok(v) => v,
                        Err(u) => {
                            let e = unresolved_error(u);
                            let e = StepError { message: format!("the run's `output`: {}", e.message), ..e };
                            return self.end_run(RunEvent::Fail, None, e, false);
                        }
                    },
                    None => value,
                };
                if let Err(over) = crate::size_limits::check(&output, cap) {
                    let m = format!(
                        "{}; {}",
                        over.message("the run's `output`", "max_output_bytes"),
                        over.hint("max_output_bytes")
                    );
                    let kind = over.step_error().kind;
                    return self.end_run(RunEvent::Fail, None, StepError::new(kind, m, false), false);
                }
                let err = StepError::canceled(format!("the run returned at step `{}`", self.def.steps[i].name));
                return self.end_run(RunEvent::Complete, Some(output), err, false);
            }
            Action::Code(_) | Action::Tool(_) | Action::Agent(_) => {}
            Action::Sleep(spec) => {
                let now = self.now();
                let wake_at = match spec {
                    weft_model::SleepSpec::Ms(ms) => now.saturating_add((*ms).min(i64::MAX as u64) as i64),
                    weft_model::SleepSpec::Until(t) => t.unix_ms(),
                };
                let until = crate::clock::rfc3339(wake_at);
                return self.park(i, WaitKind::Sleep, Some(wake_at), json!({"sleep_until": until}));
            }
            Action::Wait(_) | Action::Workflow(_) if self.def.steps[i].for_each.is_some() => {
                return self.park_items(i);
            }
            Action::Wait(_) => return self.start_wait(i),
            Action::Workflow(_) => return self.start_child(i),
        }
        if self.def.steps[i].for_each.is_some() {
            match self.resolve_items(i) {
                Ok((units, left_out)) => {
                    let n = units.len();
                    self.steps[i].units = units;
                    self.steps[i].activated = true;
                    let data = match self.def.steps[i].where_ {
                        Some(_) => json!({"items": n, "left_out": left_out}),
                        None => json!({"items": n}),
                    };
                    self.step_to(i, StepEvent::Claim, Value::Null, None, data)?;
                    if n == 0 {
                        self.step_to(i, StepEvent::Succeed, json!([]), None, json!({}))?;
                    }
                }
                Err(e) => {
                    self.step_to(i, StepEvent::Claim, Value::Null, None, json!({}))?;
                    self.step_failed(i, e)?;
                }
            }
        } else {
            self.steps[i].units = vec![Unit::new(None, Value::Null)];
            self.steps[i].activated = true;
        }
        Ok(())
    }

    /// Step `i` fails before it started (its `when`, `return` value or a
    /// wait's prompt could not be resolved).
    pub(super) fn fail_unclaimed(&mut self, i: usize, err: StepError) -> Result<(), EngineError> {
        self.steps[i].activated = true;
        self.step_to(i, StepEvent::Claim, Value::Null, None, json!({}))?;
        self.step_failed(i, err)
    }

    pub(super) fn claim_ready(&mut self, now: i64) -> Result<(), EngineError> {
        let mut ready: Vec<(i64, usize, usize, usize)> = vec![];
        for (i, s) in self.steps.iter_mut().enumerate() {
            if !s.activated || s.state.is_terminal() {
                continue;
            }
            let cap = self.def.steps[i].concurrency.map(|c| c.max(1) as usize).unwrap_or(usize::MAX);
            let mut running = s.running;
            let key = (-self.def.steps[i].priority, self.rank[i]);
            // Retries first (they are older), then pending units in order.
            if s.retrying > 0 {
                for (u, unit) in s.units.iter().enumerate() {
                    if running >= cap {
                        break;
                    }
                    if unit.state == UnitState::Retrying && unit.retry_at <= now {
                        running += 1;
                        ready.push((key.0, key.1, u, i));
                    }
                }
            }
            while s.pending_from < s.units.len() && s.units[s.pending_from].state != UnitState::Pending {
                s.pending_from += 1;
            }
            let mut u = s.pending_from;
            while running < cap && u < s.units.len() {
                if s.units[u].state == UnitState::Pending {
                    running += 1;
                    ready.push((key.0, key.1, u, i));
                }
                u += 1;
            }
        }
        ready.sort_unstable();
        for (_, _, u, i) in ready {
            // A claim that failed at once (a ref that leads nowhere) may
            // have ended its step or the run.
            if self.state.is_terminal() {
                break;
            }
            if self.steps[i].state.is_terminal()
                || !matches!(self.steps[i].units[u].state, UnitState::Pending | UnitState::Retrying)
            {
                continue;
            }
            // An attempt expected to finish in place takes a permit of its
            // own pool while it has room (see `EngineConfig::max_in_place`).
            let quick = if self.sh.runner.finishes_in_place(&self.def.steps[i].action) {
                self.sh.in_place_permits.clone().try_acquire_owned().ok()
            } else {
                None
            };
            let permit = match quick.or_else(|| self.permits.pop()) {
                Some(p) => p,
                None => match self.sh.permits.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => {
                        self.want_permit = true;
                        break;
                    }
                },
            };
            self.claim(i, u, permit, now)?;
        }
        Ok(())
    }

    pub(super) fn claim(
        &mut self,
        i: usize,
        u: usize,
        permit: OwnedSemaphorePermit,
        now: i64,
    ) -> Result<(), EngineError> {
        let attempt = self.steps[i].units[u].next_attempt;
        let item = self.steps[i].units[u].item;
        let step = &self.def.steps[i];
        let timeout_ms =
            step.timeout_ms.or_else(|| self.sh.runner.default_timeout_ms(&step.action)).or(step.effective_timeout_ms());
        let lease_until = match timeout_ms {
            Some(t) => now.saturating_add((t + self.sh.config.lease_slack_ms) as i64),
            None => now.saturating_add(self.sh.config.default_lease_ms as i64),
        };
        if item.is_none() {
            // An answer it carries stays with it (see `ask`).
            let carried = self.steps[i].output.clone();
            self.step_to(i, StepEvent::Claim, carried, None, json!({"attempt": attempt}))?;
        } else {
            self.event("item.running".into(), Some(i), item, json!({"item": item, "attempt": attempt}));
        }
        let name = self.def.steps[i].name.clone();
        let input = {
            // The definition is shared: hold it, not a copy of the template.
            let def = self.def.clone();
            let t = &def.steps[i].input;
            let value = &self.steps[i].units[u].value;
            let it = item.map(|k| (value, k.0 as u64));
            self.scope_eval(it, |s| t.try_resolve(s))
        };
        self.batch.push(Write::StartAttempt {
            run: self.id.clone(),
            step: name.clone(),
            item,
            attempt,
            lease_until,
            at: now,
            input: input.as_ref().ok().map(crate::size_limits::shown_input),
        });
        let token = CancelToken::new();
        self.steps[i].set_unit(u, UnitState::Running);
        self.steps[i].units[u].running = Some((attempt, token.clone()));
        // A ref that leads nowhere: the attempt fails before anything runs.
        let input = match input {
            Ok(v) => v,
            Err(u_err) => {
                drop(permit);
                return self.attempt_failed(i, u, attempt, unresolved_error(u_err));
            }
        };
        let req = StepRequest {
            run: self.id.clone(),
            step: name.clone(),
            item,
            attempt,
            idempotency_key: idempotency_key(&self.id, &name, item, attempt),
            // Set when the attempt is launched (`attempt::run_attempt`).
            deadline_ms: None,
            action: self.def.steps[i].action.clone(),
            priority: self.def.steps[i].priority,
            input,
            limits: self.def.steps[i].limits,
            run_fuel_left: self.def.limits.and_then(|l| l.run_fuel).map(|b| b.saturating_sub(self.fuel_used)),
            transform: self.def.steps[i].transform.clone(),
            events: Arc::new(Sink { tx: self.sink_tx.clone(), step: i, item, queued: Default::default() }),
            trace: self.info.trace.clone(),
            answer: self.carried_answer(i),
        };
        self.to_launch.push(Launch {
            step: i,
            unit: u,
            req,
            token,
            timeout_ms,
            run_deadline: self.deadline_at,
            permit,
        });
        Ok(())
    }
}
