//! Retention (deleting finished runs with everything stored of them) and
//! copying one store into another.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::MemStore;

fn ended(id: &RunId, to: RunState, at: i64) -> Write {
    Write::RunState { run: id.clone(), from: RunState::Submitted, to, output: None, error: None, at }
}

fn artifact(id: &RunId, name: &str, data: &[u8]) -> Write {
    Write::PutArtifact {
        artifact: ArtifactRecord {
            run: id.clone(),
            name: name.into(),
            mime: "text/plain".into(),
            size: data.len() as u64,
            sha256: format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(data)),
            step: "a".into(),
            item: None,
            attempt: AttemptNo::new(1).unwrap(),
            created_at: 7,
        },
        data: Arc::from(data),
    }
}

/// `finished_before` lists finished runs by the time they ended (oldest
/// first, by state); `delete_runs` deletes the finished ones with their
/// events, waits, artifacts and messages, leaves unfinished and unknown
/// ones, and shared artifact bytes stay while a run refers to them. The
/// store and the reference agree throughout.
pub async fn retention_deletes_finished_runs_only(store: Arc<dyn Store>) {
    let mem: Arc<dyn Store> = Arc::new(MemStore::new());
    let (old, newer, failed, live) = (rid(1), rid(2), rid(3), rid(4));
    for s in [&store, &mem] {
        s.commit(b(vec![
            create(&old, &["a"]),
            event(&old, 1, "run.submitted"),
            artifact(&old, "out.txt", b"shared"),
            ended(&old, RunState::Completed, 1_000),
        ]))
        .await
        .unwrap();
        s.commit(b(vec![
            create(&newer, &["a"]),
            artifact(&newer, "same.txt", b"shared"),
            ended(&newer, RunState::Completed, 5_000),
        ]))
        .await
        .unwrap();
        s.commit(b(vec![create(&failed, &["a"]), ended(&failed, RunState::Failed, 2_000)])).await.unwrap();
        s.commit(b(vec![
            create(&live, &["a", "w"]),
            Write::OpenWait(WaitRecord {
                run: live.clone(),
                step: "w".into(),
                kind: WaitKind::Sleep,
                until: Some(10),
                since: 1,
            }),
        ]))
        .await
        .unwrap();
        s.commit(b(vec![Write::InboxPut(InboxRecord {
            id: "m_old".into(),
            kind: InboxKind::Signal { run: old.clone(), step: "a".into(), item: None },
            data: json!(1),
            at: 1,
            answer: None,
        })]))
        .await
        .unwrap();
    }
    for s in [&store, &mem] {
        let all = RunFilter::default();
        assert_eq!(s.finished_before(3_000, &all).await.unwrap(), vec![old.clone(), failed.clone()]);
        let failures = RunFilter { state: Some(RunState::Failed), ..Default::default() };
        assert_eq!(s.finished_before(3_000, &failures).await.unwrap(), vec![failed.clone()]);
        let one = RunFilter { limit: Some(1), ..Default::default() };
        assert_eq!(s.finished_before(3_000, &one).await.unwrap(), vec![old.clone()]);
        let other = RunFilter { template: Some("other".into()), ..Default::default() };
        assert!(s.finished_before(3_000, &other).await.unwrap().is_empty(), "by template");
        let t = RunFilter { template: Some("t".into()), ..Default::default() };
        assert_eq!(s.finished_before(3_000, &t).await.unwrap().len(), 2);
        assert_eq!(s.finished_before(10_000, &all).await.unwrap().len(), 3, "the live run never");
        let f = RunFilter { template: Some("t".into()), ..Default::default() };
        assert_eq!(s.count_runs(&f).await.unwrap(), 4);
        let deleted = s.delete_runs(&[old.clone(), live.clone(), rid(99)]).await.unwrap();
        assert_eq!(deleted, vec![old.clone()], "only the finished run goes");
        assert!(s.run(&old).await.unwrap().is_none());
        assert!(s.events_after(&old, Seq::ZERO, 10).await.unwrap().is_empty());
        assert!(s.artifacts(&old).await.unwrap().is_empty());
        assert!(s.inbox_get("m_old", false).await.unwrap().is_none(), "its messages go too");
        // The bytes another run shares stay.
        let (_, data) = s.artifact(&newer, "same.txt").await.unwrap().unwrap();
        assert_eq!(data, b"shared");
        assert_eq!(s.run(&live).await.unwrap().unwrap().waits.len(), 1, "the live run keeps its waits");
        assert_eq!(s.count_runs(&RunFilter::default()).await.unwrap(), 3);
        assert_eq!(
            s.delete_runs(std::slice::from_ref(&old)).await.unwrap(),
            Vec::<RunId>::new(),
            "deleting twice deletes nothing"
        );
    }
    for id in [&newer, &failed, &live] {
        assert_eq!(store.run(id).await.unwrap(), mem.run(id).await.unwrap());
    }
}

