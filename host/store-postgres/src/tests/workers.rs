//! Many workers on one database: claims, leases, fencing, takeover,
//! messages routed to a run's owner, notifications.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use weft_engine::conformance::{b as batch, create, event, rid};
use weft_engine::store::*;
use weft_engine::{RunId, RunState};

use super::super::*;

/// Two stores on one fresh database, as two processes would have them,
/// with a short lease.
async fn pair() -> (PgStore, PgStore) {
    let url = tokio::task::spawn_blocking(weft_test_postgres::database).await.unwrap();
    let opts = Options { lease: Duration::from_millis(600), ..Default::default() };
    (PgStore::connect(&url, opts.clone()).await.unwrap(), PgStore::connect(&url, opts).await.unwrap())
}

fn working(id: &RunId) -> Write {
    Write::RunState {
        run: id.clone(),
        from: RunState::Submitted,
        to: RunState::Working,
        output: None,
        error: None,
        at: 2,
    }
}

/// A worker paused past its lease is taken over: the taker gets its runs,
/// and the paused worker's next commit is refused and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_past_its_lease_is_taken_over_and_fenced() {
    let (a, b) = pair().await;
    let la = a.join("a").await.unwrap();
    let _lb = b.join("b").await.unwrap();
    let id = rid(1);
    a.commit(batch(vec![create(&id, &["s"]), event(&id, 1, "run.submitted")])).await.unwrap();
    assert!(!b.claim_run(&id).await.unwrap(), "a live worker's run is not another's to take");
    assert!(b.claim_runs(10).await.unwrap().is_empty());
    // The pause: its heartbeat stops (as SIGSTOP stops it).
    drop(la);
    tokio::time::sleep(Duration::from_millis(900)).await;
    let taken = b.claim_runs(10).await.unwrap();
    assert_eq!(taken, vec![id.clone()], "the taker has its runs");
    let late = a.commit(batch(vec![working(&id), event(&id, 2, "run.working")])).await;
    assert!(matches!(late, Err(StoreError::Fenced(_))), "{late:?}");
    assert!(!late.unwrap_err().is_retryable());
    let r = b.run(&id).await.unwrap().unwrap();
    assert_eq!((r.state, r.last_seq.0), (RunState::Submitted, 1), "the late commit changed nothing");
    b.commit(batch(vec![working(&id), event(&id, 2, "run.working")])).await.unwrap();
    // A batch of another run of the paused worker is refused too; one of
    // a run nobody owns is its to write (a client's, say).
    let free = rid(2);
    b.commit(batch(vec![create(&free, &["s"])])).await.unwrap();
    b.release_runs(std::slice::from_ref(&free)).await.unwrap();
    let e = a.commit(batch(vec![working(&free)])).await;
    assert!(matches!(e, Err(StoreError::Fenced(_))), "a lost lease commits nothing at all: {e:?}");
}

/// Runs a client creates are nobody's until a worker claims them; only the
/// head of a concurrency-key queue is claimed; a run given back is claimed
/// again; two workers never claim one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_take_free_runs_once_and_only_queue_heads() {
    let (client, w) = pair().await;
    let w2 = PgStore::connect(&w.shown_url_for_tests(), Options::default()).await.unwrap();
    let _l1 = w.join("w1").await.unwrap();
    let _l2 = w2.join("w2").await.unwrap();
    let mut ids = vec![];
    for k in 0..40 {
        let id = rid(100 + k);
        let mut c = create(&id, &["s"]);
        if let Write::CreateRun { run, .. } = &mut c {
            // `create` puts every run in queue "k": only the oldest may go.
            run.concurrency_key = if k < 30 { None } else { Some("k".into()) };
            run.created_at = 100 + k;
        }
        client.commit(batch(vec![c])).await.unwrap();
        ids.push(id);
    }
    let (x, y) = tokio::join!(w.claim_runs(100), w2.claim_runs(100));
    let (x, y) = (x.unwrap(), y.unwrap());
    let mut all: Vec<RunId> = x.iter().chain(&y).cloned().collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), x.len() + y.len(), "no run claimed twice");
    assert_eq!(all.len(), 31, "30 free runs and the head of queue k");
    assert!(all.contains(&ids[30]) && !all.contains(&ids[31]));
    assert!(w.claim_runs(100).await.unwrap().is_empty() && w2.claim_runs(100).await.unwrap().is_empty());
    // The head ends: the next of the queue is claimable.
    let owner = if x.contains(&ids[30]) { &w } else { &w2 };
    owner
        .commit(batch(vec![Write::RunState {
            run: ids[30].clone(),
            from: RunState::Submitted,
            to: RunState::Canceled,
            output: None,
            error: None,
            at: 3,
        }]))
        .await
        .unwrap();
    assert_eq!(w.claim_runs(100).await.unwrap(), vec![ids[31].clone()]);
    // Given back, a run is free again.
    w.release_runs(std::slice::from_ref(&ids[31])).await.unwrap();
    assert_eq!(w2.claim_runs(100).await.unwrap(), vec![ids[31].clone()]);
    assert!(w.claim_run(&ids[31]).await.is_ok_and(|mine| !mine));
}

