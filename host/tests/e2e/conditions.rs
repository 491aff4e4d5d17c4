//! `when` never compares across types silently: a number in a string (a
//! CSV's `"12.5"`) compares as its number, two numeric strings as numbers,
//! and a pair that cannot be compared fails the step with both types named;
//! a skipped step's event says what was tested. `where` picks a
//! `for_each` step's items by the same conditions, and the bundled `jq`
//! plugin filters and counts a list in one step.

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

/// "Keep orders over 10, echo each, return the count" in one definition
/// (tests/mcp-clients/jq_where_check.py, the official Python SDK, the real
/// server-everything): `for_each` + `where` echoes only the kept orders,
/// the bundled `jq` plugin counts them (a number, not a string), and a
/// filter with a typo is refused at validation, pointing into the filter.
#[test]
fn filter_echo_and_count_in_one_definition_with_where_and_jq() {
    let w = Weft::new();
    let seen = crate::serve_recording::play(&w, &crate::tools::everything_toml("everything"), "jq_where_check.py");
    assert!(seen["plugins"].as_array().unwrap().contains(&json!("jq")), "{seen}");
    let run = &seen["run"];
    assert_eq!(run["state"], "completed", "{run}");
    // "12.5" and "30" are over 10 ("10" and "4" are not): two echoes, counted as a number.
    assert_eq!(run["output"]["count"], json!(2), "{run}");
    assert_eq!(run["output"]["big"], json!(2), "{run}");
    let echoed = run["output"]["echoed"].to_string();
    assert!(echoed.contains("order b") && echoed.contains("order c"), "{echoed}");
    assert!(!echoed.contains("order a") && !echoed.contains("order d"), "left-out items did not run: {echoed}");
    // A literal filter with a typo is refused before the run, at its path,
    // by the very parser the guest runs.
    let typo = &seen["typo"];
    assert_eq!(typo["is_error"], true, "{typo}");
    assert_eq!(typo["structured"]["problems"][0]["path"], "/steps/3/input/filter", "{typo}");
    let error = typo["structured"]["problems"][0]["message"].as_str().unwrap_or("");
    assert!(error.contains("undefined filter `selekt`") && error.contains("filter 1:5"), "{typo}");
    let alone = &seen["where_alone"];
    assert_eq!(alone["valid"], false, "{alone}");
    assert_eq!(alone["problems"][0]["path"], "/steps/0/where", "{alone}");
}
