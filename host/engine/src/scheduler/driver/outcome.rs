//! Outcomes: finished attempts, retries, handled and unhandled failures,
//! and the end of the run (its output or error).

use super::*;

impl Driver {
    // ---- outcomes -------------------------------------------------------

    pub(super) fn on_sink(&mut self, m: SinkMsg) {
        match m {
            SinkMsg::Progress { step, item, data } => {
                if self.log_room(step, item, data.to_string().len()) {
                    self.event("progress".into(), Some(step), item, data);
                }
            }
            SinkMsg::Log { step, item, line } => {
                if self.log_room(step, item, line.len()) {
                    self.event("log".into(), Some(step), item, json!({"line": line}));
                }
            }
            SinkMsg::Artifact { step, item, name, mime, data } => self.on_artifact(step, item, name, mime, data),
            SinkMsg::Queued { step, item } => {
                let why = "waiting for a CPU slot or guest memory (other guests run); the step's timeout starts when it gets one";
                self.event("attempt.queued".into(), Some(step), item, json!({"message": why}));
            }
            SinkMsg::Admitted { step, item, waited_ms } => {
                self.event("attempt.admitted".into(), Some(step), item, json!({"waited_ms": waited_ms}));
            }
            SinkMsg::Fuel { step, item, used } => {
                if let Some(unit) = self.steps.get_mut(step).and_then(|s| s.units.iter_mut().find(|u| u.item == item)) {
                    unit.fuel = Some(unit.fuel.unwrap_or(0).saturating_add(used));
                }
            }
        }
    }

    /// Stores an artifact with the run (bytes once per sha256) and announces
    /// it in the run's log; a name that could not be a file name is refused
    /// with a log line instead.
    fn on_artifact(&mut self, step: usize, item: Option<ItemIndex>, name: String, mime: String, data: Vec<u8>) {
        use sha2::Digest as _;
        if let Err(why) = crate::size_limits::artifact_name(&name) {
            let line = format!("[weft: artifact refused: {why}]");
            self.event("log".into(), Some(step), item, json!({"line": line}));
            return;
        }
        let attempt = self.steps[step].units.iter().find(|u| u.item == item).and_then(|u| u.running.as_ref());
        let Some(attempt) = attempt.map(|r| r.0) else { return };
        let sha256 = hex::encode(sha2::Sha256::digest(&data));
        let artifact = crate::store::ArtifactRecord {
            run: self.id.clone(),
            name,
            mime,
            size: data.len() as u64,
            sha256,
            step: self.def.steps[step].name.clone(),
            item,
            attempt,
            created_at: self.now(),
        };
        let ev = json!({"name": artifact.name, "mime": artifact.mime, "size": artifact.size, "sha256": artifact.sha256,
                        "item": item, "attempt": attempt});
        self.batch.push(Write::PutArtifact { artifact, data: data.into() });
        self.event("artifact".into(), Some(step), item, ev);
    }

    /// Whether a log line or progress of `len` bytes fits in the run's
    /// budget (`EngineConfig::max_run_log_bytes`); the first that does not
    /// is replaced by one `log.truncated` event, and the rest are dropped.
    fn log_room(&mut self, step: usize, item: Option<ItemIndex>, len: usize) -> bool {
        let cap = self.sh.config.max_run_log_bytes;
        let before = self.log_bytes;
        self.log_bytes = before.saturating_add(len as u64);
        if self.log_bytes <= cap {
            return true;
        }
        if before <= cap {
            let data = json!({"line": format!(
                "[weft: the run's logs and progress reached {cap} bytes; the rest of this run's logs are dropped]"
            ), "max_run_log_bytes": cap});
            self.event("log.truncated".into(), Some(step), item, data);
        }
        false
    }

