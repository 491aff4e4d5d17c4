//! Group commit on PostgreSQL. One task owns the write connection: it takes
//! every batch queued, applies them in one transaction and commits once.
//! The statements of a transaction are pipelined (sent without waiting for
//! each answer): a group costs two round trips, its statements and then its
//! `COMMIT`, however many batches and writes it carries.
//!
//! Every write says what it expects (`from` states, a free event seq, ...)
//! and its statement's row count tells whether that held. A group with a
//! refused batch is rolled back and applied again, each batch in a
//! savepoint, so the refused batch leaves no trace and the others commit.
//!
//! Fencing: a worker's transaction first checks its lease (`workers` row,
//! locked `FOR KEY SHARE` so a taker waits for the commit in flight) and
//! that no run it writes belongs to another worker, with those runs' rows
//! locked until the commit (`FOR NO KEY UPDATE`, in id order). A batch
//! that fails the check is refused ([`StoreError::Fenced`]) and nothing
//! of it is applied. The lock matters: checked without it, a claim could
//! commit between the check and the write, and the claiming worker would
//! drive a copy of the run this write has just made stale (a `weft
//! signal` with no worker, answering the last item of a wait while a
//! worker starts, left the run with its next step never run).

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use weft_engine::StoreError;

use crate::apply::{Answer, Op, Stmt, Stmts, Which};
use crate::{Me, map_err};

pub(crate) struct Msg {
    pub op: Op,
    pub reply: oneshot::Sender<Result<u32, StoreError>>,
}

/// Most messages folded into one transaction.
const MAX_GROUP: usize = 512;

/// The handle callers queue their work on.
#[derive(Clone)]
pub(crate) struct Writer {
    tx: mpsc::UnboundedSender<Msg>,
}

impl Writer {
    pub fn start(connect: crate::Connect, me: Arc<Me>, stats: Arc<crate::Stats>) -> Writer {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(connect, me, stats, rx));
        Writer { tx }
    }

    pub async fn send(&self, op: Op) -> Result<u32, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Msg { op, reply }).map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

/// The writer task: commits what is queued, group by group, until every
/// handle is gone; (re)connects when it has no connection.
async fn run(connect: crate::Connect, me: Arc<Me>, stats: Arc<crate::Stats>, mut rx: mpsc::UnboundedReceiver<Msg>) {
    let mut conn: Option<crate::Conn> = None;
    while let Some(first) = rx.recv().await {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(m) => group.push(m),
                Err(_) => break,
            }
        }
        if conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            match connect.writer().await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    for m in group {
                        let _ = m.reply.send(Err(e.clone()));
                    }
                    continue;
                }
            }
        }
        let c = conn.as_ref().expect("connected");
        let started = weft_engine::trace::metrics_on().then(std::time::Instant::now);
        let results = commit_group(c, &me, &stats, &group).await;
        if let Some(t) = started {
            weft_engine::trace::record_commit(group.len(), t.elapsed());
        }
        stats.transactions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        stats.batches.fetch_add(group.len() as u64, std::sync::atomic::Ordering::Relaxed);
        for (m, r) in group.into_iter().zip(results) {
            let _ = m.reply.send(r);
        }
    }
}

/// What one message's statements came to.
enum Outcome {
    Applied(u32),
    Refused(StoreError),
}

