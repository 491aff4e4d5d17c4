//! Unit tests of conditions: every operator, truthiness, mixed types.

use serde_json::{Value, json};

use super::*;
use crate::refs::parse_ref;
use crate::scope::MapScope;

#[test]
fn truthiness() {
    for v in [json!(null), json!(false), json!(0), json!(0.0), json!(""), json!([]), json!({})] {
        assert!(!truthy(&v), "{v} is falsy");
    }
    for v in [json!(true), json!(1), json!(-0.5), json!("0"), json!("false"), json!([0]), json!({"a": null})] {
        assert!(truthy(&v), "{v} is truthy");
    }
}

#[test]
fn equality() {
    assert!(apply(Operator::Eq, &json!(1), &json!(1.0)), "numbers by value");
    assert!(apply(Operator::Eq, &json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
    assert!(apply(Operator::Eq, &json!(null), &json!(null)));
    assert!(apply(Operator::Eq, &json!("a"), &json!("a")));
    assert!(!apply(Operator::Eq, &json!("1"), &json!(1)), "no coercion");
    assert!(!apply(Operator::Eq, &json!(false), &json!(null)));
    assert!(!apply(Operator::Eq, &json!([1]), &json!([1, 2])));
    assert!(!apply(Operator::Eq, &json!({"a": 1}), &json!({"b": 1})));
    assert!(apply(Operator::Neq, &json!("1"), &json!(1)));
    assert!(!apply(Operator::Neq, &json!(2), &json!(2.0)));
}

#[test]
fn ordering() {
    let t = |op, a: Value, b: Value| apply(op, &a, &b);
    assert!(t(Operator::Gt, json!(10), json!(9)));
    assert!(t(Operator::Gt, json!(2.5), json!(2)));
    assert!(t(Operator::Gt, json!(u64::MAX), json!(-1)));
    assert!(!t(Operator::Gt, json!(9), json!(9)));
    assert!(t(Operator::Gte, json!(9), json!(9.0)));
    assert!(t(Operator::Lt, json!(-3), json!(1e3)));
    assert!(t(Operator::Lte, json!(4), json!(4)));
    assert!(!t(Operator::Lte, json!(5), json!(4)));
    assert!(t(Operator::Lt, json!("apple"), json!("banana")), "strings lexically");
    assert!(t(Operator::Lt, json!("B"), json!("a")), "by code point");
    assert!(!t(Operator::Gt, json!("10"), json!("9")), "strings are not numbers");
    // mixed or unordered types: every ordered test is false
    for (a, b) in [
        (json!(1), json!("1")),
        (json!(null), json!(0)),
        (json!(true), json!(false)),
        (json!([1]), json!([0])),
        (json!({}), json!({})),
    ] {
        for op in [Operator::Gt, Operator::Gte, Operator::Lt, Operator::Lte] {
            assert!(!apply(op, &a, &b), "{a} {op:?} {b}");
        }
    }
}

#[test]
fn membership_and_existence() {
    assert!(apply(Operator::In, &json!("b"), &json!(["a", "b"])));
    assert!(apply(Operator::In, &json!(2), &json!([1, 2.0])));
    assert!(!apply(Operator::In, &json!("c"), &json!(["a", "b"])));
    assert!(apply(Operator::In, &json!("ell"), &json!("hello")), "substring");
    assert!(!apply(Operator::In, &json!(1), &json!("1")));
    assert!(apply(Operator::In, &json!("k"), &json!({"k": 0})), "object key");
    assert!(!apply(Operator::In, &json!("x"), &json!(null)));
    assert!(apply(Operator::Exists, &json!(0), &json!(true)));
    assert!(!apply(Operator::Exists, &json!(null), &json!(true)));
    assert!(apply(Operator::Exists, &json!(null), &json!(false)));
    assert!(!apply(Operator::Exists, &json!(""), &json!(false)));
}

fn cond(r: &str, test: Option<(Operator, Value)>) -> Condition {
    Condition {
        reference: parse_ref(r).unwrap(),
        ref_text: r.into(),
        test: test.map(|(op, v)| Test { op, operand: Template::compile(v).unwrap() }),
    }
}

#[test]
fn evaluate_against_a_scope() {
    let s = MapScope::new(json!({"max": 5, "roles": ["admin"]}))
        .with_step("validate", json!({"ok": false, "n": 3, "role": "admin"}));
    assert!(!cond("@validate.ok", None).evaluate(&s));
    assert!(cond("@validate.n", None).evaluate(&s));
    assert!(cond("@validate.ok", Some((Operator::Eq, json!(false)))).evaluate(&s));
    assert!(cond("@validate.n", Some((Operator::Lt, json!("@input.max")))).evaluate(&s), "operand ref");
    assert!(cond("@validate.role", Some((Operator::In, json!("@input.roles")))).evaluate(&s));
    assert!(cond("@validate.missing", Some((Operator::Exists, json!(false)))).evaluate(&s));
    assert!(!cond("@nothing.x", None).evaluate(&s), "unfinished step is null");
}

#[test]
fn serializes_as_written() {
    let c = cond("@a.ok", Some((Operator::Neq, json!("@@x"))));
    assert_eq!(serde_json::to_value(&c).unwrap(), json!({"ref": "@a.ok", "neq": "@@x"}));
    assert_eq!(serde_json::to_value(cond("@a", None)).unwrap(), json!({"ref": "@a"}));
    for op in Operator::ALL {
        assert_eq!(Operator::parse(op.as_str()), Some(op));
    }
}
