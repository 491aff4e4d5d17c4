//! Tests on real SQLite files in temp dirs. Where it helps, the same
//! batches go to the engine's MemStore (the reference semantics) and the
//! two stores must agree.

use std::sync::Arc;

use serde_json::{Value, json};
use weft_engine::state::AttemptState;
use weft_engine::store::*;
use weft_engine::{AttemptNo, ErrorKind, ItemIndex, MemStore, RunId, RunState, SeededRng, Seq, StepError, StepState};

use super::*;

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("data").join("weft.db");
    (d, p)
}

fn rid(n: i64) -> RunId {
    RunId::generate(1_700_000_000_000 + n, &SeededRng::new(n as u64))
}

fn create(id: &RunId, steps: &[&str]) -> Write {
    Write::CreateRun {
        run: NewRun {
            id: id.clone(),
            template: "t".into(),
            version: Some(2),
            definition: std::sync::Arc::new(json!({"name": "t", "steps": []})),
            input: json!({"email": "a@b"}),
            parent: None,
            depth: 0,
            concurrency_key: Some("k".into()),
            created_at: 100,
            deadline_at: Some(9_999),
        },
        steps: steps.iter().map(|s| s.to_string()).collect(),
    }
}

fn event(id: &RunId, seq: u64, kind: &str) -> Write {
    Write::Event(NewEvent {
        run: id.clone(),
        seq: Seq(seq),
        at: 100 + seq as i64,
        kind: kind.into(),
        step: None,
        item: None,
        data: json!({"k": kind}),
    })
}

fn step_to(id: &RunId, step: &str, from: StepState, to: StepState, output: Option<Value>, at: i64) -> Write {
    Write::StepState { run: id.clone(), step: step.into(), from, to, output, error: None, next_attempt_at: None, at }
}

fn start(id: &RunId, step: &str, item: Option<u32>, n: u32, lease: i64) -> Write {
    Write::StartAttempt {
        run: id.clone(),
        step: step.into(),
        item: item.map(ItemIndex),
        attempt: AttemptNo::new(n).unwrap(),
        lease_until: lease,
        at: 110,
        input: Some(serde_json::json!({"n": n})),
    }
}

fn finish(
    id: &RunId,
    step: &str,
    item: Option<u32>,
    n: u32,
    state: AttemptState,
    output: Option<Value>,
    error: Option<StepError>,
) -> Write {
    Write::FinishAttempt {
        run: id.clone(),
        step: step.into(),
        item: item.map(ItemIndex),
        attempt: AttemptNo::new(n).unwrap(),
        state,
        output,
        error,
        fuel: None,
        blame: 0,
        at: 120,
    }
}

fn b(writes: Vec<Write>) -> Batch {
    Batch { writes }
}

/// Every write kind, in the order an engine would make them.
fn life(id: &RunId) -> Vec<Batch> {
    let err = StepError::new(ErrorKind::Transport, "down", true);
    vec![
        b(vec![create(id, &["a", "each", "z"]), event(id, 1, "run.submitted")]),
        b(vec![
            Write::RunState {
                run: id.clone(),
                from: RunState::Submitted,
                to: RunState::Working,
                output: None,
                error: None,
                at: 105,
            },
            event(id, 2, "run.working"),
            step_to(id, "a", StepState::Pending, StepState::Running, None, 106),
            start(id, "a", None, 1, 5_000),
        ]),
        b(vec![
            finish(id, "a", None, 1, AttemptState::Failed, None, Some(err.clone())),
            Write::StepState {
                run: id.clone(),
                step: "a".into(),
                from: StepState::Running,
                to: StepState::Retrying,
                output: None,
                error: Some(err.clone()),
                next_attempt_at: Some(300),
                at: 121,
            },
            event(id, 3, "step.retrying"),
        ]),
        b(vec![step_to(id, "a", StepState::Retrying, StepState::Running, None, 300), start(id, "a", None, 2, 6_000)]),
        b(vec![
            finish(id, "a", None, 2, AttemptState::Succeeded, Some(json!({"ok": true})), None),
            step_to(id, "a", StepState::Running, StepState::Succeeded, Some(json!({"ok": true})), 301),
            step_to(id, "each", StepState::Pending, StepState::Running, None, 302),
            start(id, "each", Some(0), 1, 7_000),
            start(id, "each", Some(1), 1, 200),
        ]),
        b(vec![
            finish(id, "each", Some(0), 1, AttemptState::Succeeded, Some(json!(0)), None),
            event(id, 4, "item.succeeded"),
        ]),
    ]
}

