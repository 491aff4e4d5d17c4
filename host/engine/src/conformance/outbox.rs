//! The outbox: deliveries and idempotency keys, checked against the
//! reference store step by step (what each write is refused for, what
//! each read returns), then deleted with their run.

use std::sync::Arc;

use serde_json::json;

use super::{b, create, rid};
use crate::delivery::{DeliveryRecord, DeliveryRetry, DeliveryState, DeliveryTarget, StartKeyRecord};
use crate::store::*;
use crate::{MemStore, RunState};

fn delivery(run: &crate::RunId, id: &str, key: Option<&str>, at: i64) -> DeliveryRecord {
    DeliveryRecord {
        id: id.into(),
        run: run.clone(),
        on: "completed".into(),
        target: DeliveryTarget::Webhook { name: "ops".into() },
        key: key.map(String::from),
        body: json!({"run_id": run, "n": id}),
        retry: DeliveryRetry { max_attempts: 3, backoff_ms: 100, max_backoff_ms: 1_000 },
        state: DeliveryState::Pending,
        attempts: 0,
        next_at: at,
        lease_until: None,
        error: None,
        created_at: at,
        updated_at: at,
    }
}

fn ids(ds: &[DeliveryRecord]) -> Vec<&str> {
    ds.iter().map(|d| d.id.as_str()).collect()
}

