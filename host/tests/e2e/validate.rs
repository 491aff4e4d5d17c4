//! `weft validate` and `weft graph` as a user types them: every problem
//! with its JSON path and exit code 2, the `--json` shape, the drawn edges,
//! and the example workflows in examples/workflows/.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::{Weft, repo_root};

fn valid() -> Value {
    json!({
        "name": "extract-and-greet",
        "version": 3,
        "input_schema": {"type": "object", "required": ["text"]},
        "steps": [
            {"name": "find", "code": {"plugin": "regex-extract"},
             "input": {"text": "@input.text", "pattern": "(?P<name>[A-Z][a-z]+)"}},
            {"name": "first", "code": {"plugin": "json-select"},
             "input": {"data": "@find", "path": "matches.0.groups.name", "default": "stranger"}},
            {"name": "count", "code": {"plugin": "json-select"},
             "input": {"data": "@find.matches", "path": "$"}},
            {"name": "greet", "when": {"ref": "@first", "neq": "stranger"},
             "code": {"plugin": "text-template"},
             "input": {"template": "Hello {{who}}", "values": {"who": "@first"}}},
            {"name": "cleanup", "after": [{"step": "greet", "on": "failure"}], "return": true,
             "input": {"error": "could not greet"}}
        ]
    })
}

#[test]
fn a_valid_definition_passes_and_is_drawn() {
    let w = Weft::new();
    let file = w.write_file("ok.json", &valid());
    let f = file.to_str().unwrap();

    let out = w.run(&["validate", f]);
    out.expect_code(0);
    assert!(out.stderr.contains("ok: extract-and-greet v3 (5 steps)"), "{}", out.stderr);
    assert!(out.stdout.trim().is_empty(), "{}", out.stdout);

    let out = w.run(&["validate", f, "--json"]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({"valid": true, "name": "extract-and-greet", "version": 3, "steps": 5}));

    // A relative path works from the working directory too.
    w.run(&["validate", "ok.json"]).expect_code(0);

    let out = w.run(&["graph", f]);
    out.expect_code(0);
    let m = &out.stdout;
    assert!(m.starts_with("flowchart TD"), "{m}");
    for edge in ["s_find --> s_first", "s_find --> s_count", "s_first --> s_greet", "s_greet -. failure .-> s_cleanup"]
    {
        assert!(m.contains(edge), "{edge} missing from\n{m}");
    }
    let out = w.run(&["graph", f, "--format", "mermaid"]);
    out.expect_code(0);
    assert_eq!(&out.stdout, m);

    let out = w.run(&["graph", f, "--format", "dot"]);
    out.expect_code(0);
    let d = &out.stdout;
    assert!(d.starts_with("digraph \"extract-and-greet\""), "{d}");
    for edge in [
        "\"find\" -> \"first\";",
        "\"find\" -> \"count\";",
        "\"first\" -> \"greet\";",
        "\"greet\" -> \"cleanup\" [label=\"failure\"",
    ] {
        assert!(d.contains(edge), "{edge} missing from\n{d}");
    }
}

