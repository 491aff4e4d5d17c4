//! Many workers on one database: who drives which run.
//!
//! A worker joins by inserting a `workers` row whose `epoch` (a sequence)
//! is its fencing token and whose `lease_until` it renews every third of
//! its lease ([`Lease`]). It owns the runs it creates and those it claims
//! (`runs.owner`). A worker that misses its renewals past the lease (dead,
//! paused, cut off) is taken over by the first other worker to look: its
//! row is deleted and its unfinished runs become the taker's, in one
//! statement, and every later commit of the old worker fails its lease
//! check (see `write`). New runs created by clients (`owner` NULL) are
//! claimed with `FOR UPDATE SKIP LOCKED`, only the head of each
//! concurrency-key queue. Messages for a run (signals, cancels, event
//! deliveries) are handled by its owner; events by any worker.
//!
//! Processes learn of commits through LISTEN/NOTIFY on channel `weft`
//! ([`Listener`]), so nobody polls the database in a tight loop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;
use futures::StreamExt;
use tokio::sync::watch;
use weft_engine::store::{InboxRecord, StoreWatch};
use weft_engine::{RunId, StoreError};

use crate::read::{UNFINISHED, id};
use crate::{Connect, Me, PgStore, map_err};

/// This process's membership as a worker; renewed by a task of its own
/// until it is dropped or [`Lease::leave`]s.
pub struct Lease {
    me: Arc<Me>,
    connect: Connect,
    lost: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// Why a lease ended.
#[derive(Debug, Clone, thiserror::Error)]
#[error("this worker's lease was lost: {0}")]
pub struct LeaseLost(pub String);

impl PgStore {
    /// Makes this process a worker: it drives the runs it creates and
    /// claims, and may be fenced. `name` is shown to operators.
    pub async fn join(&self, name: &str) -> Result<Lease, StoreError> {
        let c = self.connect.client().await?;
        let lease_ms = self.connect.lease.as_millis().min(i64::MAX as u128) as i64;
        let now = weft_engine::clock::system_now_ms();
        let row = c
            .query_one(
                "INSERT INTO workers (name, started_at, lease_until)
                 VALUES ($1, $2, now() + $3 * interval '1 millisecond') RETURNING epoch",
                &[&name, &now, &(lease_ms as f64)],
            )
            .await
            .map_err(map_err)?;
        let epoch: i64 = row.get(0);
        self.me.forget_all();
        self.me.epoch.store(epoch, std::sync::atomic::Ordering::Release);
        let (tx, lost) = watch::channel(false);
        let task = tokio::spawn(renew(c, epoch, self.connect.clone(), tx));
        tracing::info!(epoch, name, "joined the workers of {}", self.shown);
        Ok(Lease { me: self.me.clone(), connect: self.connect.clone(), lost, task })
    }
}

impl Lease {
    /// The fencing token.
    pub fn epoch(&self) -> i64 {
        self.me.epoch()
    }

    /// Resolves once the lease is lost (the worker must stop every run it
    /// drives: they are another's now) .
    pub async fn lost(&mut self) -> LeaseLost {
        let _ = self.lost.wait_for(|l| *l).await;
        LeaseLost(format!("epoch {} was not renewed within {:?}", self.epoch(), self.connect.lease))
    }

