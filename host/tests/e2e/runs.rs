//! Workflow runs through the CLI: `weft run`, `runs list|show|events|cancel`,
//! `templates`, and `weft worker`, against the example workflow in
//! examples/workflows/ (bundled plugins only).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::common::{Weft, repo_root, step};

fn example() -> PathBuf {
    repo_root().join("examples/workflows/order-digest.json")
}

fn example_input(highlight: bool) -> Value {
    json!({
        "csv": "id,customer,amount\nA-1,ada,12.5\nA-2,bob,7\nA-3,cy,30",
        "notes": "see ORD-100, and ORD-205 for the refund",
        "highlight": highlight,
    })
}

fn run_example(w: &Weft, input: &Value, extra: &[&str]) -> crate::common::Outcome {
    let file = example();
    let input = input.to_string();
    let mut args = vec!["run", file.to_str().unwrap(), "--input", &input];
    args.extend_from_slice(extra);
    w.run(&args)
}

on_both_stores! { fn the_example_runs_branches_a_when_a_retry_a_failure_handler_and_a_for_each(w) {
    let out = run_example(&w, &example_input(true), &[]);
    out.expect_code(0);
    let output = out.json();
    let lines: Vec<&str> = output["lines"].as_array().unwrap().iter().map(|l| l["text"].as_str().unwrap()).collect();
    assert_eq!(lines, ["#0 A-1 ada: 12.5", "#1 A-2 bob: 7", "#2 A-3 cy: 30"]);
    assert_eq!(output["valid"], true);
    let refs: Vec<&str> =
        output["order_refs"].as_array().unwrap().iter().map(|m| m["groups"]["num"].as_str().unwrap()).collect();
    assert_eq!(refs, ["100", "205"]);
    assert_eq!(output["top_customer"], "ada");
    assert_eq!(output["summary"], "rows valid: true; enrichment unavailable");
    // Progress went to stderr (plain lines: stderr is not a terminal here).
    assert!(out.stderr.contains("step enrich: failed after 3 attempts"), "{}", out.stderr);

    let list = w.runs();
    assert_eq!(list.len(), 1, "{list:?}");
    let id = list[0]["id"].as_str().unwrap().to_string();
    assert_eq!(list[0]["state"], "completed");
    assert_eq!(list[0]["template"], "order-digest");

    let run = w.show(&id);
    // The exact top-level shape (docs/cli.md, "The run as JSON").
    let mut keys: Vec<&str> = run.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "artifacts",
            "created_at",
            // Its definition has a `timeout_ms`: when it times out.
            "deadline",
            "error",
            "id",
            "input",
            "output",
            "parent",
            "resume",
            "state",
            "steps",
            "template",
            "updated_at",
            "version",
            "waits"
        ]
    );
    assert!(run["deadline"].as_str() > run["created_at"].as_str(), "its deadline is after its start: {run}");
    assert_eq!(run["waits"], json!([]), "a finished run waits for nothing");
    assert_eq!(run["id"], id.as_str());
    assert_eq!(run["version"], 1);
    assert_eq!(run["state"], "completed");
    assert_eq!(run["input"], example_input(true));
    assert_eq!(run["output"], output);
    assert_eq!(run["error"], Value::Null);
    assert_eq!(run["parent"], Value::Null);
    assert!(run["created_at"].as_str().unwrap().ends_with('Z'));
    let names: Vec<&str> = run["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["parse", "refs", "check", "lines", "top", "enrich", "enrich_fallback", "summary"]);
    for s in run["steps"].as_array().unwrap() {
        // The shape of docs/cli.md ("The run as JSON"), plus what each attempt was given:
        // `input` (the latest attempt's, refs resolved), `tries` (every
        // attempt, when there are several), `items` (a for_each step's) and
        // `description` (the definition's).
        let mut k: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
        k.retain(|k| !["input", "tries", "items", "description"].contains(k));
        k.sort();
        assert_eq!(k, ["attempts", "ended_at", "error", "name", "output", "started_at", "state"], "{s}");
    }
    assert_eq!(step(&run, "parse")["input"]["csv"], example_input(true)["csv"], "the resolved input");
    assert_eq!(step(&run, "parse")["description"], "CSV to rows");
    // The resume block: each step with its description and state.
    let resumed = &run["resume"]["steps"][0];
    assert_eq!((resumed["name"].as_str(), resumed["description"].as_str()), (Some("parse"), Some("CSV to rows")));
    assert_eq!(resumed["state"], "succeeded", "{resumed}");
    let tries = step(&run, "lines")["tries"].as_array().unwrap();
    assert_eq!(tries.len(), 3, "one per item");
    let items = json!({"succeeded": 3, "failed": 0, "canceled": 0, "unfinished": 0});
    assert_eq!(step(&run, "lines")["items"], items, "three attempts, one per item");
    assert_eq!(tries[1]["item"], 1);
    assert!(tries.iter().all(|t| t["input"].is_object() && t["state"] == "succeeded"), "{tries:?}");
    assert_eq!(step(&run, "parse")["attempts"], 1);
    assert_eq!(step(&run, "lines")["state"], "succeeded");
    assert_eq!(step(&run, "lines")["attempts"], 3, "one attempt per item");
    assert_eq!(step(&run, "top")["state"], "succeeded");
    let enrich = step(&run, "enrich");
    assert_eq!(enrich["state"], "failed");
    assert_eq!(enrich["attempts"], 3);
    assert_eq!(enrich["error"]["kind"], "fuel_exhausted");
    assert_eq!(step(&run, "enrich_fallback")["state"], "succeeded");
    assert_eq!(step(&run, "summary")["output"]["text"], "rows valid: true; enrichment unavailable");

    // The human form names every step; the event log is ordered.
    let human = w.run(&["runs", "show", &id]);
    human.expect_code(0);
    assert!(human.stdout.contains("enrich_fallback") && human.stdout.contains("attempt 3"), "{}", human.stdout);
    let events = w.run(&["runs", "events", &id, "--json"]);
    events.expect_code(0);
    let seqs: Vec<u64> =
        events.stdout.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["seq"].as_u64().unwrap()).collect();
    assert!(seqs.len() > 10 && seqs.windows(2).all(|p| p[1] == p[0] + 1), "{seqs:?}");
    let followed = w.run(&["runs", "events", &id, "--follow"]);
    followed.expect_code(0);
    assert!(followed.stdout.contains("run.completed"), "{}", followed.stdout);

    // A false `when` skips the step without cascading; `--json` prints the run.
    let out = run_example(&w, &example_input(false), &["--json"]);
    out.expect_code(0);
    let run = out.json();
    assert_eq!(run["state"], "completed");
    assert_eq!(step(&run, "top")["state"], "skipped");
    assert_eq!(run["output"]["top_customer"], Value::Null);
    assert_eq!(run["output"]["summary"], "rows valid: true; enrichment unavailable");
    assert_eq!(w.runs().len(), 2);
} }

