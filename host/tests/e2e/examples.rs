//! The guests in examples/, built from source and run through `weft`.
//!
//! Building is part of the test: the JavaScript and Python examples are
//! built with `weft guest build` (the SDKs in guest-sdk/js and
//! guest-sdk/python; the pinned toolchains are installed on first use into
//! weft's cache, `~/.cache/weft/toolchains`), the C one with its build script (which does
//! nothing when its output is newer than its sources). When the example's
//! toolchain is missing (node/npm, python3, clang-19) the test prints
//! `SKIPPED: <reason>` and passes; the build script says so with exit status
//! 77. `examples/setup.sh` installs them all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common::{Outcome, Weft, repo_root};

/// Exit status of a build script whose toolchain is missing.
const SKIP: i32 = 77;

/// Whether `name` is an executable file on PATH.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            let file = dir.join(name);
            file.is_file()
                && std::fs::metadata(&file).is_ok_and(|m| {
                    use std::os::unix::fs::PermissionsExt;
                    m.permissions().mode() & 0o111 != 0
                })
        })
    })
}

/// Says loudly that a test is skipped. Written straight to stderr, which
/// the test harness does not capture (`eprintln!` would only show with
/// `--nocapture` or on failure).
fn skip(example: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: examples/{example}: {reason} ***\n");
}

/// Builds `examples/<example>` with `program args...` (run in the example's
/// folder) and returns the file it printed last on stdout (`weft guest
/// build`), else its `build/guest.wasm`; `None` after printing
/// `SKIPPED` when a tool in `tools` is not on PATH or the script exits 77.
/// Builds run one at a time: two tests must not write the same output, and
/// the machine's cores are better spent on one build at once.
pub(crate) fn build(example: &'static str, tools: &[&str], program: &str, args: &[&str]) -> Option<PathBuf> {
    static BUILT: Mutex<BTreeMap<&str, Option<PathBuf>>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(result) = built.get(example) {
        if result.is_none() {
            skip(example, "its toolchain is missing (see above)");
        }
        return result.clone();
    }
    let result = build_now(example, tools, program, args);
    built.insert(example, result.clone());
    result
}

fn build_now(example: &str, tools: &[&str], program: &str, args: &[&str]) -> Option<PathBuf> {
    if let Some(tool) = tools.iter().find(|t| !on_path(t)) {
        skip(example, &format!("`{tool}` is not on PATH (run examples/setup.sh)"));
        return None;
    }
    let dir = repo_root().join("examples").join(example);
    let started = Instant::now();
    let out = Command::new(program)
        .args(args)
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {program} for examples/{example}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(SKIP) {
        skip(example, stderr.trim());
        return None;
    }
    assert!(
        out.status.success(),
        "building examples/{example} failed ({})\n--- stdout\n{}\n--- stderr\n{stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let wasm = match stdout.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(printed) => PathBuf::from(printed.trim()),
        None => dir.join("build/guest.wasm"),
    };
    assert!(wasm.is_file(), "examples/{example}: the build wrote no {}\n--- stderr\n{stderr}", wasm.display());
    eprintln!("examples/{example}: built in {:.1?}", started.elapsed());
    Some(wasm)
}

/// Builds `examples/<example>` with `weft guest build` (see [`build`]).
pub(crate) fn weft_build(example: &'static str, tools: &[&str]) -> Option<PathBuf> {
    build(example, tools, &crate::common::weft_bin().to_string_lossy(), &["guest", "build"])
}

/// `weft step run GUEST --input INPUT` with a generous timeout (the JS and
/// Python components are big: their first compile takes seconds, and the
/// timeout covers the invocation, which is what it limits).
fn run(weft: &Weft, guest: &Path, input: &Value) -> Outcome {
    weft.step_run(guest, input, &["--timeout-ms", "5000"])
}

/// Asserts a failed step: exit 1, `{"kind": KIND, "message": ..}` on stdout
/// with a message containing `needle`.
#[track_caller]
fn assert_step_error(out: &Outcome, kind: &str, needle: &str) {
    out.expect_code(1);
    let err = out.json();
    assert_eq!(err["kind"], kind, "{err}\n--- stderr\n{}", out.stderr);
    let message = err["message"].as_str().unwrap_or_else(|| panic!("no message in {err}"));
    assert!(message.contains(needle), "message {message:?} does not contain {needle:?}");
    assert!(err.get("retryable").is_some_and(Value::is_boolean), "no retryable flag in {err}");
}

