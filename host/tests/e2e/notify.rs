//! Notifications through the real binary, to real receivers: webhooks
//! verified by the Standard Webhooks libraries (Python's `standardwebhooks`
//! from PyPI, and the npm one), retried with one id (500, 500, 200), kept
//! across SIGKILLs of the worker (none lost over 20), in order per key over
//! 50 runs, and an MCP tool of a FastMCP upstream called with the
//! delivery's idempotency key; `weft notifications` lists and resends.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Weft, repo_root};
use crate::serve_recording::python;
use crate::waits::{Worker, detach, signal, wait_until};

pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A webhook receiver (tests/webhooks), killed when dropped.
pub(crate) struct Receiver {
    child: Child,
    pub(crate) port: u16,
    log: PathBuf,
}

impl Receiver {
    /// The Python receiver with its options (`--fail N`, `--hold S`, `--jitter-ms M`).
    pub(crate) fn python(w: &Weft, name: &str, opts: &[&str]) -> Receiver {
        let (port_file, log) = (w.dir.path().join(format!("{name}.port")), w.dir.path().join(format!("{name}.jsonl")));
        let mut cmd = Command::new(python());
        cmd.arg(repo_root().join("tests/webhooks/receiver.py"))
            .args(["--secret", SECRET, "--port-file", port_file.to_str().unwrap(), "--log", log.to_str().unwrap()])
            .args(opts);
        Receiver::spawn(cmd, port_file, log)
    }

    /// The Node receiver (the npm `standardwebhooks`).
    fn node(w: &Weft, name: &str) -> Receiver {
        let (port_file, log) = (w.dir.path().join(format!("{name}.port")), w.dir.path().join(format!("{name}.jsonl")));
        let mut cmd = Command::new("node");
        cmd.arg(repo_root().join("tests/webhooks/receiver.mjs")).args([
            SECRET,
            port_file.to_str().unwrap(),
            log.to_str().unwrap(),
        ]);
        Receiver::spawn(cmd, port_file, log)
    }

    fn spawn(mut cmd: Command, port_file: PathBuf, log: PathBuf) -> Receiver {
        let child = cmd.stdout(Stdio::null()).spawn().expect("start the receiver");
        let t0 = Instant::now();
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p.trim().parse().unwrap();
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the receiver did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        Receiver { child, port, log }
    }

