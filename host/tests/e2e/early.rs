//! Signals and events that come before their wait, through the real
//! binary on both stores: a signal from another process while the run is
//! not started (no worker) and an event while it sleeps (a worker owns
//! the store) are both kept; the worker is killed (SIGKILL) with them
//! kept, and the next worker's waits take them when they start.

use serde_json::{Value, json};

use crate::common::{Weft, step};
use crate::waits::{Worker, count, detach, events, signal, wait_until};

fn early(w: &Weft) -> std::path::PathBuf {
    let def = json!({"name": "early-race", "version": 1,
    "input_schema": {"type": "object", "required": ["msg"], "properties": {"msg": {"type": "string"}}},
    "steps": [
        {"name": "pause", "sleep": {"ms": 1500}},
        {"name": "approve", "after": ["pause"], "wait": {"prompt": "Ship it?",
            "schema": {"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}}}},
        {"name": "reply", "after": ["pause"], "wait": {"event": "reply", "match": {"raw": {"to": "@input.msg"}}}},
        {"name": "out", "return": {"approved": "@approve.approved", "reply": "@reply.raw.text"}}
    ]});
    let f = w.dir.path().join("early.json");
    std::fs::write(&f, def.to_string()).unwrap();
    f
}

on_both_stores! { fn a_signal_and_an_event_before_their_waits_are_kept_across_a_kill(w) {
    let before = w.run(&["emit", "reply", "--data", r#"{"raw": {"to": "m1", "text": "too early"}}"#]);
    before.expect_code(0);
    let id = detach(&w, &early(&w), &json!({"msg": "m1"}), &[]);

    // No worker: this process decides. Checked against the schema now.
    let bad = signal(&w, &id, "approve", &json!({"approved": "yes"}));
    bad.expect_code(2);
    assert_eq!(bad.json()["status"], "invalid", "{}", bad.stdout);
    let queued = signal(&w, &id, "approve", &json!({"approved": true}));
    queued.expect_code(0);
    assert_eq!(queued.json()["status"], "queued", "{}", queued.stdout);
    assert!(queued.stderr.contains("does not wait yet"), "{}", queued.stderr);

    // A worker owns the store: the emit goes through its inbox, while
    // the run sleeps. Nothing waits yet; the event is kept.
    let worker = Worker::start(&w);
    wait_until(&w, &id, "the sleep", |r| step(r, "pause")["state"] == "waiting");
    let emitted = w.run(&["emit", "reply", "--data", r#"{"raw": {"to": "m1", "text": "hello", "extra": 1}}"#]);
    emitted.expect_code(0);
    assert_eq!(emitted.json()["delivered"], json!([]), "{}", emitted.stdout);
    worker.kill();
    let evs = events(&w, &id);
    assert_eq!(count(&evs, "signal.queued", "approve"), 1, "{evs:?}");
    assert_eq!(step(&w.show(&id), "approve")["state"], "pending");

    let _worker = Worker::start(&w);
    let run = wait_until(&w, &id, "completion", |r| r["state"] == "completed" || r["state"] == "failed");
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"], json!({"approved": true, "reply": "hello"}), "not the event from before the run");
    let evs = events(&w, &id);
    let took: Vec<&Value> = evs.iter().filter(|e| e["kind"] == "step.succeeded" && e["step"] == "reply").collect();
    assert!(took[0]["data"]["event_id"].as_str().is_some_and(|s| !s.is_empty()), "{took:?}");
    assert_eq!(count(&evs, "step.succeeded", "approve"), 1);
    let again = signal(&w, &id, "approve", &json!({"approved": false}));
    assert_eq!(again.json()["status"], "already_resolved", "{}", again.stdout);
} }
