//! Unit tests of the sandbox with small hand-written WAT guests. The real
//! guests (Rust, C, JS, Python) are exercised end to end in host/tests.

use std::time::Duration;

use super::*;

/// A WASI command that writes `text` to fd `fd` and exits with `code`
/// (or loops, or grows memory, when `body` says so).
fn command(body: &str) -> String {
    format!(
        r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 100) "{{\"ok\":true}}")
  (data (i32.const 200) "not json")
  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))))
  (func (export "_start") {body}))"#
    )
}

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxConfig { max_concurrent: 4, ..SandboxConfig::default() }, None).expect("sandbox")
}

fn run(s: &Sandbox, wat: &str, limits: Limits) -> InvokeResult {
    let g = s.load(wat.as_bytes()).expect("loads");
    let mut inv = Invocation::new("{}");
    inv.limits = limits;
    s.invoke(&g, &inv)
}

fn err_kind(r: &InvokeResult) -> GuestErrorKind {
    match &r.outcome {
        Err(e) => e.kind,
        Ok(o) => panic!("expected an error, got {o:?}"),
    }
}

#[test]
fn a_command_guest_returns_its_stdout_as_json() {
    let s = sandbox();
    let r = run(&s, &command("(call $write (i32.const 1) (i32.const 100) (i32.const 11))"), Limits::default());
    assert_eq!(r.outcome, Ok(GuestOutcome::Done(serde_json::json!({"ok": true}))));
}

#[test]
fn stderr_lines_become_logs_and_exit_codes_become_guest_errors() {
    let s = sandbox();
    let body = "(call $write (i32.const 2) (i32.const 200) (i32.const 8)) (call $exit (i32.const 3))";
    let r = run(&s, &command(body), Limits::default());
    assert_eq!(err_kind(&r), GuestErrorKind::GuestError);
    let e = r.outcome.unwrap_err();
    assert!(e.message.contains("code 3") && e.message.contains("not json"), "{}", e.message);
    assert_eq!(r.report.logs[0].message, "not json");
}

#[test]
fn invalid_json_output_is_invalid_output() {
    let s = sandbox();
    let r = run(&s, &command("(call $write (i32.const 1) (i32.const 200) (i32.const 8))"), Limits::default());
    assert_eq!(err_kind(&r), GuestErrorKind::InvalidOutput);
}

#[test]
fn an_infinite_loop_times_out_near_its_deadline_and_the_next_call_works() {
    let s = sandbox();
    let limits = Limits { fuel: None, timeout: Duration::from_millis(100), ..Limits::default() };
    let r = run(&s, &command("(loop (br 0))"), limits);
    assert_eq!(err_kind(&r), GuestErrorKind::Timeout);
    assert!(r.elapsed >= Duration::from_millis(100) && r.elapsed < Duration::from_millis(600), "{:?}", r.elapsed);
    let ok = run(&s, &command("(call $write (i32.const 1) (i32.const 100) (i32.const 11))"), Limits::default());
    assert!(ok.outcome.is_ok());
}

#[test]
fn an_infinite_loop_runs_out_of_fuel() {
    let s = sandbox();
    let limits = Limits { fuel: Some(1_000_000), ..Limits::default() };
    let r = run(&s, &command("(loop (br 0))"), limits);
    assert_eq!(err_kind(&r), GuestErrorKind::FuelExhausted);
}

/// A guest looping forever, given `fuel`, canceled after 50 ms.
fn canceled_loop(s: &Sandbox, fuel: Option<u64>) -> InvokeResult {
    let g = s.load(command("(loop (br 0))").as_bytes()).unwrap();
    let mut inv = Invocation::new("{}");
    inv.limits.fuel = fuel;
    let cancel = inv.cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        cancel.cancel();
    });
    let r = s.invoke(&g, &inv);
    t.join().unwrap();
    r
}

#[test]
fn cancel_interrupts_a_running_guest() {
    let r = canceled_loop(&sandbox(), None);
    assert_eq!(err_kind(&r), GuestErrorKind::Canceled);
    assert!(r.elapsed < Duration::from_secs(2));
}

