//! Benchmark W2 of docs/performance.md, long-10: ten invocations of a
//! compute kernel in each of five variants, interleaved round by round:
//! natively, as a guest without epoch checks or fuel, with epoch
//! interruption (weft's default: no fuel unless a budget is asked for),
//! with a fuel budget (the fuel-metered engine, which checks no epochs),
//! and with fuel metered beside epoch checks (`fuel_metering` on, every
//! guest metered). The
//! kernels (`weft-test-kernels`, the same source natively and in the guest)
//! are three shapes of code, because wasmtime's checks cost per function
//! entry and per loop back-edge: `fib(38)` (call-bound, the worst case),
//! `sieve` (loop-bound) and `json` (a step's typical work). Prints one
//! greppable line per kernel and variant, with the ratios the targets are
//! stated in (guest ≤ 1.3× native; epoch ≤ 5% over the bare guest, fuel
//! ≤ 15% over epoch).
//!
//! Run: `cargo bench -p weft-sandbox --bench w2_long` (`W2_SCALE=0.1` for
//! a quick look; `W2_KERNELS=fib,json` for some of them).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use weft_sandbox::{Guest, GuestOutcome, Invocation, Limits, Sandbox, SandboxConfig};

const STEPS: usize = 10;

/// A kernel: its mode in the hostile guest, its native twin, and `n` at
/// scale 1 (about 0.1–0.3 s per call on the VMs of the figures).
struct Kernel {
    mode: &'static str,
    native: fn(u64) -> u64,
    n: f64,
}

const KERNELS: [Kernel; 3] = [
    Kernel { mode: "fib", native: weft_test_kernels::fib, n: 38.0 },
    Kernel { mode: "sieve", native: weft_test_kernels::sieve, n: 30e6 },
    Kernel { mode: "json", native: weft_test_kernels::json, n: 150e3 },
];

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let scale: f64 = std::env::var("W2_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let only = std::env::var("W2_KERNELS").ok();
    for k in KERNELS.iter().filter(|k| only.as_deref().is_none_or(|o| o.split(',').any(|m| m == k.mode))) {
        // fib's cost grows 1.6× per unit of n: scale its n logarithmically.
        let n = if k.mode == "fib" { (k.n + scale.log(1.618)).round() } else { (k.n * scale).round() } as u64;
        run(k, n);
    }
}

/// One variant of a kernel: a sandbox with its guest loaded and warmed, or
/// the native function. Five of them live for a kernel's run, never moved
/// in the timed loop, so their sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Variant {
    Native(fn(u64) -> u64),
    Guest { sandbox: Sandbox, guest: Arc<Guest>, inv: Invocation },
}

impl Variant {
    fn guest(config: SandboxConfig, mode: &str, n: u64, fuel: Option<u64>) -> Variant {
        let sandbox = Sandbox::new(config, None).unwrap();
        let guest = sandbox.load(&std::fs::read(weft_test_artifacts::HOSTILE).unwrap()).unwrap();
        let mut inv = Invocation::new(json!({"mode": mode, "n": n}).to_string());
        inv.limits = Limits { fuel, timeout: Duration::from_secs(600), memory_bytes: 1 << 30, ..Limits::default() };
        let v = Variant::Guest { sandbox, guest, inv };
        // Untimed: a budget's first call compiles the guest for the metered
        // engine, and every variant's first call touches its memory first.
        v.call(n);
        v
    }

    fn call(&self, n: u64) -> u64 {
        match self {
            Variant::Native(f) => f(black_box(n)),
            Variant::Guest { sandbox, guest, inv } => match sandbox.invoke(guest, inv).outcome {
                Ok(GuestOutcome::Done(v)) => v.as_u64().unwrap(),
                other => panic!("{} failed: {other:?}", inv.input),
            },
        }
    }
}

fn run(k: &Kernel, n: u64) {
    let bare = SandboxConfig { epoch_interruption: false, fuel_metering: false, ..SandboxConfig::default() };
    let epoch = SandboxConfig { fuel_metering: false, ..SandboxConfig::default() };
    // The default engine meters no fuel; a budget runs on the metered one.
    let fuel = SandboxConfig::default();
    let both = SandboxConfig { fuel_metering: true, ..SandboxConfig::default() };
    let variants = [
        Variant::Native(k.native),
        Variant::guest(bare, k.mode, n, None),
        Variant::guest(epoch, k.mode, n, None),
        Variant::guest(fuel, k.mode, n, Some(u64::MAX / 2)),
        Variant::guest(both, k.mode, n, Some(u64::MAX / 2)),
    ];
    // Interleaved, the order turning each round: this VM's speed drifts
    // by tens of percent over a minute, and each variant meets the same
    // minutes.
    let expect = variants[0].call(n);
    let mut total = [Duration::ZERO; 5];
    for round in 0..STEPS {
        for i in 0..variants.len() {
            let v = (i + round) % variants.len();
            let start = Instant::now();
            let got = variants[v].call(n);
            total[v] += start.elapsed();
            assert_eq!(got, expect, "every variant computes the same {}({n})", k.mode);
        }
    }

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let [native, t_bare, t_epoch, t_fuel, t_both] = total.map(ms);
    let head = format!("W2 long-10 kernel={} n={n}", k.mode);
    println!("{head} variant=native total_ms={native:.1}");
    println!("{head} variant=guest total_ms={t_bare:.1} vs_native={:.3}", t_bare / native);
    println!(
        "{head} variant=guest+epoch total_ms={t_epoch:.1} vs_native={:.3} epoch_overhead_pct={:.1}",
        t_epoch / native,
        (t_epoch / t_bare - 1.0) * 100.0
    );
    println!(
        "{head} variant=guest+fuel-budget total_ms={t_fuel:.1} vs_native={:.3} fuel_overhead_pct={:.1}",
        t_fuel / native,
        (t_fuel / t_epoch - 1.0) * 100.0
    );
    println!(
        "{head} variant=guest+epoch+fuel total_ms={t_both:.1} vs_native={:.3} fuel_overhead_pct={:.1}",
        t_both / native,
        (t_both / t_epoch - 1.0) * 100.0
    );
}
