//! Comparing two runs says what a replay's new input did not reach: a step
//! whose input stayed the same although the runs' inputs differ is named
//! in the summary, and a step with no input in one run (skipped) is not
//! reported as having the same input.

use serde_json::json;

use crate::common::Weft;

#[test]
fn a_step_the_new_input_did_not_reach_is_named_and_a_skipped_one_is_not_called_same() {
    let w = Weft::new();
    let def = json!({"name": "greet", "steps": [
        {"name": "follows", "code": {"plugin": "json-select"}, "input": {"data": {"w": "@input.who"}, "path": "w"}},
        {"name": "literal", "code": {"plugin": "json-select"}, "input": {"data": {"w": "zoe"}, "path": "w"}},
        {"name": "never", "code": {"plugin": "json-select"}, "input": {"data": {"w": 1}, "path": "w"},
         "when": {"ref": "@input.who", "eq": "nobody"}},
        {"name": "out", "return": {"a": "@follows", "b": "@literal"}, "after": ["never"]}
    ]});
    let file = w.write_def("greet", &def);
    let mut ids = vec![];
    for who in ["zoe", "ada"] {
        let input = json!({"who": who}).to_string();
        w.run(&["run", file.to_str().unwrap(), "--input", &input]).expect_code(0);
        ids.push(w.runs()[0]["id"].as_str().unwrap().to_string());
    }
    let out = w.run(&["runs", "diff", &ids[1], &ids[0], "--json"]);
    out.expect_code(0);
    let c = out.json();
    let step = |n: &str| c["steps"].as_array().unwrap().iter().find(|s| s["step"] == n).unwrap().clone();
    assert_eq!(step("follows")["input"]["same"], false, "{c}");
    assert_eq!(step("literal")["input"]["same"], true, "{c}");
    // Skipped in both runs: there was no input to compare.
    assert_eq!(step("never")["state"], json!(["skipped", "skipped"]), "{c}");
    assert_eq!(step("never")["input"], json!(null), "{c}");
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains("the runs' inputs differ but these steps got the same input") && summary.contains("`literal`"),
        "{summary}"
    );
    let named = summary.split("got the same input").nth(1).unwrap();
    assert!(!named.contains("`never`") && !named.contains("`follows`"), "{summary}");
}
