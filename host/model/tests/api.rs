//! The public API end to end: parse → validate → resolve, run-input
//! validation, typed validation, errors and defaults.

use serde_json::json;
use weft_model::graph::{to_dot, to_mermaid};
use weft_model::{
    Action, Definition, Graph, MapScope, NoSchemas, Problem, StepState, parse_and_validate, validate, validate_against,
    validate_input,
};

const ONBOARD: &str = r#"{
  "name": "onboard-user", "version": 1,
  "input_schema": {"type": "object", "required": ["email"], "properties": {"email": {"type": "string"}, "admins": {"type": "array"}}},
  "steps": [
    {"name": "validate", "code": {"plugin": "validate-email"}, "input": {"email": "@input.email"}},
    {"name": "exit_if_invalid", "when": {"ref": "@validate.ok", "eq": false}, "return": {"error": "@validate.error"}},
    {"name": "create", "when": {"ref": "@validate.ok", "eq": true}, "tool": {"server": "crm", "name": "create_user"},
     "input": {"email": "@input.email"}, "timeout_ms": 30000,
     "retry": {"max_attempts": 3, "backoff": "exponential", "initial_delay_ms": 200, "max_delay_ms": 5000}},
    {"name": "notify", "for_each": "@input.admins", "concurrency": 4, "tool": {"server": "chat", "name": "send"},
     "input": {"to": "@item", "text": "new user @create.id", "n": "@index"}},
    {"name": "undo", "after": [{"step": "create", "on": "failure"}], "tool": {"server": "crm", "name": "rollback"}, "input": {}}
  ],
  "output": {"user": "@create.id", "notified": "@notify"}
}"#;

#[test]
fn onboard_user_parses_and_resolves() {
    let def = parse_and_validate(ONBOARD, &NoSchemas).unwrap();
    assert_eq!(def.steps.len(), 5);
    let exit = def.step("exit_if_invalid").unwrap();
    assert_eq!(exit.action, Action::Return);
    let scope = MapScope::new(json!({"email": "a@b.c", "admins": ["x", "y"]}))
        .with_step("validate", json!({"ok": false, "error": "bad domain"}));
    assert!(exit.when.as_ref().unwrap().evaluate(&scope));
    assert!(!def.step("create").unwrap().when.as_ref().unwrap().evaluate(&scope));
    assert_eq!(exit.input.resolve(&scope), json!({"error": "bad domain"}));

    let notify = def.step("notify").unwrap();
    let item = scope.clone().with_step("create", json!({"id": 7})).with_item(json!("x"), 0);
    assert_eq!(notify.input.resolve(&item), json!({"to": "x", "text": "new user 7", "n": 0}));
    assert_eq!(notify.for_each.as_ref().unwrap().resolve(&scope), json!(["x", "y"]));
    assert_eq!(notify.for_each_items(&scope), Some(Ok(vec![json!("x"), json!("y")])));
    assert_eq!(notify.for_each_items(&MapScope::new(json!({}))), Some(Ok(vec![])), "null is no items");
    assert_eq!(
        notify.for_each_items(&MapScope::new(json!({"admins": "bob"}))),
        Some(Err(weft_model::NotAnArray("a string")))
    );
    assert_eq!(def.step("create").unwrap().for_each_items(&scope), None);

    let done = scope.with_status("create", StepState::Skipped, json!(null)).with_step("notify", json!([1, 2]));
    assert_eq!(def.output.as_ref().unwrap().resolve(&done), json!({"user": null, "notified": [1, 2]}));

    assert_eq!(def.step("create").unwrap().effective_timeout_ms(), Some(30000));
    assert_eq!(def.step("validate").unwrap().effective_timeout_ms(), Some(10_000));
    assert_eq!(def.step("undo").unwrap().effective_timeout_ms(), Some(30_000));
    assert_eq!(def.step("validate").unwrap().retry_policy().max_attempts, 1);
    let bare = parse_and_validate(r#"{"name": "b", "steps": [{"name": "t", "tool": {"server": "s", "name": "n"}}, {"name": "r", "return": true}]}"#, &NoSchemas).unwrap();
    assert_eq!(bare.steps[0].resolve_input(&item), json!({}), "tools get {{}} without input");
    assert_eq!(bare.steps[1].resolve_input(&item), json!(null));
    assert_eq!(exit.resolve_input(&item), json!({"error": "bad domain"}));

    let g = Graph::build(&def);
    let order: Vec<&str> = g.topo_order().unwrap().into_iter().map(|i| g.name(i)).collect();
    assert_eq!(order, ["validate", "exit_if_invalid", "create", "notify", "undo"]);
    let sinks: Vec<&str> = g.sinks().into_iter().map(|i| g.name(i)).collect();
    assert_eq!(sinks, ["exit_if_invalid", "notify", "undo"]);
    assert!(to_mermaid(&def, &Default::default()).contains("s_create -. failure .-> s_undo"));
    assert!(to_dot(&def, &Default::default()).contains("\"validate\" -> \"create\";"));
}

#[test]
fn run_input_is_checked_against_input_schema() {
    let def = parse_and_validate(ONBOARD, &NoSchemas).unwrap();
    assert_eq!(validate_input(&def, &json!({"email": "a@b.c"})), Ok(()));
    let errs = validate_input(&def, &json!({"email": 5, "admins": "no"})).unwrap_err();
    let mut paths: Vec<&str> = errs.iter().map(|p| p.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["/admins", "/email"]);
    let errs = validate_input(&def, &json!({})).unwrap_err();
    assert_eq!(errs.len(), 1);
    // A missing property is reported where it belongs (a form's field).
    assert_eq!(errs[0].path, "/email");
    assert!(errs[0].message.contains("\"email\" is a required property"), "{}", errs[0].message);
    let wait_schema =
        json!({"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}});
    assert!(validate_against(&wait_schema, &json!({"approved": true})).is_ok());
    assert_eq!(validate_against(&wait_schema, &json!({"approved": "yes"})).unwrap_err()[0].path, "/approved");
}

#[test]
fn json_syntax_errors_have_line_and_column() {
    let errs = parse_and_validate("{\n  \"name\": \"x\",\n  \"steps\": [,]\n}", &NoSchemas).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].path, "");
    assert!(errs[0].message.contains("line 3 column 13"), "{}", errs[0]);
    assert!(errs[0].hint.as_deref().unwrap().contains("line 3 column 13"));
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = r#"{"name": "X", "steps": [
        {"name": "a", "code": {"plugin": "p"}, "input": "@b"},
        {"name": "b", "code": {"plugin": "p"}, "input": "@a", "retry": {"max_attempts": 0}},
        {"name": "a", "tool": {"server": "s", "name": "t"}, "typo": 1}]}"#;
    let errs = parse_and_validate(text, &NoSchemas).unwrap_err();
    let paths: Vec<&str> = errs.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/steps/2/typo", "/name", "/steps/2/name", "/steps/1/retry/max_attempts", "/steps/0/input"],
        "{errs:#?}"
    );
    assert!(errs[4].message.contains("cycle: a → b → a"));
}

