//! Group commit. Callers queue their batch; one writer at a time (the
//! holder of the write connection) takes everything queued, applies every
//! batch in one transaction, commits once, and answers each caller. A
//! batch that fails is rolled back alone, leaving no trace: the group goes
//! again with each batch in a savepoint (see `commit_group`). Callers
//! await their answer, so `commit` returns once durable.
//!
//! Who writes: at `Durability::Normal` the caller that finds no leader
//! becomes one and commits the queue itself if the connection is free (no
//! thread hand-off, a commit costs tens of µs), else wakes the writer
//! thread. Under load (other batches queued or being committed, or the
//! last transaction carried more than one) the leader first yields once to
//! the tasks ready on its worker, so those about to commit queue their
//! batches and share the transaction (W3: ~3.5 → ~6 batches per
//! transaction); alone (W1's one chain) it commits at once.
//! At `Durability::Full` (whose fsync must not block an async worker) the
//! writer thread always commits. See `Lead` in lib.rs.

use std::collections::VecDeque;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, params};
use serde_json::Value;
use tokio::sync::oneshot;
use weft_engine::store::{Batch, Write};
use weft_engine::{StepError, StoreError};

use crate::{map_err, opt_json};

/// Work for the writer.
pub(crate) enum Op {
    Batch(Arc<Batch>),
    SaveTemplate {
        name: String,
        definition: Value,
        at: i64,
    },
    DeleteTemplate {
        name: String,
    },
    /// Finished runs to delete (see `manage`): answers how many went.
    DeleteRuns(Vec<weft_engine::RunId>),
    ImportRun(Box<weft_engine::store::RunExport>),
    ImportTemplate(weft_engine::store::TemplateRecord),
}

pub(crate) struct Msg {
    pub op: Op,
    pub reply: oneshot::Sender<Result<u32, StoreError>>,
}

/// Most messages folded into one transaction.
const MAX_GROUP: usize = 512;

/// Messages waiting for a transaction.
#[derive(Default)]
pub(crate) struct Queue {
    pub msgs: VecDeque<Msg>,
    /// A caller is about to commit the queue (see `Lead`).
    pub leader: bool,
    /// A group taken from the queue is being committed.
    pub committing: bool,
    /// Messages in the last group committed.
    pub last_group: usize,
}

pub(crate) struct Writer {
    pub conn: Mutex<Connection>,
    pub queue: Mutex<Queue>,
    pub stats: Arc<crate::Stats>,
    /// Callers may commit on their own thread (Durability::Normal).
    pub inline: bool,
}

impl Writer {
    /// Commit everything queued, group by group, until the queue is empty.
    /// Called with the connection locked.
    pub fn drain(&self, conn: &Connection) {
        loop {
            let group: Vec<Msg> = {
                let mut q = self.queue.lock().unwrap();
                let n = q.msgs.len().min(MAX_GROUP);
                q.committing = n > 0;
                if n > 0 {
                    q.last_group = n;
                }
                q.msgs.drain(..n).collect()
            };
            if group.is_empty() {
                return;
            }
            let started = weft_engine::trace::metrics_on().then(std::time::Instant::now);
            let results = commit_group(conn, &group);
            if let Some(t) = started {
                weft_engine::trace::record_commit(group.len(), t.elapsed());
            }
            self.stats.transactions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.stats.batches.fetch_add(group.len() as u64, std::sync::atomic::Ordering::Relaxed);
            for (m, r) in group.into_iter().zip(results) {
                let _ = m.reply.send(r);
            }
        }
    }
}

/// The writer thread: drain whenever woken; a last drain when the store closes.
pub(crate) fn run(w: Arc<Writer>, wake: Receiver<()>) {
    while wake.recv().is_ok() {
        while wake.try_recv().is_ok() {}
        let c = w.conn.lock().unwrap();
        w.drain(&c);
    }
    let c = w.conn.lock().unwrap();
    w.drain(&c);
}

