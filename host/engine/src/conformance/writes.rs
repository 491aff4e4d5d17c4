//! Writes: every kind round-trips like the reference, refusals match,
//! refused batches leave no trace, group commit keeps callers apart.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::MemStore;

pub async fn every_write_kind_round_trips_like_the_reference(store: Arc<dyn Store>) {
    let sql = &*store;
    let mem = MemStore::new();
    let id = rid(1);
    let batches = life(&id);
    apply_all(sql, &batches).await;
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
    // A run's definition, replaced while it runs (its `notify` changed).
    let redefined =
        Arc::new(json!({"name": "t", "steps": [], "notify": [{"on": ["completed"], "push": {"url": "http://x/"}}]}));
    let redefine = || b(vec![Write::RunDefinition { run: id.clone(), definition: redefined.clone() }]);
    sql.commit(redefine()).await.unwrap();
    mem.commit(redefine()).await.unwrap();
    assert_eq!(sql.run(&id).await.unwrap().unwrap().definition, redefined);
    assert_eq!(sql.run(&id).await.unwrap(), mem.run(&id).await.unwrap());
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
    let ended = sql.commit(redefine()).await.unwrap_err();
    assert!(matches!(ended, StoreError::Conflict(_)), "an ended run's definition stays: {ended}");
    let r = sql.run(&id).await.unwrap().unwrap();
    assert_eq!(r.error.as_ref().unwrap().kind, ErrorKind::Deadline);
    assert_eq!(r.updated_at, 400);
    // Many runs read at once are the runs read one by one.
    let other = rid(2);
    apply_all(sql, &life(&other)[..2]).await;
    let mut many = sql.runs(&[other.clone(), rid(99), id.clone()]).await.unwrap();
    many.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(many, vec![r, sql.run(&other).await.unwrap().unwrap()], "runs() differs from run()");
    assert_eq!(many[1].attempts.len(), 1, "{:?}", many[1].attempts);
}