#[test]
fn typed_definitions_built_in_code_are_validated() {
    let mut def = parse_and_validate(ONBOARD, &NoSchemas).unwrap();
    assert!(validate(&def, &NoSchemas).is_empty());
    let mut extra = def.steps[0].clone();
    extra.name = "get_user_1".into();
    extra.input = weft_model::Template::compile(json!({"id": "@nope.id"})).unwrap();
    extra.timeout_ms = Some(0);
    def.steps.push(extra);
    let problems = validate(&def, &NoSchemas);
    let expect = [
        Problem::new("/steps/5/timeout_ms", "`timeout_ms` must be an integer from 1 to 31622400000, got 0")
            .hint("durations are in milliseconds, at most a year"),
        Problem::new("/steps/5/input/id", "unknown step `nope`").hint(
            "the steps are `create`, `exit_if_invalid`, `get_user_1`, `notify`, `undo`, `validate`; `@input` is the run's input",
        ),
    ];
    assert_eq!(problems, expect);
}

#[test]
fn deserialize_runs_validation() {
    let def: Definition = serde_json::from_str(ONBOARD).unwrap();
    assert_eq!(def.name, "onboard-user");
    let err = serde_json::from_value::<Definition>(json!({"name": "x", "steps": [{"name": "a"}]})).unwrap_err();
    assert!(err.to_string().contains("/steps/0: step has no action"), "{err}");
}

#[test]
fn problems_serialize_for_mcp_and_cli() {
    let p = Problem::new("/steps/1/after/0", "unknown step `x`").hint("did you mean `y`?");
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        json!({"path": "/steps/1/after/0", "message": "unknown step `x`", "hint": "did you mean `y`?"})
    );
    assert_eq!(serde_json::to_value(Problem::new("", "m")).unwrap(), json!({"path": "", "message": "m"}));
}

#[test]
fn event_waits_match_on_top_level_fields() {
    let def = parse_and_validate(
        r#"{"name": "w", "steps": [
            {"name": "send", "tool": {"server": "chat", "name": "post"}},
            {"name": "reply", "wait": {"event": "chat.reply", "match": {"channel": "@send.channel", "n": 1}}},
            {"name": "any", "wait": {"event": "chat.reply"}}]}"#,
        &NoSchemas,
    )
    .unwrap();
    let scope = MapScope::new(json!({})).with_step("send", json!({"channel": "C1"}));
    let wait = |i: usize| match &def.steps[i].action {
        Action::Wait(w) => w.clone(),
        other => panic!("{other:?}"),
    };
    assert!(wait(1).matches_event(&scope, &json!({"channel": "C1", "n": 1.0, "text": "ok"})));
    assert!(!wait(1).matches_event(&scope, &json!({"channel": "C2", "n": 1})));
    assert!(!wait(1).matches_event(&scope, &json!({"channel": "C1"})));
    assert!(wait(2).matches_event(&scope, &json!(null)));
}

#[test]
fn a_waits_preview_takes_refs_and_goes_with_signals_only() {
    let ok = r#"{"name": "x", "steps": [
        {"name": "draft", "code": {"plugin": "p"}},
        {"name": "approve", "wait": {"prompt": "Send it?", "preview": {"text": "@draft.text"}}}]}"#;
    let def = parse_and_validate(ok, &NoSchemas).unwrap();
    assert!(def.steps[1].depends_on("draft"), "a ref in the preview orders the wait after its step");
    let bad = r#"{"name": "x", "steps": [
        {"name": "a", "wait": {"preview": "@nope.text"}},
        {"name": "b", "wait": {"event": "e", "preview": 1}}]}"#;
    let errs = parse_and_validate(bad, &NoSchemas).unwrap_err();
    let paths: Vec<&str> = errs.iter().map(|p| p.path.as_str()).collect();
    assert!(paths.contains(&"/steps/0/wait/preview"), "{errs:#?}");
    let event = errs.iter().find(|p| p.path == "/steps/1/wait/preview").expect("preview on an event wait");
    assert!(event.message.contains("applies to signals"), "{event:?}");
}
