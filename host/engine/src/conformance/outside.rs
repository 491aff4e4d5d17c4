//! Waits, the inbox, schedules and run queues.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::MemStore;

/// Waits, the inbox, schedules and run queues behave alike in SQLite and
/// in the MemStore reference.
pub async fn waits_inbox_schedules_and_queues_agree_with_the_reference(store: Arc<dyn Store>) {
    let sql = &*store;
    let mem = MemStore::new();
    let (a, b) = (rid(1), rid(2));
    let wait = |run: &RunId, step: &str, kind: WaitKind| {
        Write::OpenWait(WaitRecord { run: run.clone(), step: step.into(), kind, until: Some(5), since: 1 })
    };
    let ev = |m: serde_json::Map<String, Value>| WaitKind::Event { event: "reply".into(), matches: m };
    let mut m = serde_json::Map::new();
    m.insert("ch".into(), json!("c1"));
    let signal = WaitKind::Signal {
        prompt: Some("ok?".into()),
        schema: None,
        preview: None,
        reason: RunState::InputRequired,
        resume: None,
    };
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
        paused: false,
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
        (Batch { writes: vec![Write::SchedulePaused { name: "n".into(), paused: true, next: 200 }] }, true),
        (Batch { writes: vec![Write::SchedulePaused { name: "gone".into(), paused: true, next: 200 }] }, false),
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
    assert!(s[0].paused, "paused, in the body every store reads back");
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
}

/// Signals queued for steps that do not wait yet and events emitted
/// before a wait started (docs/waits.md) read back alike in every store:
/// a queued message is found by its run until it is settled, once; events
/// by name and time, oldest first, capped.
pub async fn early_signals_and_events_agree_with_the_reference(store: Arc<dyn Store>) {
    let sql = &*store;
    let mem = MemStore::new();
    let (a, b) = (rid(1), rid(2));
    let queued = |id: &str, run: &RunId, step: &str, at: i64| InboxRecord {
        id: id.into(),
        kind: InboxKind::Signal { run: run.clone(), step: step.into(), item: None },
        data: json!({"ok": true}),
        at,
        answer: Some(json!({"status": "queued", "message": "kept"})),
    };
    let event = |id: &str, name: &str, at: i64| InboxRecord {
        id: format!("m{id}"),
        kind: InboxKind::Event { event: name.into(), id: id.into() },
        data: json!({"n": at}),
        at,
        answer: Some(json!({"delivered": []})),
    };
    let settle = |id: &str, status: &str| Write::InboxSettle { id: id.into(), answer: json!({"status": status}) };
    let batches = vec![
        Batch { writes: vec![create(&a, &["w"]), create(&b, &["w"])] },
        Batch {
            writes: vec![
                Write::InboxPut(queued("q1", &a, "w", 1)),
                Write::InboxPut(queued("q2", &a, "w", 2)),
                Write::InboxPut(queued("q3", &b, "w", 3)),
                Write::InboxPut(event("e1", "reply", 10)),
                Write::InboxPut(event("e2", "other", 11)),
                Write::InboxPut(event("e3", "reply", 12)),
                Write::InboxPut(event("e4", "reply", 13)),
            ],
        },
        // Settled once: the second settle of q1 changes nothing.
        Batch { writes: vec![settle("q1", "accepted"), settle("q1", "already_resolved")] },
    ];
    for (k, batch) in batches.into_iter().enumerate() {
        let (x, y) = (sql.commit(batch.clone()).await, mem.commit(batch).await);
        assert!(x.is_ok() && y.is_ok(), "batch {k}: {x:?} {y:?}");
    }
    let ids = |v: Vec<InboxRecord>| v.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(ids(sql.inbox_queued(&a).await.unwrap()), ["q2"], "q1 is settled; q3 is another run's");
    assert_eq!(ids(mem.inbox_queued(&a).await.unwrap()), ["q2"]);
    let q1 = sql.inbox_get("q1", false).await.unwrap().unwrap();
    assert_eq!(q1.answer, Some(json!({"status": "accepted"})), "the first settle stands");
    assert_eq!(Some(q1), mem.inbox_get("q1", false).await.unwrap());
    assert!(sql.inbox_pending().await.unwrap().is_empty(), "a queued signal is not pending");
    let q2 = sql.inbox_queued(&a).await.unwrap().remove(0);
    assert_eq!(q2, mem.inbox_queued(&a).await.unwrap().remove(0), "read back whole");
    assert_eq!(ids(sql.events_emitted("reply", 11, 10).await.unwrap()), ["me3", "me4"], "from `since`, oldest first");
    assert_eq!(ids(mem.events_emitted("reply", 11, 10).await.unwrap()), ["me3", "me4"]);
    assert_eq!(ids(sql.events_emitted("reply", 0, 2).await.unwrap()), ["me1", "me3"], "capped");
    assert_eq!(ids(mem.events_emitted("reply", 0, 2).await.unwrap()), ["me1", "me3"]);
    assert!(sql.events_emitted("none", 0, 10).await.unwrap().is_empty());
}