    /// What it received so far, one object per request, in order.
    pub(crate) fn seen(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// Waits (30 s at most) until what it received satisfies `done`.
    pub(crate) fn until(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let t0 = Instant::now();
        loop {
            let seen = self.seen();
            if done(&seen) {
                return seen;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "{what} never happened: {seen:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn toml(&self, name: &str) -> String {
        format!("[webhooks.{name}]\nurl = \"http://127.0.0.1:{}/hooks/weft\"\nsecret = \"{SECRET}\"\n", self.port)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Appends `toml` to `w`'s weft.toml (written fresh when there is none).
pub(crate) fn configure(w: &Weft, toml: &str) {
    let file = w.dir.path().join("weft.toml");
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    text.push_str(toml);
    std::fs::write(file, text).unwrap();
}

fn notifications(w: &Weft, run: &str) -> Vec<Value> {
    let out = w.run(&["notifications", "list", "--run", run, "--json"]);
    out.expect_code(0);
    out.json().as_array().unwrap().clone()
}

/// Asks for approval; notifies `ops` (Python) and `node` (npm).
fn approval_def(w: &Weft) -> PathBuf {
    w.write_def(
        "ask",
        &json!({"name": "ask-lead", "summary": "Asked @input.who about @input.topic",
        "notify": [
            {"on": ["input-required", "resolved:approve", "completed"], "webhook": "ops",
             "retry": {"max_attempts": 4, "initial_delay_ms": 200}},
            {"on": ["completed"], "webhook": "node"}
        ],
        "steps": [
            {"name": "approve", "description": "the lead's answer",
             "wait": {"prompt": "Approve @input.topic?", "schema": {"type": "object", "required": ["ok"]}}},
            {"name": "done", "return": {"ok": "@approve.ok"}}
        ]}),
    )
}

on_both_stores! { fn webhooks_are_signed_retried_with_one_id_and_verified_by_both_libraries(w) {
    // 500 twice, then 200: three tries of each delivery, one id.
    let ops = Receiver::python(&w, "ops", &["--fail", "2"]);
    let node = Receiver::node(&w, "node");
    configure(&w, &format!("{}{}", ops.toml("ops"), node.toml("node")));
    let id = detach(&w, &approval_def(&w), &json!({"who": "ada", "topic": "the budget"}), &["--label", "session=s1"]);
    let _worker = Worker::start(&w);
    wait_until(&w, &id, "input-required", |r| r["state"] == "input-required");
    let seen = ops.until("the input-required notification delivered", |s| s.iter().any(|x| x["status"] == 200));
    let asked = &seen[0];
    assert_eq!(asked["type"], "run.input-required", "{asked}");
    assert_eq!(asked["data"]["waiting"][0]["prompt"], "Approve the budget?", "{asked}");
    assert_eq!(asked["data"]["waiting"][0]["schema"]["required"], json!(["ok"]), "{asked}");
    assert_eq!(asked["data"]["summary"], "Asked ada about the budget");
    assert_eq!(asked["data"]["labels"]["session"], "s1");

    signal(&w, &id, "approve", &json!({"ok": true})).expect_code(0);
    wait_until(&w, &id, "completed", |r| r["state"] == "completed");
    let seen = ops.until("all three delivered", |s| s.iter().filter(|x| x["status"] == 200).count() == 3);
    assert!(seen.iter().all(|x| x["verified"] == true), "every delivery verifies: {seen:?}");
    let done: Vec<&Value> = seen.iter().filter(|x| x["type"] == "run.completed").collect();
    assert_eq!(done.len(), 3, "500, 500, 200: {done:?}");
    assert!(done.iter().all(|x| x["id"] == done[0]["id"]), "one id on every try: {done:?}");
    assert_eq!(done.iter().map(|x| x["try"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(done[2]["data"]["output"], json!({"ok": true}));
    let step = &done[2]["data"]["steps"][0];
    assert_eq!((&step["description"], &step["result"]), (&json!("the lead's answer"), &json!({"ok": true})));
    let resolved: Vec<&Value> = seen.iter().filter(|x| x["type"] == "step.resolved").collect();
    assert_eq!(resolved[0]["data"]["event"], "resolved:approve");
    // The npm library verified its own delivery.
    let n = node.until("the node receiver's delivery", |s| !s.is_empty());
    assert_eq!((n.len(), &n[0]["verified"], &n[0]["type"]), (1, &json!(true), &json!("run.completed")), "{n:?}");
    // Shown with the run: delivered, with its tries.
    let listed = notifications(&w, &id);
    assert_eq!(listed.len(), 4, "{listed:?}");
    let ours = listed.iter().find(|d| d["on"] == "completed" && d["target"]["webhook"] == "ops").unwrap();
    assert_eq!((&ours["state"], &ours["attempts"], &ours["id"]), (&json!("delivered"), &json!(3), &done[0]["id"]));
    assert_eq!(w.show(&id)["notifications"].as_array().unwrap().len(), 4);
}}

on_both_stores! { fn a_notification_out_of_tries_is_failed_logged_and_resent(w) {
    let ops = Receiver::python(&w, "ops", &["--fail", "2"]);
    configure(&w, &ops.toml("ops"));
    let def = w.write_def("n", &json!({"name": "n",
        "notify": [{"on": ["completed"], "webhook": "ops", "retry": {"max_attempts": 2, "initial_delay_ms": 100}}],
        "steps": [{"name": "a", "return": 1}]}));
    let id = detach(&w, &def, &json!({}), &[]);
    let worker = Worker::start(&w);
    let t0 = Instant::now();
    let failed = loop {
        let list = notifications(&w, &id);
        if list.first().is_some_and(|d| d["state"] == "failed") {
            break list[0].clone();
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "never failed: {list:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(failed["attempts"], 2, "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("500"), "{failed}");
    let evs = crate::waits::events(&w, &id);
    let logged = evs.iter().find(|e| e["kind"] == "notify.failed").expect("a notify.failed event");
    assert_eq!(logged["data"]["delivery"], failed["id"]);
    // Sent again from its first try, same id: the receiver's third try is a 200.
    let out = w.run(&["notifications", "resend", failed["id"].as_str().unwrap()]);
    out.expect_code(0);
    let seen = ops.until("delivered after the resend", |s| s.iter().any(|x| x["status"] == 200));
    assert!(seen.iter().all(|x| x["id"] == failed["id"]), "{seen:?}");
    let again = w.run(&["notifications", "resend", failed["id"].as_str().unwrap()]);
    again.expect_code(2);
    assert!(again.stderr.contains("only a failed one"), "{}", again.stderr);
    drop(worker);
}}

/// A `weft worker` SIGKILLed 20 times: at the receipt of a delivery
/// (received, not yet recorded) and as soon as the run completed (the
/// delivery committed, maybe not sent). Every run's notification arrives,
/// each with one id, none lost.
#[test]
fn notifications_survive_twenty_worker_kills() {
    let w = Weft::new();
    // The first try of each id is held 2 s (logged at once): the kill lands
    // while the receiver has it and weft has not recorded it.
    let ops = Receiver::python(&w, "ops", &["--hold", "2"]);
    configure(&w, &ops.toml("ops"));
    let def = w.write_def(
        "k",
        &json!({"name": "k", "notify": [{"on": ["completed"], "webhook": "ops"}],
        "steps": [{"name": "a", "return": "@input.n"}]}),
    );
    let mut runs = vec![];
    for i in 0..20 {
        let worker = Worker::start(&w);
        let id = detach(&w, &def, &json!({"n": i}), &[]);
        if i % 2 == 0 {
            ops.until("the run's notification received", |s| s.iter().any(|x| x["data"]["run_id"] == id.as_str()));
        } else {
            wait_until(&w, &id, "completed", |r| r["state"] == "completed");
        }
        worker.kill();
        runs.push(id);
    }
    let _last = Worker::start(&w);
    let seen = ops.until("every run's notification delivered", |s| {
        runs.iter().all(|id| s.iter().any(|x| x["data"]["run_id"] == id.as_str() && x["status"] == 200))
    });
    for id in &runs {
        let of_run: Vec<&Value> = seen.iter().filter(|x| x["data"]["run_id"] == id.as_str()).collect();
        assert!(of_run.iter().all(|x| x["id"] == of_run[0]["id"] && x["verified"] == true), "{of_run:?}");
        let listed = notifications(&w, id);
        assert_eq!(listed.len(), 1, "one notification per run: {listed:?}");
        assert_eq!(listed[0]["id"], of_run[0]["id"]);
    }
    let redelivered =
        runs.iter().filter(|id| seen.iter().filter(|x| x["data"]["run_id"] == id.as_str()).count() > 1).count();
    assert!(redelivered >= 5, "the receipts held at a kill were sent again: {redelivered}");
}

/// 50 runs of one session: their notifications arrive one at a time, in
/// the order they were written, though the receiver answers each after a
/// random delay.
#[test]
fn notifications_of_one_key_arrive_in_order() {
    let w = Weft::new();
    let ops = Receiver::python(&w, "ops", &["--jitter-ms", "30"]);
    configure(&w, &ops.toml("ops"));
    let def = w.write_def(
        "f",
        &json!({"name": "f", "notify": [{"on": ["completed"], "webhook": "ops",
        "key": "@run.labels.session"}], "steps": [{"name": "a", "return": "@input.n"}]}),
    );
    let mut runs = vec![];
    for i in 0..50 {
        runs.push(detach(&w, &def, &json!({"n": i}), &["--label", "session=s"]));
    }
    let _worker = Worker::start(&w);
    let seen = ops.until("50 delivered", |s| s.len() == 50);
    // The order they were written in (the outbox lists newest first).
    let out = w.run(&["notifications", "list", "--json", "--limit", "100"]);
    let written: Vec<String> =
        out.json().as_array().unwrap().iter().rev().map(|d| d["id"].as_str().unwrap().to_string()).collect();
    let arrived: Vec<String> = seen.iter().map(|x| x["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(arrived, written, "in the order written");
    assert!(seen.iter().all(|x| x["in_flight"] == 1), "one at a time: {seen:?}");
}

/// An agent's MCP tool as the target: FastMCP gets the run's resume
/// context and the delivery's id as `_meta`'s idempotency key.
#[test]
fn a_tool_target_gets_the_resume_context_and_its_idempotency_key() {
    let w = Weft::new();
    let inbox = w.dir.path().join("resume.jsonl");
    configure(
        &w,
        &format!(
            "[servers.agent]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ FASTMCP_CHECK_FOR_UPDATES = \"off\", WEFT_RESUME_LOG = {:?} }}\n",
            python().display().to_string(),
            repo_root().join("tests/mcp-peers/fastmcp_server.py").display().to_string(),
            inbox.display().to_string()
        ),
    );
    let def = w.write_def("t", &json!({"name": "t", "summary": "greeted @input.who",
        "notify": [{"on": ["completed"], "tool": {"server": "agent", "name": "resume"},
                    "input": {"session": "@run.labels.session", "context": "@run.resume"}, "key": "@run.labels.session"}],
        "steps": [{"name": "hi", "description": "say hi", "return": "hi @input.who"}]}));
    // `weft run` sends its run's notifications before it exits.
    let out = w.run(&["run", def.to_str().unwrap(), "--input", r#"{"who": "bob"}"#, "--label", "session=s9"]);
    out.expect_code(0);
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    let got: Vec<Value> =
        std::fs::read_to_string(&inbox).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["session"], "s9");
    assert_eq!(got[0]["context"]["summary"], "greeted bob");
    assert_eq!(got[0]["context"]["run_id"], id.as_str());
    assert_eq!(got[0]["context"]["steps"][0]["description"], "say hi");
    let listed = notifications(&w, &id);
    assert_eq!(got[0]["key"], listed[0]["id"], "the delivery's id is the call's idempotency key");
    assert_eq!(listed[0]["state"], "delivered");
}

/// A definition names only webhooks the operator configured.
#[test]
fn an_unconfigured_webhook_is_refused_with_its_path() {
    let w = Weft::new();
    configure(
        &w,
        "[webhooks.ops]\nurl = \"http://127.0.0.1:9/h\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n",
    );
    let def = w.write_def(
        "u",
        &json!({"name": "u", "notify": [{"on": ["completed"], "webhook": "opps"}],
        "steps": [{"name": "a", "return": 1}]}),
    );
    let out = w.run(&["validate", def.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("/notify/0/webhook") && out.stderr.contains("no webhook `opps`"), "{}", out.stderr);
    assert!(out.stderr.contains("configured: ops"), "{}", out.stderr);
    assert!(w.runs().is_empty());
}

/// On PostgreSQL with two workers: the worker trying a notification is
/// SIGKILLed while the receiver holds it; the other worker sends it again,
/// with the same id, once the dead worker's lease on it ran out.
#[test]
fn another_worker_sends_a_dead_workers_notification() {
    let w = Weft::postgres();
    let ops = Receiver::python(&w, "ops", &["--hold", "3"]);
    // A try may take 1 s: a sender's lease on it is 2 × 1 s + 5 s.
    configure(&w, &format!("{}[notifications]\ntimeout_ms = 1000\n", ops.toml("ops")));
    let def = w.write_def(
        "p",
        &json!({"name": "p", "notify": [{"on": ["completed"], "webhook": "ops"}],
        "steps": [{"name": "a", "return": 1}]}),
    );
    let first = Worker::start(&w);
    let id = detach(&w, &def, &json!({}), &[]);
    ops.until("the first try received", |s| s.iter().any(|x| x["data"]["run_id"] == id.as_str()));
    let other = Worker::start(&w);
    let t0 = Instant::now();
    first.kill();
    let seen = ops.until("sent again by the other worker", |s| s.iter().any(|x| x["status"] == 200 && x["try"] == 2));
    assert!(t0.elapsed() < Duration::from_secs(20), "within the lease and a poll");
    assert!(seen.iter().all(|x| x["id"] == seen[0]["id"] && x["verified"] == true), "{seen:?}");
    let t1 = Instant::now();
    loop {
        let listed = notifications(&w, &id);
        if listed[0]["state"] == "delivered" {
            break;
        }
        assert!(t1.elapsed() < Duration::from_secs(10), "{listed:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(other);
}
