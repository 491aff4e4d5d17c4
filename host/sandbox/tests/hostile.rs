//! The "hostile guests" row of docs/reliability.md: guests compiled from source
//! (tests/guests) that loop, allocate, recurse, flood, snoop and trap. Each
//! must fail its own invocation with the right error kind within its limit
//! (plus a small slack), and the same sandbox must run the next invocation
//! normally.

use std::net::TcpListener;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use weft_sandbox::{
    Guest, GuestErrorKind, GuestOutcome, Invocation, InvokeResult, Limits, Sandbox, SandboxConfig, TRUNCATED_MARKER,
};

fn sandbox() -> &'static Sandbox {
    static S: OnceLock<Sandbox> = OnceLock::new();
    S.get_or_init(|| Sandbox::new(SandboxConfig { max_concurrent: 8, ..Default::default() }, None).unwrap())
}

fn guest(path: &str) -> std::sync::Arc<Guest> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    sandbox().load(&bytes).unwrap()
}

fn hostile() -> std::sync::Arc<Guest> {
    guest(weft_test_artifacts::HOSTILE)
}

fn call(g: &Guest, input: Value, limits: Limits) -> InvokeResult {
    let mut inv = Invocation::new(input.to_string());
    inv.ctx.step = "s".into();
    inv.limits = limits;
    sandbox().invoke(g, &inv)
}

/// Asserts the error kind, then that the same guest still works.
#[track_caller]
fn fails_with(g: &Guest, r: &InvokeResult, kind: GuestErrorKind) -> String {
    let e = match &r.outcome {
        Err(e) => e.clone(),
        Ok(o) => panic!("expected {kind}, got {o:?}"),
    };
    assert_eq!(e.kind, kind, "{}", e.message);
    let next = call(g, json!({"mode": "ok"}), Limits::default());
    assert!(next.outcome.is_ok(), "the next invocation must work: {:?}", next.outcome);
    e.message
}

#[test]
fn an_infinite_loop_hits_the_wall_clock_limit() {
    let g = hostile();
    let limits = Limits { fuel: None, timeout: Duration::from_millis(300), ..Limits::default() };
    let r = call(&g, json!({"mode": "loop"}), limits);
    fails_with(&g, &r, GuestErrorKind::Timeout);
    assert!(r.elapsed >= Duration::from_millis(300), "{:?}", r.elapsed);
    assert!(r.elapsed < Duration::from_millis(300 + 250), "slack exceeded: {:?}", r.elapsed);
}

/// With a CPU budget the guest runs on the metered engine, which has no
/// epoch checks: a loop still stops at its wall-clock limit.
#[test]
fn a_budgeted_infinite_loop_hits_the_wall_clock_limit() {
    let g = hostile();
    let limits = Limits { fuel: Some(1_000_000_000_000_000), timeout: Duration::from_millis(300), ..Limits::default() };
    // The first budgeted call compiles the guest for the metered engine.
    assert!(call(&g, json!({"mode": "ok"}), limits.clone()).outcome.is_ok());
    let r = call(&g, json!({"mode": "loop"}), limits);
    fails_with(&g, &r, GuestErrorKind::Timeout);
    assert!(r.elapsed >= Duration::from_millis(300), "{:?}", r.elapsed);
    assert!(r.elapsed < Duration::from_millis(300 + 250), "slack exceeded: {:?}", r.elapsed);
}

#[test]
fn an_infinite_loop_exhausts_its_fuel() {
    let g = hostile();
    let limits = Limits { fuel: Some(50_000_000), ..Limits::default() };
    let r = call(&g, json!({"mode": "loop"}), limits);
    fails_with(&g, &r, GuestErrorKind::FuelExhausted);
    assert!(r.elapsed < Duration::from_secs(2), "{:?}", r.elapsed);
}

#[test]
fn a_memory_bomb_hits_the_memory_limit() {
    let g = hostile();
    let limits = Limits { memory_bytes: 32 << 20, ..Limits::default() };
    let r = call(&g, json!({"mode": "alloc"}), limits);
    let msg = fails_with(&g, &r, GuestErrorKind::MemoryLimit);
    assert!(msg.contains("32 MiB"), "{msg}");
}