/// Deliveries are written with their run, offered oldest first and one at
/// a time per key, leased, tried, failed, resent and deleted with their
/// run; an idempotency key is taken once.
pub async fn outbox_agrees_with_the_reference(store: Arc<dyn Store>) {
    let mem: Arc<dyn Store> = Arc::new(MemStore::new());
    let (r1, r2) = (rid(1), rid(2));
    for s in [&store, &mem] {
        let key = |run: &crate::RunId| {
            Write::PutStartKey(StartKeyRecord {
                key: "k-1".into(),
                run: run.clone(),
                digest: "d1".into(),
                created_at: 5,
            })
        };
        s.commit(b(vec![create(&r1, &["a"]), key(&r1), Write::PutDelivery(delivery(&r1, "dlv_a", Some("s"), 10))]))
            .await
            .unwrap();
        // A taken key refuses the whole batch: its run is not created.
        let e = s.commit(b(vec![create(&r2, &["a"]), key(&r2)])).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
        assert!(s.run(&r2).await.unwrap().is_none(), "nothing of a refused batch is stored");
        let k = s.start_key("k-1").await.unwrap().unwrap();
        assert_eq!((k.run, k.digest.as_str()), (r1.clone(), "d1"));
        assert!(s.start_key("k-2").await.unwrap().is_none());
        s.commit(b(vec![create(&r2, &["a"])])).await.unwrap();
        s.commit(b(vec![
            Write::PutDelivery(delivery(&r2, "dlv_b", Some("s"), 11)),
            Write::PutDelivery(delivery(&r2, "dlv_c", None, 12)),
            Write::PutDelivery(delivery(&r2, "dlv_d", Some("t"), 50)),
        ]))
        .await
        .unwrap();
        // Written failed (its refs did not resolve): kept with its error, never due.
        let never = DeliveryRecord {
            state: DeliveryState::Failed,
            error: Some("not sent: its `input` does not resolve".into()),
            ..delivery(&r2, "dlv_x", None, 12)
        };
        s.commit(b(vec![Write::PutDelivery(never)])).await.unwrap();
        let x = s.delivery("dlv_x").await.unwrap().unwrap();
        assert_eq!(
            (x.state, x.error.as_deref()),
            (DeliveryState::Failed, Some("not sent: its `input` does not resolve"))
        );
        let again = s.commit(b(vec![Write::PutDelivery(delivery(&r2, "dlv_c", None, 12))])).await;
        assert!(matches!(again, Err(StoreError::Conflict(_))), "an id is written once");
        // Due at 20: the head of key `s` and the keyless one; `dlv_d` not yet.
        assert_eq!(ids(&s.deliveries_due(20, 10).await.unwrap()), ["dlv_a", "dlv_c"]);
        assert_eq!(ids(&s.deliveries_due(60, 1).await.unwrap()), ["dlv_a"], "at most `limit`");
        // A lease hides it from other senders until it ends.
        let lease = |attempts, until, now| Write::DeliveryLease { id: "dlv_a".into(), attempts, until, now };
        s.commit(b(vec![lease(0, 30, 20)])).await.unwrap();
        assert!(s.commit(b(vec![lease(0, 40, 25)])).await.is_err(), "held until 30");
        assert_eq!(ids(&s.deliveries_due(25, 10).await.unwrap()), ["dlv_c"], "`dlv_b` waits behind `dlv_a`");
        let tried = |id: &str, attempts, state, next_at, at| Write::DeliveryTried {
            id: id.into(),
            attempts,
            state,
            next_at,
            error: Some("500".into()),
            at,
        };
        s.commit(b(vec![tried("dlv_a", 0, DeliveryState::Pending, 100, 26)])).await.unwrap();
        assert!(s.commit(b(vec![tried("dlv_a", 0, DeliveryState::Pending, 100, 26)])).await.is_err(), "a try once");
        assert_eq!(ids(&s.deliveries_due(99, 10).await.unwrap()), ["dlv_c", "dlv_d"], "its retry is not due yet");
        s.commit(b(vec![tried("dlv_a", 1, DeliveryState::Failed, 100, 101)])).await.unwrap();
        assert_eq!(
            ids(&s.deliveries_due(101, 10).await.unwrap()),
            ["dlv_b", "dlv_c", "dlv_d"],
            "a failed head lets its key go on"
        );
        let d = s.delivery("dlv_a").await.unwrap().unwrap();
        assert_eq!(
            (d.state, d.attempts, d.error.as_deref(), d.updated_at),
            (DeliveryState::Failed, 2, Some("500"), 101)
        );
        assert_eq!(d.body, json!({"run_id": r1, "n": "dlv_a"}));
        let resend = Write::DeliveryResend { id: "dlv_a".into(), at: 200 };
        assert!(s.commit(b(vec![Write::DeliveryResend { id: "dlv_c".into(), at: 200 }])).await.is_err(), "pending");
        s.commit(b(vec![resend.clone()])).await.unwrap();
        let d = s.delivery("dlv_a").await.unwrap().unwrap();
        assert_eq!((d.state, d.attempts, d.next_at, d.lease_until), (DeliveryState::Pending, 0, 200, None));
        assert_eq!(d.error, None, "its last error goes with the resend");
        assert_eq!(
            ids(&s.deliveries_due(200, 10).await.unwrap()),
            ["dlv_a", "dlv_c", "dlv_d"],
            "it is its key's head again"
        );
        s.commit(b(vec![tried("dlv_a", 0, DeliveryState::Delivered, 200, 201)])).await.unwrap();
        let all = s.deliveries(&DeliveryFilter::default()).await.unwrap();
        assert_eq!(ids(&all), ["dlv_x", "dlv_d", "dlv_c", "dlv_b", "dlv_a"], "newest first");
        let of_r2 = DeliveryFilter { run: Some(r2.clone()), state: Some(DeliveryState::Pending), limit: Some(2) };
        assert_eq!(ids(&s.deliveries(&of_r2).await.unwrap()), ["dlv_d", "dlv_c"]);
        let done = DeliveryFilter { state: Some(DeliveryState::Delivered), ..Default::default() };
        assert_eq!(ids(&s.deliveries(&done).await.unwrap()), ["dlv_a"]);
        // Deleted with its run (and its key with it: free again).
        let end = Write::RunState {
            run: r1.clone(),
            from: RunState::Submitted,
            to: RunState::Completed,
            output: None,
            error: None,
            at: 300,
        };
        s.commit(b(vec![end])).await.unwrap();
        assert_eq!(s.delete_runs(std::slice::from_ref(&r1)).await.unwrap(), std::slice::from_ref(&r1));
        assert!(s.delivery("dlv_a").await.unwrap().is_none());
        assert!(s.start_key("k-1").await.unwrap().is_none());
        assert_eq!(s.deliveries(&DeliveryFilter::default()).await.unwrap().len(), 4);
    }
}
