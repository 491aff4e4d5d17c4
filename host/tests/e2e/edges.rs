//! The workflow rules of edges and joins through the binary, with bundled
//! plugins: an edge that follows a skip, an edge with a `when`, a `join:
//! any` that outlives a failed branch (and fails with every error when no
//! branch succeeds), a `race` that cancels the timer that lost; `weft
//! graph` labels the edges. Event `match` takes nested subsets and JSON
//! Pointers; a child run shows its depth.

use serde_json::{Value, json};

use crate::common::Weft;

fn step<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["steps"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap()
}

/// A step that outputs `v`.
fn says(name: &str, v: &str) -> Value {
    json!({"name": name, "code": {"plugin": "json-select"}, "input": {"data": {"v": v}, "path": "v"}})
}

/// A step that fails (a path its data does not have).
fn fails(name: &str) -> Value {
    json!({"name": name, "code": {"plugin": "json-select"}, "input": {"data": {"a": 1}, "path": "nope"}})
}

fn with(mut step: Value, field: &str, v: Value) -> Value {
    step[field] = v;
    step
}

#[test]
fn skip_edges_edge_conditions_and_joins_that_outlive_a_failure() {
    let w = Weft::new();
    let def = json!({"name": "rules", "steps": [
        with(says("check", "big"), "when", json!({"ref": "@input.n", "gt": 10})),
        with(says("fallback", "small"), "after", json!([{"step": "check", "on": "skipped"}])),
        with(says("loud", "loud"), "after", json!([{"step": "check", "when": {"ref": "@check", "eq": "big"}}])),
        fails("flaky"),
        with(with(says("either", "went on"), "join", json!("any")), "after", json!(["flaky", "fallback"])),
        {"name": "out", "return": {"fallback": "@fallback", "loud": "@loud", "either": "@either"},
         "after": [{"step": "either", "on": "always"}, {"step": "loud", "on": "always"}, {"step": "flaky", "on": "always"}, {"step": "fallback", "on": "always"}]}
    ]});
    let file = w.write_def("rules", &def);
    let out = w.run(&["run", file.to_str().unwrap(), "--input", r#"{"n": 3}"#]);
    out.expect_code(0);
    // `check` was skipped: `fallback` ran on the skip, `loud`'s edge did not
    // fire (skipped, not cascading), `either` went on although `flaky` failed.
    assert_eq!(out.json(), json!({"fallback": "small", "loud": null, "either": "went on"}), "{}", out.stderr);
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    let run = w.show(&id);
    assert_eq!(step(&run, "flaky")["state"], "failed");
    assert_eq!(step(&run, "loud")["state"], "skipped");

    let out = w.run(&["run", file.to_str().unwrap(), "--input", r#"{"n": 30}"#]);
    out.expect_code(0);
    // `check` ran: `fallback`'s edge did not fire and `loud`'s did; `either`
    // has no branch that succeeded, so it fails with `flaky`'s error (its
    // `always` edge to `out` handles that).
    assert_eq!(out.json(), json!({"fallback": null, "loud": "loud", "either": null}), "{}", out.stderr);
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    let either = step(&w.show(&id), "either").clone();
    assert_eq!(either["state"], "failed", "{either}");
    assert!(either["error"]["message"].as_str().unwrap().contains("`flaky` failed"), "{either}");
    let graph = w.run(&["graph", file.to_str().unwrap()]);
    graph.expect_code(0);
    assert!(graph.stdout.contains("s_check -. skipped .-> s_fallback"), "{}", graph.stdout);
    assert!(graph.stdout.contains(r#"s_check -->|"when @check eq #quot;big#quot;"| s_loud"#), "{}", graph.stdout);
}

#[test]
fn a_join_any_with_no_success_fails_with_every_error_and_a_race_cancels_the_timer() {
    let w = Weft::new();
    let def = json!({"name": "none", "steps": [
        fails("a"), fails("b"),
        with(with(says("either", "x"), "join", json!("any")), "after", json!(["a", "b"]))
    ]});
    let file = w.write_def("none", &def);
    w.run(&["run", file.to_str().unwrap()]).expect_code(1);
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    let run = w.show(&id);
    let e = &step(&run, "either")["error"];
    assert_eq!(e["kind"], "dependency_failed", "{run}");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("`a` failed") && m.contains("`b` failed"), "{m}");

    let race = json!({"name": "race", "steps": [
        {"name": "timer", "sleep": {"ms": 600000}},
        says("fast", "first"),
        with(with(says("first", "done"), "join", json!("race")), "after", json!(["timer", "fast"]))
    ]});
    let file = w.write_def("race", &race);
    let t0 = std::time::Instant::now();
    w.run(&["run", file.to_str().unwrap()]).expect_code(0);
    assert!(t0.elapsed().as_secs() < 60, "the race did not wait for the ten-minute timer");
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    assert_eq!(step(&w.show(&id), "timer")["state"], "canceled");
}

#[test]
fn an_event_matches_a_nested_subset_or_a_pointer() {
    let w = Weft::new();
    let def = json!({"name": "reply", "steps": [
        {"name": "nested", "wait": {"event": "chat", "match": {"raw": {"discord": {"replyToMessageId": "@input.id"}}}}},
        {"name": "pointer", "wait": {"event": "chat", "match": {"/raw/discord/replyToMessageId": "@input.id"}}},
        {"name": "out", "return": {"a": "@nested.text", "b": "@pointer.text"}}
    ]});
    let file = w.write_def("reply", &def);
    let out = w.run(&["run", file.to_str().unwrap(), "--input", r#"{"id": "m1"}"#, "--detach"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    // A worker starts the run: both steps wait (then it exits, idle).
    w.run(&["worker", "--until-idle"]).expect_code(0);
    assert_eq!(w.show(&id)["waits"].as_array().unwrap().len(), 2);
    let other = json!({"text": "no", "raw": {"discord": {"replyToMessageId": "m2", "guild": "g"}}});
    let none = w.run(&["emit", "chat", "--data", &other.to_string()]);
    none.expect_code(0);
    assert_eq!(none.json()["delivered"], json!([]), "another message's reply matches nothing");
    let reply = json!({"text": "yes", "raw": {"discord": {"replyToMessageId": "m1", "guild": "g"}, "more": 1}});
    let both = w.run(&["emit", "chat", "--data", &reply.to_string()]);
    both.expect_code(0);
    assert_eq!(both.json()["delivered"].as_array().unwrap().len(), 2, "{}", both.stdout);
    w.run(&["worker", "--until-idle"]).expect_code(0);
    let run = w.show(&id);
    assert_eq!(run["output"], json!({"a": "yes", "b": "yes"}), "{run}");
}

/// The same rules through MCP (tests/mcp-clients/rules_check.py, the
/// official Python SDK).
#[test]
fn edges_and_joins_through_mcp() {
    let seen = crate::serve_recording::play(&Weft::new(), "", "rules_check.py");
    let run = &seen["run"];
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"], json!({"fallback": "small", "loud": null, "either": "went on"}), "{run}");
    let got = &seen["got"];
    assert_eq!(step(got, "flaky")["state"], "failed", "{got}");
    assert_eq!(step(got, "loud")["state"], "skipped", "{got}");
    let wrong = &seen["wrong"];
    assert_eq!(wrong["valid"], false, "{wrong}");
    assert_eq!(wrong["problems"][0]["path"], "/steps/2/after/0/when/ref", "{wrong}");
    let note = seen["event_wait"]["note"].as_str().unwrap();
    assert!(note.contains("step `answer` waits for the event `chat`"), "{note}");
    assert_eq!(seen["emitted"]["delivered"].as_array().unwrap().len(), 1, "{seen}");
    let optional = &seen["optional"];
    assert_eq!(optional["valid"], true, "{optional}");
    assert!(optional["warnings"][0]["message"].as_str().unwrap().contains("the `?` after `@input.x` is kept as text"));
}
