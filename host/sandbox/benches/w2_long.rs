//! Benchmark W2 of docs/performance.md, long-10: ten sequential invocations of
//! fib(38) — natively, as a guest without epoch checks or fuel, with epoch
//! interruption (weft's default: no fuel unless a budget is asked for), and
//! with a fuel budget (epoch + the fuel-metered engine). Prints one
//! greppable line per variant and the ratios the targets are stated in
//! (guest ≤ 1.3× native; epoch ≤ 5%, fuel ≤ 15% over the bare guest).
//!
//! Run: `cargo bench -p weft-sandbox --bench w2_long` (`W2_N=30` for a
//! quick look).

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::json;
use weft_sandbox::{GuestOutcome, Invocation, Limits, Sandbox, SandboxConfig};

const STEPS: usize = 10;

fn fib(n: u64) -> u64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

fn guest_total(config: SandboxConfig, n: u64, fuel: Option<u64>) -> (Duration, u64) {
    let sandbox = Sandbox::new(config, None).unwrap();
    let guest = sandbox.load(&std::fs::read(weft_test_artifacts::HOSTILE).unwrap()).unwrap();
    let mut inv = Invocation::new(json!({"mode": "fib", "n": n}).to_string());
    inv.limits = Limits { fuel, timeout: Duration::from_secs(600), ..Limits::default() };
    let start = Instant::now();
    let mut last = 0;
    for _ in 0..STEPS {
        match sandbox.invoke(&guest, &inv).outcome {
            Ok(GuestOutcome::Done(v)) => last = v.as_u64().unwrap(),
            other => panic!("fib failed: {other:?}"),
        }
    }
    (start.elapsed(), last)
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let n: u64 = std::env::var("W2_N").ok().and_then(|s| s.parse().ok()).unwrap_or(38);
    let start = Instant::now();
    let mut expect = 0;
    for _ in 0..STEPS {
        expect = fib(black_box(n));
    }
    let native = start.elapsed();

    let bare = SandboxConfig { epoch_interruption: false, fuel_metering: false, ..SandboxConfig::default() };
    let epoch = SandboxConfig { fuel_metering: false, ..SandboxConfig::default() };
    // The default engine meters no fuel; a budget runs on the metered one.
    let fuel = SandboxConfig::default();
    let (t_bare, r1) = guest_total(bare, n, None);
    let (t_epoch, r2) = guest_total(epoch, n, None);
    let (t_fuel, r3) = guest_total(fuel, n, Some(u64::MAX / 2));
    assert_eq!([r1, r2, r3], [expect; 3], "every variant computes the same fib({n})");

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("W2 long-10 n={n} variant=native total_ms={:.1}", ms(native));
    println!("W2 long-10 n={n} variant=guest total_ms={:.1} vs_native={:.3}", ms(t_bare), ms(t_bare) / ms(native));
    println!(
        "W2 long-10 n={n} variant=guest+epoch total_ms={:.1} vs_native={:.3} epoch_overhead_pct={:.1}",
        ms(t_epoch),
        ms(t_epoch) / ms(native),
        (ms(t_epoch) / ms(t_bare) - 1.0) * 100.0
    );
    println!(
        "W2 long-10 n={n} variant=guest+epoch+fuel total_ms={:.1} vs_native={:.3} fuel_overhead_pct={:.1}",
        ms(t_fuel),
        ms(t_fuel) / ms(native),
        (ms(t_fuel) / ms(t_epoch) - 1.0) * 100.0
    );
}
