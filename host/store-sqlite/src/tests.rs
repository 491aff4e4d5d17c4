//! Tests on real SQLite files in temp dirs. Where it helps, the same
//! batches go to the engine's MemStore (the reference semantics) and the
//! two stores must agree.

use std::sync::Arc;

use serde_json::{Value, json};
use weft_engine::store::*;
use weft_engine::{AttemptNo, ErrorKind, RunId, RunState, SeededRng, Seq, StepError, StepState};

use super::*;
use weft_engine::conformance::*;

weft_engine::conformance_suite!(async {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("weft.db"), Durability::Normal).unwrap();
    (std::sync::Arc::new(store) as std::sync::Arc<dyn Store>, dir)
});

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("data").join("weft.db");
    (d, p)
}

#[tokio::test]
async fn migrations_create_and_refuse_newer() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    drop(s);
    // idempotent reopen
    let s = SqliteStore::open(&p, Durability::Full).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    drop(s);
    let c = Connection::open(&p).unwrap();
    c.pragma_update(None, "user_version", SCHEMA_VERSION + 7).unwrap();
    drop(c);
    match SqliteStore::open(&p, Durability::Normal) {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 7, SCHEMA_VERSION));
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a newer schema must be refused"),
    }
}

#[tokio::test]
async fn a_failed_batch_leaves_no_trace() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let id = rid(3);
    // the last write is refused: the run, steps and event before it must vanish
    let e = s
        .commit(b(vec![
            create(&id, &["a", "b"]),
            event(&id, 1, "run.submitted"),
            step_to(&id, "a", StepState::Pending, StepState::Running, None, 1),
            start(&id, "a", None, 1, 10),
            step_to(&id, "b", StepState::Running, StepState::Failed, None, 1),
        ]))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)));
    assert!(s.run(&id).await.unwrap().is_none());
    assert!(s.events_after(&id, Seq::ZERO, 10).await.unwrap().is_empty());
    assert!(s.list_runs(&RunFilter::default()).await.unwrap().is_empty());
    let c = Connection::open(&p).unwrap();
    for t in ["runs", "steps", "attempts", "events"] {
        let n: i64 = c.query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "{t} has rows of a refused batch");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_commit_under_concurrent_callers() {
    let (_d, p) = tmp();
    let s = Arc::new(SqliteStore::open(&p, Durability::Normal).unwrap());
    let callers = 40;
    let per = 15;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..callers {
        let s = s.clone();
        tasks.spawn(async move {
            let id = rid(1000 + c);
            s.commit(b(vec![create(&id, &["a"]), event(&id, 1, "run.submitted")])).await.unwrap();
            let mut refused = 0;
            for k in 0..per {
                // every third batch carries a duplicate seq and must fail alone
                let seq = if k % 3 == 2 { 1 } else { k as u64 + 2 };
                let r = s.commit(b(vec![event(&id, k as u64 + 100, "extra"), event(&id, seq, "e")])).await;
                if k % 3 == 2 {
                    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
                    refused += 1;
                } else {
                    r.unwrap();
                }
            }
            (id, refused)
        });
    }
    let mut total_refused = 0;
    while let Some(r) = tasks.join_next().await {
        let (id, refused) = r.unwrap();
        total_refused += refused;
        let ev = s.events_after(&id, Seq::ZERO, 1000).await.unwrap();
        let ok = per - refused;
        assert_eq!(ev.len(), 1 + 2 * ok as usize, "the refused batches left nothing, the others everything");
        assert!(ev.iter().all(|e| e.kind != "e" || e.seq.0 != 1));
        let extra: Vec<u64> = ev.iter().filter(|e| e.kind == "extra").map(|e| e.seq.0 - 100).collect();
        assert!(extra.iter().all(|k| k % 3 != 2), "{extra:?}");
    }
    assert_eq!(total_refused, callers * (per / 3));
    let st = s.stats();
    let txns = st.transactions.load(Ordering::Relaxed);
    let batches = st.batches.load(Ordering::Relaxed);
    assert_eq!(batches, (callers * (per + 1)) as u64, "every batch went through the writer");
    assert!(txns <= batches);
    assert_eq!(s.list_runs(&RunFilter::default()).await.unwrap().len(), callers as usize);
}

