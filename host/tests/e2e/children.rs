//! `workflow` steps through the real binary: the recursive example
//! (`examples/workflows/descend.json`, a template that starts itself),
//! parent/depth links in `runs list/show`, the depth cap, and a cancel of
//! the parent that reaches its waiting child.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::repo_root;

fn chain(depth: usize) -> Value {
    let mut node = json!({"name": format!("n{depth}"), "role": "leaf"});
    for k in (0..depth).rev() {
        node = json!({"name": format!("n{k}"), "role": "parent", "child": node});
    }
    node
}

on_both_stores! { fn the_recursive_example_walks_a_chain_with_one_child_run_per_level(w) {
    let file = repo_root().join("examples/workflows/descend.json");
    w.run(&["templates", "save", file.to_str().unwrap()]).expect_code(0);
    let input = json!({"node": chain(2)}).to_string();
    let out = w.run(&["run", "descend", "--input", &input]);
    out.expect_code(0);
    assert_eq!(
        out.json(),
        json!({"line": "n0 (parent)", "below": {"line": "n1 (parent)", "below": {"line": "n2 (leaf)", "below": null}}})
    );
    let runs = w.run(&["runs", "list", "--json"]).json();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3, "one run per level: {runs:?}");
    let root = runs.iter().find(|r| r["parent"].is_null()).unwrap();
    let child = runs.iter().find(|r| r["parent"] == root["id"]).expect("the root's child");
    let grandchild = runs.iter().find(|r| r["parent"] == child["id"]).expect("the child's child");
    assert!(runs.iter().all(|r| r["state"] == "completed"));
    let shown = w.show(root["id"].as_str().unwrap());
    let below = shown["steps"].as_array().unwrap().iter().find(|s| s["name"] == "below").unwrap();
    assert_eq!(below["output"]["line"], "n1 (parent)");
    assert_eq!(below["output"]["below"]["line"], "n2 (leaf)");
    assert_eq!(grandchild["template"], "descend");
    // Each run says how deep it nests (a top-level run says nothing).
    assert_eq!(shown.get("depth"), None);
    assert_eq!(w.show(grandchild["id"].as_str().unwrap())["depth"], 2);
    let human = w.run(&["runs", "show", grandchild["id"].as_str().unwrap()]);
    assert!(human.stdout.contains(&format!("parent   {} (depth 2)", child["id"].as_str().unwrap())), "{}", human.stdout);
} }

on_both_stores! { fn the_depth_cap_stops_a_runaway_template(w) {
    let file = repo_root().join("examples/workflows/descend.json");
    w.run(&["templates", "save", file.to_str().unwrap()]).expect_code(0);
    let input = json!({"node": chain(20)}).to_string();
    let out = w.run(&["run", "descend", "--input", &input, "--json"]);
    out.expect_code(1);
    let run = out.json();
    assert_eq!(run["state"], "failed");
    assert!(run["error"]["message"].as_str().unwrap().contains("at most 16 deep"), "{run}");
    let runs = w.run(&["runs", "list", "--json"]).json();
    assert_eq!(runs.as_array().unwrap().len(), 17, "the root and 16 levels of children");
} }

on_both_stores! { fn canceling_a_parent_cancels_its_waiting_child(w) {
    let kid = json!({"name": "ask", "version": 1, "steps": [{"name": "ok", "wait": {"prompt": "go?"}}]});
    let parent = json!({"name": "boss", "version": 1, "steps": [{"name": "c", "workflow": {"template": "ask"}}]});
    for d in [&kid, &parent] {
        let f = w.dir.path().join(format!("{}.json", d["name"].as_str().unwrap()));
        std::fs::write(&f, d.to_string()).unwrap();
        w.run(&["templates", "save", f.to_str().unwrap()]).expect_code(0);
    }
    let out = w.run(&["run", "boss", "--detach"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    let mut worker = w.cmd().arg("worker").stderr(std::process::Stdio::null()).spawn().unwrap();
    let t0 = Instant::now();
    let child = loop {
        let runs = w.run(&["runs", "list", "--json"]).json();
        if let Some(c) =
            runs.as_array().unwrap().iter().find(|r| r["parent"] == json!(id) && r["state"] == "input-required")
        {
            break c["id"].as_str().unwrap().to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the child never waited: {runs}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let parent_run = w.show(&id);
    assert_eq!(parent_run["state"], "working");
    assert_eq!(parent_run["waits"][0]["kind"], "child");
    assert_eq!(parent_run["waits"][0]["child"], json!(child));
    w.run(&["runs", "cancel", &id]).expect_code(0);
    let t0 = Instant::now();
    while w.show(&child)["state"] != "canceled" {
        assert!(t0.elapsed() < Duration::from_secs(10), "the child was not canceled: {}", w.show(&child));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(w.show(&id)["state"], "canceled");
    worker.kill().unwrap();
    worker.wait().unwrap();
} }
