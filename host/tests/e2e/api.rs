//! The HTTP JSON API of `weft serve --http`, with a plain HTTP client:
//! templates, starting and waiting, listing with cursors, events as JSON
//! and as an SSE stream resumed with `Last-Event-ID` (nothing lost or
//! repeated), signals (422 with the schema's errors, then accepted, then
//! 409), cancel, schedules, events, errors with JSON paths, the token, the
//! one validation (`POST /validate`), the replay diff (`GET
//! /runs/{id}/compare`), and the OpenAPI document.

use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::common::Weft;
use crate::serve::Server;

fn base(s: &Server) -> String {
    format!("http://127.0.0.1:{}/api/v1", s.port())
}

fn chain(name: &str, n: usize) -> Value {
    weft_workloads::w9::chain(name, n)
}

/// A run that waits for approval, then computes one step.
fn approval() -> Value {
    json!({"name": "approval", "steps": [
        {"name": "approve", "wait": {"prompt": "approve?", "schema": {"type": "object", "required": ["ok"],
            "properties": {"ok": {"type": "boolean"}}}}},
        {"name": "after", "code": {"plugin": "json-select"}, "input": {"data": "@approve", "path": "ok"}}
    ]})
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.expect("the server answers");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_runs_graphs_and_pages() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let (api, http) = (base(&server), reqwest::Client::new());

    let (st, saved) =
        send(http.put(format!("{api}/templates/chain")).json(&json!({"definition": chain("x", 3)}))).await;
    assert_eq!((st, &saved), (201, &json!({"name": "chain", "version": 1})));
    let (st, t) = send(http.get(format!("{api}/templates/chain"))).await;
    assert_eq!(st, 200);
    assert_eq!(t["graph"]["nodes"].as_array().unwrap().len(), 3, "{t}");

    let r =
        http.post(format!("{api}/runs")).json(&json!({"template": "chain", "wait_ms": 20000})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let run: Value = r.json().await.unwrap();
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(location, format!("/api/v1/runs/{}", run["id"].as_str().unwrap()));
    let id = run["id"].as_str().unwrap().to_string();
    assert!(run["steps"].as_array().unwrap().iter().all(|s| s["state"] == "succeeded"), "{run}");
    // The same object as `weft runs show --json`.
    let (st, shown) = send(http.get(format!("{api}/runs/{id}"))).await;
    assert_eq!(st, 200);
    assert_eq!(shown, w.show(&id));

    let (_, events) = send(http.get(format!("{api}/runs/{id}/events"))).await;
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!((kinds.first(), kinds.last()), (Some(&"run.submitted"), Some(&"run.completed")), "{kinds:?}");
    assert_eq!((events["more"].clone(), events["finished"].clone()), (json!(false), json!(true)));
    let (_, page) = send(http.get(format!("{api}/runs/{id}/events?after=1&limit=2"))).await;
    assert_eq!(page["events"][0]["seq"], 2);
    assert_eq!(page["more"], true, "{page}");

    let (_, g) = send(http.get(format!("{api}/runs/{id}/graph"))).await;
    let layers: Vec<u64> = g["nodes"].as_array().unwrap().iter().map(|n| n["layer"].as_u64().unwrap()).collect();
    assert_eq!(layers, [0, 1, 2]);
    assert_eq!(
        g["edges"],
        json!([{"from": "s0", "to": "s1", "on": "success"}, {"from": "s1", "to": "s2", "on": "success"}])
    );
    let mermaid = http.get(format!("{api}/runs/{id}/graph?format=mermaid")).send().await.unwrap().text().await.unwrap();
    assert!(mermaid.contains("s0") && mermaid.contains("-->"), "{mermaid}");

    // Pages of runs, newest first, by cursor.
    for _ in 0..2 {
        send(http.post(format!("{api}/runs")).json(&json!({"definition": chain("inline", 1), "wait_ms": 20000}))).await;
    }
    let (_, p1) = send(http.get(format!("{api}/runs?limit=2"))).await;
    assert_eq!(p1["runs"].as_array().unwrap().len(), 2);
    let next = p1["next"].as_str().expect("a next page").to_string();
    let (_, p2) = send(http.get(format!("{api}/runs?limit=2&cursor={next}"))).await;
    assert_eq!(p2["runs"].as_array().unwrap().iter().map(|r| r["id"].clone()).collect::<Vec<_>>(), [json!(id)]);
    assert!(p2.get("next").is_none(), "{p2}");
    let (_, failed) = send(http.get(format!("{api}/runs?state=failed"))).await;
    assert_eq!(failed["runs"], json!([]));
    let (_, keyed) =
        send(http.post(format!("{api}/runs")).json(&json!({"template": "chain", "key": "k-1", "wait_ms": 20000})))
            .await;
    let (_, by_key) = send(http.get(format!("{api}/runs?key=k-1"))).await;
    assert_eq!(
        by_key["runs"].as_array().unwrap().iter().map(|r| r["id"].clone()).collect::<Vec<_>>(),
        [keyed["id"].clone()]
    );
    // The page's search: part of a template's name in any case; a window
    // of creation times; a time that does not parse is refused at its name.
    let ids = |page: &Value| page["runs"].as_array().unwrap().iter().map(|r| r["id"].clone()).collect::<Vec<_>>();
    let (_, part) = send(http.get(format!("{api}/runs?template_contains=HAI"))).await;
    assert_eq!(ids(&part), [keyed["id"].clone(), json!(id)], "{part}");
    let created = shown["created_at"].as_str().unwrap();
    let (_, from) = send(http.get(format!("{api}/runs?created_from={created}&limit=10"))).await;
    assert_eq!(ids(&from).last(), Some(&json!(id)), "created at the bound is in: {from}");
    let (_, until) = send(http.get(format!("{api}/runs?created_until={created}"))).await;
    assert_eq!(until["runs"], json!([]), "created at the bound is out: {until}");
    let (st, bad) = send(http.get(format!("{api}/runs?created_from=yesterday"))).await;
    assert_eq!((st, bad["path"].as_str()), (400, Some("/created_from")), "{bad}");
    let (_, broken) = send(http.post(format!("{api}/runs")).json(
        &json!({"definition": {"name": "broken", "steps": [{"name": "each", "for_each": "@input.v",
                "code": {"plugin": "json-select"}, "input": {"data": {}, "path": "a"}}]},
                "input": {"v": 5}, "wait_ms": 20000}),
    ))
    .await;
    assert_eq!(broken["state"], "failed", "{broken}");
    let (_, failed) = send(http.get(format!("{api}/runs?state=failed"))).await;
    assert_eq!(failed["runs"][0]["error"], broken["error"], "a failed run's summary says why: {failed}");

    let (st, doc) = send(http.get(format!("{api}/openapi.json"))).await;
    assert_eq!(st, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/runs",
        "/runs/{id}",
        "/runs/{id}/events",
        "/runs/{id}/steps/{step}/signal",
        "/templates/{name}",
        "/schedules",
    ] {
        assert!(doc["paths"].get(path).is_some(), "no {path} in the OpenAPI document");
    }
    assert!(doc["components"]["schemas"].get("RunView").is_some(), "{}", doc["components"]);
    // What client generators need: every route, an operationId each (no
    // two alike), typed parameters, no boolean schema anywhere.
    let paths = doc["paths"].as_object().unwrap();
    assert_eq!(paths.len(), 26, "every route is declared: {:?}", paths.keys().collect::<Vec<_>>());
    let ids: Vec<&str> = paths
        .values()
        .flat_map(|p| p.as_object().unwrap().values())
        .map(|o| o["operationId"].as_str().unwrap())
        .collect();
    let unique: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (30, 30), "{ids:?}");
    let params = doc["paths"]["/runs"]["get"]["parameters"].as_array().unwrap();
    let param = |n: &str| params.iter().find(|p| p["name"] == n).unwrap()["schema"].clone();
    assert_eq!(param("limit")["type"], "integer");
    assert!(param("state")["enum"].as_array().unwrap().contains(&json!("input-required")));
    fn no_booleans(v: &Value, at: &str) {
        match v {
            Value::Bool(_)
                if !["required", "uniqueItems", "readOnly", "writeOnly", "deprecated"]
                    .iter()
                    .any(|k| at.ends_with(k)) =>
            {
                panic!("a boolean schema at {at}")
            }
            // Values, not schemas.
            Value::Object(m) => m
                .iter()
                .filter(|(k, _)| !["default", "const", "enum", "examples", "example"].contains(&k.as_str()))
                .for_each(|(k, x)| no_booleans(x, &format!("{at}/{k}"))),
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| no_booleans(x, &format!("{at}/{i}"))),
            _ => {}
        }
    }
    no_booleans(&doc["components"], "/components");
    let events = &doc["paths"]["/runs/{id}/events"]["get"]["responses"]["200"]["content"];
    assert!(events.get("text/event-stream").is_some(), "the SSE form is declared: {events}");
    // A bad query string is answered in JSON, naming the parameter.
    let r = http.get(format!("{api}/runs?limit=lots")).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["kind"], "invalid", "{e}");
    assert!(e["message"].as_str().unwrap().contains("limit"), "{e}");
    assert_eq!(reqwest::get(format!("http://127.0.0.1:{}/healthz", server.port())).await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_what_and_where() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let (api, http) = (base(&server), reqwest::Client::new());

    let bad = json!({"name": "x", "steps": [{"name": "a", "code": {"plugin": "no-such"}}]});
    let (st, e) = send(http.post(format!("{api}/runs")).json(&json!({"definition": bad}))).await;
    assert_eq!((st, e["kind"].as_str()), (400, Some("invalid")), "{e}");
    assert_eq!(e["path"], "/definition/steps/0/code", "{e}");

    let schema = json!({"name": "typed", "input_schema": {"type": "object", "required": ["n"],
        "properties": {"n": {"type": "integer"}}}, "steps": [{"name": "a", "return": "@input.n"}]});
    let (st, e) =
        send(http.post(format!("{api}/runs")).json(&json!({"definition": schema, "input": {"n": "x"}}))).await;
    assert_eq!(st, 400);
    assert_eq!(e["path"], "/input/n", "{e}");

    let (st, e) =
        send(http.post(format!("{api}/runs")).header("content-type", "application/json").body("{\"template\": ")).await;
    assert_eq!((st, e["kind"].as_str()), (400, Some("invalid")), "{e}");
    let (st, e) = send(http.post(format!("{api}/runs")).json(&json!({"template": "t", "inptu": {}}))).await;
    assert_eq!(st, 400);
    assert!(e["message"].as_str().unwrap().contains("inptu"), "{e}");
    let (st, e) = send(http.post(format!("{api}/runs")).json(&json!({"template": "nope"}))).await;
    assert_eq!((st, e["path"].as_str()), (404, Some("/template")), "{e}");
    let (st, _) = send(http.get(format!("{api}/runs/not-an-id"))).await;
    assert_eq!(st, 400);
    let (st, e) = send(http.get(format!("{api}/runs/r_00000000000000000000000000"))).await;
    assert_eq!((st, e["kind"].as_str()), (404, Some("not_found")), "{e}");
    let (st, e) = send(http.get(format!("{api}/nowhere"))).await;
    assert_eq!((st, e["kind"].as_str()), (404, Some("not_found")), "{e}");
    assert_eq!(w.runs(), Vec::<Value>::new(), "nothing was stored");

    // Off loopback the token guards the API as it guards MCP.
    let other = Weft::new();
    let guarded = Server::start(&other, &["--http", "0.0.0.0:0", "--token", "s3cret"]);
    let api = format!("http://127.0.0.1:{}/api/v1", guarded.port());
    assert_eq!(send(http.get(format!("{api}/runs"))).await.0, 401);
    assert_eq!(send(http.get(format!("{api}/runs")).bearer_auth("wrong")).await.0, 401);
    assert_eq!(send(http.get(format!("{api}/runs")).bearer_auth("s3cret")).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_validation_and_the_replay_diff_over_http() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let (api, http) = (base(&server), reqwest::Client::new());
    let pick = |input: Value| {
        json!({"name": "pick", "input_schema": {"type": "object", "required": ["data"]}, "steps": [
            {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": "@input.data", "path": "x"}},
            {"name": "b", "return": input}]})
    };
    let validate = |d: Value| send(http.post(format!("{api}/validate")).json(&json!({"definition": d})));
    // A look-alike naming a step is a problem, with the ref to write.
    let (st, v) = validate(pick(json!({"m": "got {{a.x}}"}))).await;
    assert_eq!((st, v["valid"].clone()), (200, json!(false)), "{v}");
    assert_eq!(v["problems"][0]["path"], "/definition/steps/1/return/m", "{v}");
    assert!(v["problems"][0]["hint"].as_str().unwrap().contains("`@a.x`"), "{v}");
    // Any other placeholder is a warning; the definition is valid. (So is
    // a return step that waits for no step: it ends the run at once.)
    let (_, v) = validate(pick(json!({"m": "Dear {{name}}"}))).await;
    assert_eq!((v["valid"].clone(), v["warnings"].as_array().map(Vec::len)), (json!(true), Some(2)), "{v}");
    assert_eq!(v["warnings"][0]["path"], "/definition/steps/1/return/m", "{v}");
    assert_eq!(v["warnings"][1]["path"], "/definition/steps/1", "{v}");
    assert!(v["warnings"][1]["message"].as_str().unwrap().contains("returns as soon as the run starts"), "{v}");
    // Hints name what an API client can use, not MCP tools.
    let (_, v) = validate(json!({"name": "p", "steps": [{"name": "s", "code": {"plugin": "json-selct"}}]})).await;
    let hint = v["problems"][0]["hint"].as_str().unwrap();
    assert!(hint.contains("did you mean `json-select`?") && !hint.contains("plugin_list"), "{hint}");
    // A run: the definition's problems and the input's, at once.
    let bad = json!({"name": "x", "input_schema": {"type": "object", "required": ["n"]},
        "steps": [{"name": "s", "code": {"plugin": "json-selct"}}]});
    let (st, e) = send(http.post(format!("{api}/runs")).json(&json!({"definition": bad, "input": {}}))).await;
    assert_eq!(st, 400);
    let paths: Vec<&str> = e["problems"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/definition/steps/0/code", "/input/n"], "{e}");

    // Two runs of a template, compared step by step.
    let (st, saved) =
        send(http.put(format!("{api}/templates/pick")).json(&json!({"definition": pick(json!("@a"))}))).await;
    assert_eq!((st, saved.get("warnings")), (201, None), "{saved}");
    let mut ids = vec![];
    for x in [1, 2] {
        let body = json!({"template": "pick", "input": {"data": {"x": x}}, "wait_ms": 20000});
        let (st, run) = send(http.post(format!("{api}/runs")).json(&body)).await;
        assert_eq!((st, run["state"].as_str()), (201, Some("completed")), "{run}");
        ids.push(run["id"].as_str().unwrap().to_string());
    }
    let (st, c) = send(http.get(format!("{api}/runs/{}/compare", ids[1]))).await;
    assert_eq!(st, 200, "{c}");
    assert_eq!(c["with"], ids[0].as_str(), "the run before it, without a recording");
    assert_eq!(c["first_divergence"]["step"], "a");
    assert_eq!(c["first_divergence"]["changes"], json!([{"path": "/data/x", "run": 2, "with": 1}]));
    assert_eq!(c["output"]["changes"], json!([{"path": "", "run": 2, "with": 1}]));
    let (st, same) = send(http.get(format!("{api}/runs/{}/compare?with={}", ids[0], ids[0]))).await;
    assert_eq!((st, same["same"].clone()), (200, json!(true)), "{same}");
    let (st, e) = send(http.get(format!("{api}/runs/{}/compare?with=r_00000000000000000000000000", ids[0]))).await;
    assert_eq!((st, e["path"].as_str()), (404, Some("/with")), "{e}");
}

/// Reads SSE events (`id`, `event`, parsed `data`) until the stream ends
/// or `stop` says so.
async fn read_sse(resp: reqwest::Response, mut stop: impl FnMut(&Value) -> bool) -> Vec<(u64, Value)> {
    let mut out = vec![];
    let mut buf = String::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let id = block.lines().find_map(|l| l.strip_prefix("id:")).map(|v| v.trim().parse::<u64>().unwrap());
            let data =
                block.lines().find_map(|l| l.strip_prefix("data:")).map(|v| serde_json::from_str(v.trim()).unwrap());
            if let (Some(id), Some(data)) = (id, data) {
                let done = stop(&data);
                out.push((id, data));
                if done {
                    return out;
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_resumes_without_loss_or_repeat_and_waits_are_answered() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let (api, http) = (base(&server), reqwest::Client::new());
    let (_, run) =
        send(http.post(format!("{api}/runs")).json(&json!({"definition": approval(), "wait_ms": 20000}))).await;
    assert_eq!(run["state"], "input-required", "{run}");
    let id = run["id"].as_str().unwrap().to_string();

    // Follow the stream until the wait opens, then drop the connection.
    let sse = |after: Option<u64>| {
        let mut req = http.get(format!("{api}/runs/{id}/events")).header("accept", "text/event-stream");
        if let Some(a) = after {
            req = req.header("last-event-id", a.to_string());
        }
        req.send()
    };
    let first = read_sse(sse(None).await.unwrap(), |e| e["kind"] == "run.input-required").await;
    let last = first.last().unwrap().0;

    // A signal that breaks the schema: 422 with where; the step still waits.
    let signal = format!("{api}/runs/{id}/steps/approve/signal");
    let (st, e) = send(http.post(&signal).json(&json!({"data": {"ok": "yes"}}))).await;
    assert_eq!(st, 422, "{e}");
    assert_eq!(e["path"], "/data/ok", "{e}");
    let (st, ok) = send(http.post(&signal).json(&json!({"data": {"ok": true}}))).await;
    assert_eq!(st, 200, "{ok}");
    let (st, _) = send(http.post(&signal).json(&json!({"data": {"ok": false}}))).await;
    assert_eq!(st, 409, "already answered");

    // Resume after the last event seen: the rest, once each, to the end.
    let rest = read_sse(sse(Some(last)).await.unwrap(), |_| false).await;
    let seqs: Vec<u64> = first.iter().chain(&rest).map(|(id, _)| *id).collect();
    let (_, page) = send(http.get(format!("{api}/runs/{id}/events"))).await;
    let stored: Vec<u64> = page["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, stored, "every event once, in order");
    assert_eq!(rest.last().unwrap().1["kind"], "run.completed");
    for (id, data) in first.iter().chain(&rest) {
        assert_eq!(data["seq"], *id, "the SSE id is the event's seq");
    }

    // Cancel a waiting run; a finished one is left as it is.
    let (_, waiting) = send(http.post(format!("{api}/runs")).json(&json!({"definition": approval()}))).await;
    let wid = waiting["id"].as_str().unwrap();
    let (st, canceled) = send(http.post(format!("{api}/runs/{wid}/cancel"))).await;
    assert_eq!((st, canceled["state"].as_str()), (200, Some("canceled")), "{canceled}");
    let (_, again) = send(http.post(format!("{api}/runs/{id}/cancel"))).await;
    assert_eq!(again["state"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_and_events() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let (api, http) = (base(&server), reqwest::Client::new());
    send(http.put(format!("{api}/templates/chain")).json(&json!({"definition": chain("x", 1)}))).await;
    let body = json!({"name": "nightly", "template": "chain", "cron": "0 2 * * *"});
    let (st, s) = send(http.post(format!("{api}/schedules")).json(&body)).await;
    assert_eq!((st, s["name"].as_str()), (201, Some("nightly")), "{s}");
    let (_, all) = send(http.get(format!("{api}/schedules"))).await;
    assert_eq!(all["schedules"].as_array().unwrap().len(), 1);
    let (st, e) =
        send(http.post(format!("{api}/schedules")).json(&json!({"name": "bad", "template": "chain", "cron": "nope"})))
            .await;
    assert_eq!((st, e["path"].as_str()), (400, Some("/cron")), "{e}");
    let (st, p) = send(http.post(format!("{api}/schedules/nightly/pause"))).await;
    assert_eq!((st, &p["paused"]), (200, &json!(true)), "{p}");
    let (_, all) = send(http.get(format!("{api}/schedules"))).await;
    assert_eq!(all["schedules"][0]["paused"], true, "{all}");
    let (st, p) = send(http.post(format!("{api}/schedules/nightly/resume"))).await;
    assert_eq!((st, &p["paused"]), (200, &json!(false)), "{p}");
    assert_eq!(send(http.post(format!("{api}/schedules/nope/pause"))).await.0, 404);
    assert_eq!(send(http.delete(format!("{api}/schedules/nightly"))).await.0, 200);
    assert_eq!(send(http.delete(format!("{api}/schedules/nightly"))).await.0, 404);

    let waiter = json!({"name": "paid", "steps": [{"name": "w", "wait": {"event": "order.paid", "match": {"order": "@input.order"}}}]});
    let (_, run) =
        send(http.post(format!("{api}/runs")).json(&json!({"definition": waiter, "input": {"order": "A-7"}}))).await;
    let rid = run["id"].as_str().unwrap();
    // Until its wait is open (an event wait leaves the run `working`).
    for _ in 0..500 {
        let (_, now) = send(http.get(format!("{api}/runs/{rid}"))).await;
        if now["waits"].as_array().is_some_and(|w| !w.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (st, emitted) = send(
        http.post(format!("{api}/events")).json(&json!({"event": "order.paid", "data": {"order": "A-7"}, "id": "e1"})),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(emitted["delivered"], json!([{"run_id": run["id"], "step": "w"}]), "{emitted}");
    let (_, dup) = send(
        http.post(format!("{api}/events")).json(&json!({"event": "order.paid", "data": {"order": "A-7"}, "id": "e1"})),
    )
    .await;
    assert_eq!(dup["duplicate"], true);
    assert_eq!(send(http.delete(format!("{api}/templates/chain"))).await.0, 200);
    assert_eq!(send(http.delete(format!("{api}/templates/chain"))).await.0, 404);
}

#[test]
fn bench_w9_serves_runs_to_a_client_process_over_mcp_and_the_api() {
    let w = Weft::new();
    let json_file = w.dir.path().join("w9.json");
    let out = w.run(&["bench", "w9", "--rounds", "1", "--json", json_file.to_str().unwrap()]);
    out.expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("W9 served ")).collect();
    assert_eq!(lines.len(), 9, "three figures over each path:\n{}", out.stdout);
    for via in ["mcp=http-2025-11-25", "mcp=http-2026-07-28", "api=http"] {
        let tput = lines.iter().find(|l| l.contains(via) && l.contains("throughput")).unwrap();
        let per_s: f64 = tput.split_whitespace().find_map(|f| f.strip_prefix("runs_per_s=")).unwrap().parse().unwrap();
        assert!(per_s > 0.0, "{tput}");
    }
    // The same runs in the bench's own process, the same minutes.
    let here: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("W9 in-process ")).collect();
    assert_eq!(here.len(), 2, "chain-40 and trivial-3 in process:\n{}", out.stdout);
    let field = |l: &str, k: &str| -> f64 {
        l.split_whitespace().find_map(|f| f.strip_prefix(k)).unwrap_or_else(|| panic!("{k} in {l}")).parse().unwrap()
    };
    assert!(field(here[0], "total_ms_p50=") > 0.0 && here[0].contains("chain-40"), "{}", here[0]);
    assert!(field(here[1], "runs_per_s=") > 0.0 && field(here[1], "cpu_us_per_run=") > 0.0, "{}", here[1]);
    let figures: Value = serde_json::from_str(&std::fs::read_to_string(json_file).unwrap()).unwrap();
    assert!(figures.to_string().contains("\"via\":\"api=http\""), "{figures}");
    assert!(figures.to_string().contains("\"via\":\"in-process\""), "{figures}");
}
