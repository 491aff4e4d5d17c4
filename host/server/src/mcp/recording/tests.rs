//! Unit tests of recordings: names, refs, proposals, the definition (its
//! dependencies inferred from refs), removal, and what a save says.

use serde_json::json;

use super::*;

/// A call to a tool its server does not annotate read-only (a write).
fn call(name: &str, server: &str, tool: &str, arguments: Value, output: Value) -> RecordedStep {
    RecordedStep {
        name: name.into(),
        tool: Some((server.into(), tool.into())),
        code: None,
        input: arguments.clone(),
        arguments,
        output,
        read_only: false,
    }
}

/// A call to a tool annotated `readOnlyHint: true`.
fn read(name: &str, server: &str, tool: &str, arguments: Value, output: Value) -> RecordedStep {
    RecordedStep { read_only: true, ..call(name, server, tool, arguments, output) }
}

fn rec() -> Recording {
    let mut r = Recording::new(json!({"message": "hello", "n": 2}));
    let name = r.next_name("echo");
    assert_eq!(name, "echo_1");
    r.push(read(&name, "everything", "echo", json!({"message": "hello"}), json!("Echo: hello")));
    let name = r.next_name("write_file");
    r.push(call(
        &name,
        "fs",
        "write_file",
        json!({"path": "/tmp/out.txt", "content": "Echo: hello"}),
        json!({"content": "Successfully wrote to /tmp/out.txt"}),
    ));
    r
}

#[test]
fn names_use_the_tool_with_a_counter() {
    let mut r = rec();
    assert_eq!(r.next_name("echo"), "echo_2");
    assert_eq!(stem("get-user.v2"), "get_user_v2");
    assert_eq!(stem("3d"), "_3d");
    r.steps[0].name = "echo_2".into();
    assert_eq!(r.next_name("echo"), "echo_1", "the lowest free counter");
}

#[test]
fn refs_in_arguments_resolve_against_what_was_recorded() {
    let r = rec();
    let v = r.resolve(&json!({"text": "@echo_1", "say": "n=@input.n", "lit": "@@home"})).unwrap();
    assert_eq!(v, json!({"text": "Echo: hello", "say": "n=2", "lit": "@home"}));
    let e = r.resolve(&json!({"x": "@nope_1.id"})).unwrap_err();
    assert!(e.contains("nope_1") && e.contains("echo_1"), "{e}");
    let e = r.resolve(&json!({"x": "@echo_2"})).unwrap_err();
    assert!(e.contains("did you mean `echo_1`"), "{e}");
    // A ref that leads nowhere is refused now, as a replay would fail.
    let e = r.resolve(&json!({"x": "@echo_1.text"})).unwrap_err();
    assert!(e.contains("`@echo_1.text` resolves to nothing") && e.contains("a string"), "{e}");
    assert_eq!(r.resolve(&json!({"x": "@echo_1.text?"})).unwrap(), json!({"x": null}));
}

#[test]
fn literals_equal_to_input_or_earlier_outputs_are_proposed() {
    let r = rec();
    let p = r.propose();
    let got: Vec<(&str, &str, &str)> =
        p.iter().map(|x| (x.step.as_str(), x.path.as_str(), x.reference.as_str())).collect();
    assert_eq!(got, vec![("echo_1", "/message", "@input.message"), ("write_file_1", "/content", "@echo_1")]);
    assert_eq!(p[0].id, "r1");
    assert_eq!(p[1].value, json!("Echo: hello"));
}

#[test]
fn input_values_inside_longer_strings_are_proposed_as_refs_in_the_text() {
    let mut r = Recording::new(json!({"name": "zoe", "file": "notes", "greeting": "Hello there"}));
    r.push(read("greet_1", "everything", "echo", json!({"message": "@config.greeting zoe!"}), json!("x")));
    r.push(read("echo_1", "everything", "echo", json!({"message": "xzoe zoe_2 (zoe) Hello there, zoe."}), json!("y")));
    r.push(call("write_1", "fs", "write_file", json!({"path": "out/notes.txt", "content": "zoe.name"}), json!("z")));
    let p = r.propose();
    let got: Vec<(&str, &str, &str)> =
        p.iter().map(|x| (x.step.as_str(), x.path.as_str(), x.reference.as_str())).collect();
    assert_eq!(
        got,
        vec![
            // A ref already in the text stays; the input value after it becomes one.
            ("greet_1", "/message", "@config.greeting @input.name!"),
            // Inside a word (`xzoe`, `zoe_2`) it stays text; the longest value goes first.
            ("echo_1", "/message", "xzoe zoe_2 (@input.name) @input.greeting, @input.name."),
        ],
        "`notes.txt` and `zoe.name` would read on as a field: left alone"
    );
    assert_eq!(p[0].value, json!("@config.greeting zoe!"));
    // Applied, a replay with another name says the new name.
    let args = r.arguments(&p);
    let scope = MapScope::new(json!({"name": "ann", "greeting": "Hi"})).with_step("config", json!({"greeting": "Hey"}));
    let t = Template::compile(args[0].1.clone()).unwrap();
    assert_eq!(t.resolve(&scope), json!({"message": "Hey ann!"}));
}