    pub(super) fn finish_attempt(
        &mut self,
        i: usize,
        u: usize,
        attempt: AttemptNo,
        state: AttemptState,
        output: Option<Value>,
        error: Option<StepError>,
    ) {
        let unit = &mut self.steps[i].units[u];
        unit.running = None;
        let item = unit.item;
        let fuel = unit.fuel.take();
        let blame = if state == AttemptState::Interrupted { unit.blame } else { 0 };
        self.fuel_used = self.fuel_used.saturating_add(fuel.unwrap_or(0));
        let at = self.now();
        self.batch.push(Write::FinishAttempt {
            run: self.id.clone(),
            step: self.def.steps[i].name.clone(),
            item,
            attempt,
            state,
            output,
            error,
            fuel,
            blame,
            at,
        });
    }

    pub(super) fn on_done(&mut self, d: Done) -> Result<(), EngineError> {
        if self.state.is_terminal() {
            return Ok(());
        }
        let Some(unit) = self.steps.get(d.step).and_then(|s| s.units.get(d.unit)) else { return Ok(()) };
        if unit.state != UnitState::Running || unit.running.as_ref().map(|r| r.0) != Some(d.attempt) {
            return Ok(()); // already recorded (canceled)
        }
        let (i, u) = (d.step, d.unit);
        match d.result {
            // Every output stored can be read back: over the size cap or
            // too deep, the attempt fails (never retried) and nothing of it
            // is stored.
            Ok(StepOutput::Done(v))
                if let Err(over) = crate::size_limits::check(&v, self.sh.config.size_limits.max_output_bytes) =>
            {
                self.attempt_failed(i, u, d.attempt, over.step_error())?
            }
            Ok(StepOutput::Done(v)) => {
                self.finish_attempt(i, u, d.attempt, AttemptState::Succeeded, Some(v.clone()), None);
                let item = self.steps[i].units[u].item;
                self.steps[i].set_unit(u, UnitState::Succeeded);
                self.steps[i].units[u].result = v.clone();
                if item.is_none() {
                    self.step_to(i, StepEvent::Succeed, v, None, json!({"attempt": d.attempt}))?;
                } else {
                    self.event("item.succeeded".into(), Some(i), item, json!({"item": item, "attempt": d.attempt}));
                    if self.steps[i].succeeded == self.steps[i].units.len() {
                        let out = Value::Array(self.steps[i].units.iter().map(|u| u.result.clone()).collect());
                        self.step_to(i, StepEvent::Succeed, out, None, json!({}))?;
                    }
                }
            }
            Ok(StepOutput::Reject(reason)) => {
                let err = StepError::new(ErrorKind::Validation, format!("rejected: {reason}"), false);
                self.finish_attempt(i, u, d.attempt, AttemptState::Failed, None, Some(err.clone()));
                self.steps[i].set_unit(u, UnitState::Failed);
                self.step_to(i, StepEvent::Fail, Value::Null, Some(err), json!({"attempt": d.attempt}))?;
                let run_err = StepError::new(ErrorKind::Validation, reason, false);
                self.end_run(RunEvent::Reject, None, run_err, false)?;
            }
            Ok(StepOutput::Ask(q)) => self.on_ask(i, u, d.attempt, q)?,
            // A panic in this attempt's runner: the blame is all its own.
            Err(e) if e.kind == ErrorKind::Interrupted => self.attempt_interrupted(i, u, d.attempt, e, 1000)?,
            Err(e) => self.attempt_failed(i, u, d.attempt, e)?,
        }
        Ok(())
    }

