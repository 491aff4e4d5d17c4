//! Unit tests of the graph: edges, topological order, sinks, cycles, rendering.

use std::collections::HashMap;

use serde_json::json;

use super::*;
use crate::status::StepState;

fn def(steps: serde_json::Value) -> Definition {
    // Build through decode only (cycles are allowed here, validation is not run).
    let mut problems = vec![];
    let d = crate::decode::decode(&json!({"name": "g", "steps": steps}), &mut problems).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    d.def
}

fn names(g: &Graph, v: &[usize]) -> Vec<String> {
    v.iter().map(|&i| g.name(i).to_owned()).collect()
}

#[test]
fn edges_from_refs_and_after() {
    let d = def(json!([
        {"name": "a", "return": true},
        {"name": "b", "code": {"plugin": "p"}, "input": {"x": "@a.x", "s": "@a.$status"}},
        {"name": "c", "code": {"plugin": "p"}, "input": "@b.$status"},
        {"name": "d", "code": {"plugin": "p"}, "input": "@b.y", "after": [{"step": "b", "on": "failure"}, "a"]},
        {"name": "e", "code": {"plugin": "p"}, "when": {"ref": "@a.ok"}, "for_each": "@c.items"}
    ]));
    let g = Graph::build(&d);
    let e: Vec<(String, String, EdgeOn, bool)> =
        g.edges().iter().map(|e| (g.name(e.from).into(), g.name(e.to).into(), e.on, e.explicit)).collect();
    let s = |a: &str, b: &str, on, x| (a.to_string(), b.to_string(), on, x);
    assert_eq!(
        e,
        [
            s("a", "b", EdgeOn::Success, false),
            s("b", "c", EdgeOn::Always, false),
            s("a", "d", EdgeOn::Success, true),
            s("b", "d", EdgeOn::Failure, true),
            s("a", "e", EdgeOn::Success, false),
            s("c", "e", EdgeOn::Success, false),
        ]
    );
    assert_eq!(names(&g, &g.roots()), ["a"]);
    assert_eq!(names(&g, &g.sinks()), ["d", "e"]);
    assert_eq!(g.dependencies(3).count(), 2);
    assert_eq!(g.dependents(0).count(), 3);
}

#[test]
fn topological_order_is_stable() {
    let d = def(json!([
        {"name": "z", "code": {"plugin": "p"}, "input": "@y"},
        {"name": "y", "code": {"plugin": "p"}, "input": "@x"},
        {"name": "x", "code": {"plugin": "p"}},
        {"name": "w", "code": {"plugin": "p"}}
    ]));
    let g = Graph::build(&d);
    // among ready steps the earliest declared goes first
    assert_eq!(names(&g, &g.topo_order().unwrap()), ["x", "y", "z", "w"]);
    assert!(g.cycles().is_empty());
}

#[test]
fn cycles_are_named() {
    let d = def(json!([
        {"name": "a", "code": {"plugin": "p"}, "input": "@c"},
        {"name": "b", "code": {"plugin": "p"}, "input": "@a"},
        {"name": "c", "code": {"plugin": "p"}, "after": ["b"]},
        {"name": "self_loop", "code": {"plugin": "p"}, "input": "@self_loop.x"},
        {"name": "ok", "code": {"plugin": "p"}, "input": "@a"},
        {"name": "p", "code": {"plugin": "p"}, "input": "@q"},
        {"name": "q", "code": {"plugin": "p"}, "input": "@p"}
    ]));
    let g = Graph::build(&d);
    let cycles: Vec<String> = g.cycles().iter().map(|c| g.describe_cycle(c)).collect();
    assert_eq!(cycles, ["a → b → c → a", "self_loop → self_loop", "p → q → p"]);
    let err = g.topo_order().unwrap_err();
    assert_eq!(g.describe_cycle(&err), "a → b → c → a");
}

#[test]
fn shortest_cycle_in_a_component() {
    let d = def(json!([
        {"name": "a", "code": {"plugin": "p"}, "after": ["b", "d"]},
        {"name": "b", "code": {"plugin": "p"}, "after": ["a"]},
        {"name": "c", "code": {"plugin": "p"}, "after": ["b"]},
        {"name": "d", "code": {"plugin": "p"}, "after": ["c"]}
    ]));
    let g = Graph::build(&d);
    let cycles: Vec<String> = g.cycles().iter().map(|c| g.describe_cycle(c)).collect();
    assert_eq!(cycles, ["a → b → a"]);
}