    /// Leaves for good: the unfinished runs it owns go back to the pool
    /// (another worker takes them at once) and its row is deleted. Its
    /// finished runs keep their owner, as a taker leaves them: rewriting
    /// a worker's whole history at each exit would cost a scan of `runs`.
    pub async fn leave(self) -> Result<(), StoreError> {
        self.task.abort();
        let epoch = self.me.epoch();
        let c = self.connect.client().await?;
        c.batch_execute(&format!(
            "BEGIN; UPDATE runs SET owner = NULL WHERE owner = {epoch} AND state IN {UNFINISHED};
             DELETE FROM workers WHERE epoch = {epoch};
             SELECT pg_notify('weft', 'r'); COMMIT"
        ))
        .await
        .map_err(map_err)?;
        self.me.epoch.store(0, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Renews the lease every third of it; tells `lost` when a renewal finds
/// the lease gone (taken over) or when none succeeded for a whole lease.
async fn renew(mut c: tokio_postgres::Client, epoch: i64, connect: Connect, lost: watch::Sender<bool>) {
    let lease = connect.lease;
    let lease_ms = lease.as_millis() as f64;
    let mut last_ok = Instant::now();
    loop {
        tokio::time::sleep(lease / 3).await;
        if c.is_closed() {
            match connect.client().await {
                Ok(n) => c = n,
                Err(e) => tracing::warn!(error = %e, "cannot reach the database to renew this worker's lease"),
            }
        }
        let r = c
            .query_opt(
                "UPDATE workers SET lease_until = now() + $2 * interval '1 millisecond'
                 WHERE epoch = $1 AND lease_until > now() RETURNING 1",
                &[&epoch, &lease_ms],
            )
            .await;
        match r {
            Ok(Some(_)) => last_ok = Instant::now(),
            Ok(None) => {
                tracing::error!(epoch, "this worker's lease ran out and was taken over: it stops its runs");
                let _ = lost.send(true);
                return;
            }
            Err(e) => tracing::warn!(error = %e, "cannot renew this worker's lease"),
        }
        // Silent past its lease: others may be driving its runs by now.
        if last_ok.elapsed() >= lease {
            tracing::error!(epoch, "this worker could not renew its lease in time: it stops its runs");
            let _ = lost.send(true);
            return;
        }
    }
}

/// Takes run `id` for this worker unless a live worker owns it.
pub(crate) async fn claim_run<C: GenericClient>(c: &C, me: &Me, id: &RunId) -> Result<bool, StoreError> {
    let st = c
        .prepare_cached(&format!(
            "UPDATE runs SET owner = $1 WHERE id = $2 AND state IN {UNFINISHED}
               AND (owner IS NULL OR owner = $1
                    OR NOT EXISTS (SELECT 1 FROM workers w WHERE w.epoch = runs.owner AND w.lease_until > now()))
             RETURNING id"
        ))
        .await
        .map_err(map_err)?;
    Ok(!c.query(&st, &[&me.epoch(), &id.as_str()]).await.map_err(map_err)?.is_empty())
}

/// The unfinished runs this worker owns (a client: those nobody owns).
pub(crate) async fn owned_runs<C: GenericClient>(c: &C, me: &Me) -> Result<Vec<RunId>, StoreError> {
    let st = c
        .prepare_cached(&format!(
            "SELECT id FROM runs WHERE state IN {UNFINISHED} AND owner IS NOT DISTINCT FROM $1 ORDER BY id"
        ))
        .await
        .map_err(map_err)?;
    let rows = c.query(&st, &[&me.owner_of_new()]).await.map_err(map_err)?;
    rows.into_iter().map(|r| id(r.get(0))).collect()
}

/// Every unfinished run of a worker whose lease ran out, now this one's:
/// the dead worker's row is deleted and its runs moved in one statement,
/// so two takers never split (or both take) a dead worker's runs. With
/// `orphans`, also the runs of owners that have no row at all.
pub(crate) async fn take_over<C: GenericClient>(c: &C, me: &Me, orphans: bool) -> Result<Vec<RunId>, StoreError> {
    let epoch = me.epoch();
    let dead =
        c.prepare_cached("SELECT EXISTS (SELECT 1 FROM workers WHERE lease_until < now())").await.map_err(map_err)?;
    if !orphans && !c.query_one(&dead, &[]).await.map_err(map_err)?.get::<_, bool>(0) {
        return Ok(vec![]);
    }
    let taken = c
        .prepare_cached(&format!(
            "WITH dead AS (
               DELETE FROM workers WHERE epoch IN
                 (SELECT epoch FROM workers WHERE lease_until < now() FOR UPDATE SKIP LOCKED)
               RETURNING epoch)
             UPDATE runs SET owner = $1
             WHERE state IN {UNFINISHED} AND owner IS NOT NULL AND owner <> $1
               AND (owner IN (SELECT epoch FROM dead)
                    OR ($2 AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.epoch = runs.owner)))
             RETURNING id"
        ))
        .await
        .map_err(map_err)?;
    let mut ids = vec![];
    for r in c.query(&taken, &[&epoch, &orphans]).await.map_err(map_err)? {
        ids.push(id(r.get(0))?);
    }
    if !ids.is_empty() {
        tracing::warn!(epoch, "took over {} run(s) of a worker whose lease ran out", ids.len());
        if weft_engine::trace::metrics_on() {
            metrics::counter!("weft_lease_takeovers_total").increment(ids.len() as u64);
        }
    }
    Ok(ids)
}

/// At most `limit` runs nobody owns (the heads of their queues), oldest
/// first, now this worker's. The scan starts after `cursor` (the newest id
/// it claimed last time: the entries of runs claimed before are dead in the
/// index until vacuumed, and a scan from the start would walk them all),
/// and from the start only when that finds too few.
pub(crate) async fn claim_fresh<C: GenericClient>(
    c: &C,
    me: &Me,
    limit: usize,
    cursor: &mut String,
) -> Result<Vec<RunId>, StoreError> {
    let st = c
        .prepare_cached(&format!(
            "UPDATE runs SET owner = $1 WHERE id IN (
               SELECT r.id FROM runs r WHERE r.owner IS NULL AND r.state IN {UNFINISHED} AND r.id > $3
                 AND (r.concurrency_key IS NULL OR NOT EXISTS (
                       SELECT 1 FROM runs q WHERE q.concurrency_key = r.concurrency_key
                         AND q.state IN {UNFINISHED} AND (q.created_at, q.id) < (r.created_at, r.id)))
               ORDER BY r.id LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING id"
        ))
        .await
        .map_err(map_err)?;
    let epoch = me.epoch();
    let mut ids: Vec<RunId> = vec![];
    for from in [cursor.clone(), String::new()] {
        let want = (limit - ids.len()).min(i64::MAX as usize) as i64;
        for r in c.query(&st, &[&epoch, &want, &from]).await.map_err(map_err)? {
            ids.push(id(r.get(0))?);
        }
        if ids.len() >= limit || from.is_empty() {
            break;
        }
    }
    *cursor = ids.iter().map(|i| i.as_str()).max().unwrap_or("").to_string();
    Ok(ids)
}

/// Unfinished runs not this worker's with a step that is not finished and
/// does not wait for a signal or an event (it runs, will run, or sleeps).
pub(crate) async fn busy_elsewhere<C: GenericClient>(c: &C, me: &Me) -> Result<u64, StoreError> {
    let st = c
        .prepare_cached(
            "SELECT count(*) FROM runs r WHERE r.state IN ('submitted', 'working')
               AND r.owner IS DISTINCT FROM $1
               AND EXISTS (SELECT 1 FROM steps s WHERE s.run_id = r.id
                             AND s.state NOT IN ('succeeded', 'failed', 'skipped', 'canceled')
                             AND NOT EXISTS (SELECT 1 FROM waits w WHERE w.run_id = s.run_id AND w.step = s.name
                                               AND w.kind IN ('signal', 'event')))",
        )
        .await
        .map_err(map_err)?;
    let n: i64 = c.query_one(&st, &[&me.epoch()]).await.map_err(map_err)?.get(0);
    Ok(n.max(0) as u64)
}

/// Gives runs back (their owner becomes nobody) and tells the workers.
pub(crate) async fn release_runs<C: GenericClient>(c: &C, me: &Me, ids: &[RunId]) -> Result<(), StoreError> {
    let ids: Vec<&str> = ids.iter().map(RunId::as_str).collect();
    let st = c
        .prepare_cached(
            "WITH r AS (UPDATE runs SET owner = NULL WHERE id = ANY($1) AND owner = $2 RETURNING 1)
             SELECT pg_notify('weft', 'r') FROM (SELECT count(*) AS n FROM r) x WHERE n > 0",
        )
        .await
        .map_err(map_err)?;
    c.query(&st, &[&ids, &me.epoch()]).await.map_err(map_err)?;
    Ok(())
}

/// The messages this process should handle now: a worker takes those for
/// the runs it owns (or nobody owns) and events, each for a lease's time;
/// a client sees every pending message.
pub(crate) async fn inbox_pending<C: GenericClient>(
    c: &C,
    me: &Me,
    lease: Duration,
) -> Result<Vec<InboxRecord>, StoreError> {
    let epoch = me.epoch();
    let rows = if epoch == 0 {
        let st =
            c.prepare_cached("SELECT seq, body FROM inbox WHERE answer IS NULL ORDER BY seq").await.map_err(map_err)?;
        c.query(&st, &[]).await.map_err(map_err)?
    } else {
        let st = c
            .prepare_cached(
                "UPDATE inbox SET taken_until = now() + $2 * interval '1 millisecond' WHERE seq IN (
                   SELECT i.seq FROM inbox i LEFT JOIN runs r ON r.id = i.run
                   WHERE i.answer IS NULL AND (i.taken_until IS NULL OR i.taken_until < now())
                     AND (i.run IS NULL OR r.id IS NULL OR r.owner IS NULL OR r.owner = $1)
                   ORDER BY i.seq LIMIT 500 FOR UPDATE OF i SKIP LOCKED)
                 RETURNING seq, body",
            )
            .await
            .map_err(map_err)?;
        c.query(&st, &[&epoch, &(lease.as_millis() as f64)]).await.map_err(map_err)?
    };
    let mut msgs: Vec<(i64, InboxRecord)> = rows
        .iter()
        .map(|r| Ok((r.get(0), crate::read::inbox_row(r.get(1), None)?)))
        .collect::<Result<_, StoreError>>()?;
    msgs.sort_by_key(|(seq, _)| *seq);
    Ok(msgs.into_iter().map(|(_, m)| m).collect())
}

/// The notification flags that mean work for a worker's owner loop: a run
/// nobody owns, a message, a schedule (see `apply::Stmts::notify`).
pub(crate) const WORK: &[char] = &['r', 'i', 's'];

/// LISTENs on channel `weft` on a connection of its own, reconnecting
/// when it breaks. Every notification (and every reconnection, which may
/// have missed some) moves a counter that watches wait on; one that says
/// there is work (see [`WORK`]) moves a second one too.
pub(crate) struct Listener {
    any: watch::Receiver<u64>,
    work: watch::Receiver<u64>,
    _task: tokio::task::JoinHandle<()>,
}

impl Listener {
    pub fn start(connect: Connect) -> Listener {
        let (any_tx, any) = watch::channel(0u64);
        let (work_tx, work) = watch::channel(0u64);
        let task = tokio::spawn(async move {
            let mut backoff = Duration::from_millis(50);
            loop {
                match listen(&connect, &any_tx, &work_tx).await {
                    Ok(()) => backoff = Duration::from_millis(50),
                    Err(e) => tracing::debug!(error = %e, "the LISTEN connection failed"),
                }
                if any_tx.is_closed() && work_tx.is_closed() {
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                // Reconnected: something may have been missed.
                any_tx.send_modify(|n| *n += 1);
                work_tx.send_modify(|n| *n += 1);
            }
        });
        Listener { any, work, _task: task }
    }

    /// Wakes at every commit of any process.
    pub fn watch(&self) -> PgWatch {
        let mut rx = self.any.clone();
        rx.mark_unchanged();
        PgWatch { rx }
    }

    /// Wakes when there may be work for a worker (see [`WORK`]).
    pub fn watch_work(&self) -> PgWatch {
        let mut rx = self.work.clone();
        rx.mark_unchanged();
        PgWatch { rx }
    }
}

async fn listen(connect: &Connect, any: &watch::Sender<u64>, work: &watch::Sender<u64>) -> Result<(), StoreError> {
    let (client, mut conn) = connect.config.connect(tokio_postgres::NoTls).await.map_err(map_err)?;
    let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
    let listen = client.batch_execute("LISTEN weft");
    tokio::pin!(listen);
    let mut listening = false;
    loop {
        tokio::select! {
            r = &mut listen, if !listening => {
                r.map_err(map_err)?;
                listening = true;
            }
            m = messages.next() => match m {
                Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                    any.send_modify(|n| *n += 1);
                    if n.payload().contains(WORK) {
                        work.send_modify(|n| *n += 1);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(map_err(e)),
                None => return Ok(()),
            },
        }
        if any.is_closed() && work.is_closed() {
            return Ok(());
        }
    }
}

/// A [`StoreWatch`] over the [`Listener`].
pub(crate) struct PgWatch {
    rx: watch::Receiver<u64>,
}

#[async_trait::async_trait]
impl StoreWatch for PgWatch {
    async fn changed(&mut self) -> bool {
        self.rx.changed().await.is_ok()
    }
}