// ---------------------------------------------------------------- Rust ----

#[test]
fn rust_guest_counts_words() {
    let guest = Path::new(weft_test_artifacts::EXAMPLE_RUST_GUEST);
    let weft = Weft::new();

    let out = run(&weft, guest, &json!({"text": "The cat and the hat.\nThe END, isn't it?\n", "top": 2}));
    out.expect_code(0);
    assert_eq!(
        out.json(),
        json!({
            "words": 9, "unique_words": 7, "lines": 2, "chars": 40,
            "top": [{"word": "the", "count": 3}, {"word": "and", "count": 1}],
        })
    );
    assert!(out.stderr.contains("step "), "the guest's log line is missing from stderr:\n{}", out.stderr);

    // Defaults and Unicode: `top` defaults to 3, characters are not bytes,
    // ties are in code point order ('v' < 'ç').
    let out = run(&weft, guest, &json!({"text": "Ça va? ça VA! Ça va."}));
    out.expect_code(0);
    let v = out.json();
    assert_eq!((v["words"].as_u64(), v["unique_words"].as_u64(), v["chars"].as_u64()), (Some(6), Some(2), Some(20)));
    assert_eq!(v["top"], json!([{"word": "va", "count": 3}, {"word": "ça", "count": 3}]));

    // A mistyped input is the guest's own error, reported by the SDK.
    assert_step_error(&run(&weft, guest, &json!({"txt": "x"})), "guest_error", "txt");
    assert_step_error(&run(&weft, guest, &json!({"text": "x", "top": 1000})), "guest_error", "at most 100");
}

// ---------------------------------------------------------- JavaScript ----

#[test]
fn js_guest_slugifies() {
    let Some(guest) = weft_build("js-guest", &["node", "npm"]) else {
        return;
    };
    let weft = Weft::new();

    let out = run(&weft, &guest, &json!({"text": "Héllo, Wörld! Straße — café"}));
    out.expect_code(0);
    assert_eq!(out.json(), json!({"slug": "hello-world-strasse-cafe", "title": "Héllo Wörld Straße Café", "words": 4}));
    assert!(out.stderr.contains("27 characters"), "the guest's log line is missing from stderr:\n{}", out.stderr);

    let out = run(&weft, &guest, &json!({"text": "a very long title indeed", "separator": "_", "maxLength": 10}));
    out.expect_code(0);
    assert_eq!(out.json(), json!({"slug": "a_very", "title": "A Very Long Title Indeed", "words": 5}));

    // The SDK checks the input against the zod schema, naming the field.
    assert_step_error(
        &run(&weft, &guest, &json!({"text": 5})),
        "guest_error",
        "input.text: expected string, got number",
    );
    assert_step_error(&run(&weft, &guest, &json!([1])), "guest_error", "input: expected object, got array");
    assert_step_error(
        &run(&weft, &guest, &json!({"text": "x", "sep": "_"})),
        "guest_error",
        "input: unknown field(s): sep",
    );
    let invalid = run(&weft, &guest, &json!({"text": 5}));
    assert_eq!(
        (invalid.json()["code"].as_str(), invalid.json()["retryable"].as_bool()),
        (Some("invalid_input"), Some(false))
    );
}

// -------------------------------------------------------------- Python ----

