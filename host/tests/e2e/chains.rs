//! Long chains and wide fan-outs of every kind of guest, through `weft run`:
//! components (Rust, JavaScript, Python) and WASI commands (C, Rust
//! wasip1), each repeated so that a race shows.
//!
//! Why: a chain of WASI-command steps once hung every run. Once a guest's
//! recent calls were short, its attempts ran in place on the run driver's
//! async thread, where a command's stdio (wasmtime-wasi's blocking bridge)
//! panicked ("Cannot start a runtime from within a runtime"), the driver
//! died and the run stayed `working` for good. No test ran more than one
//! command step in a row. Every run here must finish, with the right
//! output, within a bound; a hang fails the test (the process is killed).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Outcome, Weft};
use crate::examples::{build, weft_build};

/// Steps in a chain (the report: 15).
const CHAIN: usize = 15;
/// Items of a fan-out, and how many run at once (the report: 10 and 3).
const ITEMS: usize = 10;
const CONCURRENCY: u32 = 3;

/// How a guest is chained: its first input, and the input of a later step
/// from the previous step's name.
struct Kind {
    name: &'static str,
    guest: PathBuf,
    first: Value,
    next: fn(&str) -> Value,
    /// The item input of a fan-out (`@item` is a number).
    item: Value,
    /// Rounds of each shape (commands more: they raced).
    rounds: usize,
}

/// Runs `def` with `weft run` and returns its output, failing on a hang
/// (2 minutes: JS and Python components compile on first use).
fn run_def(w: &Weft, name: &str, def: &Value) -> (Value, Outcome) {
    let file = w.dir.path().join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_string_pretty(def).unwrap()).unwrap();
    let out = w.run_within(Duration::from_secs(120), &["run", file.to_str().unwrap()]);
    assert!(!out.stderr.contains("panicked"), "{name}: a thread panicked:\n{}", out.stderr);
    out.expect_code(0);
    (out.json(), out)
}

fn chain(k: &Kind) -> Value {
    let steps: Vec<Value> = (0..CHAIN)
        .map(|i| {
            let input = if i == 0 { k.first.clone() } else { (k.next)(&format!("s{}", i - 1)) };
            json!({"name": format!("s{i}"), "code": {"path": k.guest}, "input": input})
        })
        .collect();
    json!({"name": format!("chain-{}", k.name), "steps": steps, "output": format!("@s{}", CHAIN - 1)})
}

fn fan_out(k: &Kind) -> Value {
    let items: Vec<usize> = (0..ITEMS).collect();
    json!({"name": format!("fan-{}", k.name), "steps": [
        {"name": "each", "for_each": items, "concurrency": CONCURRENCY, "code": {"path": k.guest}, "input": k.item}
    ], "output": "@each"})
}

/// Every round of a chain and of a fan-out finishes, with outputs that
/// show each step saw its predecessor's output (`check_chain`) and each
/// item its own input (`check_item`).
fn exercise(k: Kind, check_chain: impl Fn(&Value), check_item: impl Fn(usize, &Value)) {
    let w = Weft::new();
    for round in 0..k.rounds {
        let (out, _) = run_def(&w, &format!("chain-{round}"), &chain(&k));
        check_chain(&out);
        let (out, _) = run_def(&w, &format!("fan-{round}"), &fan_out(&k));
        let items = out.as_array().unwrap_or_else(|| panic!("{}: the fan-out's output is not an array: {out}", k.name));
        assert_eq!(items.len(), ITEMS, "{}: {out}", k.name);
        for (i, v) in items.iter().enumerate() {
            check_item(i, v);
        }
    }
    // Every run completed (none left working).
    let list = w.run(&["runs", "list", "--json"]);
    list.expect_code(0);
    let runs = list.json();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2 * k.rounds, "{}", list.stdout);
    assert!(runs.iter().all(|r| r["state"] == "completed"), "{}: {}", k.name, list.stdout);
}

#[test]
fn c_command_chains_and_fan_outs_finish_every_time() {
    let Some(guest) = build("c-guest", &["clang-19"], "sh", &["build.sh"]) else {
        return;
    };
    let text = "stressed desserts";
    let k = Kind {
        name: "c",
        guest,
        first: json!({"text": text}),
        next: |prev| json!({"text": format!("@{prev}.reversed")}),
        item: json!({"text": "item @item"}),
        rounds: 6,
    };
    let reversed: String = text.chars().rev().collect();
    exercise(
        k,
        // 15 reversals: the text reversed.
        |out| assert_eq!(out["reversed"], json!(reversed), "{out}"),
        |i, v| assert_eq!(v["reversed"], json!(format!("item {i}").chars().rev().collect::<String>()), "{v}"),
    );
}

#[test]
fn rust_command_chains_and_fan_outs_finish_every_time() {
    let k = Kind {
        name: "rust-command",
        guest: Path::new(weft_test_artifacts::HOSTILE_COMMAND).to_path_buf(),
        first: json!({"mode": "ok", "echo": 0}),
        next: |prev| json!({"mode": "ok", "echo": format!("@{prev}.echo")}),
        item: json!({"mode": "ok", "echo": "@item"}),
        rounds: 6,
    };
    exercise(k, |out| assert_eq!(out["echo"], json!(0), "{out}"), |i, v| assert_eq!(v["echo"], json!(i), "{v}"));
}

#[test]
fn rust_component_chains_and_fan_outs_finish_every_time() {
    let k = Kind {
        name: "rust",
        guest: Path::new(weft_test_artifacts::EXAMPLE_RUST_GUEST).to_path_buf(),
        first: json!({"text": "one two three"}),
        // "words @prev.words" has two words once the ref is resolved.
        next: |prev| json!({"text": format!("words @{prev}.words")}),
        item: json!({"text": "item @item"}),
        rounds: 3,
    };
    exercise(k, |out| assert_eq!(out["words"], json!(2), "{out}"), |_, v| assert_eq!(v["words"], json!(2), "{v}"));
}

#[test]
fn js_component_chains_and_fan_outs_finish_every_time() {
    let Some(guest) = weft_build("js-guest", &["node", "npm"]) else {
        return;
    };
    let k = Kind {
        name: "js",
        guest,
        first: json!({"text": "hello wide world"}),
        next: |prev| json!({"text": format!("@{prev}.title")}),
        item: json!({"text": "item @item"}),
        rounds: 2,
    };
    exercise(
        k,
        |out| assert_eq!(out["title"], json!("Hello Wide World"), "{out}"),
        |i, v| assert_eq!(v["slug"], json!(format!("item-{i}")), "{v}"),
    );
}

#[test]
fn python_component_chains_and_fan_outs_finish_every_time() {
    let Some(guest) = weft_build("python-guest", &["python3"]) else {
        return;
    };
    let k = Kind {
        name: "python",
        guest,
        first: json!({"numbers": [1, 2, 3]}),
        // The previous step's count (3) keeps the mean at 2.
        next: |prev| json!({"numbers": [1, 2, format!("@{prev}.count")]}),
        item: json!({"numbers": ["@item", "@item"]}),
        rounds: 2,
    };
    exercise(
        k,
        |out| assert_eq!((out["count"].as_i64(), out["mean"].as_f64()), (Some(3), Some(2.0)), "{out}"),
        |i, v| assert_eq!(v["mean"].as_f64(), Some(i as f64), "{v}"),
    );
}