#[test]
fn renders_mermaid_and_dot() {
    let d = def(json!([
        {"name": "create", "tool": {"server": "crm", "name": "create_user"}},
        {"name": "notify", "for_each": "@input.admins", "tool": {"server": "chat", "name": "send"}, "input": "@create.id"},
        {"name": "undo", "after": [{"step": "create", "on": "failure"}], "tool": {"server": "crm", "name": "rollback"}},
        {"name": "done", "when": {"ref": "@create.ok", "eq": true}, "return": true, "after": [{"step": "notify", "on": "always"}]}
    ]));
    let m = to_mermaid(&d, &HashMap::new());
    assert!(m.starts_with("flowchart TD\n"), "{m}");
    assert!(m.contains("  s_create[\"create<br/>tool crm.create_user\"]"), "{m}");
    assert!(m.contains("  s_notify[[\"notify<br/>tool chat.send<br/>for each @input.admins\"]]"), "{m}");
    assert!(m.contains("s_done{{\"done<br/>return<br/>when @create.ok eq true\"}}"), "{m}");
    assert!(m.contains("  s_create --> s_notify\n"), "{m}");
    assert!(m.contains("  s_create -. failure .-> s_undo\n"), "{m}");
    assert!(m.contains("  s_notify == always ==> s_done\n"), "{m}");
    let states = HashMap::from([("create".to_string(), StepState::Succeeded)]);
    assert!(to_mermaid(&d, &states).contains("  class s_create succeeded\n"));

    let dot = to_dot(&d, &HashMap::new());
    assert!(dot.starts_with("digraph \"g\" {"), "{dot}");
    assert!(dot.contains("\"create\" -> \"undo\" [label=\"failure\", style=dashed, color=red];"), "{dot}");
    assert!(dot.contains("\"notify\" -> \"done\" [label=\"always\", style=bold];"), "{dot}");
    assert!(dot.contains("peripheries=2"), "{dot}");
    assert!(dot.contains("label=\"done\\nreturn\\nwhen @create.ok eq true\""), "{dot}");
    assert!(dot.contains("style=\"rounded,dashed\""), "{dot}");
    assert!(to_dot(&d, &states).contains("fillcolor=\"#c8e6c9\""));
    assert!(dot.trim_end().ends_with('}'));
}

#[test]
fn conditional_and_skip_edges_are_labelled() {
    let d = crate::from_value(
        &json!({"name": "w", "steps": [
            {"name": "check", "code": {"plugin": "p"}},
            {"name": "big", "code": {"plugin": "p"}, "after": [{"step": "check", "when": {"ref": "@check.ok", "eq": true}}]},
            {"name": "other", "code": {"plugin": "p"}, "after": [{"step": "big", "on": "skipped"}]}
        ]}),
        &crate::NoSchemas,
    )
    .unwrap();
    let m = to_mermaid(&d, &HashMap::new());
    assert!(m.contains("s_check -->|\"when @check.ok eq true\"| s_big"), "{m}");
    assert!(m.contains("s_big -. skipped .-> s_other"), "{m}");
    let dot = to_dot(&d, &HashMap::new());
    assert!(dot.contains("\"check\" -> \"big\" [label=\"when @check.ok eq true\"];"), "{dot}");
    assert!(dot.contains("\"big\" -> \"other\" [label=\"skipped\", style=dotted];"), "{dot}");
    // An edge's `when` may read only what the step depends on.
    let bad = json!({"name": "w", "steps": [
        {"name": "a", "code": {"plugin": "p"}}, {"name": "b", "code": {"plugin": "p"}},
        {"name": "c", "code": {"plugin": "p"}, "after": [{"step": "a", "when": {"ref": "@b.ok"}}]}]});
    let problems = crate::from_value(&bad, &crate::NoSchemas).unwrap_err();
    let p = &problems[0];
    assert_eq!(p.path, "/steps/2/after/0/when/ref", "{problems:?}");
    assert!(p.message.contains("reads `@b`, a step `c` does not depend on"), "{p:?}");
}