#[test]
fn growing_memory_past_the_limit_is_memory_limit() {
    let s = sandbox();
    let limits = Limits { memory_bytes: 2 << 20, ..Limits::default() };
    let r = run(&s, &command("(loop (drop (memory.grow (i32.const 1))) (br 0))"), limits);
    assert_eq!(err_kind(&r), GuestErrorKind::MemoryLimit);
}

#[test]
fn a_stdout_flood_is_output_too_large() {
    let s = sandbox();
    let limits = Limits { output_bytes: 1000, ..Limits::default() };
    let body = "(loop (call $write (i32.const 1) (i32.const 100) (i32.const 11)) (br 0))";
    let limits = Limits { fuel: Some(10_000_000), ..limits };
    let r = run(&s, &command(body), limits);
    // The flood either runs out of fuel after the cap was passed or stops;
    // either way, what the guest produced is over the cap.
    assert_eq!(err_kind(&r), GuestErrorKind::OutputTooLarge);
}

#[test]
fn bad_bytes_are_refused_with_a_clear_error() {
    let s = sandbox();
    assert!(matches!(s.load(b"hello"), Err(SandboxError::Load(LoadError::NotWasm(_)))));
    assert!(matches!(s.load(b"\0asm\x01\0\0\0\xff"), Err(SandboxError::Load(LoadError::Invalid(_)))));
    let no_start = "(module (func (export \"main\")))";
    assert!(matches!(s.load(no_start.as_bytes()), Err(SandboxError::Load(LoadError::NotCommand(_)))));
    let odd_import = "(module (import \"env\" \"f\" (func)) (func (export \"_start\")))";
    assert!(matches!(s.load(odd_import.as_bytes()), Err(SandboxError::Load(LoadError::NotCommand(_)))));
    let empty_component = "(component)";
    match s.load(empty_component.as_bytes()) {
        Err(SandboxError::Load(LoadError::WrongWorld(m))) => {
            assert!(m.contains("run") || m.contains("describe"), "{m}")
        }
        Err(other) => panic!("expected WrongWorld, got {other}"),
        Ok(_) => panic!("expected WrongWorld, got a guest"),
    }
}

#[test]
fn the_cache_serves_a_second_sandbox_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let wat = command("(call $write (i32.const 1) (i32.const 100) (i32.const 11))");
    let a = Sandbox::new(SandboxConfig { max_concurrent: 2, ..SandboxConfig::default() }, Some(dir.path())).unwrap();
    a.load(wat.as_bytes()).unwrap();
    let entries: Vec<_> = std::fs::read_dir(a.cache().dir().unwrap()).unwrap().collect();
    assert_eq!(entries.len(), 1, "one artifact written");
    // A differently configured engine must not share the entry.
    let b = Sandbox::new(
        SandboxConfig { fuel_metering: true, max_concurrent: 2, ..SandboxConfig::default() },
        Some(dir.path()),
    )
    .unwrap();
    assert_ne!(a.cache().dir(), b.cache().dir());
    // A corrupt entry is ignored and replaced, not trusted.
    let entry = entries[0].as_ref().unwrap().path();
    std::fs::write(&entry, b"garbage").unwrap();
    let c = Sandbox::new(SandboxConfig { max_concurrent: 2, ..SandboxConfig::default() }, Some(dir.path())).unwrap();
    let g = c.load(wat.as_bytes()).unwrap();
    assert!(c.invoke(&g, &Invocation::new("{}")).outcome.is_ok());
    assert_ne!(std::fs::read(&entry).unwrap(), b"garbage");
}

