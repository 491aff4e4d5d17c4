//! Artifacts end to end: a Rust component's `artifact(...)` and a WASI
//! command's `$weft` envelope, each stored with its run, announced by an
//! `artifact` event, listed by `runs show --json`, and written back
//! byte for byte by `weft runs artifacts RUN --out DIR`.

use serde_json::json;

use crate::common::Weft;
use crate::examples::build;

fn run(w: &Weft, name: &str, step: serde_json::Value) -> String {
    let file = w.write_def(name, &json!({"name": name, "steps": [step]}));
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(0);
    out.json()["id"].as_str().unwrap().to_string()
}

#[test]
fn artifacts_of_a_component_and_of_a_command_round_trip() {
    let w = Weft::new();
    let id = run(
        &w,
        "comp",
        json!({"name": "make", "code": {"path": weft_test_artifacts::HOSTILE}, "input": {"mode": "artifact"}}),
    );
    let shown = w.show(&id);
    let arts = shown["artifacts"].as_array().unwrap();
    let names: Vec<&str> = arts.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["data.bin", "report.txt"], "{shown}");
    assert_eq!(arts[1]["mime"], "text/plain");
    assert_eq!(arts[1]["step"], "make");
    assert_eq!(arts[0]["size"], 4);
    let events = w.run(&["runs", "events", &id]);
    assert!(events.stdout.matches("artifact").count() >= 2, "{}", events.stdout);

    let dir = w.dir.path().join("out");
    w.run(&["runs", "artifacts", &id, "--out", dir.to_str().unwrap()]).expect_code(0);
    assert_eq!(std::fs::read_to_string(dir.join("report.txt")).unwrap(), "report of make");
    assert_eq!(std::fs::read(dir.join("data.bin")).unwrap(), [0u8, 1, 2, 255]);
    // Content-addressed: a second run's identical artifacts add no bytes.
    run(
        &w,
        "comp",
        json!({"name": "make", "code": {"path": weft_test_artifacts::HOSTILE}, "input": {"mode": "artifact"}}),
    );
    let db = rusqlite::Connection::open(w.data_dir().join("weft.db")).unwrap();
    let count = |sql: &str| db.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    assert_eq!((count("SELECT count(*) FROM artifacts"), count("SELECT count(*) FROM blobs")), (4, 2));
    let human = w.run(&["runs", "show", &id]);
    assert!(human.stdout.contains("artifacts:") && human.stdout.contains("report.txt"), "{}", human.stdout);

    // A WASI command (the C example) returns one through its `$weft` envelope.
    let Some(guest) = build("c-guest", &["clang-19"], "sh", &["build.sh"]) else { return };
    let id =
        run(&w, "cmd", json!({"name": "rev", "code": {"path": guest}, "input": {"text": "stressed", "report": true}}));
    let shown = w.show(&id);
    assert_eq!(shown["output"]["rev"]["reversed"], "desserts", "{shown}");
    assert_eq!(shown["artifacts"][0]["name"], "reversed.txt", "{shown}");
    // ... and a status update with data, recorded as the run's event.
    let events = w.run(&["runs", "events", &id, "--json"]);
    let progress: Vec<serde_json::Value> = events
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| e["kind"] == "progress")
        .collect();
    assert_eq!(progress.len(), 1, "{}", events.stdout);
    assert_eq!(progress[0]["data"], json!({"message": "reversed", "data": {"code_points": 8}}));
    let dir = w.dir.path().join("out2");
    w.run(&["runs", "artifacts", &id, "--out", dir.to_str().unwrap()]).expect_code(0);
    assert_eq!(std::fs::read_to_string(dir.join("reversed.txt")).unwrap(), "desserts");
    let listed = w.run(&["runs", "artifacts", &id, "--json"]);
    listed.expect_code(0);
    assert_eq!(listed.json()[0]["sha256"].as_str().unwrap().len(), 64);
}