fn broken() -> Value {
    json!({
        "name": "broken",
        "steps": [
            // a → b → c → a: a cycle through refs.
            {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": "@c", "path": "x"}},
            // Unknown plugin.
            {"name": "b", "code": {"plugin": "no-such-plugin"}, "input": {"v": "@a"}},
            // `path` must be a string, and there is no `extra` in json-select's schema.
            {"name": "c", "code": {"plugin": "json-select"}, "input": {"data": "@b", "path": 5, "extra": true}},
            // A ref to a step that does not exist.
            {"name": "d", "code": {"plugin": "text-template"},
             "input": {"template": "{{x}}", "values": {"x": "@ghost.value"}}},
            // A guest file that is not there (relative to the definition's folder).
            {"name": "e", "code": {"path": "guests/missing.wasm"}, "after": ["d"]}
        ]
    })
}

#[test]
fn a_broken_definition_lists_every_problem_and_exits_2() {
    let w = Weft::new();
    let file = w.write_file("broken.json", &broken());
    let f = file.to_str().unwrap();

    let out = w.run(&["validate", f]);
    out.expect_code(2);
    let err = &out.stderr;
    assert!(out.stdout.trim().is_empty(), "{}", out.stdout);
    for (path, words) in [
        ("/steps/0/input/data", "cycle: a → b → c → a"),
        ("/steps/1/code", "unknown plugin `no-such-plugin`"),
        ("/steps/2/input/path", "input schema of plugin json-select"),
        ("/steps/2/input", "'extra' was unexpected"),
        ("/steps/3/input/values/x", "unknown step `ghost`"),
        ("/steps/4/code", "guests/missing.wasm"),
    ] {
        let line = format!("{f}: {path}: ");
        let hit = err.lines().find(|l| l.starts_with(&line) && l.contains(words));
        assert!(hit.is_some(), "no `{line}...{words}` line in\n{err}");
    }
    assert!(err.contains("not a valid workflow definition (6 problems)"), "{err}");
    // Hints come in parentheses, in the terms of the command line.
    assert!(err.contains("(known plugins: csv-to-json, "), "{err}");
    assert!(err.contains("`weft plugin list` shows the installed plugins"), "{err}");

    let out = w.run(&["validate", f, "--json"]);
    out.expect_code(2);
    let v = out.json();
    assert_eq!(v["valid"], false);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 6, "{v:#}");
    for p in problems {
        assert!(p["path"].as_str().unwrap().starts_with("/steps/"), "{p}");
        assert!(p["message"].as_str().is_some_and(|m| !m.is_empty()), "{p}");
        let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
        assert!(keys.iter().all(|k| ["path", "message", "hint"].contains(&k.as_str())), "{p}");
    }
    let paths: Vec<&str> = problems.iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"/steps/1/code") && paths.contains(&"/steps/4/code"), "{paths:?}");

    // graph refuses the same definition with the same problems.
    let out = w.run(&["graph", f]);
    out.expect_code(2);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(out.stderr.contains(&format!("{f}: /steps/1/code: unknown plugin")), "{}", out.stderr);
}

#[test]
fn syntax_errors_missing_files_and_non_files_exit_2_clearly() {
    let w = Weft::new();
    let file = w.dir.path().join("syntax.json");
    std::fs::write(&file, "{\n  \"name\": \"x\",\n  \"steps\": [,]\n}\n").unwrap();
    let f = file.to_str().unwrap();
    let out = w.run(&["validate", f]);
    out.expect_code(2);
    assert!(out.stderr.contains(&format!("{f}:3:")), "{}", out.stderr);
    assert!(out.stderr.contains("invalid JSON"), "{}", out.stderr);
    let out = w.run(&["validate", f, "--json"]);
    out.expect_code(2);
    let v = out.json();
    assert_eq!(v["valid"], false);
    assert_eq!(v["problems"][0]["line"], 3);
    assert!(v["problems"][0]["column"].as_u64().is_some(), "{v}");

    let out = w.run(&["validate", "no-such-file.json"]);
    out.expect_code(2);
    assert!(out.stderr.contains("no file `no-such-file.json`"), "{}", out.stderr);

    let out = w.run(&["graph", "onboard-user"]);
    out.expect_code(2);
    assert!(out.stderr.contains("neither a file, a saved template nor a run id"), "{}", out.stderr);
    let out = w.run(&["graph", f, "--format", "svg"]);
    out.expect_code(2);
}

