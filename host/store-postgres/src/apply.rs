//! The statements of each write: what a batch becomes on PostgreSQL, and
//! what each statement's answer must be for the write's expectation to
//! hold (see `write` for how they are sent and checked).

use std::sync::Arc;

use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};
use weft_engine::store::{Batch, NewEvent, RunExport, TemplateRecord, Write};
use weft_engine::{RunId, StepError, StoreError};

use crate::Me;

/// Work for the writer (`write.rs` queues it, [`Stmts::op`] turns it into statements).
pub(crate) enum Op {
    Batch(Arc<Batch>),
    SaveTemplate { name: String, definition: String, at: i64 },
    DeleteTemplate { name: String },
    DeleteRuns(Vec<RunId>),
    ImportRun(Box<RunExport>),
    ImportTemplate(TemplateRecord),
}

/// A statement parameter.
pub(crate) type Param = Box<dyn ToSql + Sync + Send>;

/// The writer connection's prepared statements.
pub(crate) struct Statements {
    list: Vec<Statement>,
}

macro_rules! statements {
    ($($name:ident = $sql:expr;)*) => {
        /// Which prepared statement.
        #[derive(Debug, Clone, Copy)]
        #[allow(non_camel_case_types)]
        pub(crate) enum Which { $($name),* }
        const SQL: &[&str] = &[$($sql),*];
    };
}