#[test]
fn small_and_unspecific_values_are_candidates_not_proposals() {
    let mut r = Recording::new(json!({"flag": true, "k": 1, "s": "ab", "a": 5, "b": 6}));
    r.push(call("a_1", "s", "a", json!({"x": true, "y": 1, "z": "ab", "n": 7}), json!(null)));
    r.push(call("sum_1", "e", "get-sum", json!({"a": 5, "b": 6}), json!("The sum of 5 and 6 is 11.")));
    let p = r.propose();
    assert!(p.is_empty(), "{p:?}");
    let c = r.candidates(&p);
    let got: Vec<(&str, &str, &str, &str)> =
        c.iter().map(|x| (x.id.as_str(), x.step.as_str(), x.path.as_str(), x.reference.as_str())).collect();
    assert_eq!(
        got,
        vec![
            ("c1", "a_1", "/x", "@input.flag"),
            ("c2", "a_1", "/y", "@input.k"),
            ("c3", "a_1", "/z", "@input.s"),
            ("c4", "sum_1", "/a", "@input.a"),
            ("c5", "sum_1", "/b", "@input.b")
        ]
    );
    // Nothing used: the review says every field is unused, and which
    // candidates would use it.
    let review = r.review(&[], &c);
    assert_eq!(review.unused_input, ["flag", "k", "s", "a", "b"]);
    assert!(review.warnings.iter().any(|w| w.contains("`a`") && w.contains("c4")), "{:?}", review.warnings);
    assert!(review.warnings.iter().any(|w| w.contains("no step uses the recording's input")));
    // Accepting c4 and c5 makes the sum follow the input.
    let review = r.review(&c[3..], &c[..3]);
    let a = review.effects.iter().find(|e| e.field == "a").unwrap();
    assert_eq!(a.changes, ["sum_1"]);
    assert!(!review.unused_input.contains(&"a".to_string()));
    let def = r.definition("sum", &c[3..], false, &r.order(&[]));
    assert_eq!(def["steps"][1]["input"], json!({"a": "@input.a", "b": "@input.b"}));
    assert_eq!(def["input_schema"]["required"], json!(["a", "b"]), "only the fields some step uses are required");
}

#[test]
fn dependencies_come_from_refs_so_independent_read_only_calls_stay_parallel() {
    let mut r = Recording::new(json!({"a": 15, "b": 27}));
    r.push(read("get_sum_1", "e", "get-sum", json!({"a": 15, "b": 27}), json!("The sum of 15 and 27 is 42.")));
    r.push(read("echo_1", "e", "echo", json!({"message": "unrelated"}), json!("Echo: unrelated")));
    r.push(read("echo_2", "e", "echo", json!({"message": "The sum of 15 and 27 is 42."}), json!("Echo: x")));
    r.push(read("echo_3", "e", "echo", json!({"message": "@echo_1 and @echo_2"}), json!("Echo: y")));
    let p = r.propose();
    assert!(r.order(&[]).is_empty(), "no writes, no order to keep");
    let def = r.definition("flow", &p, false, &r.order(&[]));
    let parsed = weft_model::from_value(&def, &weft_model::NoSchemas).unwrap();
    let g = weft_model::Graph::build(&parsed);
    let layers = g.layers().unwrap();
    assert_eq!(layers, [0, 0, 1, 2], "get_sum_1 and echo_1 are independent: {def}");
    assert!(def["steps"].as_array().unwrap().iter().all(|s| s.get("after").is_none()));
    let kept = r.definition("flow", &p, true, &[]);
    assert_eq!(kept["steps"][1]["after"], json!(["get_sum_1"]), "keep_order chains the calls");
    let review = r.review(&p, &[]);
    let a = review.effects.iter().find(|e| e.field == "a").unwrap();
    assert_eq!(
        (a.changes.as_slice(), a.through.as_slice()),
        (&["get_sum_1".to_string()][..], &["echo_2".to_string(), "echo_3".to_string()][..])
    );
}

