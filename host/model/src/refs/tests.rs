//! Unit tests of refs: every form, escaping, embedding, resolution.

use serde_json::{Value, json};

use super::*;
use crate::scope::MapScope;
use crate::status::StepState;
use crate::template::{CompiledValue, Template};

fn scope() -> MapScope {
    let mut s = MapScope::new(json!({"email": "a@b.c", "items": [10, 20, {"k": "v"}], "n": 3, "o": {"7": "seven"}}))
        .with_step("create", json!({"id": 42, "name": "Ann", "tags": ["x", "y"]}))
        .with_status("skip", StepState::Skipped, json!({"id": 1}))
        .with_status("bad", StepState::Failed, json!({"kind": "timeout"}))
        .with_item(json!({"to": "bob"}), 2);
    s.run_id = "r_1".into();
    s
}

fn resolve(v: Value) -> Value {
    Template::compile(v).unwrap().resolve(&scope())
}

#[test]
fn parse_every_form() {
    let p = |s: &str| parse_ref(s).unwrap();
    assert_eq!(p("@input"), Ref { root: RefRoot::Input, path: vec![], optional: false });
    assert_eq!(
        p("@input.a.b"),
        Ref { root: RefRoot::Input, path: vec![Segment::Key("a".into()), Segment::Key("b".into())], optional: false }
    );
    assert_eq!(p("@input.items.0").path, vec![Segment::Key("items".into()), Segment::Index(0)]);
    assert_eq!(p("@step_1.list.3.x").root, RefRoot::Step("step_1".into()));
    assert_eq!(p("@item").root, RefRoot::Item);
    assert_eq!(p("@item.to").path, vec![Segment::Key("to".into())]);
    assert_eq!(p("@index").root, RefRoot::Index);
    assert_eq!(p("@run.id").root, RefRoot::RunId);
    assert_eq!(p("@create.$status").root, RefRoot::StepStatus("create".into()));
    assert_eq!(p("@x.0abc").path, vec![Segment::Key("0abc".into())]);
    for s in ["@input.a.b", "@create.$status", "@run.id", "@index", "@s.list.3"] {
        assert_eq!(p(s).to_string(), s, "display round-trips");
    }
}

#[test]
fn parse_errors() {
    assert!(matches!(parse_ref("input"), Err(RefError::NotARef(_))));
    assert!(matches!(parse_ref("@"), Err(RefError::NotARef(_))));
    assert!(matches!(parse_ref("@a b"), Err(RefError::NotARef(_))));
    assert!(matches!(parse_ref("@a."), Err(RefError::NotARef(_))));
    assert!(matches!(parse_ref("@1abc"), Err(RefError::NotARef(_))));
    assert_eq!(parse_ref("@run"), Err(RefError::RunWithoutField));
    assert_eq!(parse_ref("@run.name"), Err(RefError::UnknownRunField("name".into())));
    assert_eq!(parse_ref("@run.id.x"), Err(RefError::UnknownRunField("id.x".into())));
    assert_eq!(parse_ref("@index.x"), Err(RefError::IndexHasNoFields));
    assert_eq!(parse_ref("@a.$foo"), Err(RefError::UnknownDollar("foo".into())));
    assert_eq!(parse_ref("@a.b.$status"), Err(RefError::MisplacedStatus));
    assert_eq!(parse_ref("@input.$status"), Err(RefError::MisplacedStatus));
}

#[test]
fn exact_refs_keep_the_json_type() {
    assert_eq!(resolve(json!("@create.id")), json!(42));
    assert_eq!(resolve(json!("@create.tags")), json!(["x", "y"]));
    assert_eq!(resolve(json!("@create")), json!({"id": 42, "name": "Ann", "tags": ["x", "y"]}));
    assert_eq!(resolve(json!("@input.items.1")), json!(20));
    assert_eq!(resolve(json!("@input.items.2.k")), json!("v"));
    assert_eq!(resolve(json!("@input.o.7")), json!("seven"), "number segment on an object is a key");
    assert_eq!(resolve(json!("@item")), json!({"to": "bob"}));
    assert_eq!(resolve(json!("@item.to")), json!("bob"));
    assert_eq!(resolve(json!("@index")), json!(2));
    assert_eq!(resolve(json!("@run.id")), json!("r_1"));
    assert_eq!(resolve(json!("@create.$status")), json!("succeeded"));
    assert_eq!(resolve(json!("@bad.$status")), json!("failed"));
    assert_eq!(resolve(json!("@later.$status")), json!("pending"));
    assert_eq!(resolve(json!("@bad")), json!({"kind": "timeout"}));
}