statements! {
    begin = "BEGIN";
    savepoint = "SAVEPOINT batch";
    lease = "SELECT 1 FROM workers WHERE epoch = $1 AND lease_until > now() FOR KEY SHARE";
    notify = "SELECT pg_notify('weft', $1)";
    create_run = "INSERT INTO runs (id, template, version, state, parent, depth, concurrency_key, created_at,
                     updated_at, deadline_at, owner)
                  VALUES ($1, $2, $3, 'submitted', $4, $5, $6, $7, $7, $8, $9) ON CONFLICT DO NOTHING";
    plan = "INSERT INTO plans (sha256, definition) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    run_input = "INSERT INTO run_inputs (id, plan, input, traceparent, labels) VALUES ($1, $2, $3, $4, $5::text::jsonb)";
    steps = "INSERT INTO steps (run_id, name, idx, state)
             SELECT $1, n, (i - 1)::int, 'pending' FROM unnest($2::text[]) WITH ORDINALITY AS u(n, i)";
    run_state = "UPDATE runs SET state = $3, output = $4, error = $5, updated_at = GREATEST(updated_at, $6)
                 WHERE id = $1 AND state = $2";
    step_state = "UPDATE steps SET state = $4, output = $5, error = $6, next_attempt_at = $7,
                    started_at = CASE WHEN $4 = 'running' THEN COALESCE(started_at, $8) ELSE started_at END,
                    ended_at = CASE WHEN $9 THEN $8 ELSE ended_at END
                  WHERE run_id = $1 AND name = $2 AND state = $3";
    start_attempt = "INSERT INTO attempts (run_id, step, item, attempt, state, lease_until, started_at, input)
                     SELECT $1, $2, $3, $4, 'running', $5, $6, $7
                     WHERE EXISTS (SELECT 1 FROM steps WHERE run_id = $1 AND name = $2)
                       AND NOT EXISTS (SELECT 1 FROM attempts
                                       WHERE run_id = $1 AND step = $2 AND item = $3 AND state = 'running')
                     ON CONFLICT (run_id, step, item, attempt) DO UPDATE
                       SET state = 'running', lease_until = excluded.lease_until,
                           started_at = excluded.started_at, ended_at = NULL, output = NULL, error = NULL,
                           input = excluded.input
                       WHERE attempts.state = 'interrupted'";
    finish_attempt = "UPDATE attempts SET state = $5, output = $6, error = $7, ended_at = $8,
                        fuel = CASE WHEN $9::bigint IS NULL THEN fuel ELSE COALESCE(fuel, 0) + $9::bigint END,
                        interruptions = interruptions + CASE WHEN $5 = 'interrupted' THEN 1 ELSE 0 END,
                        blame = CASE WHEN $5 = 'interrupted' THEN $10 ELSE blame END
                      WHERE run_id = $1 AND step = $2 AND item = $3 AND attempt = $4 AND state = 'running'";
    // A row's seqs overlap no stored row's: rows hold consecutive seqs and
    // never overlap, so only the last row starting at or before this one's
    // last seq can, and one index probe checks it.
    events = "INSERT INTO event_batches (run_id, first_seq, last_seq, last_at, events)
              SELECT u.* FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[])
                AS u(run_id, first_seq, last_seq, last_at, events)
              WHERE EXISTS (SELECT 1 FROM runs r WHERE r.id = u.run_id)
                AND NOT EXISTS (SELECT 1 FROM (SELECT b.last_seq FROM event_batches b
                                               WHERE b.run_id = u.run_id AND b.first_seq <= u.last_seq
                                               ORDER BY b.first_seq DESC LIMIT 1) p
                                WHERE p.last_seq >= u.first_seq)
              ON CONFLICT DO NOTHING";
    blob = "INSERT INTO blobs (sha256, data) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    artifact = "INSERT INTO artifacts (run_id, name, mime, size, sha256, step, item, attempt, created_at)
                SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1)
                ON CONFLICT (run_id, name) DO UPDATE SET mime = excluded.mime, size = excluded.size,
                  sha256 = excluded.sha256, step = excluded.step, item = excluded.item,
                  attempt = excluded.attempt, created_at = excluded.created_at";
    open_wait = "INSERT INTO waits (run_id, step, kind, event, spec, until, since)
                 SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1)
                 ON CONFLICT DO NOTHING";
    close_wait = "DELETE FROM waits WHERE run_id = $1 AND step = $2";
    delete_recording = "DELETE FROM runs WHERE id = $1 AND state = 'recording'";
    run_plan = "UPDATE run_inputs SET plan = $2 WHERE id = $1 AND EXISTS (SELECT 1 FROM runs WHERE id = $1
                  AND state NOT IN ('completed', 'failed', 'canceled', 'rejected'))";
    delete_recording_input = "DELETE FROM run_inputs WHERE id = $1";
    delete_recording_events = "DELETE FROM event_batches WHERE run_id = $1";
    inbox_put = "INSERT INTO inbox (id, kind, event_id, run, body, at, answer) VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT DO NOTHING";
    inbox_answer = "UPDATE inbox SET answer = $2 WHERE id = $1 AND answer IS NULL";
    inbox_settle = "UPDATE inbox SET answer = $2 WHERE id = $1 AND answer::jsonb->>'status' = 'queued'";
    inbox_take = "UPDATE inbox SET taken_until = now() + $2 * interval '1 millisecond' WHERE id = $1";
    start_key = "INSERT INTO start_keys (key, run_id, digest, created_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT DO NOTHING";
    delivery_put = "INSERT INTO deliveries (id, run_id, fifo_key, state, attempts, next_at, updated_at, body, error)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING";
    delivery_lease = "UPDATE deliveries SET lease_until = $3 WHERE id = $1 AND state = 'pending' AND attempts = $2
                        AND (lease_until IS NULL OR lease_until < $4)";
    delivery_tried = "UPDATE deliveries SET attempts = attempts + 1, state = $3, next_at = $4, error = $5,
                        lease_until = NULL, updated_at = $6 WHERE id = $1 AND state = 'pending' AND attempts = $2";
    delivery_resend = "UPDATE deliveries SET state = 'pending', attempts = 0, next_at = $2, lease_until = NULL,
                         error = NULL, updated_at = $2 WHERE id = $1 AND state = 'failed'";
    put_schedule = "INSERT INTO schedules (name, body, next_fire_at) VALUES ($1, $2::text::jsonb, $3)
                    ON CONFLICT DO NOTHING";
    delete_schedule = "DELETE FROM schedules WHERE name = $1";
    schedule_paused = "UPDATE schedules SET next_fire_at = $3,
                         body = body || jsonb_build_object('next_fire_at', $3::bigint, 'paused', $2::boolean)
                       WHERE name = $1";
    schedule_fired = "UPDATE schedules SET next_fire_at = $3,
                        body = body || jsonb_build_object('next_fire_at', $3::bigint, 'last_fire_at', $2::bigint)
                               || CASE WHEN $4::text IS NULL THEN '{}'::jsonb
                                       ELSE jsonb_build_object('last_run', $4::text) END
                      WHERE name = $1 AND next_fire_at = $2";
    save_template = "INSERT INTO templates (name, version, definition, created_at)
                     SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3 FROM templates WHERE name = $1
                     RETURNING version";
    delete_template = "DELETE FROM templates WHERE name = $1";
    import_template = "INSERT INTO templates (name, version, definition, created_at) VALUES ($1, $2, $3, $4)
                       ON CONFLICT DO NOTHING";
    owned_by_others = "SELECT id FROM runs WHERE id = ANY($1) AND owner IS NOT NULL AND owner <> $2";
    // The same inside the write's transaction, each run's row locked (in id
    // order) until the commit: a claim of one of them waits for it, or
    // this finds the claim that committed first (see `write.rs`).
    owned_by_others_locked = "WITH l AS (SELECT id, owner FROM runs WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE)
                              SELECT id FROM l WHERE owner IS NOT NULL AND owner <> $2";
    // The set-based forms of the hot writes (see `sets`): one row of the
    // arrays per write, at most one write per row changed.
    run_states = "UPDATE runs r SET state = u.to_state, output = u.output, error = u.error,
                    updated_at = GREATEST(r.updated_at, u.at)
                  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
                    AS u(id, from_state, to_state, output, error, at)
                  WHERE r.id = u.id AND r.state = u.from_state";
    step_states = "UPDATE steps s SET state = u.to_state, output = u.output, error = u.error,
                     next_attempt_at = u.next_attempt_at,
                     started_at = CASE WHEN u.to_state = 'running' THEN COALESCE(s.started_at, u.at)
                                  ELSE s.started_at END,
                     ended_at = CASE WHEN u.terminal THEN u.at ELSE s.ended_at END
                   FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                               $7::bigint[], $8::bigint[], $9::bool[])
                     AS u(run_id, name, from_state, to_state, output, error, next_attempt_at, at, terminal)
                   WHERE s.run_id = u.run_id AND s.name = u.name AND s.state = u.from_state";
    start_attempts = "INSERT INTO attempts (run_id, step, item, attempt, state, lease_until, started_at, input)
                      SELECT u.run_id, u.step, u.item, u.attempt, 'running', u.lease_until, u.started_at, u.input
                      FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::bigint[], $6::bigint[],
                                  $7::text[]) AS u(run_id, step, item, attempt, lease_until, started_at, input)
                      WHERE EXISTS (SELECT 1 FROM steps s WHERE s.run_id = u.run_id AND s.name = u.step)
                        AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = u.run_id AND a.step = u.step
                                          AND a.item = u.item AND a.state = 'running')
                      ON CONFLICT (run_id, step, item, attempt) DO UPDATE
                        SET state = 'running', lease_until = excluded.lease_until,
                            started_at = excluded.started_at, ended_at = NULL, output = NULL, error = NULL,
                            input = excluded.input
                        WHERE attempts.state = 'interrupted'";
    finish_attempts = "UPDATE attempts a SET state = u.state, output = u.output, error = u.error, ended_at = u.at,
                         fuel = CASE WHEN u.fuel IS NULL THEN a.fuel ELSE COALESCE(a.fuel, 0) + u.fuel END,
                         interruptions = a.interruptions + CASE WHEN u.state = 'interrupted' THEN 1 ELSE 0 END,
                         blame = CASE WHEN u.state = 'interrupted' THEN u.blame ELSE a.blame END
                       FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::text[],
                                   $7::text[], $8::bigint[], $9::bigint[], $10::int[])
                         AS u(run_id, step, item, attempt, state, output, error, at, fuel, blame)
                       WHERE a.run_id = u.run_id AND a.step = u.step AND a.item = u.item
                         AND a.attempt = u.attempt AND a.state = 'running'";
}