async fn commit_group(c: &crate::Conn, me: &Me, stats: &crate::Stats, group: &[Msg]) -> Vec<Result<u32, StoreError>> {
    if group.iter().any(|m| matches!(m.op, Op::DeleteRuns(_) | Op::ImportRun(_))) {
        // Retention and imports: each in a transaction of its own.
        let mut out = vec![];
        for m in group {
            out.push(match &m.op {
                Op::DeleteRuns(ids) => crate::manage::delete_runs(c, ids).await,
                Op::ImportRun(e) => crate::manage::import_run(c, me, e).await.map(|()| 0),
                _ => Box::pin(commit_group(c, me, stats, std::slice::from_ref(m))).await.remove(0),
            });
        }
        return out;
    }
    let fenced = match fence(c, me, group).await {
        Ok(f) => f,
        Err(e) => return group.iter().map(|_| Err(e.clone())).collect(),
    };
    if fenced.iter().all(|f| f.is_none()) {
        match in_one(c, me, stats, group).await {
            Ok(Some(results)) => return results.into_iter().map(Ok).collect(),
            // a batch was refused: again, each in a savepoint
            Ok(None) => {
                stats.retried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => {
                abandon(c).await;
                return group.iter().map(|_| Err(e.clone())).collect();
            }
        }
    }
    let done = in_savepoints(c, me, group, &fenced).await;
    if done.is_err() {
        abandon(c).await;
    }
    match done {
        Ok(results) => results
            .into_iter()
            .map(|o| match o {
                Outcome::Applied(n) => Ok(n),
                Outcome::Refused(e) => Err(e),
            })
            .collect(),
        Err(e) => group.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// The existing runs `msgs` write (not those they create), once each.
fn touched<'a>(msgs: impl Iterator<Item = &'a Msg> + Clone) -> Vec<String> {
    let mut touched: Vec<String> = vec![];
    let mut created: HashSet<&str> = HashSet::new();
    for m in msgs.clone() {
        if let Op::Batch(b) = &m.op {
            for w in &b.writes {
                if let weft_engine::store::Write::CreateRun { run, .. } = w {
                    created.insert(run.id.as_str());
                }
            }
        }
    }
    for m in msgs {
        if let Op::Batch(b) = &m.op {
            for w in &b.writes {
                if let Some(id) = w.run_id()
                    && !created.contains(id.as_str())
                    && !touched.iter().any(|t| t == id.as_str())
                {
                    touched.push(id.as_str().to_string());
                }
            }
        }
    }
    touched
}

/// Which messages this worker may not commit, and why (see the module
/// docs): a first look, before the transaction (each transaction checks
/// again with the rows locked, [`Stmts::not_taken`]).
async fn fence(c: &crate::Conn, me: &Me, group: &[Msg]) -> Result<Vec<Option<StoreError>>, StoreError> {
    let touched = touched(group.iter());
    if touched.is_empty() {
        return Ok(group.iter().map(|_| None).collect());
    }
    let epoch = me.epoch();
    // Runs that belong to another worker (on a client's store: to any).
    let others: HashSet<String> = c
        .client
        .query(c.st.get(Which::owned_by_others), &[&touched, &epoch])
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect();
    Ok(group
        .iter()
        .map(|m| {
            let Op::Batch(b) = &m.op else { return None };
            b.writes.iter().filter_map(|w| w.run_id()).find(|id| others.contains(id.as_str())).map(|id| {
                StoreError::Fenced(format!(
                    "run {id} is driven by another worker{}",
                    if epoch == 0 { "" } else { " (this one lost it, or never had it)" }
                ))
            })
        })
        .collect())
}

/// Sends `stmts` pipelined and checks each answer: `Ok(Err(_))` when a
/// write's expectation did not hold (or the database refused it); else
/// each statement's value (a query's first column, or a row count).
async fn send(c: &crate::Conn, stmts: &Stmts) -> Result<Result<Vec<i64>, StoreError>, StoreError> {
    let refs: Vec<Vec<&(dyn tokio_postgres::types::ToSql + Sync)>> =
        stmts.list.iter().map(|s| s.params.iter().map(|p| p.as_ref() as _).collect()).collect();
    let futs = stmts.list.iter().zip(&refs).map(|(s, p)| async move {
        let st = s.statement(&c.st);
        if s.is_query() {
            let rows = c.client.query(st, p).await?;
            let first = rows
                .first()
                .map(|r| r.try_get::<_, i32>(0).map(i64::from).or_else(|_| r.try_get::<_, i64>(0)).unwrap_or(0));
            Ok::<_, tokio_postgres::Error>((rows.len() as u64, first.unwrap_or(0)))
        } else {
            let n = c.client.execute(st, p).await?;
            Ok((n, n as i64))
        }
    });
    let answers = futures::future::join_all(futs).await;
    let mut first: Option<StoreError> = None;
    let mut values = Vec::with_capacity(answers.len());
    for (s, a) in stmts.list.iter().zip(answers) {
        let r = match a {
            Ok((n, v)) => {
                values.push(v);
                s.check(n)
            }
            Err(e) => {
                values.push(0);
                Err(map_err(e))
            }
        };
        if let Err(e) = r {
            // The first refusal says why; those after it only say the
            // transaction was aborted.
            if first.is_none() {
                first = Some(e);
            }
        }
    }
    match first {
        None => Ok(Ok(values)),
        Some(e) if c.client.is_closed() => Err(e),
        Some(e @ (StoreError::Io(_) | StoreError::Busy(_))) => Err(e),
        Some(e) => Ok(Err(e)),
    }
}

/// The whole group in one transaction: `None` when a batch was refused
/// (rolled back: nothing of the group was applied).
async fn in_one(c: &crate::Conn, me: &Me, stats: &crate::Stats, group: &[Msg]) -> Result<Option<Vec<u32>>, StoreError> {
    let mut stmts = Stmts::default();
    stmts.push(Stmt::begin());
    stmts.lease(me);
    stmts.not_taken(touched(group.iter()), me, false);
    let mut answers = vec![];
    for m in group {
        answers.push(match &m.op {
            Op::Batch(_) => Answer::Const(0),
            op => stmts.op(op, me)?,
        });
    }
    // The batches' writes, set-based (see `sets`); templates are apart.
    let writes = group.iter().flat_map(|m| match &m.op {
        Op::Batch(b) => b.writes.as_slice(),
        _ => &[],
    });
    stmts.writes_in_sets(writes, me);
    stmts.events();
    stmts.notify(group.iter().map(|m| &m.op), me);
    let values = match send(c, &stmts).await? {
        Ok(v) => v,
        // Only the lease check refuses that way: nothing may commit (the
        // caller rolls the group back).
        Err(e @ StoreError::Fenced(_)) => return Err(e),
        Err(_) => {
            rollback(c).await?;
            return Ok(None);
        }
    };
    c.client.batch_execute("COMMIT").await.map_err(map_err)?;
    stats.in_sets.fetch_add(stmts.in_sets, std::sync::atomic::Ordering::Relaxed);
    Ok(Some(answers.into_iter().map(|a| a.get(&values)).collect()))
}

/// Each message in a savepoint of one transaction: a refused one is rolled
/// back alone. Fenced messages are refused without being sent. On an error
/// the caller rolls the transaction back ([`abandon`]).
async fn in_savepoints(
    c: &crate::Conn,
    me: &Me,
    group: &[Msg],
    fenced: &[Option<StoreError>],
) -> Result<Vec<Outcome>, StoreError> {
    let mut head = Stmts::default();
    head.push(Stmt::begin());
    head.lease(me);
    send(c, &head).await??;
    let mut out = Vec::with_capacity(group.len());
    let mut any = false;
    for (m, f) in group.iter().zip(fenced) {
        if let Some(e) = f {
            out.push(Outcome::Refused(e.clone()));
            continue;
        }
        let mut stmts = Stmts::default();
        stmts.push(Stmt::savepoint());
        stmts.not_taken(touched(std::iter::once(m)), me, true);
        let answer = match stmts.op(&m.op, me) {
            Ok(a) => a,
            Err(e) => {
                out.push(Outcome::Refused(e));
                continue;
            }
        };
        stmts.events();
        match send(c, &stmts).await? {
            Ok(values) => {
                c.client.batch_execute("RELEASE SAVEPOINT batch").await.map_err(map_err)?;
                out.push(Outcome::Applied(answer.get(&values)));
                any = true;
            }
            Err(e) => {
                c.client
                    .batch_execute("ROLLBACK TO SAVEPOINT batch; RELEASE SAVEPOINT batch")
                    .await
                    .map_err(map_err)?;
                out.push(Outcome::Refused(e));
            }
        }
    }
    if any {
        let mut tail = Stmts::default();
        tail.notify(group.iter().zip(&out).filter(|(_, o)| matches!(o, Outcome::Applied(_))).map(|(m, _)| &m.op), me);
        send(c, &tail).await??;
    }
    c.client.batch_execute("COMMIT").await.map_err(map_err)?;
    Ok(out)
}

/// After a failed group (a deadlock, a lost lease, a broken statement):
/// whatever transaction is still open on the connection is rolled back, so
/// the next group does not start inside an aborted one ("current
/// transaction is aborted", which no retry would cure). Outside a
/// transaction `ROLLBACK` only warns; a broken connection is replaced at
/// the next group.
async fn abandon(c: &crate::Conn) {
    if !c.client.is_closed() {
        let _ = c.client.batch_execute("ROLLBACK").await;
    }
}

async fn rollback(c: &crate::Conn) -> Result<(), StoreError> {
    c.client.batch_execute("ROLLBACK").await.map_err(map_err)
}
