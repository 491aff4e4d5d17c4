//! How events are stored: rows of a run's events (paged across them),
//! and the migration over events an older build stored one per row; the
//! count of template changes (schema 8).

use serde_json::json;
use weft_engine::Seq;
use weft_engine::store::*;

use super::super::*;

/// An event as schema 6 stored it: seq, kind, step, item, data.
type OldRow<'a> = (i64, &'a str, Option<&'a str>, Option<i32>, &'a str);
/// An event as read back: seq, at, kind, step, item, data.
type ReadBack<'a> = (u64, i64, &'a str, Option<&'a str>, Option<u32>, String);

/// Schema 7 moves each event into a row of its own in `event_batches`:
/// the events read back as they were stored (data byte for byte, its keys
/// in their order), the `events` view still lists them, and new events
/// follow them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stored_one_per_row_read_back_after_the_migration() {
    let url = tokio::task::spawn_blocking(weft_test_postgres::database).await.unwrap();
    let (mut c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    assert_eq!(schema::migrate_until(&mut c, 6).await.unwrap(), 6);
    let id = weft_engine::conformance::rid(7);
    let rows: [OldRow<'_>; 3] = [
        (1, "run.submitted", None, None, r#"{"z":1,"a":[true,null]}"#),
        (2, "step.succeeded", Some("s"), None, r#"{"out":"é \"q\""}"#),
        (3, "item.succeeded", Some("s"), Some(4), "null"),
    ];
    for (seq, kind, step, item, data) in rows {
        c.execute(
            "INSERT INTO events (run_id, seq, at, kind, step, item, data) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[&id.as_str(), &seq, &(1_000 + seq), &kind, &step, &item, &data],
        )
        .await
        .unwrap();
    }
    let store = PgStore::connect(&url, Options::default()).await.unwrap();
    let got = store.events_after(&id, Seq::ZERO, 10).await.unwrap();
    let want: Vec<ReadBack<'_>> =
        rows.iter().map(|r| (r.0 as u64, 1_000 + r.0, r.1, r.2, r.3.map(|i| i as u32), r.4.to_string())).collect();
    let seen: Vec<ReadBack<'_>> = got
        .iter()
        .map(|e| (e.seq.0, e.at, e.kind.as_str(), e.step.as_deref(), e.item.map(|i| i.0), e.data.to_string()))
        .collect();
    assert_eq!(seen, want);
    assert_eq!(store.events_after(&id, Seq(1), 1).await.unwrap()[0].seq, Seq(2), "a page starts after its seq");
    let view: Vec<(i64, String)> = c
        .query("SELECT seq, data FROM events WHERE run_id = $1 ORDER BY seq", &[&id.as_str()])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(view, rows.iter().map(|r| (r.0, r.4.to_string())).collect::<Vec<_>>());
    // New events go on from the migrated ones; a stored seq is refused.
    store.commit(weft_engine::conformance::b(vec![weft_engine::conformance::create(&id, &["s"])])).await.unwrap();
    let next = |seq: u64| {
        weft_engine::conformance::b(vec![Write::Event(NewEvent {
            run: id.clone(),
            seq: Seq(seq),
            at: 2_000,
            kind: "log".into(),
            step: None,
            item: None,
            data: json!({"line": seq}),
        })])
    };
    store.commit(next(4)).await.unwrap();
    assert!(matches!(store.commit(next(2)).await, Err(StoreError::Conflict(_))), "seq 2 is stored");
    let all = store.events_after(&id, Seq::ZERO, 10).await.unwrap();
    assert_eq!(all.iter().map(|e| e.seq.0).collect::<Vec<_>>(), [1, 2, 3, 4]);
}

/// A fan-out's events of one run, written in one transaction, span several
/// rows; a page starts and ends anywhere among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_events_cross_the_rows_a_transaction_wrote() {
    let store = super::fresh().await;
    let id = weft_engine::conformance::rid(8);
    let mut writes = vec![weft_engine::conformance::create(&id, &["s"])];
    writes.extend((1..=70).map(|seq| {
        Write::Event(NewEvent {
            run: id.clone(),
            seq: Seq(seq),
            at: seq as i64,
            kind: "item.succeeded".into(),
            step: Some("s".into()),
            item: Some(weft_engine::ItemIndex(seq as u32)),
            data: json!({"i": seq}),
        })
    }));
    store.commit(weft_engine::conformance::b(writes)).await.unwrap();
    let seqs = |after: u64, limit: usize| {
        let store = &store;
        let id = id.clone();
        async move { store.events_after(&id, Seq(after), limit).await.unwrap().iter().map(|e| e.seq.0).collect::<Vec<_>>() }
    };
    assert_eq!(seqs(0, 10).await, (1..=10).collect::<Vec<_>>());
    assert_eq!(seqs(30, 5).await, (31..=35).collect::<Vec<_>>(), "a page across two rows");
    assert_eq!(seqs(31, 40).await, (32..=70).collect::<Vec<_>>(), "a page across three rows, to the end");
    assert!(seqs(70, 10).await.is_empty());
    let run = store.run(&id).await.unwrap().unwrap();
    assert_eq!(run.last_seq, Seq(70), "the run's last seq is its last row's");
}

/// Schema 8 counts template changes: two stores on one database (two
/// workers) and a change by hand in SQL; a template changed through one
/// reads fresh through the other, which had read it before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_changed_elsewhere_read_fresh() {
    let url = tokio::task::spawn_blocking(weft_test_postgres::database).await.unwrap();
    let a: std::sync::Arc<dyn Store> = std::sync::Arc::new(PgStore::connect(&url, Options::default()).await.unwrap());
    let b: std::sync::Arc<dyn Store> = std::sync::Arc::new(PgStore::connect(&url, Options::default()).await.unwrap());
    weft_engine::conformance::templates_changed_by_another_handle_read_fresh(a.clone(), b).await;
    let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.execute("UPDATE templates SET definition = '{\"v\":\"by hand\"}' WHERE name = 't'", &[]).await.unwrap();
    assert_eq!(a.template("t", None).await.unwrap().unwrap().definition, json!({"v": "by hand"}));
}
