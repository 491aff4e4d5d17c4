//! Loading a run into its driver: the stored run's steps and attempts
//! become the driver's units, and what the previous owner left running is
//! recovered (an interrupted attempt runs again as itself).

use super::*;

impl StepRt {
    /// A step not started: what a run's steps are before its stored
    /// record is loaded over them.
    pub(super) fn pending() -> StepRt {
        StepRt {
            state: StepState::Pending,
            output: Value::Null,
            error: None,
            when_skipped: false,
            activated: false,
            units: vec![],
            pending_from: 0,
            running: 0,
            retrying: 0,
            succeeded: 0,
            parked: vec![],
            children_started: 0,
            wake_at: None,
        }
    }
}

impl Driver {
    pub(super) fn load(&mut self, rec: &RunRecord) -> Result<(), EngineError> {
        if self.state == RunState::Submitted {
            self.run_to(RunEvent::Start, None, None)?;
        }
        let mut interrupted: Vec<(usize, usize, AttemptNo)> = vec![];
        self.fuel_used = rec.attempts.iter().filter_map(|a| a.fuel).fold(0u64, u64::saturating_add);
        let mut children_again = vec![];
        for (i, sr) in rec.steps.iter().enumerate() {
            if self.def.steps.get(i).map(|s| s.name.as_str()) != Some(sr.name.as_str()) {
                return Err(EngineError::Plan(format!("stored step {} does not match the plan", sr.name)));
            }
            let st = &mut self.steps[i];
            st.state = sr.state;
            st.output = sr.output.clone().unwrap_or(Value::Null);
            st.error = sr.error.as_ref().map(|e| e.message.clone());
            st.when_skipped = sr.state == StepState::Skipped && sr.error.is_none();
            if sr.state == StepState::Failed {
                self.failures += 1;
                if !self.handled(i) && self.unhandled.is_none() {
                    self.unhandled = sr.error.clone();
                }
            }
            if !matches!(sr.state, StepState::Running | StepState::Retrying | StepState::Waiting) {
                continue;
            }
            if sr.state == StepState::Waiting {
                // Parked: a durable timer fires at its stored time, or at
                // once when that passed while no process was running; a
                // wait's timeout likewise; a child run is awaited again.
                self.steps[i].activated = true;
                if self.def.steps[i].for_each.is_some() {
                    self.load_items(i, rec)?;
                }
                // An attempt that asked (see `ask`) waits for its answer.
                let asked = rec.waits.iter().find(|w| w.step == sr.name).map(|w| &w.kind);
                if let Some(k @ WaitKind::Signal { resume: Some(_), .. }) = asked {
                    self.load_asking(i, k.clone(), rec);
                    continue;
                }
                match &self.def.steps[i].action {
                    Action::Sleep(_) => self.steps[i].wake_at = Some(sr.next_attempt_at.unwrap_or(0)),
                    Action::Wait(_) => {
                        self.steps[i].wake_at = sr.next_attempt_at;
                        self.look_early(i);
                    }
                    Action::Workflow(_) => children_again.push(i),
                    _ => return Err(EngineError::Plan(format!("step {} waits but cannot", sr.name))),
                }
                continue;
            }
            // An activated step: rebuild its units from its attempts.
            let atts: Vec<&AttemptRecord> = rec.attempts.iter().filter(|a| a.step == sr.name).collect();
            let units = if self.def.steps[i].for_each.is_some() {
                match self.resolve_items(i) {
                    Ok((items, _)) => items,
                    Err(e) => return Err(EngineError::Plan(e.message)),
                }
            } else {
                vec![Unit::new(None, Value::Null)]
            };
            self.steps[i].units = units;
            self.steps[i].activated = true;
            for (u, unit) in self.steps[i].units.iter_mut().enumerate() {
                let mine: Vec<&&AttemptRecord> = atts.iter().filter(|a| a.item == unit.item).collect();
                if let Some(last) = mine.iter().max_by_key(|a| a.attempt) {
                    // An interrupted attempt runs again as itself.
                    if last.state == AttemptState::Interrupted {
                        unit.next_attempt = last.attempt;
                        (unit.interruptions, unit.blame) = (last.interruptions, last.blame);
                    } else {
                        unit.next_attempt = last.attempt.next();
                        if last.state == AttemptState::Running {
                            (unit.interruptions, unit.blame) = (last.interruptions, last.blame);
                        }
                    }
                }
                if let Some(ok) = mine.iter().find(|a| a.state == AttemptState::Succeeded) {
                    unit.state = UnitState::Succeeded;
                    unit.result = ok.output.clone().unwrap_or(Value::Null);
                } else if let Some(run) = mine.iter().find(|a| a.state == AttemptState::Running) {
                    interrupted.push((i, u, run.attempt));
                } else if !mine.is_empty() {
                    // Failed with a retry scheduled (its time is on the step
                    // record for plain steps; items retry at once).
                    unit.state = UnitState::Retrying;
                    unit.retry_at = sr.next_attempt_at.unwrap_or(0);
                }
            }
            self.steps[i].recount();
        }
        for i in children_again {
            if self.def.steps[i].for_each.is_none() {
                let spec = self.child_spec(i, None);
                self.to_spawn.push(spec);
            } else {
                // Items answered before are not started again; the first
                // `concurrency` open ones were running (see `start_item_children`).
                self.start_item_children(i);
            }
        }
        // Attempts of the previous owner were interrupted: each runs again
        // as itself (same idempotency key), not counted as a failure, and
        // shares the blame for the crash with the others it was running.
        let width = self.sh.crash_width.load(std::sync::atomic::Ordering::Relaxed).max(1);
        let share = (1000 / width).max(1) as u32;
        for (i, u, attempt) in interrupted {
            self.steps[i].set_unit(u, UnitState::Running);
            self.steps[i].units[u].running = Some((attempt, CancelToken::new()));
            let err = StepError::new(
                ErrorKind::Interrupted,
                "the process running this attempt stopped (its lease expired); the attempt runs again",
                true,
            );
            self.attempt_interrupted(i, u, attempt, err, share)?;
            if self.state.is_terminal() {
                break;
            }
        }
        Ok(())
    }

    /// A parked `for_each` step's items again: its items, what each waits
    /// for (from its wait record), and the answers its attempts recorded.
    fn load_items(&mut self, i: usize, rec: &RunRecord) -> Result<(), EngineError> {
        let name = &self.def.steps[i].name;
        let plan = |m: String| EngineError::Plan(format!("step {name}: {m}"));
        let (units, _) = self.resolve_items(i).map_err(|e| plan(e.message))?;
        let kinds = match rec.waits.iter().find(|w| &w.step == name).map(|w| &w.kind) {
            Some(WaitKind::Items { items }) if items.len() == units.len() => items.clone(),
            _ => return Err(plan("its wait record does not list its items".into())),
        };
        let mut units = units;
        for unit in &mut units {
            let mine = rec.attempts.iter().filter(|a| &a.step == name && a.item == unit.item);
            unit.next_attempt = mine.clone().map(|a| a.attempt.next()).max().unwrap_or(AttemptNo::FIRST);
            match mine.clone().find(|a| a.state == AttemptState::Succeeded) {
                Some(ok) => {
                    unit.state = UnitState::Succeeded;
                    unit.result = ok.output.clone().unwrap_or(Value::Null);
                }
                None => unit.state = UnitState::Parked,
            }
        }
        self.steps[i].units = units;
        self.steps[i].parked = kinds;
        self.steps[i].recount();
        Ok(())
    }
}