/// A recording (docs/mcp.md, "Recording"): a run opened in state
/// `recording` holds what was recorded as its output, is not a run to
/// execute (`unfinished_runs` leaves it out), and is saved once: stored
/// again whole under its id, after which another save is refused.
pub async fn recordings_open_hold_and_save_like_the_reference(store: Arc<dyn Store>) {
    use crate::recorded::{DoneStep, open_recording, recording_holds, saved_recording};
    let sql = &*store;
    let mem = MemStore::new();
    let id = rid(7);
    let Write::CreateRun { run, .. } = create(&id, &[]) else { unreachable!() };
    let run = NewRun { concurrency_key: None, ..run };
    let step = DoneStep {
        name: "echo_1".into(),
        input: Some(json!({"m": 1})),
        output: json!("hi"),
        started_at: 110,
        ended_at: 120,
        how: "recorded",
    };
    let batches = vec![
        (open_recording(run.clone(), json!({"steps": []})).unwrap(), true),
        (Batch { writes: vec![recording_holds(&id, json!({"steps": ["echo_1"]}), 130).unwrap()] }, true),
        (saved_recording(run.clone(), std::slice::from_ref(&step), json!("hi"), 140).unwrap(), true),
        (saved_recording(run.clone(), std::slice::from_ref(&step), json!("hi"), 150).unwrap(), false),
        (Batch { writes: vec![recording_holds(&id, json!({}), 160).unwrap()] }, false),
    ];
    for (k, (batch, ok)) in batches.into_iter().enumerate() {
        if k == 2 {
            // Open: it holds its latest body, and is not a run to execute.
            for s in [sql as &dyn Store, &mem] {
                let r = s.run(&id).await.unwrap().unwrap();
                assert_eq!((r.state, r.output.clone()), (RunState::Recording, Some(json!({"steps": ["echo_1"]}))));
                assert!(r.steps.is_empty());
                assert!(!s.unfinished_runs().await.unwrap().contains(&id), "a recording is never executed");
                let open = RunFilter { state: Some(RunState::Recording), ..Default::default() };
                assert_eq!(s.list_runs(&open).await.unwrap().len(), 1);
            }
        }
        let (x, y) = (sql.commit(batch.clone()).await, mem.commit(batch).await);
        assert_eq!(x.is_ok(), ok, "sqlite, batch {k}: {x:?}");
        assert_eq!(y.is_ok(), ok, "memstore, batch {k}: {y:?}");
    }
    let (r, m) = (sql.run(&id).await.unwrap().unwrap(), mem.run(&id).await.unwrap().unwrap());
    assert_eq!((r.state, r.steps.len(), r.output.clone()), (RunState::Completed, 1, Some(json!("hi"))));
    assert_eq!((r.steps[0].state, r.last_seq), (m.steps[0].state, m.last_seq), "stored again whole");
    let events = sql.events_after(&id, Seq(0), 100).await.unwrap();
    assert_eq!(events.first().map(|e| e.kind.as_str()), Some("run.submitted"), "the recording's events were replaced");
    assert!(!events.iter().any(|e| e.kind == "run.recording"), "{events:?}");
}