/// The runner's path: a stored guest pinned by digest is loaded from its
/// cached artifact without its blob being read (an unreadable blob does
/// not matter then); the bytes are read, and checked, only to compile —
/// for the first load, or for the fuel-metered engine.
#[test]
fn a_stored_guest_is_read_only_when_it_must_be_compiled() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let registry = registry::Registry::new(dir.path(), vec![]);
    let wat = command("(call $write (i32.const 1) (i32.const 100) (i32.const 11))");
    let digest = registry.put_blob(wat.as_bytes()).unwrap();
    let blob = dir.path().join(format!("plugins/blobs/{digest}.wasm"));
    let fresh =
        || Sandbox::new(SandboxConfig { max_concurrent: 2, ..SandboxConfig::default() }, Some(dir.path())).unwrap();
    // First load: compiled from the blob, cached.
    fresh().load_pinned(digest, registry.stored(&digest).unwrap()).unwrap();
    // A new process: the artifact is mapped and the blob never opened (a
    // root test process could still read a 0o000 file: swap in a folder).
    let kept = std::fs::read(&blob).unwrap();
    std::fs::remove_file(&blob).unwrap();
    std::fs::create_dir(&blob).unwrap();
    std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o000)).unwrap();
    let s = fresh();
    let g = s.load_pinned(digest, registry.stored(&digest).unwrap()).unwrap();
    assert!(s.invoke(&g, &Invocation::new("{}")).outcome.is_ok());
    // A CPU budget needs the metered engine, which has no artifact yet: now
    // the bytes are read, and the unreadable blob is a host error.
    let mut budgeted = Invocation::new("{}");
    budgeted.limits.fuel = Some(1_000_000);
    let err = s.invoke(&g, &budgeted).outcome.unwrap_err();
    assert!(err.message.contains("cannot prepare the guest for fuel metering"), "{}", err.message);
    // Without a cached artifact, an altered blob is refused, never compiled.
    std::fs::remove_dir(&blob).unwrap();
    let mut altered = kept.clone();
    altered.extend_from_slice(b" ;; altered");
    std::fs::write(&blob, &altered).unwrap();
    std::fs::remove_dir_all(s.cache().dir().unwrap()).unwrap();
    let err = fresh().load_pinned(digest, registry.stored(&digest).unwrap()).err().expect("refused");
    assert!(err.to_string().contains("do not match their digest"), "{err}");
    // Restored, it compiles again and the metered engine runs it.
    std::fs::write(&blob, &kept).unwrap();
    let s = fresh();
    let g = s.load_pinned(digest, registry.stored(&digest).unwrap()).unwrap();
    assert!(s.invoke(&g, &budgeted).outcome.is_ok());
}

/// By default the engine meters no fuel (every guest would pay for it);
/// an invocation with a budget runs on a fuel-metered engine built on
/// demand, so the budget holds and the fuel used is reported.
#[test]
fn a_fuel_budget_runs_on_a_metered_engine_built_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let s = Sandbox::new(SandboxConfig { max_concurrent: 2, ..SandboxConfig::default() }, Some(dir.path())).unwrap();
    assert!(!SandboxConfig::default().fuel_metering);
    let g = s.load(std::fs::read(weft_test_artifacts::HOSTILE).unwrap().as_slice()).unwrap();
    let fib = Invocation::new(r#"{"mode": "fib", "n": 20}"#);
    let plain = s.invoke(&g, &fib);
    assert!(plain.outcome.is_ok(), "{:?}", plain.outcome);
    assert_eq!(plain.fuel_used, None, "no fuel is counted without a budget");
    assert_eq!(std::fs::read_dir(s.cache().dir().unwrap()).unwrap().count(), 1, "only the main engine compiled");
    let mut budgeted = fib.clone();
    budgeted.limits.fuel = Some(1_000_000_000);
    let metered = s.invoke(&g, &budgeted);
    assert!(metered.outcome.is_ok(), "{:?}", metered.outcome);
    let used = metered.fuel_used.expect("fuel is counted with a budget");
    assert!(used > 1000 && used < 1_000_000_000, "{used}");
    // The same work costs about the same fuel (the guest's runtime varies
    // by a few dozen units from call to call); a smaller budget stops it.
    let again = s.invoke(&g, &budgeted).fuel_used.unwrap();
    assert!(again.abs_diff(used) * 100 < used, "{used} then {again}");
    budgeted.limits.fuel = Some(used / 2);
    let short = s.invoke(&g, &budgeted);
    assert_eq!(short.outcome.unwrap_err().kind, GuestErrorKind::FuelExhausted);
    let dirs = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(dirs, 2, "the metered engine has a cache folder of its own");
}