    /// An attempt cut short by a crash (its process died, or the host
    /// panicked running it): the crash is the engine's, not the step's, so
    /// the same attempt runs again at once, with the same idempotency key,
    /// and `max_attempts` is not charged.
    ///
    /// A step that takes its process down again and again must not loop
    /// the engine: each interruption charges the attempt its `share` of the
    /// blame (thousandths of a crash: all of it for a panic of its own, one
    /// n-th when the process died running n attempts), and an attempt held
    /// to blame for `max_interruptions` crashes (default 3) in a row fails
    /// as `crashed`, never retried. Sharing the blame keeps innocent
    /// attempts alive when a busy process is killed again and again (a
    /// crash loop, a flurry of deploys): only what runs alone, or panics,
    /// is suspected at full weight.
    pub(super) fn attempt_interrupted(
        &mut self,
        i: usize,
        u: usize,
        attempt: AttemptNo,
        err: StepError,
        share: u32,
    ) -> Result<(), EngineError> {
        let unit = &mut self.steps[i].units[u];
        let n = unit.interruptions.saturating_add(1);
        unit.blame = unit.blame.saturating_add(share);
        let blame = unit.blame;
        let max = self.sh.config.max_interruptions.max(1);
        if u64::from(blame) >= u64::from(max) * 1000 {
            let crashed = StepError::new(
                ErrorKind::Crashed,
                format!(
                    "attempt {attempt} was interrupted {n} times in a row, each time as its process died or \
                     panicked (last: {}); it is not run again ([limits] max_interruptions = {max} in weft.toml)",
                    err.message
                ),
                false,
            );
            return self.attempt_failed(i, u, attempt, crashed);
        }
        self.finish_attempt(i, u, attempt, AttemptState::Interrupted, None, Some(err.clone()));
        let now = self.now();
        let item = self.steps[i].units[u].item;
        self.event(
            "attempt.interrupted".into(),
            Some(i),
            item,
            json!({"item": item, "attempt": attempt, "interruptions": n, "blame": f64::from(blame) / 1000.0, "error": err}),
        );
        self.steps[i].set_unit(u, UnitState::Retrying);
        let unit = &mut self.steps[i].units[u];
        (unit.retry_at, unit.next_attempt, unit.interruptions) = (now, attempt, n);
        if item.is_none() {
            let extra = json!({"attempt": attempt, "next_attempt_at": now, "interrupted": true});
            // An answer it carries stays with it (see `ask`).
            let carried = self.steps[i].output.clone();
            self.step_to(i, StepEvent::ScheduleRetry, carried, Some(err), extra)?;
        }
        Ok(())
    }

    pub(super) fn attempt_failed(
        &mut self,
        i: usize,
        u: usize,
        attempt: AttemptNo,
        err: StepError,
    ) -> Result<(), EngineError> {
        self.finish_attempt(i, u, attempt, AttemptState::Failed, None, Some(err.clone()));
        let policy = self.def.steps[i].retry_policy();
        let now = self.now();
        let item = self.steps[i].units[u].item;
        match decide(&policy, attempt, &err, now, self.sh.rng.as_ref()) {
            RetryDecision::RetryAt { at_ms, attempt: next } => {
                self.steps[i].set_unit(u, UnitState::Retrying);
                let unit = &mut self.steps[i].units[u];
                unit.retry_at = at_ms;
                unit.next_attempt = next;
                (unit.interruptions, unit.blame) = (0, 0);
                if item.is_none() {
                    let extra = json!({"attempt": attempt, "next_attempt_at": at_ms});
                    self.step_to(i, StepEvent::ScheduleRetry, Value::Null, Some(err), extra)?;
                } else {
                    let data = json!({"item": item, "attempt": attempt, "next_attempt_at": at_ms, "error": err});
                    self.event("item.retrying".into(), Some(i), item, data);
                }
            }
            RetryDecision::GiveUp => {
                self.steps[i].set_unit(u, UnitState::Failed);
                if item.is_some() {
                    self.event(
                        "item.failed".into(),
                        Some(i),
                        item,
                        json!({"item": item, "attempt": attempt, "error": err}),
                    );
                    // The step fails at its first failed item: stop the others.
                    self.cancel_units(i, "another item of the step failed");
                }
                let err = match item {
                    Some(k) => StepError { message: format!("item {k}: {}", err.message), ..err },
                    None => err,
                };
                self.step_failed(i, err)?;
            }
        }
        Ok(())
    }

    /// Stops step `i`'s running attempts: each is canceled and recorded.
    pub(super) fn cancel_units(&mut self, i: usize, why: &str) {
        for u in 0..self.steps[i].units.len() {
            if let Some((a, t)) = self.steps[i].units[u].running.clone() {
                t.cancel();
                self.finish_attempt(i, u, a, AttemptState::Canceled, None, Some(StepError::canceled(why)));
                self.steps[i].set_unit(u, UnitState::Canceled);
            }
        }
    }