#[test]
fn a_step_can_be_removed_unless_another_uses_it() {
    let mut r = rec();
    r.push(call("echo_2", "everything", "echo", json!({"message": "@echo_1"}), json!("Echo: Echo: hello")));
    let e = r.remove(Some("echo_1")).unwrap_err();
    assert!(e.contains("echo_2"), "{e}");
    let e = r.remove(Some("ech_1")).unwrap_err();
    assert!(e.contains("did you mean `echo_1`"), "{e}");
    assert_eq!(r.remove(None).unwrap().name, "echo_2", "the last step by default");
    assert_eq!(r.next_name("echo"), "echo_2", "calling again takes the name back");
    assert_eq!(r.remove(Some("echo_1")).unwrap().name, "echo_1", "nothing uses it any more");
}

#[test]
fn the_definition_applies_accepted_replacements_only() {
    let r = rec();
    let p = r.propose();
    let def = r.definition("greet", &p[1..], false, &r.order(&[]));
    assert_eq!(def["steps"][0]["input"], json!({"message": "hello"}), "r1 refused");
    assert_eq!(def["steps"][1]["input"]["content"], "@echo_1");
    assert!(def["steps"][1].get("after").is_none(), "the ref is the dependency");
    assert_eq!(def["output"], "@write_file_1");
    assert_eq!(def["input_schema"]["properties"]["message"]["type"], "string");
    assert_eq!(def["input_schema"]["required"], json!([]), "r1 refused: no step uses `message`");
    let parsed = weft_model::from_value(&def, &weft_model::NoSchemas);
    assert!(parsed.is_ok(), "{parsed:?}");
}

#[test]
fn code_steps_and_presets_are_steps_too() {
    let mut r = Recording::new(json!({}));
    r.push(RecordedStep {
        name: "preset_1".into(),
        tool: None,
        code: None,
        arguments: Value::Null,
        input: Value::Null,
        output: json!({"user": {"name": "ada@example.com"}}),
        read_only: true,
    });
    r.push(RecordedStep {
        name: "json_select_1".into(),
        tool: None,
        code: Some(json!({"plugin": "json-select"})),
        arguments: json!({"data": "@preset_1", "path": "user.name"}),
        input: json!({"data": {"user": {"name": "ada@example.com"}}, "path": "user.name"}),
        output: json!("ada@example.com"),
        read_only: true,
    });
    let def = r.definition("pick", &[], false, &r.order(&[]));
    assert_eq!(def["steps"][0]["input"]["data"], json!({"user": {"name": "ada@@example.com"}}), "escaped");
    assert_eq!(def["steps"][1]["code"], json!({"plugin": "json-select"}));
    assert_eq!(def["steps"][1]["input"]["data"], "@preset_1");
    assert!(weft_model::from_value(&def, &weft_model::NoSchemas).is_ok(), "{def}");
}

#[test]
fn side_effects_keep_their_order_where_no_data_passes() {
    let mut r = Recording::new(json!({"fname": "/tmp/a.txt", "text": "hi"}));
    r.push(call("write_file_1", "fs", "write_file", json!({"path": "/tmp/a.txt", "content": "hi"}), json!("ok")));
    r.push(read("read_text_file_1", "fs", "read_text_file", json!({"path": "/tmp/a.txt"}), json!("hi")));
    r.push(read("echo_1", "e", "echo", json!({"message": "x"}), json!("Echo: x")));
    r.push(call("notify_1", "chat", "post", json!({"text": "done"}), json!("ok")));
    let order = r.order(&[]);
    let pairs: Vec<(&str, &str)> = order.iter().map(|o| (o.step.as_str(), o.after.as_str())).collect();
    // A read after a write to its server; a write after the write before
    // it; a read-only call on another server is free.
    assert_eq!(pairs, [("read_text_file_1", "write_file_1"), ("notify_1", "write_file_1")], "{order:?}");
    assert!(
        order[0].why.contains("fs__read_text_file reads from the server `fs` that fs__write_file wrote"),
        "{order:?}"
    );
    let def = r.definition("files", &r.propose(), false, &order);
    assert_eq!(def["steps"][1]["after"], json!(["write_file_1"]), "{def}");
    assert!(def["steps"][2].get("after").is_none(), "{def}");
    assert!(weft_model::from_value(&def, &weft_model::NoSchemas).is_ok(), "{def}");
    // The caller may drop a kept order.
    let loose = r.order(&["notify_1".to_string()]);
    assert_eq!(loose.len(), 1);
    assert_eq!(loose[0].step, "read_text_file_1");
}
