//! Orchestration overhead with a trivial in-process runner (no wasm): the
//! engine + SQLite part of W1 (chain-40: one run of 40 sequential steps)
//! and W3 (trivial-3: 3 steps per run, 1 run at a time and 200 in flight).
//!
//! `cargo bench -p weft-store-sqlite --bench engine`

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use weft_engine::runner::{StepOutput, StepRequest, StepRunner};
use weft_engine::{CancelToken, Engine, EngineConfig, RunOptions, RunState, SeededRng, StepError, SystemClock};
use weft_model::Definition;
use weft_store_sqlite::{Durability, SqliteStore};

struct Trivial;

#[async_trait::async_trait]
impl StepRunner for Trivial {
    async fn run(&self, req: StepRequest, _: CancelToken) -> Result<StepOutput, StepError> {
        Ok(StepOutput::Done(json!({"n": req.input.get("n").and_then(Value::as_i64).unwrap_or(0) + 1})))
    }
}

fn chain(n: usize) -> Definition {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let input = if i == 0 { json!({"n": 0}) } else { json!({"n": format!("@s{}.n", i - 1)}) };
            json!({"name": format!("s{i}"), "code": {"plugin": "p"}, "input": input})
        })
        .collect();
    weft_model::from_value(&json!({"name": "chain", "steps": steps}), &weft_model::NoSchemas).unwrap()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (label, durability) in [("normal", Durability::Normal), ("full", Durability::Full)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path().join("bench.db"), durability).unwrap());
        let engine = Engine::new(
            store,
            Arc::new(Trivial),
            Arc::new(SystemClock),
            Arc::new(SeededRng::from_entropy()),
            EngineConfig::default(),
        );
        let mut g = c.benchmark_group(format!("engine/{label}"));
        g.measurement_time(Duration::from_secs(4));
        g.sample_size(10);
        let c40 = Arc::new(chain(40));
        g.bench_function("W1 chain-40 (one run)", |b| {
            b.iter(|| {
                rt.block_on(async {
                    let id = engine.submit(&c40, json!({}), RunOptions::default()).await.unwrap();
                    assert_eq!(engine.wait(&id).await.unwrap().state, RunState::Completed);
                })
            })
        });
        let t3 = Arc::new(chain(3));
        g.bench_function("W3 trivial-3 latency (one run)", |b| {
            b.iter(|| {
                rt.block_on(async {
                    let id = engine.submit(&t3, json!({}), RunOptions::default()).await.unwrap();
                    engine.wait(&id).await.unwrap();
                })
            })
        });
        g.throughput(Throughput::Elements(200));
        g.bench_function("W3 trivial-3 throughput (200 in flight)", |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let mut tasks = tokio::task::JoinSet::new();
                        for _ in 0..200 {
                            let (engine, t3) = (engine.clone(), t3.clone());
                            tasks.spawn(async move {
                                let id = engine.submit(&t3, json!({}), RunOptions::default()).await.unwrap();
                                engine.wait(&id).await.unwrap();
                            });
                        }
                        while tasks.join_next().await.is_some() {}
                    }
                    start.elapsed()
                })
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