#[tokio::test]
async fn data_survives_reopen() {
    let (_d, p) = tmp();
    let id = rid(4);
    {
        let s = SqliteStore::open(&p, Durability::Full).unwrap();
        apply_all(&s, &life(&id)).await;
    }
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let r = s.run(&id).await.unwrap().unwrap();
    assert_eq!(r.attempts.len(), 4);
    assert_eq!(r.last_seq, Seq(4));
}

#[test]
fn error_mapping_splits_retryable() {
    let busy = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None);
    assert!(map_err(busy).is_retryable());
    let locked = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_LOCKED), None);
    assert!(map_err(locked).is_retryable());
    let io = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR), None);
    assert!(matches!(map_err(io), StoreError::Io(_)));
    let c = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT), None);
    assert!(matches!(map_err(c), StoreError::Conflict(_)));
    let corrupt = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT), None);
    assert!(!map_err(corrupt).is_retryable());
}

#[tokio::test]
async fn a_closed_store_refuses_writes() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    s.close();
    assert_eq!(s.commit(b(vec![create(&rid(5), &["a"])])).await, Err(StoreError::Closed));
}

/// How often each prepared statement of `c` was re-prepared.
fn reprepares(c: &Connection) -> Vec<(i32, String)> {
    let mut out = vec![];
    #[allow(unsafe_code)]
    // SAFETY: walks the statements of an open connection this thread holds.
    unsafe {
        let db = c.handle();
        let mut st = rusqlite::ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
        while !st.is_null() {
            let n = rusqlite::ffi::sqlite3_stmt_status(st, rusqlite::ffi::SQLITE_STMTSTATUS_REPREPARE, 0);
            let sql = std::ffi::CStr::from_ptr(rusqlite::ffi::sqlite3_sql(st)).to_string_lossy().into_owned();
            out.push((n, sql));
            st = rusqlite::ffi::sqlite3_next_stmt(db, st);
        }
    }
    out
}

/// Cached statements stay prepared: reading and writing runs in turn
/// re-prepares none (a re-prepare is a full parse and plan).
#[tokio::test]
async fn cached_statements_are_not_reprepared() {
    let (_d, p) = tmp();
    let sql = SqliteStore::open(&p, Durability::Normal).unwrap();
    let (a, z) = (rid(1), rid(2));
    apply_all(&sql, &life(&a)).await;
    apply_all(&sql, &life(&z)).await;
    for k in 0..6u64 {
        let id = if k % 2 == 0 { &a } else { &z };
        sql.commit(b(vec![event(id, 10 + k, "x")])).await.unwrap();
        assert!(sql.run(id).await.unwrap().is_some());
        assert!(!sql.events_after(id, Seq(k), 1 + k as usize).await.unwrap().is_empty());
    }
    let reader = sql.read(|c| Ok(reprepares(c))).unwrap();
    let writer = reprepares(&sql.w.conn.lock().unwrap());
    assert!(reader.len() >= 5 && writer.len() >= 5, "{reader:?} {writer:?}");
    for (n, stmt) in reader.iter().chain(&writer) {
        assert_eq!(*n, 0, "re-prepared {n} times: {stmt}");
    }
}

/// The unfinished runs are exactly those in a state that is not terminal
/// (the query names those states; a new state must be added there).
#[tokio::test]
async fn unfinished_runs_are_those_in_every_state_that_is_not_terminal() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let raw = rusqlite::Connection::open(&p).unwrap();
    let mut want = vec![];
    for (n, state) in RunState::ALL.iter().enumerate() {
        let id = rid(9000 + n as i64);
        raw.execute(
            "INSERT INTO runs (id, template, state, created_at, updated_at) VALUES (?1, 't', ?2, 1, 1)",
            rusqlite::params![id.as_str(), state.as_str()],
        )
        .unwrap();
        if state.is_executed() {
            want.push(id);
        }
    }
    want.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(s.unfinished_runs().await.unwrap(), want);
}

mod lock;

mod answers;