#[test]
fn unbounded_recursion_is_a_stack_overflow_trap() {
    let g = hostile();
    let r = call(&g, json!({"mode": "recurse"}), Limits::default());
    let msg = fails_with(&g, &r, GuestErrorKind::Trap);
    assert!(msg.contains("stack overflow"), "{msg}");
}

#[test]
fn a_huge_result_is_output_too_large() {
    let g = hostile();
    // 20 MiB result against the 16 MiB default cap (memory raised so the
    // guest can build it).
    let limits = Limits { memory_bytes: 256 << 20, ..Limits::default() };
    let r = call(&g, json!({"mode": "big_output", "n": 20}), limits);
    fails_with(&g, &r, GuestErrorKind::OutputTooLarge);
}

#[test]
fn a_100_mb_stdout_flood_is_output_too_large() {
    let g = guest(weft_test_artifacts::HOSTILE_COMMAND);
    let r = call(&g, json!({"mode": "flood"}), Limits::default());
    fails_with(&g, &r, GuestErrorKind::OutputTooLarge);
    assert!(r.elapsed < Duration::from_secs(5), "{:?}", r.elapsed);
}

#[test]
fn host_files_are_invisible() {
    let g = hostile();
    let r = call(&g, json!({"mode": "read_file"}), Limits::default());
    let msg = fails_with(&g, &r, GuestErrorKind::GuestError);
    assert!(msg.contains("cannot read /etc/passwd"), "{msg}");
    assert!(!msg.contains("root:"), "{msg}");
    let c = guest(weft_test_artifacts::HOSTILE_COMMAND);
    let r = call(&c, json!({"mode": "read_file"}), Limits::default());
    fails_with(&c, &r, GuestErrorKind::GuestError);
}

#[test]
fn the_host_environment_is_invisible() {
    // SAFETY: set before any guest reads it; tests only read env vars.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("WEFT_TEST_SECRET", "hunter2");
    }
    let g = hostile();
    let r = call(&g, json!({"mode": "env"}), Limits::default());
    assert_eq!(r.outcome, Ok(GuestOutcome::Done(json!({"env": []}))));
    let c = guest(weft_test_artifacts::HOSTILE_COMMAND);
    let mut inv = Invocation::new(json!({"mode": "ok"}).to_string());
    inv.ctx.step = "snoop".into();
    inv.ctx.run_id = "r_1".into();
    inv.ctx.idempotency_key = "r_1/snoop/1".into();
    let r = sandbox().invoke(&c, &inv);
    let Ok(GuestOutcome::Done(out)) = r.outcome else { panic!("{:?}", r.outcome) };
    let names: Vec<&str> = out["env"].as_array().unwrap().iter().map(|p| p[0].as_str().unwrap()).collect();
    assert_eq!(names, ["WEFT_RUN_ID", "WEFT_STEP", "WEFT_ATTEMPT", "WEFT_IDEMPOTENCY_KEY", "WEFT_DEADLINE_MS"]);
    assert_eq!(out["env"][1][1], "snoop");
    assert_eq!(r.report.logs[0].message, "hello from the command guest");
}

#[test]
fn sockets_are_closed() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let g = hostile();
    let r = call(&g, json!({"mode": "socket", "addr": addr}), Limits::default());
    let msg = fails_with(&g, &r, GuestErrorKind::GuestError);
    assert!(msg.contains("cannot connect"), "{msg}");
    assert!(listener.accept().is_err(), "the guest must not have reached the listener");
}

#[test]
fn a_panic_is_a_trap_with_the_guest_message_in_the_logs() {
    let g = hostile();
    let r = call(&g, json!({"mode": "trap"}), Limits::default());
    fails_with(&g, &r, GuestErrorKind::Trap);
    assert!(
        r.report.logs.iter().any(|l| l.message.contains("panics on purpose")),
        "the panic message is kept: {:?}",
        r.report.logs
    );
}