/// A message for a run goes to the worker that owns it (or to any worker
/// when nobody does); an event to any worker; a taken message is not
/// handed out again while its taker's lease on it lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_go_to_the_owner_of_their_run() {
    let (a, b) = pair().await;
    let _la = a.join("a").await.unwrap();
    let _lb = b.join("b").await.unwrap();
    let (mine, free) = (rid(1), rid(2));
    a.commit(batch(vec![create(&mine, &["w"])])).await.unwrap();
    b.commit(batch(vec![create(&free, &["w"])])).await.unwrap();
    b.release_runs(std::slice::from_ref(&free)).await.unwrap();
    let msg = |id: &str, kind: InboxKind| InboxRecord { id: id.into(), kind, data: json!(1), at: 1, answer: None };
    b.commit(batch(vec![
        Write::InboxPut(msg("m1", InboxKind::Signal { run: mine.clone(), step: "w".into(), item: None })),
        Write::InboxPut(msg("m2", InboxKind::Cancel { run: free.clone() })),
        Write::InboxPut(msg("m3", InboxKind::Event { event: "e".into(), id: "e1".into() })),
    ]))
    .await
    .unwrap();
    let ids = |v: Vec<InboxRecord>| v.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(ids(b.inbox_pending().await.unwrap()), vec!["m2", "m3"], "not the other worker's run's");
    assert_eq!(ids(a.inbox_pending().await.unwrap()), vec!["m1"], "its own run's; the rest is taken");
    assert!(a.inbox_pending().await.unwrap().is_empty(), "taken messages are not handed out twice");
    // A message taken as it is stored (an event its emitter handles) is
    // handed to no worker.
    let taken = msg("m4", InboxKind::Event { event: "e".into(), id: "e2".into() });
    a.commit(batch(vec![Write::InboxPut(taken), Write::InboxTake { id: "m4".into() }])).await.unwrap();
    assert!(b.inbox_pending().await.unwrap().is_empty() && a.inbox_pending().await.unwrap().is_empty());
    b.commit(batch(vec![Write::InboxAnswer { id: "m2".into(), answer: json!({"state": "canceled"}) }])).await.unwrap();
    assert_eq!(b.inbox_get("m2", false).await.unwrap().unwrap().answer, Some(json!({"state": "canceled"})));
}

/// A watch wakes when another process commits (LISTEN/NOTIFY), and not
/// before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_wakes_at_another_processs_commit() {
    let (a, b) = pair().await;
    let mut watch = a.watch().expect("PostgreSQL tells");
    // The LISTEN connection starts with the watch: let it listen.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let quiet = tokio::time::timeout(Duration::from_millis(200), watch.changed()).await;
    assert!(quiet.is_err(), "nothing committed, nothing heard");
    let id = rid(5);
    b.commit(batch(vec![create(&id, &["a"])])).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(5), watch.changed()).await;
    assert_eq!(heard.ok(), Some(true));
    let _ = b.run(&id).await.unwrap();
    let quiet = tokio::time::timeout(Duration::from_millis(200), watch.changed()).await;
    assert!(quiet.is_err(), "a read is not a change");
}

/// Many workers opening one database at once migrate it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_openers_migrate_once_and_a_newer_schema_is_refused() {
    let url = tokio::task::spawn_blocking(weft_test_postgres::database).await.unwrap();
    let opens: Vec<_> = (0..6).map(|_| PgStore::connect(&url, Options::default())).collect();
    for s in futures::future::join_all(opens).await {
        s.unwrap();
    }
    let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let v: i32 = c.query_one("SELECT version FROM weft_schema", &[]).await.unwrap().get(0);
    assert_eq!(v as u32, SCHEMA_VERSION);
    assert_eq!(c.query_one("SELECT count(*) FROM weft_schema", &[]).await.unwrap().get::<_, i64>(0), 1);
    c.execute("UPDATE weft_schema SET version = version + 5", &[]).await.unwrap();
    match PgStore::connect(&url, Options::default()).await {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 5, SCHEMA_VERSION))
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a newer schema must be refused"),
    }
    let _ = Arc::new(());
}

