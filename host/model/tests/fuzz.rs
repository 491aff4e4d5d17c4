//! Fuzzing on stable (docs/reliability.md, "fuzzing"): generated and mutated
//! definitions, refs and templates through the parser, validator and ref
//! resolver. Properties: nothing panics or hangs; what parses survives a
//! round trip; a problem always has a JSON path that exists or is `/`.
//!
//! CI runs the default number of cases (a few seconds); run longer with
//! `PROPTEST_CASES=200000 cargo test -p weft-model --test fuzz --release`.
//! A failing case is shrunk and printed; it then becomes a regression test
//! in `regressions()` below.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use weft_model::{MapScope, NoSchemas, from_value, parse_ref};

/// Strings a definition is made of, and ones that break things.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("name".to_string()),
        Just("steps".to_string()),
        Just("input".to_string()),
        Just("code".to_string()),
        Just("plugin".to_string()),
        Just("tool".to_string()),
        Just("when".to_string()),
        Just("for_each".to_string()),
        Just("retry".to_string()),
        Just("after".to_string()),
        Just("timeout_ms".to_string()),
        Just("limits".to_string()),
        Just("@input".to_string()),
        Just("@input.a.0".to_string()),
        Just("@a.b".to_string()),
        Just("@item".to_string()),
        Just("@".to_string()),
        Just("@@".to_string()),
        Just("x @a.b y @input".to_string()),
        Just("\u{1b}[31m".to_string()),
        Just("é\u{0}".to_string()),
        "[a-z@._0-9]{0,12}",
        ".{0,8}",
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(1e300)),
        Just(json!(0.5)),
        any::<i64>().prop_map(Value::from),
    ]
}

/// Any JSON, with keys and strings a definition uses.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf =
        prop_oneof![Just(Value::Null), any::<bool>().prop_map(Value::Bool), number(), word().prop_map(Value::String)];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((word(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A valid definition to mutate.
fn base() -> Value {
    json!({"name": "w", "limits": {"run_fuel": 1000}, "steps": [
        {"name": "a", "code": {"plugin": "p"}, "input": {"x": "@input.x"}},
        {"name": "b", "when": {"ref": "@a.ok", "eq": true}, "tool": {"server": "s", "name": "t"},
         "input": "@a", "retry": {"max_attempts": 3}, "timeout_ms": 100},
        {"name": "c", "for_each": "@input.items", "concurrency": 2, "code": {"plugin": "p"},
         "input": {"item": "@item", "i": "@index", "text": "n=@a.n"}, "after": [{"step": "b", "on": "always"}]},
        {"name": "d", "return": {"out": "@c"}}
    ], "output": {"c": "@c"}})
}

/// Replaces the node at a path chosen by `picks` with `with`.
fn mutate(v: &mut Value, picks: &[usize], with: Value) {
    match (picks.split_first(), &mut *v) {
        (Some((p, rest)), Value::Array(a)) if !a.is_empty() => {
            let k = p % a.len();
            mutate(&mut a[k], rest, with)
        }
        (Some((p, rest)), Value::Object(m)) if !m.is_empty() => {
            let k = p % m.len();
            mutate(m.values_mut().nth(k).unwrap(), rest, with)
        }
        _ => *v = with,
    }
}

fn check(v: &Value) {
    match from_value(v, &NoSchemas) {
        Ok(def) => {
            // What parses survives a round trip.
            let again = serde_json::to_value(&def).unwrap();
            let def2 = from_value(&again, &NoSchemas).unwrap_or_else(|p| panic!("{again} does not parse again: {p:?}"));
            assert_eq!(def, def2);
        }
        Err(problems) => {
            assert!(!problems.is_empty());
            for p in &problems {
                assert!(p.path.is_empty() || p.path.starts_with('/'), "a path is a JSON pointer: {p:?}");
            }
        }
    }
}

proptest! {
    #[test]
    fn any_json_is_parsed_or_refused_without_panic(v in json_value()) {
        check(&v);
    }

    #[test]
    fn a_mutated_definition_is_parsed_or_refused(picks in prop::collection::vec(any::<usize>(), 0..6), with in json_value()) {
        let mut v = base();
        mutate(&mut v, &picks, with);
        check(&v);
    }

    #[test]
    fn any_ref_text_parses_or_is_refused(s in word(), t in ".{0,40}") {
        for text in [s.clone(), t.clone(), format!("@{t}"), format!("{s}{t}")] {
            if let Ok(r) = parse_ref(&text) {
                let shown = r.to_string();
                prop_assert_eq!(parse_ref(&shown).ok(), Some(r), "{} -> {}", text, shown);
            }
        }
    }

    #[test]
    fn templates_resolve_against_any_scope(input in json_value(), a in json_value(), item in json_value(), picks in prop::collection::vec(any::<usize>(), 0..4), with in json_value()) {
        let mut v = base();
        mutate(&mut v, &picks, with);
        if let Ok(def) = from_value(&v, &NoSchemas) {
            let scope = MapScope::new(input).with_step("a", a.clone()).with_step("b", a).with_item(item, 3);
            for s in &def.steps {
                let _ = s.input.resolve(&scope);
                if let Some(w) = &s.when {
                    let _ = w.evaluate(&scope);
                }
            }
            if let Some(o) = &def.output {
                let _ = o.resolve(&scope);
            }
        }
    }
}

/// Cases fuzzing found, kept.
#[test]
fn regressions() {
    check(&json!({"name": "w", "steps": [{"name": "a", "code": {"plugin": "p"}, "timeout_ms": u64::MAX}]}));
    check(&json!({"name": "w", "limits": {"run_fuel": 0}, "steps": [{"name": "a", "return": {}}]}));
}