/// A guest with a CPU budget runs on the metered engine, which compiles in
/// no epoch checks; its deadline and cancel still stop it: when computing,
/// at its next fuel yield; when it spends its time in host calls (here 1
/// MiB of random bytes each, a few fuel per call, so it would not yield for
/// hours), at its next host call.
#[test]
fn a_budgeted_guest_meets_its_deadline_and_cancel_though_its_engine_checks_no_epochs() {
    let s = sandbox();
    let huge = Some(1_000_000_000_000_000);
    let limits = Limits { fuel: huge, timeout: Duration::from_millis(200), ..Limits::default() };
    let r = run(&s, &command("(loop (br 0))"), limits.clone());
    assert_eq!(err_kind(&r), GuestErrorKind::Timeout, "{:?}", r.outcome);
    assert!(r.elapsed >= Duration::from_millis(200) && r.elapsed < Duration::from_millis(700), "{:?}", r.elapsed);
    let tier = s.metered.get().expect("built").as_ref().expect("no error");
    assert_eq!(tier.calls, invoke::Calls::Metered);

    let random = r#"(module
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (memory (export "memory") 257)
  (func (export "_start") (loop (drop (call $random (i32.const 0) (i32.const 1048576))) (br 0))))"#;
    let r = run(&s, random, limits);
    assert_eq!(err_kind(&r), GuestErrorKind::Timeout, "{:?}", r.outcome);
    eprintln!("host-call loop stopped after {:?}", r.elapsed);
    assert!(r.elapsed < Duration::from_millis(700), "{:?}", r.elapsed);
    let used = r.fuel_used.expect("counted");
    assert!(used < invoke::FUEL_SLICE, "stopped by a host call's check, not at a yield: {used} fuel");

    let r = canceled_loop(&s, huge);
    assert_eq!(err_kind(&r), GuestErrorKind::Canceled);
    assert!(r.elapsed < Duration::from_millis(500), "{:?}", r.elapsed);
}

/// With no guest armed for [`config::IDLE_AFTER`], the epoch ticker
/// sleeps (an idle server wakes no thread 500 times a second); a guest
/// arming wakes it, and the guest's deadline holds. Two sandboxes, so two
/// tickers, one of whose engines is dropped while both sleep: the guest
/// wakes both, and the dropped one's ends. (The counts are the process's:
/// nextest runs each test in a process of its own.)
#[test]
fn the_epoch_ticker_sleeps_while_no_guest_runs_and_wakes_for_one() {
    use std::sync::atomic::Ordering;
    let (s, gone) = (sandbox(), sandbox());
    let ok = command("(call $write (i32.const 1) (i32.const 100) (i32.const 11))");
    assert!(run(&s, &ok, Limits::default()).outcome.is_ok());
    assert_eq!(config::SLEEPING.load(Ordering::SeqCst), 0, "they tick right after a guest");
    let since = std::time::Instant::now();
    while config::SLEEPING.load(Ordering::SeqCst) < 2 {
        assert!(since.elapsed() < Duration::from_secs(5), "the tickers never slept");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(since.elapsed() >= config::IDLE_AFTER - Duration::from_millis(100), "{:?}", since.elapsed());
    drop(gone);
    let limits = Limits { fuel: None, timeout: Duration::from_millis(100), ..Limits::default() };
    let r = run(&s, &command("(loop (br 0))"), limits);
    assert_eq!(err_kind(&r), GuestErrorKind::Timeout);
    assert!(r.elapsed < Duration::from_millis(600), "{:?}", r.elapsed);
    assert_eq!(config::SLEEPING.load(Ordering::SeqCst), 0, "a guest woke both (the dropped one's ended)");
}

// Fuzzing the decoding of a guest's output (docs/reliability.md, "fuzzing"):
// any bytes, nested without bound, are a value or a classified error,
// never a panic or a stack overflow. `PROPTEST_CASES=N` runs longer.
proptest::proptest! {
    #[test]
    fn any_guest_output_decodes_or_is_refused(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512), depth in 0usize..100_000) {
        let limits = Limits::default();
        match invoke::parse_output(&bytes, false, &limits) {
            Ok(GuestOutcome::Done(v)) => proptest::prop_assert_eq!(serde_json::to_vec(&v).is_ok(), true),
            Ok(other) => proptest::prop_assert!(false, "{other:?}"),
            Err(e) => proptest::prop_assert!(matches!(e.kind, GuestErrorKind::InvalidOutput | GuestErrorKind::OutputTooLarge)),
        }
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let r = invoke::parse_output(deep.as_bytes(), false, &limits);
        proptest::prop_assert!(r.is_ok() || r.unwrap_err().kind == GuestErrorKind::InvalidOutput);
    }
}
