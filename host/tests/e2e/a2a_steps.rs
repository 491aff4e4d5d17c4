//! Agent steps against a remote A2A agent built with the official Python
//! SDK (tests/a2a/remote_agent.py: a2a-sdk 1.3's server): the step's input
//! goes out as a data part and the remote artifacts come back as its
//! output; a remote failure fails the step with the agent's words; a
//! remote question is the run's (prompt and schema), and each answer,
//! given through weft, reaches the remote task once, across a kill; weft
//! SIGKILLed while the remote task runs sends it once (the restarted
//! worker follows the task it sent); canceling the run, while the remote
//! task runs or asks, or the step's timeout, cancels the remote task; an
//! agent weft.toml does not name is refused at validation.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Weft, repo_root};
use crate::waits::{Worker, detach, signal, wait_until};

/// The SDK's agent on a free port, its tasks logged; killed when dropped.
struct Remote {
    child: Child,
    log: std::path::PathBuf,
}

impl Remote {
    /// Starts the agent and names it `upper` in `w`'s weft.toml.
    fn start(w: &Weft) -> Remote {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = w.dir.path().join("remote.log");
        let mut child = Command::new(crate::serve_recording::python())
            .arg(repo_root().join("tests/a2a/remote_agent.py"))
            .arg(port.to_string())
            .env("A2A_REMOTE_LOG", &log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the remote agent");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("listening"), "the remote agent did not start: {line:?}");
        crate::notify::configure(w, &format!("[agents.upper]\nurl = \"http://127.0.0.1:{port}\"\n"));
        Remote { child, log }
    }

    /// What it logged: `{"task", "context", "input"}` per task created,
    /// `{"canceled"}` per cancel.
    fn entries(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn tasks_of(&self, run: &str) -> Vec<Value> {
        self.entries()
            .into_iter()
            .filter(|e| e["context"].as_str().is_some_and(|c| c.starts_with(&format!("weft-{run}/"))))
            .collect()
    }

    fn until(&self, what: &str, done: impl Fn(&[Value]) -> bool) {
        let t0 = Instant::now();
        while !done(&self.entries()) {
            assert!(t0.elapsed() < Duration::from_secs(20), "{what} never happened: {:?}", self.entries());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workflow sending its input to the remote agent; `timeout_ms` if given.
fn relay(w: &Weft, timeout_ms: Option<u64>) -> std::path::PathBuf {
    let mut step = json!({"name": "call", "agent": {"name": "upper", "skill": "upper"}, "input": "@input"});
    if let Some(t) = timeout_ms {
        step["timeout_ms"] = json!(t);
    }
    w.write_def("relay", &json!({"name": "relay", "steps": [step], "output": {"upper": "@call.data.upper", "text": "@call.text", "task": "@call.task_id"}}))
}

on_both_stores! { fn an_agent_step_sends_its_input_and_takes_the_remote_artifacts(w) {
    let remote = Remote::start(&w);
    let def = relay(&w, None);
    let out = w.run(&["run", def.to_str().unwrap(), "--input", r#"{"text": "hello"}"#, "--json"]);
    out.expect_code(0);
    let run = out.json();
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"]["upper"], "HELLO", "{run}");
    assert_eq!(run["output"]["text"], "HELLO", "{run}");
    let id = run["id"].as_str().unwrap();
    let tasks = remote.tasks_of(id);
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0]["input"], json!({"text": "hello"}));
    assert_eq!(run["output"]["task"], tasks[0]["task"], "the step's output names the remote task");
}}

#[test]
fn a_remote_failure_fails_the_step_with_the_agents_words() {
    let w = Weft::new();
    let _remote = Remote::start(&w);
    let def = relay(&w, None);
    let out = w.run(&["run", def.to_str().unwrap(), "--input", r#"{"fail": "the text is empty"}"#, "--json"]);
    let run = out.json();
    assert_eq!(run["state"], "failed", "{run}");
    let message = run["error"]["message"].as_str().unwrap();
    assert!(message.contains("ended failed: the text is empty"), "{message}");
}

/// The one open wait of run `id`, once it asks.
fn asking(w: &Weft, id: &str) -> Value {
    let run = wait_until(w, id, "the question", |r| r["state"] == "input-required");
    let waits = run["waits"].as_array().unwrap();
    assert_eq!(waits.len(), 1, "{run}");
    waits[0].clone()
}

on_both_stores! { fn a_remote_question_is_the_runs_question_and_each_answer_reaches_the_remote_task(w) {
    let remote = Remote::start(&w);
    let def = relay(&w, None);
    let input = r#"{"ask": "which city?", "then": "which year?"}"#;
    // Nobody runs the workflow once the foreground run asks (exit 3).
    w.run(&["run", def.to_str().unwrap(), "--input", input]).expect_code(3);
    let id = w.run(&["runs", "list", "--json"]).json()[0]["id"].as_str().unwrap().to_string();
    let wait = asking(&w, &id);
    assert_eq!(wait["step"], "call", "{wait}");
    assert_eq!(wait["prompt"], "agent `upper` asks: which city?", "{wait}");
    assert_eq!(wait["schema"]["required"], json!(["city"]), "the remote question's schema: {wait}");

    // An answer its schema refuses changes nothing.
    let bad = signal(&w, &id, "call", &json!({"town": "x"}));
    bad.expect_code(2);
    assert!(bad.stderr.contains("city"), "{}", bad.stderr);
    assert_eq!(w.show(&id)["state"], "input-required");
    assert!(remote.entries().iter().all(|e| e.get("answer").is_none()), "nothing reached the remote task");

    // Answered with no worker: kept, and forwarded by the next one.
    signal(&w, &id, "call", &json!({"city": "paris"})).expect_code(0);
    w.run(&["worker", "--until-idle"]).expect_code(0);
    let wait = asking(&w, &id);
    assert_eq!(wait["prompt"], "agent `upper` asks: which year?", "its second question: {wait}");
    assert_eq!(wait["schema"]["type"], "string", "no schema given: answered in words: {wait}");
    let object = signal(&w, &id, "call", &json!({"year": 1999}));
    object.expect_code(2);
    assert!(object.stderr.contains("string"), "{}", object.stderr);
    signal(&w, &id, "call", &json!("1999")).expect_code(0);
    w.run(&["worker", "--until-idle"]).expect_code(0);
    let run = wait_until(&w, &id, "the run's end", |r| r["state"] == "completed" || r["state"] == "failed");
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"]["upper"], "PARIS 1999", "{run}");

    let tasks = remote.tasks_of(&id);
    assert_eq!(tasks.len(), 1, "one remote task for the whole conversation: {tasks:?}");
    let answers: Vec<Value> = remote.entries().into_iter().filter(|e| e.get("answer").is_some()).collect();
    assert_eq!(answers.len(), 2, "each answer sent once: {answers:?}");
    assert_eq!(answers[0]["answer"], json!({"city": "paris"}));
    assert_eq!(answers[1]["answer"], "1999", "a string answer goes as text");
    assert!(answers.iter().all(|a| a["task"] == tasks[0]["task"]), "{answers:?}");
    assert_ne!(answers[0]["message"], answers[1]["message"]);
}}

on_both_stores! { fn weft_killed_after_the_answer_forwards_it_once(w) {
    let remote = Remote::start(&w);
    let def = relay(&w, None);
    let worker = Worker::start(&w);
    let id = detach(&w, &def, &json!({"ask": "which city?"}), &[]);
    asking(&w, &id);
    // The remote agent works 2 s on the answer: weft dies meanwhile.
    signal(&w, &id, "call", &json!({"city": "rome", "sleep": 2})).expect_code(0);
    remote.until("the answer", |e| e.iter().any(|x| x.get("answer").is_some()));
    worker.kill();
    let _again = Worker::start(&w);
    let run = wait_until(&w, &id, "the run's end", |r| r["state"] == "completed" || r["state"] == "failed");
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"]["upper"], "ROME", "{run}");
    let answers: Vec<Value> = remote.entries().into_iter().filter(|e| e.get("answer").is_some()).collect();
    assert_eq!(answers.len(), 1, "the answer was not sent again: {answers:?}");
    assert_eq!(remote.tasks_of(&id).len(), 1);
    let events = w.run(&["runs", "events", &id, "--json"]).stdout;
    assert!(events.contains("has the answer already"), "the restarted worker followed the task: {events}");
}}

#[test]
fn canceling_a_run_while_its_agent_asks_cancels_the_remote_task() {
    let w = Weft::new();
    let remote = Remote::start(&w);
    let def = relay(&w, None);
    let _worker = Worker::start(&w);
    let id = detach(&w, &def, &json!({"ask": "which city?"}), &[]);
    asking(&w, &id);
    let task = remote.tasks_of(&id)[0]["task"].clone();
    w.run(&["runs", "cancel", &id]).expect_code(0);
    remote.until("the remote cancel", |e| e.iter().any(|x| x["canceled"] == task));
    assert_eq!(w.show(&id)["state"], "canceled");
}

on_both_stores! { fn weft_killed_while_the_remote_task_runs_sends_it_once(w) {
    let remote = Remote::start(&w);
    let def = relay(&w, None);
    let worker = Worker::start(&w);
    let id = detach(&w, &def, &json!({"text": "durable", "sleep": 2}), &[]);
    remote.until("the remote task", |e| !e.is_empty());
    worker.kill();
    let _again = Worker::start(&w);
    let run = wait_until(&w, &id, "the run's end", |r| r["state"] == "completed" || r["state"] == "failed");
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"]["upper"], "DURABLE", "{run}");
    let tasks = remote.tasks_of(&id);
    assert_eq!(tasks.len(), 1, "one remote task across the kill: {tasks:?}");
    let events = w.run(&["runs", "events", &id, "--json"]).stdout;
    let followed = events.contains("following remote task");
    assert!(followed, "the restarted worker followed the task it had sent: {events}");
}}

#[test]
fn canceling_the_run_or_its_timeout_cancels_the_remote_task() {
    let w = Weft::new();
    let remote = Remote::start(&w);
    let def = relay(&w, None);
    let _worker = Worker::start(&w);
    let id = detach(&w, &def, &json!({"text": "long", "sleep": 60}), &[]);
    remote.until("the remote task", |e| !e.is_empty());
    let task = remote.tasks_of(&id)[0]["task"].clone();
    w.run(&["runs", "cancel", &id]).expect_code(0);
    remote.until("the remote cancel", |e| e.iter().any(|x| x["canceled"] == task));
    // A step's timeout ends its remote task too.
    let def = relay(&w, Some(500));
    let out = w.run(&["run", def.to_str().unwrap(), "--input", r#"{"text": "x", "sleep": 60}"#, "--json"]);
    let run = out.json();
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(run["error"]["kind"], "timeout", "{run}");
    let timed = remote.tasks_of(run["id"].as_str().unwrap())[0]["task"].clone();
    remote.until("the timed-out task's cancel", |e| e.iter().any(|x| x["canceled"] == timed));
}

#[test]
fn an_agent_weft_toml_does_not_name_is_refused_at_validation() {
    let w = Weft::new();
    let def = w.write_def("x", &json!({"name": "x", "steps": [{"name": "call", "agent": "nope", "input": {}}]}));
    let out = w.run(&["validate", def.to_str().unwrap(), "--json"]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("/steps/0/agent") && text.contains("unknown agent `nope`"), "{text}");
    assert!(text.contains("[agents.nope]"), "the hint says what to add: {text}");
}

/// Agents in a chain: an A2A client of weft answers the question weft's
/// agent step forwards from the remote agent, in A2A's own terms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_client_of_weft_answers_the_remote_agents_question_through_weft() {
    let w = Weft::new();
    let remote = Remote::start(&w);
    let def = relay(&w, None);
    w.run(&["templates", "save", def.to_str().unwrap()]).expect_code(0);
    let server = crate::serve::Server::start(&w, &["--http", "127.0.0.1:0"]);
    let url = format!("http://127.0.0.1:{}/a2a/relay", server.port());
    let http = reqwest::Client::new();
    let send = |id: &str, message: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "SendMessage", "params": {"message": message}});
        let post = http.post(&url).json(&body).send();
        async move { post.await.unwrap().json::<Value>().await.unwrap() }
    };
    let draft = json!({"cities": ["lyon", "nice"]});
    let input = json!({"ask": "which city?", "draft": draft});
    let r = send("1", json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": input}]})).await;
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    let part = &task["status"]["message"]["parts"][0];
    assert_eq!(part["text"], "agent `upper` asks: which city?", "{r}");
    assert_eq!(part["metadata"]["schema"]["required"], json!(["city"]), "the remote schema, forwarded: {r}");
    // What the remote agent published before it asked is the preview.
    let artifacts = task["artifacts"].as_array().unwrap();
    let previews: Vec<&Value> = artifacts.iter().filter(|a| a["name"] == "preview").collect();
    assert_eq!(previews.len(), 1, "{r}");
    assert_eq!(previews[0]["artifactId"], part["metadata"]["preview"], "{r}");
    assert_eq!(previews[0]["parts"][0]["data"], draft, "{r}");
    let (id, context) = (task["id"].as_str().unwrap(), task["contextId"].as_str().unwrap());

    let answer = |mid: &str, data: Value| json!({"messageId": mid, "role": "ROLE_USER", "taskId": id, "contextId": context, "parts": [{"data": data}]});
    let bad = send("2", answer("m2", json!({"town": "x"}))).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(remote.entries().iter().all(|e| e.get("answer").is_none()), "a refused answer goes nowhere");
    let done = send("3", answer("m3", json!({"city": "lyon"}))).await;
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let output = task["artifacts"].as_array().unwrap().iter().find(|a| a["name"] == "output").expect("the output");
    assert_eq!(output["parts"][0]["data"]["upper"], "LYON", "{done}");
    assert_eq!(remote.tasks_of(id).len(), 1);
}

/// What an MCP client (the official Python SDK) meets: the guide names the
/// configured agents, the question is in `waits`, the answer's reply says
/// it went on, an answer between two questions is refused with advice.
#[test]
fn an_mcp_client_finds_the_agent_and_answers_its_questions() {
    let w = Weft::new();
    let _remote = Remote::start(&w);
    let config = std::fs::read_to_string(w.dir.path().join("weft.toml")).unwrap();
    let seen = crate::serve_recording::play(&w, &config, "agent_steps_check.py");
    assert!(seen["guide_agents"].as_str().unwrap().contains("`upper`"), "{seen}");
    assert!(seen["steps_doc"].as_str().unwrap().contains("agent"), "{seen}");
    assert_eq!(seen["first_wait"]["prompt"], "agent `upper` asks: which city?", "{seen}");
    assert_eq!(seen["first_wait"]["schema"]["required"], json!(["city"]), "{seen}");
    let message = seen["answered"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("goes on to the remote agent"), "{seen}");
    // Answered while the agent works (1 s) before its second question.
    assert_eq!(seen["early"]["is_error"], true, "{seen}");
    let fix = seen["early"]["structured"]["fix"].as_str().unwrap();
    assert!(fix.contains("answer when the step asks again"), "{seen}");
    assert_eq!(seen["second_wait"]["prompt"], "agent `upper` asks: which year?", "{seen}");
    assert_eq!(seen["output"]["upper"], "NICE 2001", "{seen}");
}