fn commit_group(conn: &Connection, group: &[Msg]) -> Vec<Result<u32, StoreError>> {
    if group.len() == 1 {
        return vec![commit_one(conn, &group[0])];
    }
    // Batches are rarely refused: first all of them in one transaction
    // without savepoints (a savepoint copies every page its batch touches
    // to the sub-journal); if one is refused, that transaction is rolled
    // back and the group goes again, each batch in its own savepoint.
    let mut results = Vec::with_capacity(group.len());
    let mut refused = false;
    let outcome = in_transaction(conn, || {
        for m in group {
            let r = apply_op(conn, &m.op);
            refused = r.is_err();
            results.push(Ok(r?));
        }
        Ok(())
    });
    match outcome {
        Ok(()) => results,
        Err(_) if refused => commit_in_savepoints(conn, group),
        // The transaction itself failed: nothing of the group is durable.
        Err(e) => group.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// Each batch of `group` in a savepoint of one transaction: a refused
/// batch is rolled back alone, leaving no trace.
fn commit_in_savepoints(conn: &Connection, group: &[Msg]) -> Vec<Result<u32, StoreError>> {
    let mut results = Vec::with_capacity(group.len());
    let outcome = in_transaction(conn, || {
        for m in group {
            exec(conn, "SAVEPOINT batch")?;
            let r = apply_op(conn, &m.op);
            if r.is_err() {
                exec(conn, "ROLLBACK TO batch")?;
            }
            exec(conn, "RELEASE batch")?;
            results.push(r);
        }
        Ok(())
    });
    match outcome {
        Ok(()) => results,
        // The transaction itself failed: nothing of the group is durable.
        Err(e) => group.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// A group of one: no savepoint (SQLite copies every page a savepoint
/// touches to its sub-journal); a refused batch rolls the transaction back.
fn commit_one(conn: &Connection, m: &Msg) -> Result<u32, StoreError> {
    in_transaction(conn, || apply_op(conn, &m.op))
}

/// Run one of the transaction-control statements. Through the statement
/// cache, like every statement of a transition: parsed once per
/// connection, not once per transaction.
fn exec(c: &Connection, sql: &str) -> Result<(), StoreError> {
    c.prepare_cached(sql).and_then(|mut s| s.execute([])).map(|_| ()).map_err(map_err)
}

/// `f` inside `BEGIN IMMEDIATE` .. `COMMIT`; rolled back if `f` or the
/// commit fails.
fn in_transaction<T>(conn: &Connection, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    exec(conn, "BEGIN IMMEDIATE")?;
    let r = f().and_then(|v| exec(conn, "COMMIT").map(|()| v));
    if r.is_err() && !conn.is_autocommit() {
        let _ = exec(conn, "ROLLBACK");
    }
    r
}

thread_local! {
    /// The definition last written by this thread, as text: the runs of
    /// one plan share its `Arc`, and it is serialised once, not per run.
    static PLAN_TEXT: std::cell::RefCell<Option<(Arc<Value>, String)>> = const { std::cell::RefCell::new(None) };
}

/// `f` of the text of `def`.
fn plan_text<R>(def: &Arc<Value>, f: impl FnOnce(&str) -> R) -> R {
    PLAN_TEXT.with(|cell| {
        let mut cell = cell.borrow_mut();
        let (_, text) = match cell.take() {
            Some((d, text)) if Arc::ptr_eq(&d, def) => cell.insert((d, text)),
            _ => cell.insert((def.clone(), def.to_string())),
        };
        f(text)
    })
}

fn conflict(what: String) -> StoreError {
    StoreError::Conflict(what)
}

fn err_json(e: &Option<StepError>) -> Option<String> {
    e.as_ref().map(|e| serde_json::to_string(e).unwrap_or_default())
}

fn item_col(i: Option<weft_engine::ItemIndex>) -> i64 {
    i.map(|i| i.0 as i64).unwrap_or(-1)
}

/// The runs a batch's writes found (or made): an event of any other run
/// is checked by a read. Events need no more: a run's `last_seq` and
/// `updated_at` are read from its last event (see `read::run`), so a
/// transition writes no `runs` row unless the run's own state changes
/// (rewriting the row at every transition cost a page per run in flight
/// per transaction: W4 3.7 → 2.7 pages per item).
#[derive(Default)]
struct Found<'a> {
    runs: Vec<&'a str>,
}

impl<'a> Found<'a> {
    fn add(&mut self, run: &'a str) {
        if !self.runs.contains(&run) {
            self.runs.push(run);
        }
    }

    /// Refuses an event of a run that does not exist.
    fn check(&mut self, c: &Connection, run: &'a str) -> Result<(), StoreError> {
        if self.runs.contains(&run) {
            return Ok(());
        }
        let exists =
            c.prepare_cached("SELECT 1 FROM runs WHERE id = ?1").and_then(|mut s| s.exists([run])).map_err(map_err)?;
        if !exists {
            return Err(conflict(format!("run {run} does not exist")));
        }
        self.runs.push(run);
        Ok(())
    }
}

fn apply_op(c: &Connection, op: &Op) -> Result<u32, StoreError> {
    match op {
        Op::Batch(b) => {
            let mut found = Found::default();
            for w in &b.writes {
                apply_write(c, w, &mut found)?;
            }
            Ok(0)
        }
        Op::SaveTemplate { name, definition, at } => {
            let v: u32 = c
                .query_row("SELECT COALESCE(MAX(version), 0) + 1 FROM templates WHERE name = ?1", [name], |r| r.get(0))
                .map_err(map_err)?;
            c.execute(
                "INSERT INTO templates (name, version, definition, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![name, v, definition.to_string(), at],
            )
            .map_err(map_err)?;
            Ok(v)
        }
        Op::DeleteTemplate { name } => {
            let n = c.execute("DELETE FROM templates WHERE name = ?1", [name]).map_err(map_err)?;
            Ok(n as u32)
        }
        Op::DeleteRuns(ids) => crate::manage::delete_runs(c, ids),
        Op::ImportRun(e) => crate::manage::import_run(c, e).map(|()| 0),
        Op::ImportTemplate(t) => crate::manage::import_template(c, t).map(|()| 0),
    }
}

fn apply_write<'a>(c: &Connection, w: &'a Write, found: &mut Found<'a>) -> Result<(), StoreError> {
    if crate::outside::apply(c, w)? || crate::outbox::apply(c, w)? {
        return Ok(());
    }
    match w {
        Write::CreateRun { run, steps } => {
            let n = c
                .prepare_cached(
                    "INSERT OR IGNORE INTO runs (id, template, version, state, parent, depth,
                        concurrency_key, created_at, updated_at, deadline_at)
                     VALUES (?1, ?2, ?3, 'submitted', ?4, ?5, ?6, ?7, ?7, ?8)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        run.id.as_str(),
                        run.template,
                        run.version,
                        run.parent.as_ref().map(|p| p.as_str().to_owned()),
                        run.depth,
                        run.concurrency_key,
                        run.created_at,
                        run.deadline_at,
                    ])
                })
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("run {} exists", run.id)));
            }
            plan_text(&run.definition, |definition| {
                c.prepare_cached(
                    "INSERT INTO run_plans (id, definition, input, traceparent, labels) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .and_then(|mut s| {
                    let labels = crate::read::labels_text(&run.labels);
                    s.execute(params![run.id.as_str(), definition, run.input.to_string(), run.traceparent, labels])
                })
            })
            .map_err(map_err)?;
            let mut s = c
                .prepare_cached("INSERT INTO steps (run_id, name, idx, state) VALUES (?1, ?2, ?3, 'pending')")
                .map_err(map_err)?;
            for (i, name) in steps.iter().enumerate() {
                s.execute(params![run.id.as_str(), name, i as i64]).map_err(map_err)?;
            }
            found.add(run.id.as_str());
        }
        Write::RunState { run, from, to, output, error, at } => {
            let n = c
                .prepare_cached(
                    "UPDATE runs SET state = ?3, output = ?4, error = ?5, updated_at = MAX(updated_at, ?6)
                     WHERE id = ?1 AND state = ?2",
                )
                .and_then(|mut s| {
                    s.execute(params![run.as_str(), from.as_str(), to.as_str(), opt_json(output), err_json(error), at])
                })
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("run {run} is not {from}")));
            }
            found.add(run.as_str());
        }
        Write::RunDefinition { run, definition } => {
            let n = c
                .prepare_cached(
                    "UPDATE run_plans SET definition = ?2 WHERE id = ?1 AND EXISTS (SELECT 1 FROM runs WHERE id = ?1
                       AND state NOT IN ('completed', 'failed', 'canceled', 'rejected'))",
                )
                .and_then(|mut s| s.execute(params![run.as_str(), definition.to_string()]))
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("run {run} has ended or is not stored")));
            }
        }
        Write::DeleteRecording { run } => {
            let n = c
                .prepare_cached("DELETE FROM runs WHERE id = ?1 AND state = 'recording'")
                .and_then(|mut s| s.execute([run.as_str()]))
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("run {run} is not recording")));
            }
            for sql in ["DELETE FROM run_plans WHERE id = ?1", "DELETE FROM events WHERE run_id = ?1"] {
                c.prepare_cached(sql).and_then(|mut s| s.execute([run.as_str()])).map_err(map_err)?;
            }
        }
        Write::StepState { run, step, from, to, output, error, next_attempt_at, at } => {
            let n = c
                .prepare_cached(
                    "UPDATE steps SET state = ?4, output = ?5, error = ?6, next_attempt_at = ?7,
                        started_at = CASE WHEN ?4 = 'running' THEN COALESCE(started_at, ?8) ELSE started_at END,
                        ended_at = CASE WHEN ?9 THEN ?8 ELSE ended_at END
                     WHERE run_id = ?1 AND name = ?2 AND state = ?3",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        run.as_str(),
                        step,
                        from.as_str(),
                        to.as_str(),
                        opt_json(output),
                        err_json(error),
                        next_attempt_at,
                        at,
                        to.is_terminal(),
                    ])
                })
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("step {run}/{step} is not {from}")));
            }
            found.add(run.as_str());
        }
        Write::StartAttempt { run, step, item, attempt, lease_until, at, input } => {
            // One statement: the step exists (its row is not rewritten per
            // attempt: readers count its attempts), and no other attempt of
            // it (or of its item) is running — checked by a read of the
            // step's attempts rather than kept by an index of running
            // attempts (a page written as each attempt starts and ends).
            let n = c
                .prepare_cached(
                    "INSERT INTO attempts (run_id, step, item, attempt, state, lease_until, started_at, input)
                     SELECT ?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7
                     WHERE EXISTS (SELECT 1 FROM steps WHERE run_id = ?1 AND name = ?2)
                       AND NOT EXISTS (SELECT 1 FROM attempts
                                       WHERE run_id = ?1 AND step = ?2 AND item = ?3 AND state = 'running')
                     ON CONFLICT (run_id, step, item, attempt) DO UPDATE
                       SET state = 'running', lease_until = excluded.lease_until,
                           started_at = excluded.started_at, ended_at = NULL, output = NULL, error = NULL,
                           input = excluded.input
                       WHERE attempts.state = 'interrupted'",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        run.as_str(),
                        step,
                        item_col(*item),
                        attempt.get(),
                        lease_until,
                        at,
                        opt_json(input)
                    ])
                })
                .map_err(map_err)?;
            if n == 0 {
                let exists = c
                    .prepare_cached("SELECT 1 FROM steps WHERE run_id = ?1 AND name = ?2")
                    .and_then(|mut s| s.exists(params![run.as_str(), step]))
                    .map_err(map_err)?;
                return Err(conflict(if exists {
                    format!("an attempt of {run}/{step} is running")
                } else {
                    format!("step {run}/{step} does not exist")
                }));
            }
            found.add(run.as_str());
        }
        Write::FinishAttempt { run, step, item, attempt, state, output, error, fuel, blame, at } => {
            let n = c
                .prepare_cached(
                    "UPDATE attempts SET state = ?5, output = ?6, error = ?7, ended_at = ?8,
                       fuel = CASE WHEN ?9 IS NULL THEN fuel ELSE coalesce(fuel, 0) + ?9 END,
                       interruptions = interruptions + (?5 = 'interrupted'),
                       blame = CASE WHEN ?5 = 'interrupted' THEN ?10 ELSE blame END
                     WHERE run_id = ?1 AND step = ?2 AND item = ?3 AND attempt = ?4 AND state = 'running'",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        run.as_str(),
                        step,
                        item_col(*item),
                        attempt.get(),
                        state.as_str(),
                        opt_json(output),
                        err_json(error),
                        at,
                        fuel.map(|f| f.min(i64::MAX as u64) as i64),
                        blame
                    ])
                })
                .map_err(map_err)?;
            if n == 0 || *state == weft_engine::state::AttemptState::Running {
                return Err(conflict(format!("attempt {attempt} of {run}/{step} is not running")));
            }
            found.add(run.as_str());
        }
        Write::Event(e) => {
            found.check(c, e.run.as_str())?;
            c.prepare_cached(
                "INSERT INTO events (run_id, seq, at, kind, step, item, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    e.run.as_str(),
                    e.seq.0 as i64,
                    e.at,
                    e.kind,
                    e.step,
                    e.item.map(|i| i.0 as i64),
                    e.data.to_string()
                ])
            })
            .map_err(map_err)?;
        }
        Write::PutArtifact { artifact: a, data } => {
            found.check(c, a.run.as_str())?;
            // The bytes once per digest; the record by (run, name).
            c.prepare_cached("INSERT OR IGNORE INTO blobs (sha256, data) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![a.sha256, &data[..]]))
                .map_err(map_err)?;
            c.prepare_cached(
                "INSERT OR REPLACE INTO artifacts (run_id, name, mime, size, sha256, step, item, attempt, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    a.run.as_str(),
                    a.name,
                    a.mime,
                    a.size as i64,
                    a.sha256,
                    a.step,
                    item_col(a.item),
                    a.attempt.get(),
                    a.created_at
                ])
            })
            .map_err(map_err)?;
        }
        other => unreachable!("applied by crate::outside: {other:?}"),
    }
    Ok(())
}