#[test]
fn python_guest_summarises_numbers() {
    let Some(guest) = weft_build("python-guest", &["python3"]) else {
        return;
    };
    let weft = Weft::new();

    let out = run(&weft, &guest, &json!({"numbers": [2, 4, 4, 4, 5, 5, 7, 9]}));
    out.expect_code(0);
    assert_eq!(
        out.json(),
        json!({
            "count": 8, "sum": 40, "mean": 5, "median": 4.5, "min": 2, "max": 9,
            "stdev": 2.13809, "variance": 4.571429, "quartiles": [4, 4.5, 6.5], "mode": 4,
        })
    );
    assert!(out.stderr.contains("8 numbers"), "the guest's log line is missing from stderr:\n{}", out.stderr);

    let out = run(&weft, &guest, &json!({"numbers": [1.5, 2.25, 10], "precision": 2}));
    out.expect_code(0);
    let v = out.json();
    assert_eq!((v["mean"].as_f64(), v["stdev"].as_f64(), v["mode"].as_f64()), (Some(4.58), Some(4.71), Some(1.5)));

    // One number: no spread.
    let out = run(&weft, &guest, &json!({"numbers": [3]}));
    out.expect_code(0);
    assert_eq!((out.json()["mean"].as_i64(), out.json()["stdev"].is_null()), (Some(3), true));

    // The SDK checks the input against the type hints, naming the field.
    assert_step_error(
        &run(&weft, &guest, &json!({"numbers": []})),
        "guest_error",
        "input.numbers: must have at least 1 item",
    );
    assert_step_error(
        &run(&weft, &guest, &json!({"numbers": [1, "two"]})),
        "guest_error",
        "input.numbers[1]: expected number, got string",
    );
    let invalid = run(&weft, &guest, &json!({"numbers": []}));
    assert_eq!(
        (invalid.json()["code"].as_str(), invalid.json()["retryable"].as_bool()),
        (Some("invalid_input"), Some(false))
    );
}

// ------------------------------------------------------- C (WASI command) --

#[test]
fn c_guest_reverses_text_and_sees_its_context() {
    let Some(guest) = build("c-guest", &["clang-19"], "sh", &["build.sh"]) else {
        return;
    };
    let weft = Weft::new();

    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    let text = "héllo \"wörld\"\n\u{1F600} x\u{1}\\";
    let out = run(&weft, &guest, &json!({"ignored": [1, {"a": null}], "text": text}));
    out.expect_code(0);
    let v = out.json();
    let reversed: String = text.chars().rev().collect();
    assert_eq!(v["reversed"], reversed.as_str(), "{v}");
    assert_eq!(v["length"], text.chars().count());
    assert_eq!(v["words"], 4);
    let logged = format!("reversing {} code points", text.chars().count());
    assert!(out.stderr.contains(&logged), "the guest's stderr line is missing:\n{}", out.stderr);

    // The step context arrived through the environment.
    let ctx = &v["context"];
    assert_eq!(ctx["attempt"], 1, "{ctx}");
    assert!(ctx["step"].as_str().is_some_and(|s| !s.is_empty()), "WEFT_STEP is empty: {ctx}");
    assert!(ctx["idempotency_key"].as_str().is_some_and(|s| !s.is_empty()), "WEFT_IDEMPOTENCY_KEY is empty: {ctx}");
    assert!(ctx["run_id"].is_string(), "{ctx}");
    let deadline = ctx["deadline_ms"].as_u64().unwrap_or(0);
    let slack = Duration::from_secs(60).as_millis() as u64;
    assert!(
        deadline >= now_ms + 4_000 && deadline <= now_ms + 5_000 + slack,
        "WEFT_DEADLINE_MS {deadline} is not about 5 s after {now_ms}: {ctx}"
    );

    // A non-zero exit is the guest's own error, with its stderr as message or log.
    let out = run(&weft, &guest, &json!({"text": 5}));
    out.expect_code(1);
    assert_eq!(out.json()["kind"], "guest_error", "{}", out.stdout);
    assert!(out.stderr.contains("\"text\" must be a string"), "the guest's error is missing:\n{}", out.stderr);
    assert_step_error(&run(&weft, &guest, &json!({"no_text": true})), "guest_error", "");
    // Bad input is a permanent failure (exit 65): a retry policy leaves it.
    let out = run(&weft, &guest, &json!({"no_text": true}));
    assert_eq!((out.json()["code"].as_str(), out.json()["retryable"].as_bool()), (Some("exit_65"), Some(false)));

    // `"report": true`: the same output, and the reversed text as an
    // artifact, through the `$weft` envelope.
    let dir = weft.dir.path().join("artifacts");
    let out = weft.step_run(
        &guest,
        &json!({"text": "stressed", "report": true}),
        &["--artifacts-dir", dir.to_str().unwrap()],
    );
    out.expect_code(0);
    assert_eq!(out.json()["reversed"], "desserts", "the envelope is unwrapped: {}", out.stdout);
    assert_eq!(std::fs::read_to_string(dir.join("reversed.txt")).unwrap(), "desserts");
}