impl Statements {
    pub async fn prepare(c: &Client) -> Result<Statements, StoreError> {
        let mut list = Vec::with_capacity(SQL.len());
        for sql in SQL {
            list.push(c.prepare(sql).await.map_err(crate::map_err)?);
        }
        Ok(Statements { list })
    }

    pub fn get(&self, w: Which) -> &Statement {
        &self.list[w as usize]
    }
}

/// What a statement's answer must be.
#[derive(Debug)]
enum Expect {
    /// Any row count.
    Any,
    /// This many rows, else the write is refused with the message.
    Rows(u64, Refusal),
}

#[derive(Debug)]
enum Refusal {
    Conflict(String),
    /// This worker's lease ran out.
    Fenced,
    /// A run it writes belongs to another worker.
    Taken,
}

/// One statement to send.
pub(crate) struct Stmt {
    which: Which,
    pub params: Vec<Param>,
    expect: Expect,
    /// Its answer is a row's first column (else a row count).
    query: bool,
}

impl Stmt {
    fn new(which: Which, params: Vec<Param>, expect: Expect) -> Stmt {
        Stmt { which, params, expect, query: false }
    }

    /// A write that must change `n` rows, else it is refused with `what`.
    pub fn rows(which: Which, params: Vec<Param>, n: u64, what: String) -> Stmt {
        Stmt::new(which, params, Expect::Rows(n, conflict(what)))
    }