async fn apply_all(s: &dyn Store, batches: &[Batch]) {
    for (k, batch) in batches.iter().enumerate() {
        s.commit(batch.clone()).await.unwrap_or_else(|e| panic!("batch {k}: {e}"));
    }
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
async fn every_write_kind_round_trips_like_the_reference() {
    let (_d, p) = tmp();
    let sql = SqliteStore::open(&p, Durability::Normal).unwrap();
    let mem = MemStore::new();
    let id = rid(1);
    let batches = life(&id);
    apply_all(&sql, &batches).await;
    apply_all(&mem, &batches).await;
    let a = sql.run(&id).await.unwrap().unwrap();
    let m = mem.run(&id).await.unwrap().unwrap();
    assert_eq!(a, m, "SQLite and the reference store disagree");
    // spot checks of the decoded record
    assert_eq!(a.state, RunState::Working);
    assert_eq!(a.concurrency_key.as_deref(), Some("k"));
    assert_eq!(a.steps[0].attempts, 2);
    assert_eq!(a.steps[0].started_at, Some(106));
    assert_eq!(a.steps[0].ended_at, Some(301));
    assert_eq!(a.steps[0].output, Some(json!({"ok": true})));
    assert_eq!(a.attempts.len(), 4);
    assert_eq!(a.attempts[0].error.as_ref().unwrap().kind, ErrorKind::Transport);
    assert_eq!(a.attempts[2].item, Some(ItemIndex(0)));
    assert_eq!(a.last_seq, Seq(4));
    // events
    let ev = sql.events_after(&id, Seq(1), 10).await.unwrap();
    assert_eq!(ev.iter().map(|e| e.seq.0).collect::<Vec<_>>(), vec![2, 3, 4]);
    assert_eq!(ev, mem.events_after(&id, Seq(1), 10).await.unwrap());
    assert_eq!(sql.events_after(&id, Seq::ZERO, 2).await.unwrap().len(), 2);
    // recovery reads
    assert_eq!(sql.unfinished_runs().await.unwrap(), vec![id.clone()]);
    let exp = sql.expired_leases(1_000).await.unwrap();
    assert_eq!(exp, mem.expired_leases(1_000).await.unwrap());
    assert_eq!(exp.len(), 1);
    assert_eq!((exp[0].step.as_str(), exp[0].item, exp[0].lease_until), ("each", Some(ItemIndex(1)), 200));
    assert_eq!(sql.expired_leases(100).await.unwrap(), vec![]);
    // finishing the run removes it from the unfinished set and its leases
    sql.commit(b(vec![Write::RunState {
        run: id.clone(),
        from: RunState::Working,
        to: RunState::Failed,
        output: None,
        error: Some(StepError::new(ErrorKind::Deadline, "late", false)),
        at: 400,
    }]))
    .await
    .unwrap();
    assert!(sql.unfinished_runs().await.unwrap().is_empty());
    assert!(sql.expired_leases(i64::MAX).await.unwrap().is_empty());
    let r = sql.run(&id).await.unwrap().unwrap();
    assert_eq!(r.error.unwrap().kind, ErrorKind::Deadline);
    assert_eq!(r.updated_at, 400);
}

#[tokio::test]
async fn refused_writes_match_the_reference() {
    let (_d, p) = tmp();
    let sql = SqliteStore::open(&p, Durability::Normal).unwrap();
    let mem = MemStore::new();
    let id = rid(2);
    for s in [&sql as &dyn Store, &mem] {
        s.commit(b(vec![create(&id, &["a"]), start(&id, "a", None, 1, 10)])).await.unwrap();
        let bad: Vec<Write> = vec![
            create(&id, &["a"]),                                                   // run exists
            start(&id, "a", None, 1, 10),                                          // attempt exists
            start(&id, "a", None, 2, 10),                                          // another is running
            step_to(&id, "a", StepState::Running, StepState::Succeeded, None, 1),  // step is pending
            step_to(&id, "nope", StepState::Pending, StepState::Running, None, 1), // no such step
            finish(&id, "a", None, 9, AttemptState::Failed, None, None),           // no such attempt
            Write::RunState {
                run: id.clone(),
                from: RunState::Working,
                to: RunState::Completed,
                output: None,
                error: None,
                at: 1,
            },
            event(&rid(99), 1, "x"), // no such run
        ];
        for w in bad {
            let e = s.commit(b(vec![w.clone()])).await.unwrap_err();
            assert!(matches!(e, StoreError::Conflict(_)), "{w:?}: {e}");
            assert!(!e.is_retryable());
        }
        s.commit(b(vec![event(&id, 1, "x")])).await.unwrap();
        assert!(
            matches!(s.commit(b(vec![event(&id, 1, "again")])).await, Err(StoreError::Conflict(_))),
            "no event logged twice"
        );
        s.commit(b(vec![finish(&id, "a", None, 1, AttemptState::Canceled, None, None)])).await.unwrap();
        assert!(
            s.commit(b(vec![finish(&id, "a", None, 1, AttemptState::Failed, None, None)])).await.is_err(),
            "an attempt ends once"
        );
    }
    assert_eq!(sql.run(&id).await.unwrap(), mem.run(&id).await.unwrap());
}

/// A run's `last_seq` is its highest event seq and its `updated_at` the
/// latest of its run-state changes and its last event (no `runs` row is
/// rewritten per transition); an event of a run that does not exist is
/// refused in any position of its batch. Both stores agree.
#[tokio::test]
async fn last_seq_and_updated_at_come_from_the_last_event() {
    let (_d, p) = tmp();
    let sql = SqliteStore::open(&p, Durability::Normal).unwrap();
    let mem = MemStore::new();
    let (id, other) = (rid(5), rid(6));
    let to = |from, to, at| Write::RunState { run: id.clone(), from, to, output: None, error: None, at };
    for s in [&sql as &dyn Store, &mem] {
        s.commit(b(vec![create(&id, &["a", "b"]), create(&other, &["a"])])).await.unwrap();
        let created = s.run(&other).await.unwrap().unwrap().updated_at;
        // events out of order (at = 100 + seq), then the run's transition
        s.commit(b(vec![
            event(&id, 3, "e"),
            step_to(&id, "a", StepState::Pending, StepState::Running, None, 500),
            start(&id, "a", None, 1, 9_000),
            event(&id, 1, "e"),
            to(RunState::Submitted, RunState::Working, 450),
            event(&id, 2, "e"),
            step_to(&other, "a", StepState::Pending, StepState::Running, None, 700),
        ]))
        .await
        .unwrap();
        let r = s.run(&id).await.unwrap().unwrap();
        assert_eq!((r.updated_at, r.last_seq), (450, Seq(3)));
        let o = s.run(&other).await.unwrap().unwrap();
        assert_eq!((o.updated_at, o.last_seq), (created, Seq(0)), "no event, no change of the run's state");
        // a later event moves it on
        s.commit(b(vec![
            finish(&id, "a", None, 1, AttemptState::Succeeded, None, None),
            step_to(&id, "a", StepState::Running, StepState::Succeeded, None, 650),
            event(&id, 900, "e"),
        ]))
        .await
        .unwrap();
        let r = s.run(&id).await.unwrap().unwrap();
        assert_eq!((r.updated_at, r.last_seq), (1000, Seq(900)));
        for bad in [
            vec![event(&rid(99), 1, "x"), event(&id, 901, "e")],
            vec![
                event(&id, 901, "e"),
                step_to(&id, "b", StepState::Pending, StepState::Running, None, 1),
                event(&rid(99), 1, "x"),
            ],
        ] {
            assert!(matches!(s.commit(b(bad)).await, Err(StoreError::Conflict(_))));
        }
        let r = s.run(&id).await.unwrap().unwrap();
        assert_eq!((r.updated_at, r.last_seq), (1000, Seq(900)), "a refused batch changes nothing");
        let listed = s.list_runs(&RunFilter::default()).await.unwrap();
        assert_eq!(listed.iter().find(|x| x.id == id).unwrap().updated_at, 1000, "runs list agrees");
    }
    assert_eq!(sql.run(&id).await.unwrap(), mem.run(&id).await.unwrap());
    assert_eq!(sql.run(&other).await.unwrap(), mem.run(&other).await.unwrap());
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

#[tokio::test]
async fn list_runs_filters() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let (a, bb) = (rid(10), rid(11));
    s.commit(b(vec![create(&a, &["x"])])).await.unwrap();
    let mut w = create(&bb, &["x"]);
    if let Write::CreateRun { run, .. } = &mut w {
        run.template = "other".into();
    }
    s.commit(b(vec![w])).await.unwrap();
    s.commit(b(vec![Write::RunState {
        run: a.clone(),
        from: RunState::Submitted,
        to: RunState::Working,
        output: None,
        error: None,
        at: 5,
    }]))
    .await
    .unwrap();
    let all = s.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(all.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![bb.clone(), a.clone()], "newest first");
    let f = RunFilter { state: Some(RunState::Working), ..Default::default() };
    assert_eq!(s.list_runs(&f).await.unwrap().len(), 1);
    let f = RunFilter { template: Some("other".into()), ..Default::default() };
    assert_eq!(s.list_runs(&f).await.unwrap()[0].id, bb);
    let f = RunFilter { limit: Some(1), ..Default::default() };
    assert_eq!(s.list_runs(&f).await.unwrap().len(), 1);
    // The next page: runs older than the cursor.
    let f = RunFilter { before: Some(bb.clone()), ..Default::default() };
    assert_eq!(s.list_runs(&f).await.unwrap().iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![a.clone()]);
    let f = RunFilter { before: Some(a.clone()), ..Default::default() };
    assert!(s.list_runs(&f).await.unwrap().is_empty());
}

#[tokio::test]
async fn templates_are_versioned() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    assert_eq!(s.save_template("onboard", &json!({"v": 1}), 1).await.unwrap(), 1);
    assert_eq!(s.save_template("onboard", &json!({"v": 2}), 2).await.unwrap(), 2);
    assert_eq!(s.save_template("zeta", &json!({"z": 1}), 3).await.unwrap(), 1);
    assert_eq!(s.template("onboard", None).await.unwrap().unwrap().definition, json!({"v": 2}));
    let v1 = s.template("onboard", Some(1)).await.unwrap().unwrap();
    assert_eq!((v1.version, v1.definition, v1.created_at), (1, json!({"v": 1}), 1));
    assert!(s.template("onboard", Some(3)).await.unwrap().is_none());
    let list = s.list_templates().await.unwrap();
    assert_eq!(
        list.iter().map(|t| (t.name.as_str(), t.version)).collect::<Vec<_>>(),
        vec![("onboard", 2), ("zeta", 1)]
    );
    assert_eq!(s.delete_template("onboard").await.unwrap(), 2);
    assert_eq!(s.delete_template("onboard").await.unwrap(), 0);
    assert!(s.template("onboard", None).await.unwrap().is_none());
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

mod with_engine {
    use super::*;
    use weft_engine::runner::{StepOutput, StepRequest, StepRunner};
    use weft_engine::{CancelToken, Engine, EngineConfig, RunOptions, SystemClock};

    struct Echo {
        hang_on: Option<&'static str>,
    }

    #[async_trait::async_trait]
    impl StepRunner for Echo {
        async fn run(&self, req: StepRequest, cancel: CancelToken) -> Result<StepOutput, StepError> {
            if self.hang_on == Some(req.step.as_str()) {
                cancel.canceled().await;
                return Err(StepError::canceled("stopped"));
            }
            Ok(StepOutput::Done(json!({"step": req.step, "key": req.idempotency_key, "in": req.input})))
        }
    }

    fn engine(store: Arc<SqliteStore>, hang_on: Option<&'static str>) -> Engine {
        Engine::new(
            store,
            Arc::new(Echo { hang_on }),
            Arc::new(SystemClock),
            Arc::new(SeededRng::from_entropy()),
            EngineConfig::default(),
        )
    }

    fn def() -> weft_model::Definition {
        weft_model::from_value(
            &json!({"name": "chain", "steps": [
                {"name": "a", "code": {"plugin": "p"}, "input": "@input"},
                {"name": "b", "code": {"plugin": "p"}, "input": "@a.in",
                 "retry": {"max_attempts": 2, "initial_delay_ms": 1, "jitter": false}},
                {"name": "c", "code": {"plugin": "p"}, "for_each": [1, 2, 3], "input": "@item", "after": ["b"]}]}),
            &weft_model::NoSchemas,
        )
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_complete_on_sqlite() {
        let (_d, p) = tmp();
        let store = Arc::new(SqliteStore::open(&p, Durability::Full).unwrap());
        let e = engine(store.clone(), None);
        let mut ids = vec![];
        for k in 0..20 {
            ids.push(e.submit(&def(), json!(k), RunOptions::default()).await.unwrap());
        }
        for (k, id) in ids.iter().enumerate() {
            let r = e.wait(id).await.unwrap();
            assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
            assert_eq!(r.steps[1].output.as_ref().unwrap()["in"], json!(k));
            assert_eq!(r.steps[2].output.as_ref().unwrap().as_array().unwrap().len(), 3);
            let evs = store.events_after(id, Seq::ZERO, 1000).await.unwrap();
            assert_eq!(evs.len() as u64, r.last_seq.0);
            assert!(evs.iter().enumerate().all(|(i, e)| e.seq.0 == i as u64 + 1));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn crash_and_recover_on_sqlite() {
        let (_d, p) = tmp();
        let id = {
            let store = Arc::new(SqliteStore::open(&p, Durability::Normal).unwrap());
            let _lock = store.lock_scheduler().unwrap();
            let e = engine(store.clone(), Some("b"));
            let id = e.submit(&def(), json!("x"), RunOptions::default()).await.unwrap();
            for _ in 0..500 {
                if store.run(&id).await.unwrap().unwrap().steps[1].state == StepState::Running {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            e.abort_all();
            drop(e);
            // A real crash takes every task with it; here aborted tasks are
            // dropped by the runtime a little later. Wait until they are
            // gone and close the store, so the "process" is really gone
            // before the next one opens the file.
            for _ in 0..2500 {
                if Arc::strong_count(&store) == 1 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            store.close();
            id
            // store and lock dropped: the "process" is gone
        };
        let store = Arc::new(SqliteStore::open(&p, Durability::Normal).unwrap());
        let _lock = store.lock_scheduler().expect("the dead owner's lock is free");
        let before = store.run(&id).await.unwrap().unwrap();
        assert_eq!(before.steps[0].state, StepState::Succeeded);
        assert_eq!(before.steps[1].state, StepState::Running);
        assert_eq!(store.expired_leases(i64::MAX).await.unwrap().len(), 1);
        let e = engine(store.clone(), None);
        assert_eq!(e.recover().await.unwrap(), vec![id.clone()]);
        let r = match tokio::time::timeout(std::time::Duration::from_secs(8), e.wait(&id)).await {
            Ok(r) => r.unwrap(),
            Err(_) => panic!("stuck: {:#?}", store.run(&id).await.unwrap().unwrap().steps),
        };
        assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
        assert_eq!(r.steps[0].attempts, 1, "a succeeded step never runs again");
        // The interrupted attempt ran again as itself: one attempt, the
        // same idempotency key, one interruption counted on its row.
        assert_eq!(r.steps[1].attempts, 1);
        assert_eq!(r.steps[1].output.as_ref().unwrap()["key"], json!(format!("{id}/b/1")));
        assert_eq!(
            r.attempts.iter().filter(|a| a.step == "b").map(|a| (a.state, a.interruptions)).collect::<Vec<_>>(),
            vec![(AttemptState::Succeeded, 1)]
        );
    }
}

/// Waits, the inbox, schedules and run queues behave alike in SQLite and
/// in the MemStore reference.
#[tokio::test]
async fn waits_inbox_schedules_and_queues_agree_with_the_reference() {
    let (_d, path) = tmp();
    let sql = SqliteStore::open(&path, Durability::Normal).unwrap();
    let mem = MemStore::new();
    let (a, b) = (rid(1), rid(2));
    let wait = |run: &RunId, step: &str, kind: WaitKind| {
        Write::OpenWait(WaitRecord { run: run.clone(), step: step.into(), kind, until: Some(5), since: 1 })
    };
    let ev = |m: serde_json::Map<String, Value>| WaitKind::Event { event: "reply".into(), matches: m };
    let mut m = serde_json::Map::new();
    m.insert("ch".into(), json!("c1"));
    let signal = WaitKind::Signal { prompt: Some("ok?".into()), schema: None, reason: RunState::InputRequired };
    let msg = |id: &str, event_id: &str| InboxRecord {
        id: id.into(),
        kind: InboxKind::Event { event: "reply".into(), id: event_id.into() },
        data: json!({"ch": "c1"}),
        at: 3,
        answer: None,
    };
    let sched = ScheduleRecord {
        name: "n".into(),
        template: "t".into(),
        cron: "0 2 * * *".into(),
        input: json!({}),
        next_fire_at: 100,
        created_at: 1,
        last_fire_at: None,
        last_run: None,
    };
    let steps: Vec<(Batch, bool)> = vec![
        (Batch { writes: vec![create(&a, &["s", "w"]), create(&b, &["s"])] }, true),
        (Batch { writes: vec![wait(&a, "w", signal.clone()), wait(&a, "s", ev(m.clone()))] }, true),
        (Batch { writes: vec![wait(&a, "w", signal.clone())] }, false),
        (Batch { writes: vec![wait(&b, "s", ev(Default::default()))] }, true),
        (Batch { writes: vec![msg("m1", "e1")].into_iter().map(Write::InboxPut).collect() }, true),
        (Batch { writes: vec![Write::InboxPut(msg("m2", "e1"))] }, false),
        (Batch { writes: vec![Write::InboxPut(msg("m1", "e9"))] }, false),
        (Batch { writes: vec![Write::InboxAnswer { id: "m1".into(), answer: json!({"n": 1}) }] }, true),
        (Batch { writes: vec![Write::InboxAnswer { id: "m1".into(), answer: json!({"n": 2}) }] }, false),
        (Batch { writes: vec![Write::PutSchedule(sched.clone())] }, true),
        (Batch { writes: vec![Write::PutSchedule(sched.clone())] }, false),
        (
            Batch {
                writes: vec![Write::ScheduleFired { name: "n".into(), from: 100, next: 200, run: Some(a.clone()) }],
            },
            true,
        ),
        (Batch { writes: vec![Write::ScheduleFired { name: "n".into(), from: 100, next: 200, run: None }] }, false),
        (Batch { writes: vec![Write::CloseWait { run: b.clone(), step: "s".into() }] }, true),
    ];
    for (k, (batch, ok)) in steps.into_iter().enumerate() {
        let (x, y) = (sql.commit(batch.clone()).await, mem.commit(batch).await);
        assert_eq!(x.is_ok(), ok, "sqlite, batch {k}: {x:?}");
        assert_eq!(y.is_ok(), ok, "memstore, batch {k}: {y:?}");
    }
    let ra = sql.run(&a).await.unwrap().unwrap();
    assert_eq!(ra.waits, mem.run(&a).await.unwrap().unwrap().waits);
    assert_eq!(ra.waits.iter().map(|w| w.step.as_str()).collect::<Vec<_>>(), ["s", "w"], "definition order");
    assert!(sql.run(&b).await.unwrap().unwrap().waits.is_empty());
    let ew = sql.event_waits("reply").await.unwrap();
    assert_eq!(ew, mem.event_waits("reply").await.unwrap());
    assert_eq!(ew.len(), 1);
    assert!(ew[0].takes_event("reply", &json!({"ch": "c1"})));
    assert!(sql.inbox_pending().await.unwrap().is_empty());
    let got = sql.inbox_get("e1", true).await.unwrap().unwrap();
    assert_eq!(got.answer, Some(json!({"n": 1})));
    assert_eq!(Some(got), mem.inbox_get("m1", false).await.unwrap());
    let s = sql.schedules().await.unwrap();
    assert_eq!(s, mem.schedules().await.unwrap());
    assert_eq!((s[0].next_fire_at, s[0].last_fire_at, s[0].last_run.as_ref()), (200, Some(100), Some(&a)));
    // Both runs carry key "k": the older one heads the queue until it ends.
    assert_eq!(sql.queue_head("k").await.unwrap(), Some(a.clone()));
    assert_eq!(mem.queue_head("k").await.unwrap(), Some(a.clone()));
    let end = Batch {
        writes: vec![Write::RunState {
            run: a.clone(),
            from: RunState::Submitted,
            to: RunState::Canceled,
            output: None,
            error: None,
            at: 9,
        }],
    };
    sql.commit(end.clone()).await.unwrap();
    mem.commit(end).await.unwrap();
    assert_eq!(sql.queue_head("k").await.unwrap(), Some(b.clone()));
    assert_eq!(mem.queue_head("k").await.unwrap(), Some(b));
    assert_eq!(sql.queue_head("other").await.unwrap(), None);
    // Reopened, everything is still there.
    drop(sql);
    let sql = SqliteStore::open(&path, Durability::Normal).unwrap();
    assert_eq!(sql.run(&a).await.unwrap().unwrap().waits.len(), 2);
    assert_eq!(sql.schedules().await.unwrap().len(), 1);
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
        if !state.is_terminal() {
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