#[test]
fn missing_and_skipped_are_null() {
    assert_eq!(resolve(json!("@create.nope")), Value::Null);
    assert_eq!(resolve(json!("@create.tags.9")), Value::Null);
    assert_eq!(resolve(json!("@create.id.deeper")), Value::Null);
    assert_eq!(resolve(json!("@create.name.0")), Value::Null);
    assert_eq!(resolve(json!("@skip.id")), Value::Null);
    assert_eq!(resolve(json!("@skip")), Value::Null);
    assert_eq!(resolve(json!("@unfinished")), Value::Null);
    let outside = MapScope::new(json!({}));
    assert_eq!(parse_ref("@item").unwrap().resolve(&outside), Value::Null);
    assert_eq!(parse_ref("@index").unwrap().resolve(&outside), Value::Null);
}

#[test]
fn embedded_refs_become_text() {
    assert_eq!(resolve(json!("new user @create.id")), json!("new user 42"));
    assert_eq!(resolve(json!("new user @create.id!")), json!("new user 42!"));
    assert_eq!(resolve(json!("id @create.id.")), json!("id 42."), "a trailing dot ends the ref");
    assert_eq!(resolve(json!("hi @create.name, you")), json!("hi Ann, you"), "strings without quotes");
    assert_eq!(resolve(json!("tags=@create.tags")), json!("tags=[\"x\",\"y\"]"), "other values as JSON");
    assert_eq!(resolve(json!("x=@create.nope;")), json!("x=null;"));
    assert_eq!(resolve(json!("@item.to/@index")), json!("bob/2"));
    assert_eq!(resolve(json!("(@create.id)")), json!("(42)"));
    assert_eq!(resolve(json!("@create.$status!")), json!("succeeded!"));
}

#[test]
fn escapes_and_literal_at_signs() {
    assert_eq!(resolve(json!("@@create.id")), json!("@create.id"));
    assert_eq!(resolve(json!("mail me @@ home")), json!("mail me @ home"));
    assert_eq!(resolve(json!("@@@create.id")), json!("@42"));
    assert_eq!(resolve(json!("bob@example.com")), json!("bob@example.com"), "@ after a word char is text");
    assert_eq!(resolve(json!("at @ noon")), json!("at @ noon"), "@ without a name is text");
    assert_eq!(resolve(json!("@")), json!("@"));
    assert_eq!(resolve(json!("trailing @")), json!("trailing @"));
    assert_eq!(resolve(json!("@ 5")), json!("@ 5"));
    let t = Template::compile(json!("a@@b")).unwrap();
    assert_eq!(t.compiled(), &CompiledValue::Literal(json!("a@b")));
    assert!(t.sites().is_empty());
}