/// A group the database aborts midway (here its statement is canceled while
/// it waits for a row another session locked, as a deadlock would abort
/// it) is refused as retryable, and the writer's next group commits: it
/// does not start inside the aborted transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_the_database_aborts_leaves_the_writer_usable() {
    let url = tokio::task::spawn_blocking(weft_test_postgres::database).await.unwrap();
    let s = Arc::new(PgStore::connect(&url, Options::default()).await.unwrap());
    let id = rid(1);
    s.commit(batch(vec![create(&id, &["s"]), event(&id, 1, "run.submitted")])).await.unwrap();
    let (other, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    other.batch_execute("BEGIN").await.unwrap();
    other.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", &[&id.as_str()]).await.unwrap();
    let blocked = {
        let s = s.clone();
        let id = id.clone();
        tokio::spawn(async move { s.commit(batch(vec![working(&id), event(&id, 2, "run.working")])).await })
    };
    // Cancel the writer's statement once it waits for the lock.
    let mut canceled = false;
    for _ in 0..500 {
        let n = other
            .query(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .len();
        if n > 0 {
            canceled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(canceled, "the writer never waited for the locked row");
    let e = blocked.await.unwrap().unwrap_err();
    assert!(e.is_retryable(), "a canceled group may be tried again: {e:?}");
    other.batch_execute("ROLLBACK").await.unwrap();
    s.commit(batch(vec![working(&id), event(&id, 2, "run.working")]))
        .await
        .expect("the next group commits on the same writer");
    let r = s.run(&id).await.unwrap().unwrap();
    assert_eq!((r.state, r.last_seq.0), (RunState::Working, 2));
}

/// A claim that commits while a client's write to the same run is in
/// flight (its first check, before the transaction, saw nobody own the
/// run): the write waits for the claim (the check in its transaction locks
/// the run's row) and is then refused as fenced, so the claiming worker
/// never drives a copy of the run the write made stale. Before the lock, a
/// `weft signal` answering a wait's last item as a worker started left
/// the step succeeded and its next step never run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_landing_during_a_clients_write_fences_the_write() {
    let url = tokio::task::spawn_blocking(weft_test_postgres::database).await.unwrap();
    let client = Arc::new(PgStore::connect(&url, Options::default()).await.unwrap());
    let worker = PgStore::connect(&url, Options::default()).await.unwrap();
    let _joined = worker.join("w").await.unwrap();
    let id = rid(1);
    client.commit(batch(vec![create(&id, &["s"]), event(&id, 1, "run.submitted")])).await.unwrap();
    // The claim in flight: the run's owner set, not committed yet.
    let (raw, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    raw.batch_execute("BEGIN").await.unwrap();
    let claimed =
        raw.execute("UPDATE runs SET owner = $1 WHERE id = $2", &[&worker.me.epoch(), &id.as_str()]).await.unwrap();
    assert_eq!(claimed, 1);
    let write = tokio::spawn({
        let (client, id) = (client.clone(), id.clone());
        async move { client.commit(batch(vec![working(&id), event(&id, 2, "run.working")])).await }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!write.is_finished(), "the write waits for the claim in flight");
    raw.batch_execute("COMMIT").await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(10), write).await.expect("the write ends").unwrap();
    assert!(matches!(done, Err(StoreError::Fenced(_))), "the claim came first: {done:?}");
    let r = worker.run(&id).await.unwrap().unwrap();
    assert_eq!((r.state, r.last_seq.0), (RunState::Submitted, 1), "the fenced write changed nothing");
    // A write to a run nobody owns still goes through, in a group with the
    // fenced one: only the fenced batch is refused.
    let free = rid(2);
    client.commit(batch(vec![create(&free, &["s"])])).await.unwrap();
    let (a, b) = tokio::join!(
        client.commit(batch(vec![working(&free)])),
        client.commit(batch(vec![working(&id), event(&id, 2, "run.working")]))
    );
    assert!(a.is_ok() && matches!(b, Err(StoreError::Fenced(_))), "{a:?} {b:?}");
}