#[test]
fn a_guest_file_next_to_the_definition_is_found_and_its_schema_applies() {
    let w = Weft::new();
    let sub = w.dir.path().join("flows");
    std::fs::create_dir_all(sub.join("guests")).unwrap();
    std::fs::copy(weft_test_artifacts::HOSTILE, sub.join("guests/hostile.wasm")).unwrap();
    let def = json!({"name": "local", "steps": [
        {"name": "ok", "code": {"path": "guests/hostile.wasm"}, "input": {"mode": "ok"}},
        {"name": "no_mode", "code": {"path": "guests/hostile.wasm"}, "input": {"echo": 1}}
    ]});
    std::fs::write(sub.join("local.json"), def.to_string()).unwrap();
    // Run from the temp dir: the path is relative to flows/, not to the cwd.
    let out = w.run(&["validate", "flows/local.json", "--json"]);
    out.expect_code(2);
    let v = out.json();
    let paths: Vec<&str> = v["problems"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/steps/1/input"], "{v:#}");
    assert!(v["problems"][0]["message"].as_str().unwrap().contains("mode"), "{v:#}");
}

#[test]
fn the_example_workflows_validate() {
    let dir = repo_root().join("examples/workflows");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let names: Vec<String> = files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for expected in ["text-pipeline.json", "csv-check.json"] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
    let w = Weft::new();
    for file in &files {
        let f = file.to_str().unwrap();
        let out = w.run(&["validate", f, "--json"]);
        out.expect_code(0);
        let v = out.json();
        assert_eq!(v["valid"], true, "{f}: {v}");
        assert_eq!(format!("{}.json", v["name"].as_str().unwrap()), file.file_name().unwrap().to_string_lossy(), "{f}");
        w.run(&["graph", f]).expect_code(0);
    }
    // The parallel branches and the `when` of text-pipeline are drawn.
    let out = w.run(&["graph", dir.join("text-pipeline.json").to_str().unwrap()]);
    for part in
        ["s_orders --> s_first_order", "s_emails --> s_first_email", "s_first_order{{", "s_first_email --> s_summary"]
    {
        assert!(out.stdout.contains(part), "{part} missing from\n{}", out.stdout);
    }
}

/// Names have a length cap, numbers are range-checked with the engine's
/// limits, and what a user wrote reaches no terminal raw: an ESC in a step
/// name, a field or a template name is shown escaped, a 100,000-character
/// name is cut, and `weft run` of the same file stores nothing.
#[test]
fn long_names_control_characters_and_numbers_out_of_range_are_refused_escaped() {
    let w = Weft::new();
    let def = json!({
        "name": "t".repeat(5000),
        "steps": [
            {"name": "a\u{1b}[31mred", "return": {}},
            {"name": "n".repeat(100_000), "return": {}},
            {"name": "c", "code": {"plugin": "json-select"}, "timeout_ms": u64::MAX, "priority": i64::MIN,
             "retry": {"max_attempts": 1_000_000}},
            {"name": "d", "return": {}, "bell\u{7}\u{1b}]0;title\u{7}": 1},
            {"name": "e", "workflow": {"template": "x\u{1b}[2J"}}
        ]
    });
    let file = w.write_file("hostile.json", &def);
    let f = file.to_str().unwrap();
    let out = w.run(&["validate", f]);
    out.expect_code(2);
    let err = &out.stderr;
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "a control character reached the terminal raw");
    assert!(err.len() < 8000, "names are cut, not echoed whole ({} bytes)", err.len());
    for (path, words) in [
        ("/name", "5000 characters long; at most 128"),
        ("/steps/0/name", "invalid step name `a\\u{1b}[31mred`"),
        ("/steps/1/name", "100000 characters long; at most 128"),
        ("/steps/2/timeout_ms", "must be an integer from 1 to 31622400000"),
        ("/steps/2/priority", "from -1000000 to 1000000"),
        ("/steps/2/retry/max_attempts", "from 1 to 10000"),
        ("/steps/3/bell\\u{7}\\u{1b}]0;title\\u{7}", "unknown field"),
        ("/steps/4/workflow/template", "invalid template name `x\\u{1b}[2J`"),
    ] {
        let line = format!("{f}: {path}: ");
        assert!(err.lines().any(|l| l.starts_with(&line) && l.contains(words)), "no `{line}...{words}` in\n{err}");
    }

    // The JSON report keeps the JSON Pointers exact; messages are escaped.
    let out = w.run(&["validate", f, "--json"]);
    out.expect_code(2);
    assert!(!out.stdout.contains('\u{1b}'));
    let v = out.json();
    let problems = v["problems"].as_array().unwrap();
    assert!(problems.iter().any(|p| p["path"] == "/steps/3/bell\u{7}\u{1b}]0;title\u{7}"), "{v:#}");
    assert!(problems.iter().all(|p| !p["message"].as_str().unwrap().contains('\u{1b}')), "{v:#}");

    // Running it is refused the same way, and nothing is stored.
    let out = w.run(&["run", f]);
    out.expect_code(2);
    assert!(!out.stderr.contains('\u{1b}'), "weft run shows the problems escaped too");
    let out = w.run(&["runs", "list", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json(), json!([]));
}

/// A key given twice in one object is refused with its path and line (the
/// last would silently win), nothing stored; a UTF-8 byte-order mark is
/// skipped.
#[test]
fn duplicate_keys_are_refused_and_a_byte_order_mark_is_not() {
    let w = Weft::new();
    let dup = w.dir.path().join("dup.json");
    std::fs::write(
        &dup,
        "{\"name\": \"dup\", \"steps\": [\n  {\"name\": \"a\", \"sleep\": {\"ms\": 1}, \"sleep\": {\"ms\": 99999}}\n]}",
    )
    .unwrap();
    for cmd in ["validate", "run"] {
        let out = w.run(&[cmd, dup.to_str().unwrap()]);
        assert_eq!(out.code, 2, "{cmd}: {}{}", out.stdout, out.stderr);
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(said.contains("/steps/0/sleep") && said.contains("twice"), "{cmd}: {said}");
        assert!(said.contains("line 2"), "{cmd}: {said}");
    }
    assert!(w.runs().is_empty(), "a refused definition was stored");
    let bom = w.dir.path().join("bom.json");
    let text = serde_json::json!({"name": "bom", "steps": [{"name": "a", "sleep": {"ms": 1}}]}).to_string();
    std::fs::write(&bom, format!("\u{feff}{text}")).unwrap();
    let out = w.run(&["run", bom.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// `for_each` on a `sleep` (its time is the same for every item) and
/// `concurrency` on a `for_each` wait (every item waits at once) are
/// refused before anything runs; on a `wait` or `workflow` step it is
/// valid (one wait, one child run per item: e2e `waits`).
#[test]
fn for_each_where_it_cannot_mean_anything_is_refused() {
    let w = Weft::new();
    let cases = [
        (
            json!({"name": "each", "for_each": ["a", "b"], "sleep": {"ms": 1}}),
            "/steps/0/for_each: a `sleep` step cannot have `for_each`",
        ),
        (
            json!({"name": "each", "for_each": ["a", "b"], "concurrency": 1, "wait": {"prompt": "approve @item?"}}),
            "/steps/0/concurrency: `concurrency` does not apply to a `wait` step",
        ),
    ];
    for (k, (step, want)) in cases.into_iter().enumerate() {
        let def = json!({"name": format!("each-{k}"), "steps": [step]});
        let file = w.write_def(&format!("each-{k}"), &def);
        let out = w.run(&["validate", file.to_str().unwrap()]);
        out.expect_code(2);
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
        // Nor does a run start.
        w.run(&["run", file.to_str().unwrap()]).expect_code(2);
    }
    assert!(w.runs().is_empty(), "nothing was stored");
    let ok = json!({"name": "each-ok", "steps": [{"name": "each", "for_each": ["a"], "wait": {"prompt": "approve @item?"}}]});
    let file = w.write_def("each-ok", &ok);
    w.run(&["validate", file.to_str().unwrap()]).expect_code(0);
}

/// A ref the definition itself rules out is refused at validation, not at
/// run time: `@input.whom` where the input_schema lists `who` and allows
/// no other property; a ref to an unknown step lists the steps.
#[test]
fn refs_the_definition_rules_out_are_refused_before_a_run() {
    let w = Weft::new();
    let def = json!({"name": "greet", "input_schema": {"type": "object", "additionalProperties": false,
        "required": ["who"], "properties": {"who": {"type": "string"}}},
    "steps": [
        {"name": "hello", "code": {"plugin": "json-select"}, "input": {"data": {"w": "@input.whom"}, "path": "w"}},
        {"name": "out", "return": {"said": "@helo", "x": "@zzz"}}
    ]});
    let file = w.write_def("greet", &def);
    let out = w.run(&["validate", file.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("/steps/0/input/data/w: `@input.whom` can never have a value"), "{}", out.stderr);
    assert!(out.stderr.contains("did you mean `who`?"), "{}", out.stderr);
    assert!(out.stderr.contains("/steps/1/return/said: unknown step `helo`"), "{}", out.stderr);
    assert!(out.stderr.contains("the steps are `hello`, `out`"), "{}", out.stderr);
    // Fixed, it validates and runs.
    let mut fixed = def.clone();
    fixed["steps"][0]["input"]["data"]["w"] = json!("@input.who");
    fixed["steps"][1]["return"] = json!({"said": "@hello"});
    let file = w.write_def("greet", &fixed);
    let out = w.run(&["run", file.to_str().unwrap(), "--input", r#"{"who": "Ada"}"#]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({"said": "Ada"}));
}

/// workflow_validate (over MCP, the official Python SDK) keeps a
/// definition's warnings when it also has problems: fixing the problems
/// must not be the first time the agent hears of `{{x}}` text.
#[test]
fn validation_keeps_its_warnings_when_it_has_problems() {
    let Some(py) = crate::serve::python("validation_keeps_its_warnings_when_it_has_problems") else { return };
    let w = Weft::new();
    let server = crate::serve::Server::start(&w, &["--http", "127.0.0.1:0"]);
    let def = json!({"name": "warned", "steps": [
        {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": {"m": "{{get_sum_1}}"}, "path": "m"}},
        {"name": "b", "return": {"x": "@nope"}}
    ]});
    let calls = json!([["workflow_validate", {"definition": def}]]);
    let seen = crate::serve::run_script(
        &py,
        &repo_root().join("tests/mcp-clients/calls.py"),
        &["--url", &server.url, "--calls", &calls.to_string()],
    );
    let out = &seen[0]["structured"];
    assert_eq!(out["valid"], false, "{seen}");
    assert!(out["problems"].to_string().contains("unknown step `nope`"), "{out}");
    let warnings = out["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w["path"] == "/steps/0/input/data/m" && w["message"].as_str().unwrap().contains("{{")),
        "{out}"
    );
}

/// Validation agrees with running for refs into what schemas describe
/// (server-everything's live tools): a field of a for_each step's array
/// (`@a.length`), a property the tool's closed output schema does not list
/// (`@weather.humidty`), and an input typed string by the input_schema
/// passed where the tool wants a number are refused, each at its path;
/// all of these passed validation and failed at run time before.
#[test]
fn refs_are_checked_against_output_schemas_and_argument_types() {
    let w = crate::tools::with_config(&crate::tools::everything_toml("everything"));
    let def = json!({"name": "gaps",
        "input_schema": {"type": "object", "properties": {"n": {"type": "string"}, "cities": {"type": "array"}}},
        "steps": [
            {"name": "weather", "for_each": "@input.cities", "tool": {"server": "everything", "name": "get-structured-content"},
             "input": {"location": "@item"}},
            {"name": "one", "tool": {"server": "everything", "name": "get-structured-content"}, "input": {"location": "Chicago"}},
            {"name": "sum", "tool": {"server": "everything", "name": "get-sum"}, "input": {"a": "@input.n", "b": 2}},
            {"name": "out", "return": {"count": "@weather.length", "wet": "@one.humidty", "ok": "@one.humidity"}}]});
    let f = w.write_def("gaps", &def);
    let out = w.run(&["validate", f.to_str().unwrap(), "--json"]);
    out.expect_code(2);
    let got = out.json();
    let problems: Vec<(String, String)> = got["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["path"].as_str().unwrap().to_string(), p["message"].as_str().unwrap().to_string()))
        .collect();
    let at = |path: &str| {
        problems
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, m)| m.clone())
            .unwrap_or_else(|| panic!("no problem at {path}: {problems:?}"))
    };
    assert!(at("/steps/3/return/count").contains("`@weather` is an array"), "{problems:?}");
    assert!(at("/steps/3/return/wet").contains("`@one.humidty` can never have a value"), "{problems:?}");
    assert!(
        at("/steps/2/input/a").contains("`@input.n` is a string") && at("/steps/2/input/a").contains("wants a number"),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 3, "`@one.humidity` is fine: {problems:?}");
}
