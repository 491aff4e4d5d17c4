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
    assert!(apply(Operator::Eq, &json!("1"), &json!(1)), "a numeric string is its number");
    assert!(apply(Operator::Eq, &json!(12.5), &json!(" 12.5 ")));
    assert!(!apply(Operator::Eq, &json!(false), &json!(null)));
    assert!(!apply(Operator::Eq, &json!([1]), &json!([1, 2])));
    assert!(!apply(Operator::Eq, &json!({"a": 1}), &json!({"b": 1})));
    assert!(!apply(Operator::Neq, &json!("1"), &json!(1)));
    assert!(apply(Operator::Neq, &json!("2"), &json!(1)));
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
    assert!(t(Operator::Gt, json!("10"), json!("9")), "numeric strings as numbers");
    assert!(t(Operator::Gt, json!("12.5"), json!(10)), "a CSV's number against a number");
    assert!(t(Operator::Lt, json!(9), json!("10")));
    assert!(t(Operator::Gte, json!(1), json!("1")));
    assert!(t(Operator::Lt, json!("2026-01-02"), json!("2026-01-10")), "dates as text");
    assert!(t(Operator::Lt, json!("b10"), json!("b9")), "other strings by code point");
    // null or unordered types: every ordered test is false
    for (a, b) in
        [(json!(null), json!(0)), (json!(true), json!(false)), (json!([1]), json!([0])), (json!({}), json!({}))]
    {
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

#[test]
fn types_that_cannot_be_compared_are_an_error_not_a_false_test() {
    for (op, a, b) in [
        (Operator::Gt, json!("abc"), json!(10)),
        (Operator::Gt, json!(true), json!(false)),
        (Operator::Lt, json!([1]), json!([2])),
        (Operator::Eq, json!("yes"), json!(true)),
        (Operator::Eq, json!(1), json!(true)),
        (Operator::Neq, json!("abc"), json!(3)),
        (Operator::Eq, json!({"a": 1}), json!("a")),
    ] {
        let e = try_apply(op, &a, &b).unwrap_err();
        assert!(e.contains(crate::problem::type_name(&a)) && e.contains(crate::problem::type_name(&b)), "{e}");
    }
    // null is absence, never an error; same types compare as before
    assert_eq!(try_apply(Operator::Gt, &json!(null), &json!(10)), Ok(false));
    assert_eq!(try_apply(Operator::Eq, &json!(null), &json!("x")), Ok(false));
    assert_eq!(try_apply(Operator::Eq, &json!([1, 2]), &json!([1.0, 2])), Ok(true));
    assert_eq!(try_apply(Operator::In, &json!(1), &json!("1")), Ok(false));
    // a run fails the step, naming the ref, both types and the fix
    let c = cond("@a.n", Some((Operator::Gt, json!(10))));
    let scope = MapScope::new(json!({})).with_step("a", json!({"n": "abc"}));
    let u = c.try_evaluate(&scope).unwrap_err();
    assert_eq!(u.reference, "@a.n");
    assert!(u.message.contains("a string \"abc\" with a number 10"), "{}", u.message);
    let ok = MapScope::new(json!({})).with_step("a", json!({"n": "12.5"}));
    assert!(c.try_evaluate(&ok).unwrap());
}