on_both_stores! { fn a_failing_run_exits_1_with_its_error(w) {
    let def = json!({"name": "fails", "steps": [
        {"name": "pick", "code": {"plugin": "json-select"}, "input": {"data": {"a": 1}, "path": "b"}},
        {"name": "after_pick", "code": {"plugin": "json-select"}, "input": {"data": "@pick", "path": ""}}
    ]});
    let file = w.write_file("fails.json", &def);
    let out = w.run(&["run", file.to_str().unwrap()]);
    out.expect_code(1);
    let err = out.json();
    assert_eq!(err["kind"], "guest_error", "{err}");
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    let run = w.show(&id);
    assert_eq!(run["state"], "failed");
    assert_eq!(run["error"]["kind"], "guest_error");
    assert_eq!(step(&run, "pick")["state"], "failed");
    assert_eq!(step(&run, "after_pick")["state"], "skipped");
    // --json prints the failed run and still exits 1.
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(1);
    assert_eq!(out.json()["state"], "failed");
} }

on_both_stores! { fn invalid_definitions_and_inputs_exit_2_and_store_nothing(w) {
    let def = json!({"name": "bad", "steps": [
        {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": "@nope", "path": "x"}},
        {"name": "b", "code": {"plugin": "no-such-plugin"}}
    ]});
    let file = w.write_file("bad.json", &def);
    let out = w.run(&["run", file.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("/steps/0/input"), "{}", out.stderr);
    assert!(out.stderr.contains("/steps/1/code"), "{}", out.stderr);
    assert_eq!(w.runs(), Vec::<Value>::new());

    // An input that fails input_schema: every problem with its path.
    let out = run_example(&w, &json!({"csv": 5}), &[]);
    out.expect_code(2);
    assert!(out.stderr.contains("input/csv"), "{}", out.stderr);
    assert!(out.stderr.contains("notes"), "{}", out.stderr);
    let out = run_example(&w, &json!({}), &["--detach"]);
    out.expect_code(2);
    let file = example();
    let out = w.run(&["run", file.to_str().unwrap(), "--input", "{not json"]);
    out.expect_code(2);
    assert_eq!(w.runs(), Vec::<Value>::new());

    // Broken waits and sleeps are refused before anything is stored.
    let waiter = w.write_file(
        "wait.json",
        &json!({"name": "zz", "steps": [
            {"name": "ask", "wait": {"schema": {"type": "nope"}}},
            {"name": "nap", "sleep": {}}
        ]}),
    );
    let out = w.run(&["run", waiter.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("/steps/0/wait/schema"), "{}", out.stderr);
    assert!(out.stderr.contains("/steps/1/sleep"), "{}", out.stderr);
    assert_eq!(w.runs(), Vec::<Value>::new());

    // Unknown runs and templates.
    for args in [
        &["runs", "show", "r_0000000000000000000000000a"][..],
        &["runs", "show", "nope"],
        &["runs", "events", "r_0000000000000000000000000a"],
        &["runs", "cancel", "r_0000000000000000000000000a"],
        &["run", "no-such-template"],
        &["runs", "list", "--status", "sleeping"],
    ] {
        let out = w.run(args);
        out.expect_code(2);
        assert!(out.stderr.contains("error:"), "{args:?}: {}", out.stderr);
    }
} }

on_both_stores! { fn a_detached_run_is_executed_by_a_worker(w) {
    let input_file = w.dir.path().join("input.json");
    std::fs::write(&input_file, example_input(true).to_string()).unwrap();
    let example = example();
    let out = w.run(&["run", example.to_str().unwrap(), "--input-file", input_file.to_str().unwrap(), "--detach"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    assert!(id.starts_with("r_"), "{id}");
    assert_eq!(w.show(&id)["state"], "submitted");

    // A second detached run is canceled before any worker sees it.
    let out = run_example(&w, &example_input(false), &["--detach"]);
    out.expect_code(0);
    let canceled = out.stdout.trim().to_string();
    w.run(&["runs", "cancel", &canceled]).expect_code(0);
    let run = w.show(&canceled);
    assert_eq!(run["state"], "canceled");
    assert!(run["steps"].as_array().unwrap().iter().all(|s| s["state"] == "canceled"), "{run}");

    let out = w.run(&["worker", "--until-idle"]);
    out.expect_code(0);
    let run = w.show(&id);
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"]["top_customer"], "ada");
    assert_eq!(w.show(&canceled)["state"], "canceled");
    let done = w.run(&["runs", "list", "--status", "completed", "--json"]);
    assert_eq!(done.json().as_array().unwrap().len(), 1);
    // Nothing left: an idle worker exits at once.
    w.run(&["worker", "--until-idle"]).expect_code(0);
} }

on_both_stores! { fn templates_are_saved_versioned_run_and_deleted(w) {
    let file = example();
    let out = w.run(&["templates", "save", file.to_str().unwrap()]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({"name": "order-digest", "version": 1}));
    let out = w.run(&["templates", "save", file.to_str().unwrap()]);
    assert_eq!(out.json(), json!({"name": "order-digest", "version": 2}));

    let list = w.run(&["templates", "list", "--json"]);
    list.expect_code(0);
    let list = list.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["name"], "order-digest");
    assert_eq!(list[0]["version"], 2);
    let human = w.run(&["templates", "list"]);
    assert!(human.stdout.contains("order-digest"), "{}", human.stdout);

    let shown = w.run(&["templates", "show", "order-digest", "--version", "1"]);
    shown.expect_code(0);
    let shown = shown.json();
    assert_eq!(shown["version"], 1);
    assert_eq!(shown["definition"]["steps"][0]["name"], "parse");
    w.run(&["templates", "show", "order-digest", "--version", "9"]).expect_code(2);

    let out = w.run(&["run", "order-digest", "--input", &example_input(true).to_string(), "--json"]);
    out.expect_code(0);
    let run = out.json();
    assert_eq!(run["template"], "order-digest");
    assert_eq!(run["version"], 2, "a run pins the latest version");
    assert_eq!(run["output"]["top_customer"], "ada");
    let by_template = w.run(&["runs", "list", "--template", "order-digest", "--json"]);
    assert_eq!(by_template.json().as_array().unwrap().len(), 1);

    // `weft graph` draws the template, and the run with its steps' states.
    let out = w.run(&["graph", "order-digest"]);
    out.expect_code(0);
    assert!(out.stdout.contains("s_parse") && !out.stdout.contains("classDef"), "{}", out.stdout);
    let out = w.run(&["graph", run["id"].as_str().unwrap(), "--format", "mermaid"]);
    out.expect_code(0);
    assert!(out.stdout.contains("class s_parse succeeded"), "{}", out.stdout);
    assert!(out.stdout.contains("class s_enrich failed"), "{}", out.stdout);
    w.run(&["graph", "r_00000000000000000000000000"]).expect_code(2);

    w.run(&["templates", "delete", "order-digest"]).expect_code(0);
    w.run(&["templates", "show", "order-digest"]).expect_code(2);
    w.run(&["templates", "delete", "order-digest"]).expect_code(2);
    w.run(&["run", "order-digest"]).expect_code(2);
    // The run keeps its pinned plan.
    assert_eq!(w.show(run["id"].as_str().unwrap())["state"], "completed");
} }

#[test]
fn a_second_worker_is_refused_while_the_first_holds_the_lock() {
    let w = Weft::new();
    let mut first =
        w.cmd().args(["worker"]).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().expect("start weft worker");
    let mut stderr = BufReader::new(first.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("owns"), "the first worker did not take the lock: {line:?}");
    // Keep draining its stderr.
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        rest
    });

    let second = w.run(&["worker", "--until-idle"]);
    second.expect_code(1);
    assert!(second.stderr.contains("already owned"), "{}", second.stderr);
    assert!(second.stderr.contains(&format!("pid {}", first.id())), "{}", second.stderr);

    // `weft run` hands its run to the owner and follows it to the end.
    let out = run_example(&w, &example_input(true), &[]);
    out.expect_code(0);
    assert!(out.stderr.contains("owned by"), "{}", out.stderr);
    assert_eq!(out.json()["top_customer"], "ada");

    // SIGTERM stops the worker cleanly.
    let killed = std::process::Command::new("kill").args(["-TERM", &first.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = first.wait().unwrap();
    let rest = drain.join().unwrap();
    assert!(status.success(), "{status:?}: {rest}");
    assert!(rest.contains("stopped"), "{rest}");
    // The lock is free again.
    w.run(&["worker", "--until-idle"]).expect_code(0);
}

/// A workflow whose first step spins until its per-attempt timeout.
fn spinning(w: &Weft, timeout_ms: u64, attempts: u32) -> PathBuf {
    let def = json!({"name": "spin", "steps": [
        {"name": "spin", "code": {"path": weft_test_artifacts::HOSTILE}, "input": {"mode": "loop"},
         "timeout_ms": timeout_ms, "limits": {"fuel": 100_000_000_000_000u64},
         "retry": {"max_attempts": attempts, "initial_delay_ms": 10, "jitter": false}},
        {"name": "after", "code": {"plugin": "json-select"}, "input": {"data": "@spin", "path": ""}}
    ]});
    w.write_file("spin.json", &def)
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !f() {
        assert!(std::time::Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

on_both_stores! { fn a_run_killed_mid_attempt_is_resumed_by_a_worker(w) {
    let file = spinning(&w, 1500, 2);
    let mut child =
        w.cmd().args(["run", file.to_str().unwrap()]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    wait_for("the first attempt", || {
        w.runs().first().is_some_and(|r| w.show(r["id"].as_str().unwrap())["steps"][0]["state"] == "running")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    assert_eq!(w.show(&id)["state"], "working");

    let out = w.run(&["worker", "--until-idle"]);
    out.expect_code(0);
    // (On PostgreSQL the dead process's runs are taken over once its lease ends.)
    assert!(
        out.stderr.contains("resuming 1 unfinished run") || out.stderr.contains("took over 1 run"),
        "{}",
        out.stderr
    );
    let run = w.show(&id);
    // The killed attempt is interrupted, not failed: it runs again as
    // attempt 1 and times out, and so does the retry (attempt 2).
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(step(&run, "spin")["attempts"], 2, "{run}");
    let events = w.run(&["runs", "events", &id]);
    assert!(events.stdout.contains("attempt.interrupted"), "{}", events.stdout);
    assert_eq!(step(&run, "spin")["error"]["kind"], "timeout");
    assert_eq!(step(&run, "after")["state"], "skipped");
} }

on_both_stores! { fn canceling_a_run_a_worker_executes_stops_it(w) {
    let file = spinning(&w, 60_000, 1);
    let mut worker = w.cmd().args(["worker"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = BufReader::new(worker.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("owns") || line.contains("works on"), "{line:?}");
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        rest
    });
    let out = w.run(&["run", file.to_str().unwrap(), "--detach"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    wait_for("the attempt to start", || w.show(&id)["steps"][0]["state"] == "running");
    let follower = w.cmd().args(["runs", "events", &id, "--follow"]).stdout(Stdio::piped()).spawn().unwrap();
    w.run(&["runs", "cancel", &id]).expect_code(0);
    let followed = follower.wait_with_output().unwrap();
    assert!(followed.status.success());
    let followed = String::from_utf8_lossy(&followed.stdout).into_owned();
    assert!(followed.contains("step.running") && followed.contains("run.canceled"), "{followed}");
    let run = w.show(&id);
    assert_eq!(run["state"], "canceled");
    assert_eq!(run["error"]["kind"], "canceled");
    assert_eq!(step(&run, "spin")["state"], "canceled");
    assert_eq!(step(&run, "after")["state"], "canceled");
    // The worker interrupts the guest, so it has nothing in flight at SIGTERM.
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::process::Command::new("kill").args(["-TERM", &worker.id().to_string()]).status().unwrap();
    let started = std::time::Instant::now();
    assert!(worker.wait().unwrap().success());
    let rest = drain.join().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{rest}");
    assert!(!rest.contains("in flight"), "{rest}");
} }

/// The example's `highlight` is optional (its README says `top` is then
/// skipped): a run without it completes.
#[test]
fn the_example_runs_without_its_optional_field() {
    let w = Weft::new();
    let mut input = example_input(false);
    input.as_object_mut().unwrap().remove("highlight");
    let out = run_example(&w, &input, &["--json"]);
    out.expect_code(0);
    let run = out.json();
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(step(&run, "top")["state"], "skipped", "{run}");
}