#[test]
fn invalid_json_is_invalid_output() {
    let g = hostile();
    let r = call(&g, json!({"mode": "invalid_json"}), Limits::default());
    let msg = fails_with(&g, &r, GuestErrorKind::InvalidOutput);
    assert!(msg.contains("{this is not json"), "{msg}");
}

#[test]
fn a_log_flood_is_truncated_with_a_marker() {
    let g = hostile();
    let r = call(&g, json!({"mode": "log_flood"}), Limits::default());
    assert_eq!(r.outcome, Ok(GuestOutcome::Done(json!({"logged": 3000}))));
    assert!(r.report.logs_truncated);
    assert_eq!(r.report.logs.last().unwrap().message, TRUNCATED_MARKER);
    let kept: usize = r.report.logs.iter().map(|l| l.message.len()).sum();
    assert!(kept <= (1 << 20) + TRUNCATED_MARKER.len(), "{kept}");
}

/// W2's kernels compute in the guest what they compute natively: the bench
/// compares the same work.
#[test]
fn the_w2_kernels_agree_with_their_native_twins() {
    let g = hostile();
    type Kernel = fn(u64) -> u64;
    let native: [(&str, Kernel, u64); 3] = [
        ("fib", weft_test_kernels::fib, 25),
        ("sieve", weft_test_kernels::sieve, 100_000),
        ("json", weft_test_kernels::json, 1_000),
    ];
    for (mode, f, n) in native {
        let r = call(&g, json!({"mode": mode, "n": n}), Limits::default());
        assert_eq!(r.outcome, Ok(GuestOutcome::Done(json!(f(n)))), "{mode}({n})");
    }
}

#[test]
fn rejects_and_retryable_errors_come_through() {
    let g = hostile();
    let r = call(&g, json!({"mode": "reject"}), Limits::default());
    assert_eq!(r.outcome, Ok(GuestOutcome::Reject("rejected on purpose".into())));
    let r = call(&g, json!({"mode": "error"}), Limits::default());
    let e = r.outcome.unwrap_err();
    assert_eq!((e.kind, e.retryable, e.code.as_deref()), (GuestErrorKind::GuestError, true, Some("flaky")));
}

#[test]
fn context_reaches_the_guest() {
    let g = hostile();
    let mut inv = Invocation::new(json!({"mode": "ok", "echo": [1, 2]}).to_string());
    inv.ctx.step = "greet".into();
    inv.ctx.attempt = 3;
    inv.ctx.idempotency_key = "r_x/greet/3".into();
    let r = sandbox().invoke(&g, &inv);
    assert_eq!(
        r.outcome,
        Ok(GuestOutcome::Done(
            json!({"ok": true, "step": "greet", "attempt": 3, "key": "r_x/greet/3", "echo": [1, 2]})
        ))
    );
}

/// A guest parked in a blocking host call (a WASI sleep of an hour) is not
/// running wasm, so no epoch check reaches it: its call is dropped at the
/// deadline, as a component and as a WASI command, with a CPU budget (the
/// metered engine) or without, and a cancel drops it at once.
#[test]
fn a_guest_sleeping_in_a_host_call_meets_its_deadline_and_its_cancel() {
    for (name, g) in [("component", hostile()), ("command", guest(weft_test_artifacts::HOSTILE_COMMAND))] {
        for fuel in [None, Some(1_000_000_000_000)] {
            let limits = Limits { timeout: Duration::from_millis(300), fuel, ..Limits::default() };
            // The first budgeted call compiles the guest for the metered engine.
            assert!(call(&g, json!({"mode": "ok"}), limits.clone()).outcome.is_ok());
            let r = call(&g, json!({"mode": "sleep", "n": 3600}), limits);
            let e = r.outcome.as_ref().unwrap_err();
            assert_eq!(e.kind, GuestErrorKind::Timeout, "{name}, fuel {fuel:?}: {}", e.message);
            assert!(r.elapsed < Duration::from_millis(300 + 250), "{name}: slack exceeded: {:?}", r.elapsed);
        }
        let next = call(&g, json!({"mode": "ok"}), Limits::default());
        assert!(next.outcome.is_ok(), "{name}: the next invocation: {:?}", next.outcome);

        let inv = Invocation::new(json!({"mode": "sleep", "n": 3600}).to_string());
        let cancel = inv.cancel.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            cancel.cancel();
        });
        let started = std::time::Instant::now();
        let r = sandbox().invoke(&g, &inv);
        t.join().unwrap();
        assert_eq!(r.outcome.unwrap_err().kind, GuestErrorKind::Canceled, "{name}");
        assert!(started.elapsed() < Duration::from_millis(100 + 250), "{name}: {:?}", started.elapsed());
    }
}

