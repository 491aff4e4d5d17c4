//! `when` never compares across types silently: a number in a string (a
//! CSV's `"12.5"`) compares as its number, two numeric strings as numbers,
//! and a pair that cannot be compared fails the step with both types named;
//! a skipped step's event says what was tested.

use serde_json::{Value, json};

use crate::common::Weft;

fn events(w: &Weft, id: &str) -> Vec<Value> {
    let out = w.run(&["runs", "events", id, "--json"]);
    out.expect_code(0);
    out.stdout.lines().map(|l| serde_json::from_str(l).expect("one JSON event per line")).collect()
}

fn step<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["steps"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap()
}

#[test]
fn numeric_strings_compare_as_numbers_and_a_skip_says_what_it_tested() {
    let w = Weft::new();
    let def = json!({"name": "csv-when", "steps": [
        {"name": "big", "code": {"plugin": "json-select"}, "input": {"data": {"v": "big"}, "path": "v"},
         "when": {"ref": "@input.total", "gt": 10}},
        {"name": "small", "code": {"plugin": "json-select"}, "input": {"data": {"v": "small"}, "path": "v"},
         "when": {"ref": "@input.total", "lt": "9"}},
        {"name": "same", "code": {"plugin": "json-select"}, "input": {"data": {"v": "same"}, "path": "v"},
         "when": {"ref": "@input.count", "eq": 3}},
        {"name": "out", "return": {"big": "@big", "small": "@small", "same": "@same"}}
    ]});
    let file = w.write_def("csv-when", &def);
    let out = w.run(&["run", file.to_str().unwrap(), "--input", r#"{"total": "12.5", "count": "3"}"#]);
    out.expect_code(0);
    // "12.5" > 10 and "3" == 3 as numbers; "12.5" < "9" is false as numbers
    // (as text it would be true).
    assert_eq!(out.json(), json!({"big": "big", "small": null, "same": "same"}));
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    let run = w.show(&id);
    assert_eq!(step(&run, "small")["state"], "skipped");
    let skip = events(&w, &id)
        .into_iter()
        .find(|e| e["kind"] == "step.skipped" && e["step"] == "small")
        .expect("a skip event for `small`");
    assert_eq!(
        skip["data"],
        json!({"state": "skipped", "reason": "when", "ref": "@input.total", "value": "12.5"}),
        "{skip}"
    );
}

#[test]
fn a_comparison_of_types_that_cannot_be_compared_fails_the_step_naming_both() {
    let w = Weft::new();
    let def = json!({"name": "mixed-when", "steps": [
        {"name": "check", "return": {"ok": true}, "when": {"ref": "@input.word", "gt": 10}}
    ]});
    let file = w.write_def("mixed-when", &def);
    let out = w.run(&["run", file.to_str().unwrap(), "--input", r#"{"word": "abc"}"#]);
    out.expect_code(1);
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    let run = w.show(&id);
    assert_eq!(run["state"], "failed");
    let check = step(&run, "check");
    assert_eq!(check["state"], "failed");
    let message = check["error"]["message"].as_str().unwrap();
    assert!(message.contains(r#"a string "abc" with a number 10"#), "{message}");
    assert_eq!(check["error"]["kind"], "validation", "{check}");
}
