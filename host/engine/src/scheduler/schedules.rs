//! Cron schedules: a schedule starts a run of a template at each time its
//! cron expression names (UTC; five fields, or six with seconds first).
//!
//! No double fires: a fire commits the run it creates together with the
//! schedule's move to its next time, and that move is refused unless the
//! schedule still expects the time being fired; the run's id is derived
//! from (schedule, fire time), so even a replayed fire conflicts.
//!
//! Missed fires: when the store's owner was down over one or more fire
//! times, the schedule fires once, for the latest time it missed, then
//! keeps its cadence (what a Kubernetes CronJob does). The run's input is
//! the schedule's, so a run can tell from `weft runs show` when it was due.

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use serde_json::Value;

use super::{Engine, EngineError, RunOptions};
use crate::ids::RunId;
use crate::model_glue::{Problem, Problems, check_input, parse_definition};
use crate::outside::ScheduleRecord;
use crate::store::{Batch, StoreError, Write};

/// Parses a cron expression (five or six fields, or `@daily`-style aliases).
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    CronParser::builder().seconds(Seconds::Optional).build().parse(expr).map_err(|e| format!("{e}"))
}

/// An instant as a UTC time, to the whole second (cron's finest grain; a
/// start time's milliseconds would otherwise carry into every fire time).
fn utc(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(ms.div_euclid(1000), 0).unwrap_or_default()
}

/// The first fire time strictly after `after_ms`.
pub fn next_fire(cron: &Cron, after_ms: i64) -> Result<i64, String> {
    cron.find_next_occurrence(&utc(after_ms), false).map(|t| t.timestamp_millis()).map_err(|e| format!("{e}"))
}

/// The latest fire time at or before `now_ms`.
fn last_fire(cron: &Cron, now_ms: i64) -> Option<i64> {
    cron.find_previous_occurrence(&utc(now_ms), true).ok().map(|t| t.timestamp_millis())
}

fn invalid(path: &str, msg: String) -> EngineError {
    EngineError::Invalid(Problems(vec![Problem::new(path, msg)]))
}

impl Engine {
    /// Adds a schedule: checks the cron expression, that the template
    /// exists and that `input` matches its `input_schema`.
    pub async fn add_schedule(
        &self,
        name: &str,
        template: &str,
        cron: &str,
        input: Value,
    ) -> Result<ScheduleRecord, EngineError> {
        if !weft_model::validate::is_definition_name(name) {
            return Err(invalid("/name", format!("invalid schedule name `{name}`: use [a-z0-9][a-z0-9_-]*")));
        }
        let c = parse_cron(cron).map_err(|e| {
            EngineError::Invalid(Problems(vec![
                Problem::new("/cron", format!("invalid cron expression `{cron}`: {e}")).hint(
                    "five fields, minute hour day month weekday, UTC (`0 2 * * *` = 02:00 every day), six with seconds first (`*/10 * * * * *` = every 10 s), or `@hourly`, `@daily`",
                ),
            ]))
        })?;
        let t = self
            .sh
            .store
            .template(template, None)
            .await?
            .ok_or_else(|| invalid("/template", format!("no template `{template}`")))?;
        let def = parse_definition(&t.definition).map_err(EngineError::Invalid)?;
        // Stored now and given to every run it fires: capped as a run's input.
        super::over(
            &input,
            self.sh.config.size_limits.max_input_bytes,
            "/input",
            "the schedule's input",
            "max_input_bytes",
        )?;
        check_input(&def, &input).map_err(|Problems(ps)| {
            // Paths into the request: `/input/...`, beside `/name` and `/cron`.
            EngineError::Invalid(Problems(
                ps.into_iter().map(|p| Problem { path: format!("/input{}", p.path), ..p }).collect(),
            ))
        })?;
        let now = self.sh.clock.now_ms();
        let next = next_fire(&c, now).map_err(|e| invalid("/cron", e))?;
        let rec = ScheduleRecord {
            name: name.to_string(),
            template: template.to_string(),
            cron: cron.to_string(),
            input,
            next_fire_at: next,
            created_at: now,
            last_fire_at: None,
            last_run: None,
            paused: false,
        };
        match self.sh.commit(Batch { writes: vec![Write::PutSchedule(rec.clone())] }).await {
            Err(StoreError::Conflict(_)) => {
                return Err(invalid("/name", format!("a schedule `{name}` exists (remove it first)")));
            }
            r => r?,
        }
        self.sh.schedules_changed.notify_one();
        Ok(rec)
    }