    pub fn begin() -> Stmt {
        Stmt::new(Which::begin, vec![], Expect::Any)
    }

    pub fn savepoint() -> Stmt {
        Stmt::new(Which::savepoint, vec![], Expect::Any)
    }

    pub fn statement<'a>(&self, st: &'a Statements) -> &'a Statement {
        st.get(self.which)
    }

    pub fn is_query(&self) -> bool {
        self.query
    }

    /// Checks the statement's row count.
    pub fn check(&self, rows: u64) -> Result<(), StoreError> {
        let refused = |r: &Refusal| match r {
            Refusal::Conflict(m) => StoreError::Conflict(m.clone()),
            Refusal::Fenced => {
                StoreError::Fenced("this worker's lease ran out: another worker may drive its runs".into())
            }
            Refusal::Taken => StoreError::Fenced("a run it writes is driven by another worker".into()),
        };
        match &self.expect {
            Expect::Any => Ok(()),
            Expect::Rows(n, r) if rows != *n => Err(refused(r)),
            _ => Ok(()),
        }
    }
}

/// What a message answers, once its statements ran.
pub(crate) enum Answer {
    Const(u32),
    /// The value of statement `i` (a query's first column, or a count).
    Of(usize),
}

impl Answer {
    pub fn get(&self, values: &[i64]) -> u32 {
        match self {
            Answer::Const(n) => *n,
            Answer::Of(i) => values.get(*i).copied().unwrap_or(0).max(0) as u32,
        }
    }
}

/// The statements of a transaction (or of one savepoint).
#[derive(Default)]
pub(crate) struct Stmts {
    pub list: Vec<Stmt>,
    /// The events of the batches so far, written by one statement at the
    /// end ([`Stmts::events`]): an event constrains no other write, and one
    /// multi-row insert costs the database a fraction of one per event.
    events: Vec<NewEvent>,
    /// Writes carried by set-based statements (see `sets`).
    pub in_sets: u64,
}

pub(crate) fn p<T: ToSql + Sync + Send + 'static>(v: T) -> Param {
    Box::new(v)
}

pub(crate) fn opt_json(v: &Option<Value>) -> Option<String> {
    v.as_ref().map(|v| v.to_string())
}

pub(crate) fn err_json(e: &Option<StepError>) -> Option<String> {
    e.as_ref().map(|e| serde_json::to_string(e).unwrap_or_default())
}

pub(crate) fn item_col(i: Option<weft_engine::ItemIndex>) -> i32 {
    i.map(|i| i.0 as i32).unwrap_or(-1)
}

fn conflict(m: String) -> Refusal {
    Refusal::Conflict(m)
}