#[test]
fn nested_values_and_sites() {
    let t = Template::compile(json!({
        "to": "@item", "text": "new user @create.id", "n": "@index", "lit": [1, "two"],
        "deep": [{"a/b": "@input.email"}]
    }))
    .unwrap();
    assert_eq!(
        t.resolve(&scope()),
        json!({"to": {"to": "bob"}, "text": "new user 42", "n": 2, "lit": [1, "two"], "deep": [{"a/b": "a@b.c"}]})
    );
    let sites: Vec<(&str, String, bool)> =
        t.sites().iter().map(|s| (s.pointer.as_str(), s.reference.to_string(), s.exact)).collect();
    assert_eq!(
        sites,
        [
            ("/to", "@item".to_string(), true),
            ("/text", "@create.id".to_string(), false),
            ("/n", "@index".to_string(), true),
            ("/deep/0/a~1b", "@input.email".to_string(), true),
        ]
    );
    assert_eq!(t.step_deps().into_iter().collect::<Vec<_>>(), ["create"]);
    match t.compiled() {
        CompiledValue::Object(fields) => {
            assert!(matches!(fields[3].1, CompiledValue::Literal(_)), "ref-free subtrees stay literal")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn keys_are_never_refs_and_literals_pass_through() {
    assert_eq!(resolve(json!({"@create.id": 1})), json!({"@create.id": 1}));
    assert_eq!(resolve(json!([null, true, 1.5, "x"])), json!([null, true, 1.5, "x"]));
    assert_eq!(Template::literal(json!("@create.id")).resolve(&scope()), json!("@create.id"));
}

#[test]
fn compile_errors_are_located() {
    let errs = Template::compile(json!({"a": ["ok", "see @run.name"], "b": "@index.x"})).unwrap_err();
    assert_eq!(errs.len(), 2);
    assert_eq!(errs[0].pointer, "/a/1");
    assert_eq!(errs[0].error, RefError::UnknownRunField("name".into()));
    assert_eq!(errs[1].pointer, "/b");
    let (t, errs) = Template::compile_lenient(json!("x @run.nope y @create.id"));
    assert_eq!(errs.len(), 1);
    assert_eq!(t.resolve(&scope()), json!("x @run.nope y 42"), "bad refs stay literal text");
}

#[test]
fn serializes_as_written() {
    let raw = json!({"e": "@@x", "r": "@create.id"});
    let t = Template::compile(raw.clone()).unwrap();
    assert_eq!(serde_json::to_value(&t).unwrap(), raw);
}

#[test]
fn a_ref_that_leads_nowhere_says_what_the_value_holds() {
    let s = scope();
    let look = |v: Value| Template::compile(v).unwrap().try_resolve(&s);
    let e = look(json!("@create.nope")).unwrap_err();
    assert_eq!(e.reference, "@create.nope");
    assert!(e.message.contains("step `create`'s output is an object with fields id, name, tags"), "{}", e.message);
    assert!(e.message.contains("no field `nope`") && e.message.contains("`@create.id`"), "{}", e.message);
    assert!(e.message.contains("`@create.nope?`"), "the opt-in is named: {}", e.message);
    let e = look(json!("name: @create.name.first")).unwrap_err();
    assert!(e.message.contains("`@create.name` is a string (\"Ann\")"), "{}", e.message);
    assert!(e.message.contains("use `@create.name` for the whole value"), "{}", e.message);
    let e = look(json!({"x": ["@create.tags.9"]})).unwrap_err();
    assert!(e.message.contains("no item 9 (it has 2)"), "{}", e.message);
    let e = look(json!("@input.missing")).unwrap_err();
    assert!(e.message.contains("the run's input is an object with fields"), "{}", e.message);
    let e = look(json!("@item.from")).unwrap_err();
    assert!(e.message.contains("the item is an object with field to"), "{}", e.message);
    // What resolves, resolves the same; skipped and unfinished steps are null.
    assert_eq!(look(json!({"a": "@create.id", "b": "x @input.n"})).unwrap(), json!({"a": 42, "b": "x 3"}));
    assert_eq!(look(json!("@skip.id")).unwrap(), Value::Null);
    assert_eq!(look(json!("@unfinished.x")).unwrap(), Value::Null);
}

#[test]
fn a_trailing_question_mark_is_optional_only_in_an_exact_ref() {
    let s = scope();
    let look = |v: Value| Template::compile(v).unwrap().try_resolve(&s);
    assert_eq!(look(json!("@create.nope?")).unwrap(), Value::Null);
    assert_eq!(look(json!("@create.id?")).unwrap(), json!(42), "present: the value");
    assert_eq!(look(json!("id @create.id?")).unwrap(), json!("id 42?"), "in text `?` is text");
    assert!(look(json!("id @create.nope?")).is_err(), "an embedded ref must resolve");
    let r = parse_ref("@create.nope?").unwrap();
    assert!(r.optional);
    assert_eq!(r.to_string(), "@create.nope?", "display round-trips");
    assert_eq!(r.lookup(&s), Ok(Value::Null));
    assert!(parse_ref("@a??").is_err());
    let t = Template::compile(json!("@create.x?")).unwrap();
    assert!(t.sites()[0].exact && t.sites()[0].reference.optional);
}

#[test]
fn run_labels_are_refs() {
    let p = |s: &str| parse_ref(s).unwrap();
    let r = p("@run.labels.origin");
    assert_eq!((r.root.clone(), r.path.clone()), (RefRoot::RunLabels, vec![Segment::Key("origin".into())]));
    assert_eq!(r.to_string(), "@run.labels.origin");
    assert_eq!(p("@run.labels").path, vec![]);
    assert!(parse_ref("@run.name").unwrap_err().to_string().contains("`@run.labels` and `@run.resume`"));
    assert_eq!(p("@run.resume.summary").root, RefRoot::RunResume);
}