    /// Removes a schedule; `false` when there was none.
    pub async fn remove_schedule(&self, name: &str) -> Result<bool, EngineError> {
        match self.sh.commit(Batch { writes: vec![Write::DeleteSchedule { name: name.to_string() }] }).await {
            Ok(()) => {
                self.sh.schedules_changed.notify_one();
                Ok(true)
            }
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Pauses (`paused`) or resumes a schedule; `None` when there is none.
    /// A resumed schedule fires next at its first time after now: the
    /// times it was paused over are not made up.
    pub async fn pause_schedule(&self, name: &str, paused: bool) -> Result<Option<ScheduleRecord>, EngineError> {
        let Some(mut s) = self.sh.store.schedules().await?.into_iter().find(|s| s.name == name) else {
            return Ok(None);
        };
        if s.paused == paused {
            return Ok(Some(s));
        }
        let now = self.sh.clock.now_ms();
        let next = match parse_cron(&s.cron) {
            Ok(c) if !paused => next_fire(&c, now).unwrap_or(i64::MAX),
            _ => s.next_fire_at,
        };
        let write = Write::SchedulePaused { name: name.to_string(), paused, next };
        match self.sh.commit(Batch { writes: vec![write] }).await {
            Err(StoreError::Conflict(_)) => return Ok(None),
            r => r?,
        }
        self.sh.schedules_changed.notify_one();
        s.paused = paused;
        s.next_fire_at = next;
        Ok(Some(s))
    }

    /// Fires every schedule that is due (store owner); returns the runs it
    /// started and the next fire time of any schedule.
    pub async fn fire_due_schedules(&self) -> Result<(Vec<RunId>, Option<i64>), EngineError> {
        let now = self.sh.clock.now_ms();
        let mut started = vec![];
        let mut next_any: Option<i64> = None;
        for s in self.sh.store.schedules().await? {
            let Ok(cron) = parse_cron(&s.cron) else { continue };
            if s.paused {
                continue;
            }
            let mut next_at = s.next_fire_at;
            if s.next_fire_at <= now {
                // Missed several? Fire once, for the latest one missed.
                let at = last_fire(&cron, now).filter(|t| *t >= s.next_fire_at).unwrap_or(s.next_fire_at);
                let next = next_fire(&cron, now).unwrap_or(i64::MAX);
                if let Some(id) = self.fire(&s, at, next).await? {
                    started.push(id);
                }
                next_at = next;
            }
            next_any = Some(next_any.map_or(next_at, |n: i64| n.min(next_at)));
        }
        for id in &started {
            self.start(id);
        }
        Ok((started, next_any))
    }

    /// One fire: the run and the schedule's move, in one commit. `None`
    /// when the fire was taken already or the run could not be created
    /// (the fire is consumed; the reason is logged).
    pub(crate) async fn fire(&self, s: &ScheduleRecord, at: i64, next: i64) -> Result<Option<RunId>, EngineError> {
        let id = RunId::derive(at, &format!("schedule/{}", s.name));
        let created = async {
            let t = self
                .sh
                .store
                .template(&s.template, None)
                .await?
                .ok_or_else(|| EngineError::Plan(format!("no template `{}`", s.template)))?;
            let doc = match self.sh.planner.get() {
                Some(p) => p.prepare(t.definition.clone()).map_err(EngineError::Plan)?,
                None => t.definition.clone(),
            };
            let def = parse_definition(&doc).map_err(EngineError::Invalid)?;
            let opts = RunOptions {
                id: Some(id.clone()),
                template: Some(t.name.clone()),
                version: Some(t.version),
                ..Default::default()
            };
            self.run_batch(&def, s.input.clone(), opts).await
        }
        .await;
        let moved = Write::ScheduleFired { name: s.name.clone(), from: s.next_fire_at, next, run: None };
        let (batch, run) = match created {
            Ok((id, mut b)) => {
                b.push(Write::ScheduleFired {
                    name: s.name.clone(),
                    from: s.next_fire_at,
                    next,
                    run: Some(id.clone()),
                });
                (b, Some(id))
            }
            Err(e) => {
                tracing::warn!(schedule = %s.name, error = %e, "a scheduled run could not be created; skipping this fire");
                (Batch { writes: vec![moved] }, None)
            }
        };
        match self.sh.commit(batch).await {
            Ok(()) => Ok(run),
            Err(StoreError::Conflict(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The store owner's schedule loop: fires due schedules, sleeps until
    /// the next fire time (or 1 s, to see schedules other processes added,
    /// or until one is added here). Never returns; abort its task to stop.
    pub async fn run_schedules(self) {
        loop {
            let next = match self.fire_due_schedules().await {
                Ok((_, next)) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "schedules");
                    None
                }
            };
            let now = self.sh.clock.now_ms();
            let wake = next.unwrap_or(i64::MAX).min(now + 1_000).max(now);
            tokio::select! {
                _ = self.sh.clock.sleep_until(wake) => {}
                _ = self.sh.schedules_changed.notified() => {}
            }
        }
    }
}
