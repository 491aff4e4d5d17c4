//! Per-invocation cost of a code step: a fresh store, instantiation from a
//! prepared `InstancePre`, and one call, with the pooling allocator and the
//! default limits (epoch + memory limiter; no fuel metering). Rust and C guests are
//! built by the test build; the JS and Python guests (on the SDKs) by
//! `examples/build-all.sh` (skipped, loudly, when missing). More guests, for
//! an A/B of two builds in the same minutes: `WEFT_BENCH_GUESTS` =
//! `name=path=input` entries separated by `;` (see
//! `scripts/bench-guest-sdk.sh`).
//!
//! Prints the fuel one call of each guest burns (`fuel/<name>: N`).
//!
//! Also measures loading a big guest from the compiled-artifact cache in a
//! fresh sandbox (what a new `weft` process pays) against compiling it: as
//! a file just read (hashed to find the artifact: `load-cached/<guest>`,
//! what a file new or changed since the last load pays) and as a stored
//! plugin pinned by digest, the runner's path (its bytes not read at all:
//! `load-cached/<guest>-stored`, also what a file whose digest is
//! remembered by its stamp pays: see `FileDigests`).
//!
//! Run: `cargo bench -p weft-sandbox --bench invoke`

use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use weft_sandbox::{Digest, GuestBytes, Invocation, Sandbox, SandboxConfig};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn guests() -> Vec<(&'static str, PathBuf, String)> {
    let mut list: Vec<(&'static str, PathBuf, String)> = vec![
        ("rust-trivial", PathBuf::from(weft_test_artifacts::HOSTILE), r#"{"mode": "ok"}"#.into()),
        (
            "rust",
            PathBuf::from(weft_test_artifacts::EXAMPLE_RUST_GUEST),
            r#"{"text": "the cat and the hat", "top": 2}"#.into(),
        ),
        ("c", repo().join("examples/c-guest/build/guest.wasm"), r#"{"text": "hello"}"#.into()),
        ("js", repo().join("examples/js-guest/build/slugify.wasm"), r#"{"text": "Hello World"}"#.into()),
        ("python", repo().join("examples/python-guest/build/stats.wasm"), r#"{"numbers": [1, 2, 3]}"#.into()),
    ];
    for entry in std::env::var("WEFT_BENCH_GUESTS").unwrap_or_default().split(';').filter(|e| !e.trim().is_empty()) {
        let mut parts = entry.splitn(3, '=');
        let (Some(name), Some(path), Some(input)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("WEFT_BENCH_GUESTS: `{entry}` is not name=path=input");
        };
        list.push((name.trim().to_string().leak(), PathBuf::from(path.trim()), input.to_string()));
    }
    list
}

fn invoke(c: &mut Criterion) {
    let cache = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default(), Some(cache.path())).unwrap();
    let mut group = c.benchmark_group("invoke");
    group.sample_size(30);
    for (name, path, input) in guests() {
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("SKIPPED invoke/{name}: {} is missing (run examples/build-all.sh)", path.display());
            continue;
        };
        let guest = sandbox.load(&bytes).unwrap();
        let inv = Invocation::new(&input);
        let first = sandbox.invoke(&guest, &inv);
        assert!(first.outcome.is_ok(), "{name}: {:?}", first.outcome);
        // The fuel one call burns (deterministic, unlike the times): with a
        // budget set, the sandbox meters.
        let mut metered = Invocation::new(&input);
        metered.limits.fuel = Some(u64::MAX / 4);
        if let Some(fuel) = sandbox.invoke(&guest, &metered).fuel_used {
            eprintln!("fuel/{name}: {fuel}");
        }
        group.bench_function(name, |b| b.iter(|| sandbox.invoke(&guest, &inv)));
    }
    // The fixed costs inside an invocation, for reading the figures above.
    group.bench_function("wasi-ctx", |b| {
        b.iter(|| {
            wasmtime_wasi::WasiCtxBuilder::new().allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false).build()
        })
    });
    group.finish();
}

fn cached_load(c: &mut Criterion) {
    if std::env::var_os("WEFT_BENCH_NO_LOAD").is_some() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("load-cached");
    group.sample_size(10);
    for (name, path, _) in guests() {
        let Ok(bytes) = std::fs::read(&path) else { continue };
        if name == "rust-trivial" {
            continue;
        }
        // Compile once (and fill the cache), timing it for comparison.
        let t = Instant::now();
        Sandbox::new(SandboxConfig::default(), Some(cache.path())).unwrap().load(&bytes).unwrap();
        eprintln!("load-compile/{name}: {:.1} ms (no cache, {} bytes)", t.elapsed().as_secs_f64() * 1e3, bytes.len());
        // A fresh sandbox each time, as a new process would have. A guest
        // given as a file (`weft step run guest.wasm`) the first time, or
        // just changed: its bytes, just read, are hashed to find the cached
        // artifact.
        let file = bytes::Bytes::from(bytes.clone());
        group.bench_function(name, |b| {
            b.iter_batched(
                || Sandbox::new(SandboxConfig::default(), Some(cache.path())).unwrap(),
                |s| {
                    s.load_pinned(Digest::of(&file), GuestBytes::Here(file.clone())).unwrap();
                    s
                },
                criterion::BatchSize::PerIteration,
            )
        });
        // What the runner does: the guest is a stored blob pinned by its
        // digest, and its bytes are not read when the artifact is cached.
        let registry = weft_sandbox::registry::Registry::new(cache.path(), vec![]);
        let digest = registry.put_blob(&bytes).unwrap();
        group.bench_function(format!("{name}-stored"), |b| {
            b.iter_batched(
                || Sandbox::new(SandboxConfig::default(), Some(cache.path())).unwrap(),
                |s| {
                    s.load_pinned(digest, registry.stored(&digest).unwrap()).unwrap();
                    s
                },
                criterion::BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, invoke, cached_load);
criterion_main!(benches);