thread_local! {
    /// The plan last written by this thread, as text and digest: the runs
    /// of one plan share its `Arc`, serialised and hashed once.
    static PLAN: std::cell::RefCell<Option<(Arc<Value>, String, String)>> = const { std::cell::RefCell::new(None) };
}

/// The digest and text of a run's plan.
pub(crate) fn plan_of(def: &Arc<Value>) -> (String, String) {
    PLAN.with(|cell| {
        let mut cell = cell.borrow_mut();
        if let Some((d, sha, text)) = cell.as_ref()
            && Arc::ptr_eq(d, def)
        {
            return (sha.clone(), text.clone());
        }
        let text = def.to_string();
        let sha = crate::sha256_hex(text.as_bytes());
        *cell = Some((def.clone(), sha.clone(), text.clone()));
        (sha, text)
    })
}

impl Stmts {
    pub fn push(&mut self, s: Stmt) -> usize {
        self.list.push(s);
        self.list.len() - 1
    }

    /// The events gathered so far, in one statement, one row per run
    /// (`event_rows`): every one must be written (its run exists, its seqs
    /// are free).
    pub fn events(&mut self) {
        let ev = std::mem::take(&mut self.events);
        if ev.is_empty() {
            return;
        }
        let rows = crate::event_rows::rows_of(&ev);
        let n = rows.len() as u64;
        let what = if n == 1 {
            format!("an event of {} from seq {} exists, or the run does not", rows[0].run, rows[0].first_seq)
        } else {
            format!("an event of one of {n} runs exists, or its run does not")
        };
        let mut cols = (vec![], vec![], vec![], vec![], vec![]);
        for r in rows {
            cols.0.push(r.run);
            cols.1.push(r.first_seq);
            cols.2.push(r.last_seq);
            cols.3.push(r.last_at);
            cols.4.push(r.events);
        }
        let params = vec![p(cols.0), p(cols.1), p(cols.2), p(cols.3), p(cols.4)];
        self.push(Stmt::new(Which::events, params, Expect::Rows(n, conflict(what))));
    }

    /// That no run of `runs` belongs to another worker, checked with their
    /// rows locked for the rest of the transaction; refused as `fenced`
    /// (a batch of its own) or as a conflict (a group: tried again batch
    /// by batch, so only the fenced one is refused).
    pub fn not_taken(&mut self, runs: Vec<String>, me: &Me, alone: bool) {
        if runs.is_empty() {
            return;
        }
        let refusal = if alone {
            Refusal::Taken
        } else {
            conflict("a run this group writes was claimed by a worker meanwhile".into())
        };
        let s = Stmt {
            query: true,
            ..Stmt::new(Which::owned_by_others_locked, vec![p(runs), p(me.epoch())], Expect::Rows(0, refusal))
        };
        self.push(s);
    }

    /// This worker's lease, checked (and held) for the transaction.
    pub fn lease(&mut self, me: &Me) {
        let epoch = me.epoch();
        if epoch != 0 {
            let s = Stmt { query: true, ..Stmt::new(Which::lease, vec![p(epoch)], Expect::Rows(1, Refusal::Fenced)) };
            self.push(s);
        }
    }

