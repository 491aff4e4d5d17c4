//! The bundled plugins, run through `weft` by name with no set-up: each
//! does its real job and declares its schemas.

use serde_json::{Value, json};

use crate::common::Weft;

fn run(w: &Weft, plugin: &str, input: Value) -> Value {
    let out = w.run(&["step", "run", plugin, "--input", &input.to_string()]);
    out.expect_code(0);
    out.json()
}

fn fails(w: &Weft, plugin: &str, input: Value) -> Value {
    let out = w.run(&["step", "run", plugin, "--input", &input.to_string()]);
    out.expect_code(1);
    out.json()
}

#[test]
fn every_bundled_plugin_describes_its_input_and_output() {
    let w = Weft::new();
    for name in ["json-select", "text-template", "regex-extract", "json-validate", "csv-to-json"] {
        let out = w.run(&["plugin", "inspect", name]);
        out.expect_code(0);
        let v = out.json();
        assert_eq!(v["name"], name);
        assert_eq!(v["input_schema"]["type"], "object", "{name}: {v}");
        assert!(v["output_schema"].is_object(), "{name}: {v}");
        assert!(v["description"].as_str().unwrap().len() > 20, "{name}");
    }
}

#[test]
fn json_select_picks_a_value() {
    let w = Weft::new();
    let data = json!({"user": {"emails": ["a@x.org", "b@x.org"]}});
    assert_eq!(run(&w, "json-select", json!({"data": data, "path": "user.emails.1"})), json!("b@x.org"));
}

#[test]
fn text_template_renders_and_names_a_missing_variable() {
    let w = Weft::new();
    let out =
        run(&w, "text-template", json!({"template": "Hello {{user.name}}!", "values": {"user": {"name": "Ada"}}}));
    assert_eq!(out["text"], "Hello Ada!");
    let err = fails(&w, "text-template", json!({"template": "Hi {{nobody}}", "values": {}}));
    assert!(err["message"].as_str().unwrap().contains("nobody"), "{err}");
}

#[test]
fn regex_extract_finds_named_groups() {
    let w = Weft::new();
    let out = run(
        &w,
        "regex-extract",
        json!({"text": "orders 12-A and 99-B", "pattern": "(?P<num>\\d+)-(?P<kind>[A-Z])", "all": true}),
    );
    let matches = out["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 2);
    assert_eq!(matches[1]["groups"]["num"], "99");
    let err = fails(&w, "regex-extract", json!({"text": "x", "pattern": "("}));
    assert_eq!(err["kind"], "guest_error");
}

#[test]
fn json_validate_lists_violations() {
    let w = Weft::new();
    let schema = json!({"type": "object", "required": ["age"], "properties": {"age": {"type": "integer"}}});
    let ok = run(&w, "json-validate", json!({"schema": schema, "data": {"age": 3}}));
    assert_eq!(ok["valid"], true);
    let bad = run(&w, "json-validate", json!({"schema": schema, "data": {"age": "three"}}));
    assert_eq!(bad["valid"], false);
    assert!(bad["errors"].to_string().contains("/age"), "{bad}");
}

#[test]
fn csv_to_json_parses_rows_with_types() {
    let w = Weft::new();
    let out = run(&w, "csv-to-json", json!({"csv": "name,age\nAda,36\nAlan,41\n"}));
    assert_eq!(out["columns"], json!(["name", "age"]));
    assert_eq!(out["rows"][1], json!({"name": "Alan", "age": 41}));
}