mod checkpoint;

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_watch_wakes_at_another_connections_commit_and_not_before() {
    let (_d, path) = tmp();
    let mine = SqliteStore::open(&path, Durability::Normal).unwrap();
    let other = SqliteStore::open(&path, Durability::Normal).unwrap();
    let mut watch = mine.watch().expect("a watch on Linux");
    // Nothing written: nothing to hear.
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(150), watch.changed()).await;
    assert!(quiet.is_err(), "no write, no wake-up");
    // A commit by another store (another process, as far as the file knows).
    let id = rid(1);
    other.commit(b(vec![create(&id, &["a"]), event(&id, 1, "run.submitted")])).await.unwrap();
    let heard = tokio::time::timeout(std::time::Duration::from_secs(5), watch.changed()).await;
    assert_eq!(heard.ok(), Some(true), "the commit woke the watch");
    // Reading does not write: no wake-up.
    let _ = mine.run(&id).await.unwrap();
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(150), watch.changed()).await;
    assert!(quiet.is_err(), "a read is not a change");
}

/// Processes that start together on a data folder no one has opened yet
/// (a worker and a `weft run`) all open the store: the first creates and
/// migrates it while the others wait for it rather than fail busy.
#[test]
fn stores_opened_at_once_on_a_new_file_all_open() {
    for _ in 0..20 {
        let (_d, p) = tmp();
        let start = Arc::new(std::sync::Barrier::new(6));
        let openers: Vec<_> = (0..6)
            .map(|_| {
                let (p, start) = (p.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    SqliteStore::open(&p, Durability::Normal).map(|_| ())
                })
            })
            .collect();
        for o in openers {
            o.join().unwrap().expect("every opener opens the store");
        }
    }
}

/// Two stores on one file (two processes): a template changed through
/// one, or by hand in SQL, reads fresh through the other, which had read
/// it before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_changed_elsewhere_read_fresh() {
    let (_d, p) = tmp();
    let a: Arc<dyn Store> = Arc::new(SqliteStore::open(&p, Durability::Normal).unwrap());
    let b: Arc<dyn Store> = Arc::new(SqliteStore::open(&p, Durability::Normal).unwrap());
    templates_changed_by_another_handle_read_fresh(a.clone(), b).await;
    let by_hand = Connection::open(&p).unwrap();
    by_hand.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    by_hand.execute("UPDATE templates SET definition = '{\"v\":\"by hand\"}' WHERE name = 't'", []).unwrap();
    assert_eq!(a.template("t", None).await.unwrap().unwrap().definition, json!({"v": "by hand"}));
    // Its counter deleted by hand: templates are read each time, still fresh.
    by_hand.execute("DELETE FROM template_changes", []).unwrap();
    by_hand.execute("UPDATE templates SET definition = '{\"v\":\"uncounted\"}' WHERE name = 't'", []).unwrap();
    assert_eq!(a.template("t", None).await.unwrap().unwrap().definition, json!({"v": "uncounted"}));
    assert!(by_hand.execute("INSERT INTO template_changes (id, n) VALUES (2, 0)", []).is_err(), "one row at most");
}

/// A batch of many events around its state writes: all read back in
/// order; one repeated seq refuses the whole batch, which leaves no trace.
#[tokio::test]
async fn a_batch_of_many_events_reads_back_whole_or_not_at_all() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let id = rid(11);
    let mut writes = vec![create(&id, &["a"])];
    for seq in 1..=19 {
        writes.push(event(&id, seq, &format!("e{seq}")));
        if seq == 5 {
            writes.push(step_to(&id, "a", StepState::Pending, StepState::Running, None, 5));
        }
    }
    s.commit(b(writes)).await.unwrap();
    let kinds = |evs: Vec<EventRecord>| evs.into_iter().map(|e| (e.seq.0, e.kind)).collect::<Vec<_>>();
    let want: Vec<(u64, String)> = (1..=19).map(|n| (n, format!("e{n}"))).collect();
    assert_eq!(kinds(s.events_after(&id, Seq::ZERO, 100).await.unwrap()), want);
    let mut again = vec![step_to(&id, "a", StepState::Running, StepState::Succeeded, None, 9)];
    again.extend((20..=32).map(|seq| event(&id, seq, "late")));
    again.push(event(&id, 7, "repeated"));
    assert!(matches!(s.commit(b(again)).await, Err(StoreError::Conflict(_))));
    assert_eq!(kinds(s.events_after(&id, Seq::ZERO, 100).await.unwrap()), want, "nothing of it stored");
    let run = s.run(&id).await.unwrap().unwrap();
    assert_eq!(run.steps[0].state, StepState::Running, "its step write undone too");
}
