//! The definition corpus: every `tests/data/bad-definitions/*.json` yields
//! exactly its expected problems (path + substring of message or hint), and
//! every `tests/data/good-definitions/*.json` validates, round-trips through
//! `Serialize`, and matches the published JSON Schema.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use weft_model::{CodeRef, Definition, Problem, SchemaLookup, definition_schema, parse_and_validate};

fn data(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// Schemas from a case's `"schemas": {"plugins": {NAME: S}, "tools": {"SERVER.TOOL": S}, "templates": {NAME: S}}`.
#[derive(Default)]
struct Schemas {
    plugins: HashMap<String, Value>,
    tools: HashMap<String, Value>,
    templates: HashMap<String, Value>,
}

impl Schemas {
    fn from(case: &Value) -> Schemas {
        let get = |k: &str| -> HashMap<String, Value> {
            case.pointer(&format!("/schemas/{k}"))
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default()
        };
        Schemas { plugins: get("plugins"), tools: get("tools"), templates: get("templates") }
    }
}

impl SchemaLookup for Schemas {
    fn code_input_schema(&self, code: &CodeRef) -> Option<Value> {
        match code {
            CodeRef::Plugin(p) => self.plugins.get(p).cloned(),
            _ => None,
        }
    }
    fn tool_input_schema(&self, server: &str, tool: &str) -> Option<Value> {
        self.tools.get(&format!("{server}.{tool}")).cloned()
    }
    fn template_input_schema(&self, template: &str, _version: Option<u32>) -> Option<Value> {
        self.templates.get(template).cloned()
    }
}

fn load(path: &Path) -> (Value, String) {
    let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = match case.get("definition_text") {
        Some(Value::String(t)) => t.clone(),
        _ => serde_json::to_string_pretty(&case["definition"]).unwrap(),
    };
    (case, text)
}

fn show(ps: &[Problem]) -> String {
    ps.iter().map(|p| format!("\n    {p}")).collect()
}

#[test]
fn bad_definitions_yield_exactly_the_expected_problems() {
    let files = data("bad-definitions");
    assert!(files.len() >= 20, "only {} bad cases", files.len());
    let mut failures = vec![];
    for path in &files {
        let (case, text) = load(path);
        let name = path.file_name().unwrap().to_string_lossy();
        let problems = match parse_and_validate(&text, &Schemas::from(&case)) {
            Ok(_) => {
                failures.push(format!("{name}: validated, but problems were expected"));
                continue;
            }
            Err(p) => p,
        };
        let expect = case["expect"].as_array().expect("expect: [...]");
        assert!(!expect.is_empty(), "{name}: no expectations");
        let mut left: Vec<&Problem> = problems.iter().collect();
        for e in expect {
            let (path_, sub) = (e["path"].as_str().unwrap(), e["contains"].as_str().unwrap());
            let hit = left.iter().position(|p| {
                p.path == path_ && (p.message.contains(sub) || p.hint.as_deref().is_some_and(|h| h.contains(sub)))
            });
            match hit {
                Some(i) => {
                    left.remove(i);
                }
                None => failures
                    .push(format!("{name}: no problem at `{path_}` containing `{sub}`; got:{}", show(&problems))),
            }
        }
        if !left.is_empty() {
            let extra: Vec<Problem> = left.into_iter().cloned().collect();
            failures.push(format!("{name}: unexpected problems:{}", show(&extra)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn good_definitions_validate_round_trip_and_match_the_schema() {
    let files = data("good-definitions");
    assert!(files.len() >= 5, "only {} good cases", files.len());
    let schema = jsonschema::validator_for(&definition_schema()).unwrap();
    for path in &files {
        let (case, text) = load(path);
        let name = path.file_name().unwrap().to_string_lossy();
        let lookup = Schemas::from(&case);
        let def = parse_and_validate(&text, &lookup).unwrap_or_else(|p| panic!("{name}:{}", show(&p)));
        let errors: Vec<String> =
            schema.iter_errors(&case["definition"]).map(|e| format!("{} {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{name}: as written, against the JSON Schema: {errors:?}");
        let canonical = serde_json::to_value(&def).unwrap();
        let errors: Vec<String> =
            schema.iter_errors(&canonical).map(|e| format!("{} {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{name}: canonical form against the JSON Schema: {errors:?}\n{canonical:#}");
        let again: Definition = serde_json::from_value(canonical.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(again, def, "{name}: round trip");
        assert_eq!(serde_json::to_value(&again).unwrap(), canonical, "{name}: canonical form is stable");
    }
}

#[test]
fn bad_definitions_do_not_match_the_schema_either_where_the_schema_can_tell() {
    // The schema is looser than validation (no cross-step rules), but shape
    // errors must be caught by both.
    let schema = jsonschema::validator_for(&definition_schema()).unwrap();
    for name in ["unknown-fields", "wrong-types", "missing-required", "no-action", "two-actions", "when-two-operators"]
    {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/data/bad-definitions/{name}.json"));
        let (case, _) = load(&path);
        assert!(!schema.is_valid(&case["definition"]), "{name} passes the JSON Schema");
    }
}