    /// A dependent with a `failure`/`always` edge, or `continue_on_error`,
    /// handles a step's failure; so does a `join: any | race` dependent:
    /// another dependency may still succeed, and when none does, the join
    /// step fails with every error (see `readiness`).
    pub(super) fn handled(&self, i: usize) -> bool {
        self.def.steps[i].continue_on_error
            || self.graph.dependents(i).any(|e| e.on != EdgeOn::Success || self.def.steps[e.to].join != Join::All)
    }

    /// The step's failure is final (the step is running).
    pub(super) fn step_failed(&mut self, i: usize, err: StepError) -> Result<(), EngineError> {
        let coe = self.def.steps[i].continue_on_error;
        let output = if coe { err.to_value() } else { Value::Null };
        self.step_to(i, StepEvent::Fail, output, Some(err.clone()), json!({}))?;
        self.failures += 1;
        let name = &self.def.steps[i].name;
        let run_err = StepError { message: format!("step `{name}` failed: {}", err.message), ..err };
        if let Some(max) = self.def.max_step_failures
            && self.failures >= max
        {
            let e =
                StepError { message: format!("{} (max_step_failures = {max} reached)", run_err.message), ..run_err };
            return self.end_run(RunEvent::Fail, None, e, false);
        }
        if !self.handled(i) {
            if self.def.fail_open {
                self.unhandled.get_or_insert(run_err);
            } else {
                return self.end_run(RunEvent::Fail, None, run_err, false);
            }
        }
        Ok(())
    }

    // ---- the end --------------------------------------------------------

    /// Every step is terminal.
    pub(super) fn finish(&mut self) -> Result<(), EngineError> {
        if let Some(e) = self.unhandled.clone() {
            return self.run_to(RunEvent::Fail, None, Some(e));
        }
        let output = match self.def.output.clone() {
            Some(t) => match self.scope_eval(None, |s| t.try_resolve(s)) {
                Ok(v) => v,
                Err(u) => {
                    let e = crate::model_glue::unresolved_error(u);
                    let e = StepError { message: format!("the run's `output`: {}", e.message), ..e };
                    return self.run_to(RunEvent::Fail, None, Some(e));
                }
            },
            None => {
                let mut m = serde_json::Map::new();
                for i in self.graph.sinks() {
                    m.insert(self.def.steps[i].name.clone(), self.steps[i].output.clone());
                }
                Value::Object(m)
            }
        };
        self.run_to(RunEvent::Complete, Some(output), None)
    }

    /// End the run now: running attempts are canceled and recorded, steps
    /// not yet terminal become canceled (pending ones skipped unless
    /// `cancel_pending`), then the run takes `ev`.
    pub(super) fn end_run(
        &mut self,
        ev: RunEvent,
        output: Option<Value>,
        err: StepError,
        cancel_pending: bool,
    ) -> Result<(), EngineError> {
        let why = match ev {
            RunEvent::Cancel => "the run was canceled".to_string(),
            RunEvent::Complete => err.message.clone(),
            _ => format!("the run ended: {}", err.message),
        };
        for i in 0..self.steps.len() {
            self.cancel_units(i, &why);
            match self.steps[i].state {
                StepState::Pending if !cancel_pending => {
                    let e = StepError::new(ErrorKind::DependencyFailed, why.clone(), false);
                    self.step_to(i, StepEvent::Skip, Value::Null, Some(e), json!({}))?;
                }
                s if !s.is_terminal() => {
                    let children = self.running_children(i);
                    self.to_cancel.extend(children);
                    self.step_to(i, StepEvent::Cancel, Value::Null, Some(StepError::canceled(why.clone())), json!({}))?;
                }
                _ => {}
            }
        }
        let error = (ev != RunEvent::Complete).then_some(err);
        self.run_to(ev, output, error)
    }
}
