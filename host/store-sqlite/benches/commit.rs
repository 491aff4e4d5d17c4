//! Group commit throughput: batches/s at durability normal and full, with
//! one caller at a time and with 64 concurrent callers (whose batches the
//! writer folds into shared transactions). Each batch creates a run with
//! three steps and logs one event (the shape of `weft run`'s first commit).
//!
//! `cargo bench -p weft-store-sqlite --bench commit`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use weft_engine::store::RunStore;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use weft_engine::store::{Batch, NewEvent, NewRun, Write};
use weft_engine::{RunId, SeededRng, Seq};
use weft_store_sqlite::{Durability, SqliteStore, group_factor};

fn batch(rng: &SeededRng, n: &AtomicU64) -> Batch {
    let t = n.fetch_add(1, Ordering::Relaxed) as i64;
    let id = RunId::generate(1_700_000_000_000 + t, rng);
    Batch {
        writes: vec![
            Write::CreateRun {
                run: NewRun {
                    id: id.clone(),
                    template: "bench".into(),
                    version: Some(1),
                    definition: std::sync::Arc::new(
                        json!({"name": "bench", "steps": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
                    ),
                    input: json!({"n": t}),
                    parent: None,
                    depth: 0,
                    concurrency_key: None,
                    created_at: t,
                    deadline_at: None,
                    traceparent: None,
                    labels: Default::default(),
                },
                steps: vec!["a".into(), "b".into(), "c".into()],
            },
            Write::Event(NewEvent {
                run: id,
                seq: Seq(1),
                at: t,
                kind: "run.submitted".into(),
                step: None,
                item: None,
                data: json!({"state": "submitted"}),
            }),
        ],
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (label, durability) in [("normal", Durability::Normal), ("full", Durability::Full)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path().join("bench.db"), durability).unwrap());
        let rng = Arc::new(SeededRng::new(1));
        let n = Arc::new(AtomicU64::new(0));
        let mut g = c.benchmark_group(format!("commit/{label}"));
        g.throughput(Throughput::Elements(1));
        g.measurement_time(Duration::from_secs(4));
        g.sample_size(20);
        for callers in [1usize, 64] {
            g.bench_function(format!("callers={callers}"), |b| {
                b.iter_custom(|iters| {
                    let (store, rng, n) = (store.clone(), rng.clone(), n.clone());
                    rt.block_on(async move {
                        let start = Instant::now();
                        let per = iters.div_ceil(callers as u64);
                        let mut tasks = tokio::task::JoinSet::new();
                        for _ in 0..callers {
                            let (store, rng, n) = (store.clone(), rng.clone(), n.clone());
                            tasks.spawn(async move {
                                for _ in 0..per {
                                    store.commit(batch(&rng, &n)).await.unwrap();
                                }
                            });
                        }
                        while tasks.join_next().await.is_some() {}
                        // scale to exactly `iters` batches
                        start.elapsed().mul_f64(iters as f64 / (per * callers as u64) as f64)
                    })
                })
            });
        }
        g.finish();
        eprintln!("commit/{label}: {:.1} batches per transaction on average", group_factor(store.stats()));
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