pub async fn refused_writes_match_the_reference(store: Arc<dyn Store>) {
    let sql = &*store;
    let mem = MemStore::new();
    let id = rid(2);
    for s in [sql, &mem] {
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
pub async fn last_seq_and_updated_at_come_from_the_last_event(store: Arc<dyn Store>) {
    let sql = &*store;
    let mem = MemStore::new();
    let (id, other) = (rid(5), rid(6));
    let to = |from, to, at| Write::RunState { run: id.clone(), from, to, output: None, error: None, at };
    for s in [sql, &mem] {
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

pub async fn a_failed_batch_leaves_no_trace(store: Arc<dyn Store>) {
    let s = store;
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
    // Another run's batch still commits: nothing of the refused one lingers.
    s.commit(b(vec![create(&rid(4), &["a"])])).await.unwrap();
    assert!(s.run(&id).await.unwrap().is_none());
    assert_eq!(s.list_runs(&RunFilter::default()).await.unwrap().len(), 1);
}

pub async fn group_commit_under_concurrent_callers(store: Arc<dyn Store>) {
    let s = store;
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
    assert_eq!(s.list_runs(&RunFilter::default()).await.unwrap().len(), callers as usize);
}

/// Many runs live at once (their batches grouped by a store that groups
/// commits), each batch changing rows more than once (a step started and
/// ended, an attempt started and finished in one batch) and a stale batch
/// refused among them: every run and its events end as the reference's.
pub async fn concurrent_lives_agree_with_the_reference(store: Arc<dyn Store>) {
    let runs = 24u64;
    let lives: Vec<(RunId, Vec<Batch>)> = (0..runs)
        .map(|n| {
            let id = rid(2000 + n as i64);
            let mut batches = life(&id);
            batches.push(b(vec![
                step_to(&id, "z", StepState::Pending, StepState::Running, None, 310),
                start(&id, "z", None, 1, 9_000),
                finish(&id, "z", None, 1, AttemptState::Succeeded, Some(json!(n)), None),
                step_to(&id, "z", StepState::Running, StepState::Succeeded, Some(json!(n)), 311),
                finish(&id, "each", Some(1), 1, AttemptState::Failed, None, None),
                start(&id, "each", Some(1), 2, 9_500),
                finish(&id, "each", Some(1), 2, AttemptState::Succeeded, Some(json!(1)), None),
                step_to(&id, "each", StepState::Running, StepState::Succeeded, Some(json!([0, 1])), 312),
                event(&id, 5, "step.succeeded"),
            ]));
            // Stale: step a already succeeded. Refused whole.
            batches.push(b(vec![
                run_to(&id, RunState::Working, RunState::Completed, None, 320),
                step_to(&id, "a", StepState::Running, StepState::Succeeded, None, 320),
            ]));
            batches.push(b(vec![
                run_to(&id, RunState::Working, RunState::Completed, Some(json!({"n": n})), 330),
                event(&id, 6, "run.completed"),
            ]));
            (id, batches)
        })
        .collect();
    let mem = MemStore::new();
    let mut expected = vec![];
    for (_, batches) in &lives {
        let mut outcomes = vec![];
        for batch in batches {
            outcomes.push(mem.commit(batch.clone()).await.is_ok());
        }
        assert_eq!(outcomes.iter().filter(|ok| !**ok).count(), 1, "the reference refuses the stale batch only");
        expected.push(outcomes);
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (id, batches) in lives.clone() {
        let s = store.clone();
        tasks.spawn(async move {
            let mut outcomes = vec![];
            for batch in batches {
                let r = s.commit(batch).await;
                assert!(matches!(r, Ok(()) | Err(StoreError::Conflict(_))), "{id}: {r:?}");
                outcomes.push(r.is_ok());
            }
            (id, outcomes)
        });
    }
    while let Some(r) = tasks.join_next().await {
        let (id, outcomes) = r.unwrap();
        let k = lives.iter().position(|(i, _)| *i == id).unwrap();
        assert_eq!(outcomes, expected[k], "{id}: which batches were refused");
        let got = store.run(&id).await.unwrap().unwrap();
        assert_eq!(got, mem.run(&id).await.unwrap().unwrap(), "{id}: the store and the reference disagree");
        assert_eq!(got.state, RunState::Completed);
        assert_eq!(got.attempts.len(), 6, "{id}: {:?}", got.attempts);
        let ev = store.events_after(&id, Seq::ZERO, 100).await.unwrap();
        assert_eq!(ev, mem.events_after(&id, Seq::ZERO, 100).await.unwrap(), "{id}: events");
    }
}

pub async fn list_runs_filters(store: Arc<dyn Store>) {
    let s = store;
    let (a, bb) = (rid(10), rid(11));
    s.commit(b(vec![create(&a, &["x"])])).await.unwrap();
    let mut w = create(&bb, &["x"]);
    if let Write::CreateRun { run, .. } = &mut w {
        run.template = "Other-Flow".into();
        run.created_at = 200;
        run.labels.insert("origin".into(), "email".into());
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
    let f = RunFilter { template: Some("Other-Flow".into()), ..Default::default() };
    assert_eq!(s.list_runs(&f).await.unwrap()[0].id, bb);
    let f = RunFilter { template: Some("other".into()), ..Default::default() };
    assert!(s.list_runs(&f).await.unwrap().is_empty(), "`template` is the exact name");
    // The page's search: a part of the name, any case; a window of creation.
    let ids = |f: RunFilter| {
        let s = s.clone();
        async move { s.list_runs(&f).await.unwrap().into_iter().map(|r| r.id).collect::<Vec<_>>() }
    };
    assert_eq!(ids(RunFilter { template_contains: Some("r-fl".into()), ..Default::default() }).await, vec![bb.clone()]);
    assert_eq!(ids(RunFilter { template_contains: Some("_".into()), ..Default::default() }).await, vec![]);
    assert_eq!(ids(RunFilter { created_from: Some(150), ..Default::default() }).await, vec![bb.clone()]);
    assert_eq!(ids(RunFilter { created_until: Some(200), ..Default::default() }).await, vec![a.clone()]);
    let window = RunFilter { created_from: Some(100), created_until: Some(201), ..Default::default() };
    assert_eq!(ids(window).await, vec![bb.clone(), a.clone()]);
    let f = RunFilter { limit: Some(1), ..Default::default() };
    assert_eq!(s.list_runs(&f).await.unwrap().len(), 1);
    // The next page: runs older than the cursor.
    let f = RunFilter { before: Some(bb.clone()), ..Default::default() };
    assert_eq!(s.list_runs(&f).await.unwrap().iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![a.clone()]);
    let f = RunFilter { before: Some(a.clone()), ..Default::default() };
    assert!(s.list_runs(&f).await.unwrap().is_empty());
    // Labels: every one given must match; each summary carries them.
    let labels = |pairs: &[(&str, &str)]| -> weft_model::Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let f = RunFilter { labels: labels(&[("origin", "slack")]), ..Default::default() };
    let found = s.list_runs(&f).await.unwrap();
    assert_eq!(found.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![a.clone()]);
    assert_eq!(found[0].labels, labels(&[("origin", "slack"), ("session/id", "s-42")]));
    let f = RunFilter { labels: labels(&[("origin", "email"), ("session/id", "s-42")]), ..Default::default() };
    assert_eq!(s.list_runs(&f).await.unwrap().iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![bb.clone()]);
    let f = RunFilter { labels: labels(&[("origin", "sms")]), ..Default::default() };
    assert!(s.list_runs(&f).await.unwrap().is_empty());
    assert_eq!(s.run(&bb).await.unwrap().unwrap().labels.get("origin").map(String::as_str), Some("email"));
    // A failed run's summary says why.
    let why = StepError::new(ErrorKind::Validation, "bad input", false);
    s.commit(b(vec![Write::RunState {
        run: a.clone(),
        from: RunState::Working,
        to: RunState::Failed,
        output: None,
        error: Some(why.clone()),
        at: 6,
    }]))
    .await
    .unwrap();
    let all = s.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!((all[0].error.clone(), all[1].error.clone()), (None, Some(why)));
}

pub async fn templates_are_versioned(store: Arc<dyn Store>) {
    let s = store;
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

/// `a` and `b` are two handles on one store (two processes sharing it):
/// whatever `b` does to a template, `a`'s next read of it shows, though
/// `a` read it before (a store may answer a read from memory only while
/// no template changed; see `template_cache`).
pub async fn templates_changed_by_another_handle_read_fresh(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    let latest = |s: Arc<dyn Store>| async move { s.template("t", None).await.unwrap().map(|t| t.definition) };
    b.save_template("t", &json!({"v": 1}), 1).await.unwrap();
    for _ in 0..2 {
        assert_eq!(latest(a.clone()).await, Some(json!({"v": 1})));
    }
    assert_eq!(a.template("t", Some(1)).await.unwrap().unwrap().definition, json!({"v": 1}));
    b.save_template("t", &json!({"v": 2}), 2).await.unwrap();
    assert_eq!(latest(a.clone()).await, Some(json!({"v": 2})), "a new version");
    // Deleted and saved again: version 1 once more, another definition.
    b.delete_template("t").await.unwrap();
    assert_eq!(latest(a.clone()).await, None, "deleted");
    assert!(a.template("t", Some(1)).await.unwrap().is_none(), "version 1 deleted");
    b.save_template("t", &json!({"v": "again"}), 3).await.unwrap();
    let t = a.template("t", Some(1)).await.unwrap().unwrap();
    assert_eq!((t.version, t.definition), (1, json!({"v": "again"})), "the same version, saved again");
    assert_eq!(latest(a.clone()).await, Some(json!({"v": "again"})));
    // A change of another template leaves this one as it is.
    b.save_template("u", &json!({"u": 1}), 4).await.unwrap();
    assert_eq!(latest(a.clone()).await, Some(json!({"v": "again"})));
}

/// The unfinished runs are exactly those in a state that is not terminal.
pub async fn unfinished_runs_are_those_not_terminal(store: Arc<dyn Store>) {
    let mut want = vec![];
    for (n, state) in RunState::ALL.iter().enumerate() {
        let id = rid(9000 + n as i64);
        let mut batch = vec![create(&id, &["a"])];
        // Every state is reached from `submitted` by one write here (the
        // store checks `from`, not the transition's legality).
        if *state != RunState::Submitted {
            batch.push(Write::RunState {
                run: id.clone(),
                from: RunState::Submitted,
                to: *state,
                output: None,
                error: None,
                at: 5,
            });
        }
        store.commit(b(batch)).await.unwrap();
        if state.is_executed() {
            want.push(id);
        }
    }
    want.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(store.unfinished_runs().await.unwrap(), want);
}