/// Sleepers hold no thread: on a runtime with two workers, six guests
/// sleeping in host calls (of this sandbox's 8 slots) leave a normal
/// invocation beside them free to finish at once.
#[test]
fn sleepers_hold_no_thread() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    rt.block_on(async {
        let g = hostile();
        let mut sleepers = vec![];
        for _ in 0..6 {
            let g = g.clone();
            sleepers.push(tokio::spawn(async move {
                let mut inv = Invocation::new(json!({"mode": "sleep", "n": 3600}).to_string());
                inv.limits.timeout = Duration::from_secs(5);
                sandbox().invoke_async(&g, &inv).await
            }));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        let inv = Invocation::new(json!({"mode": "fib", "n": 20}).to_string());
        let r = sandbox().invoke_async(&g, &inv).await;
        assert!(r.outcome.is_ok(), "{:?}", r.outcome);
        assert!(started.elapsed() < Duration::from_secs(1), "waited for the sleepers: {:?}", started.elapsed());
        for s in sleepers {
            assert_eq!(s.await.unwrap().outcome.unwrap_err().kind, GuestErrorKind::Timeout);
        }
    });
}

/// Pooled memories are reset between invocations: nothing one invocation
/// wrote is seen by the next. And the reset rewrites the pages a guest
/// dirtied in place, however scattered, so the next invocation does not
/// fault them in again (a JS or Python heap is such a guest). 256 pages
/// spread over 32 MiB: more runs of pages than one PAGEMAP_SCAN pass holds
/// (wasmtime 48 decommitted everything after 32 runs) and more memory than
/// `keep_resident` (wasmtime 50 without patches/wasmtime-50.0.1.patch
/// counted every page of a touched page table as dirty, so it reset the
/// first 16 MiB and decommitted the rest).
#[test]
fn memory_is_fresh_for_each_invocation_and_scattered_dirty_pages_stay_resident() {
    let g = hostile();
    let scribble = || {
        let r = call(&g, json!({"mode": "scribble", "n": 32}), Limits::default());
        let Ok(GuestOutcome::Done(out)) = r.outcome else { panic!("{:?}", r.outcome) };
        assert_eq!(out, json!({"stale": 0, "touched": 256}), "an invocation saw memory an earlier one wrote");
    };
    // The first calls fault the slot's pages in and compile nothing more.
    for _ in 0..3 {
        scribble();
    }
    if !wasmtime::PoolingAllocationConfig::is_pagemap_scan_available() {
        eprintln!(
            "SKIPPED (fault count only): this kernel has no PAGEMAP_SCAN (Linux 6.7+), so pooled memories are reset by madvise"
        );
        return;
    }
    let calls = 20;
    let before = minor_faults_of_this_thread();
    for _ in 0..calls {
        scribble();
    }
    let per_call = (minor_faults_of_this_thread() - before) / calls;
    assert!(per_call < 64, "{per_call} page faults per invocation: the reset decommitted pages the guest dirtied");
}

/// Minor page faults of the calling thread, which runs the invocation
/// (`Sandbox::invoke` outside a runtime) and its reset.
fn minor_faults_of_this_thread() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Fields after the command name (which is in parentheses): state is
    // field 3, minflt field 10.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(7).unwrap().parse().unwrap()
}