/// Every run (records, logs, artifacts, waits) and every template version
/// copied from one store into another reads back the same; copying again
/// is refused run by run.
pub async fn copies_runs_and_templates(from: Arc<dyn Store>, to: Arc<dyn Store>) {
    let (a, z) = (rid(1), rid(2));
    apply_all(&*from, &life(&a)).await;
    // z was started by an idempotency key, and one of its notifications failed.
    let key =
        crate::delivery::StartKeyRecord { key: "copy-key".into(), run: z.clone(), digest: "d".into(), created_at: 1 };
    let failed = crate::delivery::DeliveryRecord {
        id: "dlv_copied".into(),
        run: z.clone(),
        on: "completed".into(),
        target: crate::delivery::DeliveryTarget::Webhook { name: "ops".into() },
        key: Some("s".into()),
        body: json!({"run_id": z}),
        retry: crate::delivery::DeliveryRetry { max_attempts: 2, backoff_ms: 10, max_backoff_ms: 10 },
        state: crate::delivery::DeliveryState::Pending,
        attempts: 0,
        next_at: 9,
        lease_until: None,
        error: None,
        created_at: 9,
        updated_at: 9,
    };
    from.commit(b(vec![
        create(&z, &["a"]),
        Write::PutStartKey(key),
        artifact(&z, "f.bin", &[0, 1, 2, 255]),
        ended(&z, RunState::Completed, 9),
        Write::PutDelivery(failed),
    ]))
    .await
    .unwrap();
    for attempts in 0..2 {
        let state =
            [crate::delivery::DeliveryState::Pending, crate::delivery::DeliveryState::Failed][attempts as usize];
        let tried = Write::DeliveryTried {
            id: "dlv_copied".into(),
            attempts,
            state,
            next_at: 20,
            error: Some("503".into()),
            at: 20,
        };
        from.commit(b(vec![tried])).await.unwrap();
    }
    from.commit(b(vec![Write::OpenWait(WaitRecord {
        run: a.clone(),
        step: "z".into(),
        kind: WaitKind::Signal {
            prompt: Some("ok?".into()),
            schema: Some(json!({"type": "object"})),
            preview: Some(json!({"draft": "hello"})),
            reason: RunState::InputRequired,
            resume: Some(json!({"task": "t1"})),
        },
        until: None,
        since: 3,
    })]))
    .await
    .unwrap();
    from.save_template("t", &json!({"v": 1}), 1).await.unwrap();
    from.save_template("t", &json!({"v": 2}), 2).await.unwrap();
    for t in from.list_templates().await.unwrap() {
        for v in from.template_versions(&t.name).await.unwrap() {
            to.import_template(v).await.unwrap();
        }
    }
    for r in from.list_runs(&RunFilter::default()).await.unwrap() {
        let e = from.export_run(&r.id).await.unwrap().unwrap();
        to.import_run(e.clone()).await.unwrap();
        assert!(matches!(to.import_run(e).await, Err(StoreError::Conflict(_))), "a run is copied once");
    }
    for id in [&a, &z] {
        assert_eq!(to.run(id).await.unwrap(), from.run(id).await.unwrap(), "run {id}");
        assert_eq!(
            to.events_after(id, Seq::ZERO, 100).await.unwrap(),
            from.events_after(id, Seq::ZERO, 100).await.unwrap()
        );
    }
    assert_eq!(to.artifact(&z, "f.bin").await.unwrap().unwrap().1, vec![0, 1, 2, 255]);
    // Its notifications as they stood and its idempotency key went with it.
    let of_z = crate::delivery::DeliveryFilter { run: Some(z.clone()), ..Default::default() };
    let copied = to.deliveries(&of_z).await.unwrap();
    assert_eq!(copied, from.deliveries(&of_z).await.unwrap());
    assert_eq!((copied[0].attempts, copied[0].error.as_deref()), (2, Some("503")), "{copied:?}");
    assert_eq!(to.start_key("copy-key").await.unwrap().map(|k| k.run), Some(z.clone()));
    assert_eq!(to.start_key_of(&z).await.unwrap().map(|k| k.key), Some("copy-key".to_string()));
    assert_eq!(to.template_versions("t").await.unwrap(), from.template_versions("t").await.unwrap());
    assert_eq!(to.template("t", None).await.unwrap().unwrap().version, 2);
    assert_eq!(to.unfinished_runs().await.unwrap(), vec![a.clone()]);
    // The copy goes on like the original: the next version is 3.
    assert_eq!(to.save_template("t", &json!({"v": 3}), 3).await.unwrap(), 3);
}