    /// Tells listening processes what the transaction changed, in flags
    /// (see [`crate::workers::WORK`]): `r` a run nobody owns was created,
    /// `i` a message was left, `s` schedules changed, `e` a run ended, `t`
    /// templates changed, `c` anything else.
    pub fn notify<'a>(&mut self, ops: impl Iterator<Item = &'a Op>, me: &Me) {
        let mut flags = String::new();
        let mut flag = |c: char| {
            if !flags.contains(c) {
                flags.push(c);
            }
        };
        for op in ops {
            match op {
                Op::Batch(b) => {
                    for w in &b.writes {
                        match w {
                            // A worker's own new runs are its to drive.
                            Write::CreateRun { .. } if me.owner_of_new().is_none() => flag('r'),
                            Write::InboxPut(_) => flag('i'),
                            Write::RunState { to, .. } if to.is_terminal() => flag('e'),
                            Write::PutSchedule(_) | Write::DeleteSchedule { .. } | Write::SchedulePaused { .. } => {
                                flag('s')
                            }
                            _ => flag('c'),
                        }
                    }
                }
                Op::ImportRun(_) | Op::DeleteRuns(_) => flag('c'),
                Op::SaveTemplate { .. } | Op::DeleteTemplate { .. } | Op::ImportTemplate(_) => flag('t'),
            }
        }
        if !flags.is_empty() {
            self.push(Stmt { query: true, ..Stmt::new(Which::notify, vec![p(flags)], Expect::Any) });
        }
    }

    /// The statements of one message; returns how its answer is found.
    pub fn op(&mut self, op: &Op, me: &Me) -> Result<Answer, StoreError> {
        Ok(match op {
            Op::Batch(b) => {
                self.batch(b, me);
                Answer::Const(0)
            }
            Op::SaveTemplate { name, definition, at } => {
                let s = Stmt {
                    query: true,
                    ..Stmt::new(
                        Which::save_template,
                        vec![p(name.clone()), p(definition.clone()), p(*at)],
                        Expect::Rows(1, conflict(format!("template {name} was not saved"))),
                    )
                };
                Answer::Of(self.push(s))
            }
            Op::DeleteTemplate { name } => {
                Answer::Of(self.push(Stmt::new(Which::delete_template, vec![p(name.clone())], Expect::Any)))
            }
            Op::ImportTemplate(t) => {
                self.push(Stmt::new(
                    Which::import_template,
                    vec![p(t.name.clone()), p(t.version as i32), p(t.definition.to_string()), p(t.created_at)],
                    Expect::Rows(1, conflict(format!("template {} version {} exists", t.name, t.version))),
                ));
                Answer::Const(0)
            }
            Op::DeleteRuns(_) | Op::ImportRun(_) => {
                return Err(StoreError::Other("retention and imports are not group-committed".into()));
            }
        })
    }

    /// The statements of a batch's writes, in order.
    fn batch(&mut self, b: &Batch, me: &Me) {
        for w in &b.writes {
            self.write(w, me);
        }
    }

    pub(crate) fn write(&mut self, w: &Write, me: &Me) {
        let one = |m: String| Expect::Rows(1, conflict(m));
        match w {
            Write::CreateRun { run, steps } => {
                let owner = me.owner_of_new();
                self.push(Stmt::new(
                    Which::create_run,
                    vec![
                        p(run.id.as_str().to_string()),
                        p(run.template.clone()),
                        p(run.version.map(|v| v as i32)),
                        p(run.parent.as_ref().map(|r| r.as_str().to_string())),
                        p(run.depth as i32),
                        p(run.concurrency_key.clone()),
                        p(run.created_at),
                        p(run.deadline_at),
                        p(owner),
                    ],
                    one(format!("run {} exists", run.id)),
                ));
                let (sha, text) = plan_of(&run.definition);
                self.push(Stmt::new(Which::plan, vec![p(sha.clone()), p(text)], Expect::Any));
                self.push(Stmt::new(
                    Which::run_input,
                    vec![
                        p(run.id.as_str().to_string()),
                        p(sha),
                        p(run.input.to_string()),
                        p(run.traceparent.clone()),
                        p(crate::read::labels_text(&run.labels)),
                    ],
                    one(format!("run {} exists", run.id)),
                ));
                self.push(Stmt::new(
                    Which::steps,
                    vec![p(run.id.as_str().to_string()), p(steps.clone())],
                    Expect::Rows(steps.len() as u64, conflict(format!("the steps of run {} exist", run.id))),
                ));
            }
            Write::RunState { run, from, to, output, error, at } => {
                self.push(Stmt::new(
                    Which::run_state,
                    vec![
                        p(run.as_str().to_string()),
                        p(from.as_str()),
                        p(to.as_str()),
                        p(opt_json(output)),
                        p(err_json(error)),
                        p(*at),
                    ],
                    one(format!("run {run} is not {from}")),
                ));
            }
            Write::StepState { run, step, from, to, output, error, next_attempt_at, at } => {
                self.push(Stmt::new(
                    Which::step_state,
                    vec![
                        p(run.as_str().to_string()),
                        p(step.clone()),
                        p(from.as_str()),
                        p(to.as_str()),
                        p(opt_json(output)),
                        p(err_json(error)),
                        p(*next_attempt_at),
                        p(*at),
                        p(to.is_terminal()),
                    ],
                    one(format!("step {run}/{step} is not {from}")),
                ));
            }
            Write::StartAttempt { run, step, item, attempt, lease_until, at, input } => {
                self.push(Stmt::new(
                    Which::start_attempt,
                    vec![
                        p(run.as_str().to_string()),
                        p(step.clone()),
                        p(item_col(*item)),
                        p(attempt.get() as i32),
                        p(*lease_until),
                        p(*at),
                        p(opt_json(input)),
                    ],
                    one(format!("an attempt of {run}/{step} is running, or the step does not exist")),
                ));
            }
            Write::FinishAttempt { run, step, item, attempt, state, output, error, fuel, blame, at } => {
                let msg = format!("attempt {attempt} of {run}/{step} is not running");
                let expect = if *state == weft_engine::state::AttemptState::Running {
                    Expect::Rows(u64::MAX, conflict(msg))
                } else {
                    one(msg)
                };
                self.push(Stmt::new(
                    Which::finish_attempt,
                    vec![
                        p(run.as_str().to_string()),
                        p(step.clone()),
                        p(item_col(*item)),
                        p(attempt.get() as i32),
                        p(state.as_str()),
                        p(opt_json(output)),
                        p(err_json(error)),
                        p(*at),
                        p(fuel.map(|f| f.min(i64::MAX as u64) as i64)),
                        p(*blame as i32),
                    ],
                    expect,
                ));
            }
            Write::Event(e) => self.events.push(e.clone()),
            Write::PutArtifact { artifact: a, data } => {
                self.push(Stmt::new(Which::blob, vec![p(a.sha256.clone()), p(data.to_vec())], Expect::Any));
                self.push(Stmt::new(
                    Which::artifact,
                    vec![
                        p(a.run.as_str().to_string()),
                        p(a.name.clone()),
                        p(a.mime.clone()),
                        p(a.size.min(i64::MAX as u64) as i64),
                        p(a.sha256.clone()),
                        p(a.step.clone()),
                        p(item_col(a.item)),
                        p(a.attempt.get() as i32),
                        p(a.created_at),
                    ],
                    one(format!("run {} does not exist", a.run)),
                ));
            }
            Write::OpenWait(wr) => {
                let (kind, event) = crate::read::wait_columns(&wr.kind);
                self.push(Stmt::new(
                    Which::open_wait,
                    vec![
                        p(wr.run.as_str().to_string()),
                        p(wr.step.clone()),
                        p(kind),
                        p(event),
                        p(serde_json::to_string(&wr.kind).unwrap_or_default()),
                        p(wr.until),
                        p(wr.since),
                    ],
                    one(format!("step {}/{} already waits", wr.run, wr.step)),
                ));
            }
            Write::RunDefinition { run, definition } => {
                let (sha, text) = plan_of(definition);
                self.push(Stmt::new(Which::plan, vec![p(sha.clone()), p(text)], Expect::Any));
                let args = vec![p(run.as_str().to_string()), p(sha)];
                self.push(Stmt::new(Which::run_plan, args, one(format!("run {run} has ended or is not stored"))));
            }
            Write::DeleteRecording { run } => {
                let id = || vec![p(run.as_str().to_string())];
                self.push(Stmt::new(Which::delete_recording, id(), one(format!("run {run} is not recording"))));
                self.push(Stmt::new(Which::delete_recording_input, id(), Expect::Any));
                self.push(Stmt::new(Which::delete_recording_events, id(), Expect::Any));
            }
            Write::CloseWait { run, step } => {
                self.push(Stmt::new(
                    Which::close_wait,
                    vec![p(run.as_str().to_string()), p(step.clone())],
                    Expect::Any,
                ));
            }
            Write::InboxPut(m) => {
                let refusal = match m.kind.event_id() {
                    Some(e) => format!("event id {e} was already emitted"),
                    None => format!("inbox message {} exists", m.id),
                };
                self.push(Stmt::new(
                    Which::inbox_put,
                    vec![
                        p(m.id.clone()),
                        p(m.kind.name()),
                        p(m.kind.event_id().map(str::to_string)),
                        p(m.kind.run().map(|r| r.as_str().to_string())),
                        p(serde_json::to_string(m).unwrap_or_default()),
                        p(m.at),
                        p(m.answer.as_ref().map(Value::to_string)),
                    ],
                    one(refusal),
                ));
            }
            Write::InboxTake { id } => {
                self.push(Stmt::new(
                    Which::inbox_take,
                    vec![p(id.clone()), p(me.lease_ms() as f64)],
                    one(format!("no inbox message {id}")),
                ));
            }
            Write::InboxAnswer { id, answer } => {
                self.push(Stmt::new(
                    Which::inbox_answer,
                    vec![p(id.clone()), p(answer.to_string())],
                    one(format!("inbox message {id} is not pending")),
                ));
            }
            Write::InboxSettle { id, answer } => {
                self.push(Stmt::new(Which::inbox_settle, vec![p(id.clone()), p(answer.to_string())], Expect::Any));
            }
            Write::PutSchedule(s) => {
                self.push(Stmt::new(
                    Which::put_schedule,
                    vec![p(s.name.clone()), p(serde_json::to_string(s).unwrap_or_default()), p(s.next_fire_at)],
                    one(format!("schedule {} exists", s.name)),
                ));
            }
            Write::DeleteSchedule { name } => {
                self.push(Stmt::new(
                    Which::delete_schedule,
                    vec![p(name.clone())],
                    one(format!("schedule {name} does not exist")),
                ));
            }
            Write::SchedulePaused { name, paused, next } => {
                self.push(Stmt::new(
                    Which::schedule_paused,
                    vec![p(name.clone()), p(*paused), p(*next)],
                    one(format!("schedule {name} does not exist")),
                ));
            }
            Write::PutStartKey(k) => {
                let v = vec![p(k.key.clone()), p(k.run.as_str().to_string()), p(k.digest.clone()), p(k.created_at)];
                self.push(Stmt::new(Which::start_key, v, one(format!("idempotency key {} is taken", k.key))));
            }
            Write::PutDelivery(d) => {
                let v = vec![
                    p(d.id.clone()),
                    p(d.run.as_str().to_string()),
                    p(d.key.clone()),
                    p(d.state.as_str().to_string()),
                    p(d.attempts as i32),
                    p(d.next_at),
                    p(d.updated_at),
                    p(serde_json::to_string(d).unwrap_or_default()),
                    p(d.error.clone()),
                ];
                self.push(Stmt::new(Which::delivery_put, v, one(format!("delivery {} exists", d.id))));
            }
            Write::DeliveryLease { id, attempts, until, now } => {
                let v = vec![p(id.clone()), p(*attempts as i32), p(*until), p(*now)];
                self.push(Stmt::new(Which::delivery_lease, v, one(format!("delivery {id} is not free to send"))));
            }
            Write::DeliveryTried { id, attempts, state, next_at, error, at } => {
                let v = vec![
                    p(id.clone()),
                    p(*attempts as i32),
                    p(state.as_str().to_string()),
                    p(*next_at),
                    p(error.clone()),
                    p(*at),
                ];
                let refusal = one(format!("delivery {id} is not pending after {attempts} tries"));
                self.push(Stmt::new(Which::delivery_tried, v, refusal));
            }
            Write::DeliveryResend { id, at } => {
                let v = vec![p(id.clone()), p(*at)];
                self.push(Stmt::new(Which::delivery_resend, v, one(format!("delivery {id} did not fail"))));
            }
            Write::ScheduleFired { name, from, next, run } => {
                self.push(Stmt::new(
                    Which::schedule_fired,
                    vec![p(name.clone()), p(*from), p(*next), p(run.as_ref().map(|r| r.as_str().to_string()))],
                    one(format!("schedule {name} does not fire at {from}")),
                ));
            }
        }
    }
}
