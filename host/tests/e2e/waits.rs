//! `wait` steps through the real binary: `weft signal` and `weft emit`
//! with and without a worker, across a SIGKILL of the worker, racing
//! signals, repeated events, wait timeouts handled by a failure edge, run
//! queues (`--key`) and `worker --until-idle` with a waiting run. The
//! approval example (examples/workflows/approval.json) is the workflow.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Outcome, Weft, repo_root, step};

fn approval() -> PathBuf {
    repo_root().join("examples/workflows/approval.json")
}

/// The approval example with its wait's timeout set to `ms`.
fn approval_with_timeout(w: &Weft, ms: u64) -> PathBuf {
    let mut def: Value = serde_json::from_str(&std::fs::read_to_string(approval()).unwrap()).unwrap();
    def["steps"][1]["wait"]["timeout_ms"] = json!(ms);
    let f = w.dir.path().join("approval-short.json");
    std::fs::write(&f, def.to_string()).unwrap();
    f
}

/// Polls `runs show` until `done` holds (20 s at most).
pub(crate) fn wait_until(w: &Weft, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let run = w.show(id);
        if done(&run) {
            return run;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{what} never happened: {run}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn detach(w: &Weft, file: &std::path::Path, input: &Value, extra: &[&str]) -> String {
    let mut args = vec!["run", file.to_str().unwrap(), "--input"];
    let input = input.to_string();
    args.push(&input);
    args.push("--detach");
    args.extend_from_slice(extra);
    let out = w.run(&args);
    out.expect_code(0);
    out.stdout.trim().to_string()
}

/// A `weft worker` killed (SIGKILL) when dropped.
pub(crate) struct Worker(Child);

impl Worker {
    /// The worker's log goes to the test's stderr: the test harness shows it
    /// only when the test fails, which is when it says why.
    pub(crate) fn start(w: &Weft) -> Worker {
        Worker(w.cmd().arg("worker").stderr(Stdio::inherit()).spawn().unwrap())
    }

    pub(crate) fn kill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn signal(w: &Weft, id: &str, step: &str, data: &Value) -> Outcome {
    w.run(&["signal", id, step, "--data", &data.to_string()])
}

pub(crate) fn events(w: &Weft, id: &str) -> Vec<Value> {
    let out = w.run(&["runs", "events", id, "--json"]);
    out.expect_code(0);
    out.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

pub(crate) fn count(evs: &[Value], kind: &str, step: &str) -> usize {
    evs.iter().filter(|e| e["kind"] == kind && e["step"] == step).count()
}

on_both_stores! { fn the_approval_example_survives_a_kill_and_takes_invalid_then_valid_answers(w) {
    let id = detach(&w, &approval(), &json!({"order": "A-7", "amount": 12.5}), &[]);
    let worker = Worker::start(&w);
    let run = wait_until(&w, &id, "input-required", |r| r["state"] == "input-required");
    let waits = run["waits"].as_array().unwrap();
    assert_eq!(waits.len(), 1, "{run}");
    assert_eq!(waits[0]["step"], "approve");
    assert_eq!(waits[0]["prompt"], "Approve the refund of 12.5 for order A-7?", "refs in the prompt resolved");
    assert_eq!(waits[0]["schema"]["required"], json!(["approved", "by"]));
    let preview = json!({"order": "A-7", "amount": 12.5, "message": "Refund of 12.5 for order A-7 needs your approval"});
    assert_eq!(waits[0]["preview"], preview, "what the answer is about, refs resolved");
    assert!(waits[0]["until"].as_str().unwrap().ends_with('Z'), "the one-day timeout is stored: {run}");
    let human = w.run(&["runs", "show", &id]);
    assert!(human.stdout.contains(&format!("weft signal {id} approve --data JSON")), "{}", human.stdout);
    worker.kill();

    let worker = Worker::start(&w);
    let bad = signal(&w, &id, "approve", &json!({"approved": "yes"}));
    bad.expect_code(2);
    assert_eq!(bad.json()["status"], "invalid");
    assert!(bad.stderr.contains("data/approved"), "{}", bad.stderr);
    assert!(bad.stderr.contains("\"by\" is a required property"), "{}", bad.stderr);
    let run = w.show(&id);
    assert_eq!(run["state"], "input-required", "an invalid answer changes nothing: {run}");
    assert_eq!(step(&run, "approve")["state"], "waiting");

    let ok = signal(&w, &id, "approve", &json!({"approved": true, "by": "ada"}));
    ok.expect_code(0);
    assert_eq!(ok.json(), json!({"status": "accepted", "output": {"approved": true, "by": "ada"}}));
    let late = signal(&w, &id, "approve", &json!({"approved": false, "by": "bob"}));
    late.expect_code(1);
    assert_eq!(late.json(), json!({"status": "already_resolved", "state": "succeeded"}));

    let run = wait_until(&w, &id, "completion", |r| r["state"] == "completed");
    assert_eq!(run["output"]["refunded"], "Refunded 12.5 for order A-7, approved by ada");
    assert_eq!(run["output"]["declined"], Value::Null);
    assert_eq!(step(&run, "decline")["state"], "skipped");
    assert_eq!(step(&run, "escalate")["state"], "skipped");
    assert_eq!(run["waits"], json!([]));
    let evs = events(&w, &id);
    assert_eq!(count(&evs, "step.succeeded", "notify"), 1, "notify ran once across the kill");
    assert_eq!(count(&evs, "step.succeeded", "approve"), 1);
    drop(worker);
} }

on_both_stores! { fn without_a_worker_a_foreground_run_exits_3_and_a_signal_is_kept_for_the_next_worker(w) {
    let input = json!({"order": "B-1", "amount": 3}).to_string();
    let out = w.run(&["run", approval().to_str().unwrap(), "--input", &input]);
    out.expect_code(3);
    let id = w.run(&["runs", "list", "--json"]).json()[0]["id"].as_str().unwrap().to_string();
    assert!(out.stderr.contains(&format!("weft signal {id} approve --data JSON")), "{}", out.stderr);

    // Answers are checked even with nobody executing the run.
    signal(&w, &id, "nope", &json!({})).expect_code(2);
    signal(&w, "r_0000000000000000000000000a", "approve", &json!({})).expect_code(2);
    signal(&w, &id, "notify", &json!({})).expect_code(1); // not a wait step
    w.run(&["signal", &id, "approve", "--data", "{not json"]).expect_code(2);
    w.run(&["signal", &id, "approve"]).expect_code(2);
    signal(&w, &id, "approve", &json!({"approved": false, "by": "cy"})).expect_code(0);
    let run = w.show(&id);
    assert_eq!(step(&run, "approve")["state"], "succeeded", "{run}");
    assert_eq!(step(&run, "decline")["state"], "pending", "nothing runs until a worker does: {run}");

    w.run(&["worker", "--until-idle"]).expect_code(0);
    let run = w.show(&id);
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"]["declined"], "Refund for order B-1 declined by cy");
} }

on_both_stores! { fn fifty_concurrent_signals_to_one_step_accept_exactly_one(w) {
    let id = detach(&w, &approval(), &json!({"order": "C-3", "amount": 9}), &[]);
    let _worker = Worker::start(&w);
    wait_until(&w, &id, "input-required", |r| r["state"] == "input-required");
    let children: Vec<(String, Child)> = (0..50)
        .map(|i| {
            let by = format!("p{i}");
            let data = json!({"approved": true, "by": by}).to_string();
            let child = w
                .cmd()
                .args(["signal", &id, "approve", "--data", &data])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            (by, child)
        })
        .collect();
    let mut winners = vec![];
    let mut told_resolved = 0;
    for (by, child) in children {
        let out = child.wait_with_output().unwrap();
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        match out.status.code() {
            Some(0) => {
                assert_eq!(answer["status"], "accepted");
                winners.push(by);
            }
            Some(1) => {
                assert_eq!(answer["status"], "already_resolved", "{answer}");
                told_resolved += 1;
            }
            other => panic!("signal {by} exited {other:?}: {answer}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one signal wins: {winners:?}");
    assert_eq!(told_resolved, 49);
    let run = wait_until(&w, &id, "completion", |r| r["state"] == "completed");
    assert_eq!(step(&run, "approve")["output"]["by"], winners[0].as_str(), "the winner's data is the output");
    assert_eq!(count(&events(&w, &id), "step.succeeded", "approve"), 1);
} }

on_both_stores! { fn an_event_reaches_only_matching_waits_and_a_repeated_id_resolves_nothing(w) {
    let def = json!({"name": "paid", "version": 1,
        "input_schema": {"type": "object", "required": ["order"]},
        "steps": [{"name": "paid", "wait": {"event": "order.paid", "match": {"order": "@input.order"}}}],
        "output": "@paid.amount"});
    let f = w.dir.path().join("paid.json");
    std::fs::write(&f, def.to_string()).unwrap();
    let a = detach(&w, &f, &json!({"order": "A"}), &[]);
    let b = detach(&w, &f, &json!({"order": "B"}), &[]);
    let _worker = Worker::start(&w);
    for id in [&a, &b] {
        let run = wait_until(&w, id, "the wait", |r| step(r, "paid")["state"] == "waiting");
        assert_eq!(run["state"], "working", "an event wait is not input-required");
    }
    let emit = |data: Value, id: &str| {
        let out = w.run(&["emit", "order.paid", "--data", &data.to_string(), "--id", id]);
        out.expect_code(0);
        out.json()
    };
    let first = emit(json!({"order": "A", "amount": 5}), "ev-1");
    assert_eq!(first["duplicate"], false);
    assert_eq!(first["delivered"], json!([{"run": a, "step": "paid"}]));
    // The same id again (even with other data) resolves nothing.
    let again = emit(json!({"order": "B", "amount": 6}), "ev-1");
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["delivered"], first["delivered"]);
    let run = wait_until(&w, &a, "completion", |r| r["state"] == "completed");
    assert_eq!(run["output"], 5);
    assert_eq!(step(&w.show(&b), "paid")["state"], "waiting", "B still waits");
    // An event nobody waits for is delivered nowhere.
    assert_eq!(emit(json!({"order": "Z"}), "ev-2")["delivered"], json!([]));
    emit(json!({"order": "B", "amount": 7}), "ev-3");
    let run = wait_until(&w, &b, "completion", |r| r["state"] == "completed");
    assert_eq!(run["output"], 7);
    assert_eq!(count(&events(&w, &a), "step.succeeded", "paid"), 1);
} }

on_both_stores! { fn a_wait_timeout_is_a_timeout_error_the_failure_edge_handles(w) {
    let f = approval_with_timeout(&w, 400);
    let id = detach(&w, &f, &json!({"order": "D-4", "amount": 1}), &[]);
    let _worker = Worker::start(&w);
    let run = wait_until(&w, &id, "completion", |r| r["state"] == "completed");
    let approve = step(&run, "approve");
    assert_eq!(approve["state"], "failed", "{run}");
    assert_eq!(approve["error"]["kind"], "timeout", "{run}");
    assert_eq!(step(&run, "escalate")["state"], "succeeded");
    assert_eq!(step(&run, "refund")["state"], "skipped");
    assert_eq!(
        run["output"]["escalated"],
        "Nobody approved the refund for order D-4 in time: escalated to the finance lead"
    );
    // Too late now.
    signal(&w, &id, "approve", &json!({"approved": true, "by": "ada"})).expect_code(1);
} }

on_both_stores! { fn a_sleeping_run_and_a_waiting_run_both_resume_after_a_kill(w) {
    let nap = json!({"name": "nap", "version": 1, "steps": [{"name": "nap", "sleep": {"ms": 1200}}]});
    let f = w.dir.path().join("nap.json");
    std::fs::write(&f, nap.to_string()).unwrap();
    let sleeper = detach(&w, &f, &json!({}), &[]);
    let waiter = detach(&w, &approval(), &json!({"order": "E-5", "amount": 2}), &[]);
    let worker = Worker::start(&w);
    wait_until(&w, &sleeper, "the sleep", |r| step(r, "nap")["state"] == "waiting");
    wait_until(&w, &waiter, "input-required", |r| r["state"] == "input-required");
    worker.kill();
    std::thread::sleep(Duration::from_millis(1300)); // the outage outlasts the sleep

    let _worker = Worker::start(&w);
    signal(&w, &waiter, "approve", &json!({"approved": true, "by": "ada"})).expect_code(0);
    let run = wait_until(&w, &waiter, "completion", |r| r["state"] == "completed");
    assert_eq!(run["output"]["refunded"], "Refunded 2 for order E-5, approved by ada");
    wait_until(&w, &sleeper, "completion", |r| r["state"] == "completed");
    assert_eq!(count(&events(&w, &sleeper), "step.succeeded", "nap"), 1, "the timer fired once");
    assert_eq!(count(&events(&w, &waiter), "step.succeeded", "notify"), 1);
} }

on_both_stores! { fn runs_with_one_key_execute_one_at_a_time_in_order(w) {
    let first = detach(&w, &approval(), &json!({"order": "F-1", "amount": 1}), &["--key", "customer-9"]);
    let second = detach(&w, &approval(), &json!({"order": "F-2", "amount": 2}), &["--key", "customer-9"]);
    let other = detach(&w, &approval(), &json!({"order": "G-1", "amount": 3}), &["--key", "customer-10"]);
    let _worker = Worker::start(&w);
    wait_until(&w, &first, "input-required", |r| r["state"] == "input-required");
    wait_until(&w, &other, "input-required", |r| r["state"] == "input-required");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.show(&second)["state"], "submitted", "the second run of the key waits its turn");
    signal(&w, &first, "approve", &json!({"approved": true, "by": "ada"})).expect_code(0);
    wait_until(&w, &first, "completion", |r| r["state"] == "completed");
    wait_until(&w, &second, "its turn", |r| r["state"] == "input-required");
    signal(&w, &second, "approve", &json!({"approved": false, "by": "ada"})).expect_code(0);
    let run = wait_until(&w, &second, "completion", |r| r["state"] == "completed");
    assert_eq!(run["output"]["declined"], "Refund for order F-2 declined by ada");
    let input = json!({"order": "F-3", "amount": 3}).to_string();
    let blank = w.run(&["run", approval().to_str().unwrap(), "--key", " ", "--detach", "--input", &input]);
    blank.expect_code(2);
    assert!(blank.stderr.contains("--key"), "{}", blank.stderr);
} }

on_both_stores! { fn worker_until_idle_returns_while_a_run_waits_for_input(w) {
    let id = detach(&w, &approval(), &json!({"order": "H-8", "amount": 4}), &[]);
    let t0 = Instant::now();
    w.run(&["worker", "--until-idle"]).expect_code(0);
    assert!(t0.elapsed() < Duration::from_secs(10), "it did not wait for the one-day timeout");
    assert_eq!(w.show(&id)["state"], "input-required");
} }

/// A wait per item: one order each, with its own prompt.
fn per_item(w: &Weft) -> PathBuf {
    let def = json!({"name": "ship-each", "steps": [
        {"name": "approve", "for_each": "@input.orders",
         "wait": {"prompt": "Ship @item?", "schema": {"type": "object", "required": ["ok"]}}},
        {"name": "done", "return": "@approve"}]});
    w.write_def("ship-each", &def)
}

on_both_stores! { fn a_for_each_wait_takes_its_items_with_and_without_a_worker(w) {
    let input = json!({"orders": ["a", "b"]}).to_string();
    let out = w.run(&["run", per_item(&w).to_str().unwrap(), "--input", &input]);
    out.expect_code(3);
    let id = w.run(&["runs", "list", "--json"]).json()[0]["id"].as_str().unwrap().to_string();
    assert!(out.stderr.contains("approve item 0, approve item 1"), "{}", out.stderr);
    let run = w.show(&id);
    let waits: Vec<(Value, Value)> =
        run["waits"].as_array().unwrap().iter().map(|w| (w["item"].clone(), w["prompt"].clone())).collect();
    assert_eq!(waits, vec![(json!(0), json!("Ship a?")), (json!(1), json!("Ship b?"))], "{run}");
    let human = w.run(&["runs", "show", &id]);
    assert!(human.stdout.contains(&format!("weft signal {id} approve --item 1 --data JSON")), "{}", human.stdout);

    // No worker: the answer is committed to the store as item 1's attempt.
    let no_item = signal(&w, &id, "approve", &json!({"ok": true}));
    no_item.expect_code(1);
    assert!(no_item.stderr.contains("say which with `item` (waiting: 0, 1)"), "{}", no_item.stderr);
    let one = w.run(&["signal", &id, "approve", "--item", "1", "--data", r#"{"ok": "b"}"#]);
    one.expect_code(0);
    assert_eq!(one.json(), json!({"status": "accepted", "output": {"ok": "b"}, "item": 1, "waiting_items": [0]}));
    w.run(&["signal", &id, "approve", "--item", "1", "--data", r#"{"ok": 1}"#]).expect_code(1);
    w.run(&["signal", &id, "approve", "--item", "2", "--data", r#"{"ok": 1}"#]).expect_code(2);
    let run = w.show(&id);
    assert_eq!(run["state"], "input-required", "item 0 still waits: {run}");
    assert_eq!(run["waits"].as_array().unwrap().len(), 1, "{run}");

    // A worker owns the store: the last answer reaches it and the run ends.
    let worker = Worker::start(&w);
    let last = w.run(&["signal", &id, "approve", "--item", "0", "--data", r#"{"ok": "a"}"#]);
    last.expect_code(0);
    assert_eq!(last.json()["waiting_items"], json!([]));
    let run = wait_until(&w, &id, "completion", |r| r["state"] == "completed");
    assert_eq!(run["output"], json!([{"ok": "a"}, {"ok": "b"}]), "answers in item order");
    drop(worker);
} }

/// for_each over waits and over child runs, played through MCP
/// (tests/mcp-clients/items_check.py, the official Python SDK, the real
/// server-everything): each order waits on its own, answered out of
/// order by item, then one child run per order echoes it.
#[test]
fn for_each_over_waits_and_child_runs_through_mcp() {
    let w = Weft::new();
    let seen = crate::serve_recording::play(&w, &crate::tools::everything_toml("everything"), "items_check.py");
    let started = &seen["started"];
    assert_eq!(started["state"], "input-required", "{started}");
    let prompts: Vec<&Value> = started["waits"].as_array().unwrap().iter().map(|w| &w["prompt"]).collect();
    assert_eq!(prompts, vec!["Ship order a (1 units)?", "Ship order b (2 units)?", "Ship order c (3 units)?"]);
    let note = started["note"].as_str().unwrap();
    assert!(note.contains(r#""step": "approve", "item": 0"#), "{note}");
    let no_item = &seen["no_item"];
    assert_eq!(
        (no_item["is_error"].clone(), no_item["structured"]["status"].clone()),
        (json!(true), json!("not_waiting"))
    );
    assert!(no_item["text"].as_str().unwrap().contains("waiting: 0, 1, 2"), "{no_item}");
    assert_eq!(seen["no_such_item"]["structured"]["status"], "not_found", "{seen}");
    assert_eq!(seen["answers"]["2"]["waiting_items"], json!([0, 1]), "{seen}");
    assert_eq!(seen["answers"]["0"]["waiting_items"], json!([1]), "{seen}");
    assert_eq!(seen["again"]["structured"]["status"], "already_resolved", "{seen}");
    let waiting: Vec<&Value> = seen["waiting"].as_array().unwrap().iter().map(|w| &w["item"]).collect();
    assert_eq!(waiting, vec![&json!(1)], "run_get lists only the item left");
    assert!(seen["last"].get("waiting_items").is_none(), "none left: {}", seen["last"]);
    let run = &seen["run"];
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"]["answers"], json!([{"ok": false}, {"ok": true}, {"ok": true}]), "{run}");
    let shipped = run["output"]["shipped"].to_string();
    for id in ["a", "b", "c"] {
        assert!(shipped.contains(&format!("ship {id}")), "one child run per order: {shipped}");
    }
    let sleep = &seen["sleep_each"];
    assert_eq!(sleep["valid"], false, "{sleep}");
    assert_eq!(sleep["problems"][0]["path"], "/steps/0/for_each", "{sleep}");
    let typo = &seen["typo"];
    assert_eq!(typo["valid"], true, "the schema allows other fields: a warning, not a problem: {typo}");
    assert_eq!(typo["warnings"][0]["path"], "/steps/0/return/greeting", "{typo}");
    assert!(typo["warnings"][0]["message"].as_str().unwrap().contains("lists no property `nmae`"), "{typo}");
}
