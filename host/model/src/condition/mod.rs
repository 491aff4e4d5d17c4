//! `when` conditions (docs/workflow-format.md, "Conditions"): `{"ref": REF}`
//! plus at most one of `eq, neq, gt, gte, lt, lte, in, exists`, and their
//! evaluation.
//!
//! - no operator: the value's truthiness (null, false, 0, "", [] and {} are
//!   false; everything else is true);
//! - `eq`/`neq`: deep JSON equality, numbers compared by value (1 == 1.0);
//!   a number and a string that reads as a number (a CSV's `"12.5"`)
//!   compare as numbers; `null` equals only `null`;
//! - `gt`/`gte`/`lt`/`lte`: numbers numerically, and so a number and a
//!   numeric string, or two numeric strings (`"9"` < `"10"`); other
//!   strings lexically (by Unicode code point); `null` on either side is
//!   not ordered and the test is false;
//! - any other pair of types (a string and a boolean, `"abc"` and 10, an
//!   array and a number) is not compared silently: a run fails the step
//!   with an error naming both types ([`try_apply`]);
//! - `in`: the operand is an array (membership by `eq`), a string (the value
//!   is a substring) or an object (the value is one of its keys);
//! - `exists: true`: the value is not null (a missing field is null);
//!   `exists: false`: it is null.
//!
//! As a run evaluates it ([`Condition::try_evaluate`]), a ref that leads
//! nowhere fails the step (see `refs`), except under `exists` (which is
//! how a condition asks whether a field is there) or when the ref is
//! optional (`{"ref": "@input.debug?"}`).
//!
//! Operands may hold refs (`{"ref": "@a.n", "lt": "@input.max"}`).

use std::cmp::Ordering;

use schemars::JsonSchema;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::refs::{Ref, Unresolved};
use crate::scope::Scope;
use crate::template::Template;

/// A comparison operator of a `when`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    Eq,
    Neq,
    Gt,
    Gte,
    Lt,
    Lte,
    In,
    Exists,
}

impl Operator {
    pub const ALL: [Operator; 8] = [
        Operator::Eq,
        Operator::Neq,
        Operator::Gt,
        Operator::Gte,
        Operator::Lt,
        Operator::Lte,
        Operator::In,
        Operator::Exists,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Eq => "eq",
            Operator::Neq => "neq",
            Operator::Gt => "gt",
            Operator::Gte => "gte",
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::In => "in",
            Operator::Exists => "exists",
        }
    }
    pub fn parse(s: &str) -> Option<Operator> {
        Operator::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// An operator with its operand.
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    pub op: Operator,
    pub operand: Template,
}

/// A parsed `when`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub reference: Ref,
    /// The ref as written.
    pub ref_text: String,
    /// `None`: truthiness.
    pub test: Option<Test>,
}

/// Whether event data `data` has what a wait's `match` asks: each field
/// holds for the same top-level field of `data` (a key starting with `/`
/// is a JSON Pointer into it). A value holds when it equals the field
/// (numbers by value); an object when each of its fields holds, so other
/// fields of the event's object do not matter.
pub fn match_holds(matches: &serde_json::Map<String, Value>, data: &Value) -> bool {
    fn holds(got: &Value, want: &Value) -> bool {
        match (got, want) {
            (Value::Object(g), Value::Object(w)) => w.iter().all(|(k, v)| g.get(k).is_some_and(|x| holds(x, v))),
            _ => json_eq(got, want),
        }
    }
    let field = |k: &str| if k.starts_with('/') { data.pointer(k) } else { data.get(k) };
    matches.iter().all(|(k, want)| field(k).is_some_and(|got| holds(got, want)))
}

impl Condition {
    /// Evaluate against a scope, leniently (a missing field is null).
    pub fn evaluate(&self, scope: &dyn Scope) -> bool {
        let value = self.reference.resolve(scope);
        match &self.test {
            None => truthy(&value),
            Some(t) => apply(t.op, &value, &t.operand.resolve(scope)),
        }
    }

    /// Evaluate against a scope as a run does (see the module docs).
    pub fn try_evaluate(&self, scope: &dyn Scope) -> Result<bool, Unresolved> {
        let value = match &self.test {
            Some(Test { op: Operator::Exists, .. }) => self.reference.resolve(scope),
            _ => self.reference.lookup(scope)?,
        };
        Ok(match &self.test {
            None => truthy(&value),
            Some(t) => {
                let operand = t.operand.try_resolve(scope)?;
                try_apply(t.op, &value, &operand).map_err(|why| Unresolved {
                    reference: self.ref_text.clone(),
                    message: format!(
                        "`when` {{\"ref\": \"{}\", \"{}\": {}}} compares {why}; make both sides the same type (a number, a string, ...), or test the value another way",
                        self.ref_text,
                        t.op.as_str(),
                        t.operand.raw()
                    ),
                })?
            }
        })
    }

    /// The condition as a reader writes it: `@check.ok`, `@n gt 10`.
    pub fn shown(&self) -> String {
        match &self.test {
            None => self.ref_text.clone(),
            Some(t) => format!("{} {} {}", self.ref_text, t.op.as_str(), t.operand.raw()),
        }
    }

    /// The value the condition tests, as a run resolved it (for the skip
    /// event); `None` when it cannot be resolved.
    pub fn tested_value(&self, scope: &dyn Scope) -> Value {
        self.reference.resolve(scope)
    }
}

impl Serialize for Condition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("ref", &self.ref_text)?;
        if let Some(t) = &self.test {
            m.serialize_entry(t.op.as_str(), t.operand.raw())?;
        }
        m.end()
    }
}

impl JsonSchema for Condition {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Condition".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let any = serde_json::json!({});
        schemars::json_schema!({
            "description": "`ref` plus at most one operator; no operator tests truthiness.",
            "type": "object",
            "required": ["ref"],
            "maxProperties": 2,
            "additionalProperties": false,
            "properties": {
                "ref": {"type": "string", "pattern": "^@"},
                "eq": any, "neq": any,
                "gt": {"type": ["number", "string"]}, "gte": {"type": ["number", "string"]},
                "lt": {"type": ["number", "string"]}, "lte": {"type": ["number", "string"]},
                "in": {"type": ["array", "string", "object"]},
                "exists": {"type": "boolean"}
            }
        })
    }
}

/// JS/Python-like truthiness: null, false, 0, "", [] and {} are false.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Deep equality with numbers compared by value (and a number with a
/// numeric string, as numbers).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => compare(a, b) == Some(Ordering::Equal),
        (Value::Number(_), Value::String(_)) | (Value::String(_), Value::Number(_)) => {
            compare(a, b) == Some(Ordering::Equal)
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A string that reads as a finite number (`"12.5"`, `" 7 "`, `"1e3"`).
fn numeric(s: &str) -> Option<f64> {
    let t = s.trim();
    let looks = t.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.' | b'e' | b'E'));
    if t.is_empty() || !looks {
        return None;
    }
    t.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Order of two values: numbers numerically (a numeric string counts as
/// its number, two numeric strings too), other strings lexically; `None`
/// for any other pair.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::String(y)) => x.as_f64()?.partial_cmp(&numeric(y)?),
        (Value::String(x), Value::Number(y)) => numeric(x)?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => match (numeric(x), numeric(y)) {
            (Some(p), Some(q)) => p.partial_cmp(&q),
            _ => Some(x.cmp(y)),
        },
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(p), Some(q)) = (x.as_i64(), y.as_i64()) {
                return Some(p.cmp(&q));
            }
            if let (Some(p), Some(q)) = (x.as_u64(), y.as_u64()) {
                return Some(p.cmp(&q));
            }
            x.as_f64()?.partial_cmp(&y.as_f64()?)
        }
        _ => None,
    }
}

/// Apply an operator to a resolved value and operand, leniently: a pair
/// of types that cannot be compared is a false test (see [`try_apply`]).
pub fn apply(op: Operator, value: &Value, operand: &Value) -> bool {
    try_apply(op, value, operand).unwrap_or(false)
}

/// Apply an operator as a run does: `Err` says which two types a
/// comparison was asked between that cannot be compared (`eq`, `neq` and
/// the ordering operators; `null` is never an error, it is absence).
pub fn try_apply(op: Operator, value: &Value, operand: &Value) -> Result<bool, String> {
    let comparing =
        matches!(op, Operator::Eq | Operator::Neq | Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte);
    if comparing && !value.is_null() && !operand.is_null() && !comparable(op, value, operand) {
        return Err(format!("{} with {}, which cannot be compared", described(value), described(operand)));
    }
    Ok(holds(op, value, operand))
}

/// Whether `op` can compare these two non-null values.
fn comparable(op: Operator, a: &Value, b: &Value) -> bool {
    let ordering = !matches!(op, Operator::Eq | Operator::Neq);
    match (a, b) {
        (Value::Number(_), Value::Number(_)) | (Value::String(_), Value::String(_)) => true,
        (Value::Number(_), Value::String(s)) | (Value::String(s), Value::Number(_)) => numeric(s).is_some(),
        (Value::Bool(_), Value::Bool(_))
        | (Value::Array(_), Value::Array(_))
        | (Value::Object(_), Value::Object(_)) => !ordering,
        _ => false,
    }
}

/// A value as a message names it: its type and, when short, itself.
fn described(v: &Value) -> String {
    let text = v.to_string();
    let kind = crate::problem::type_name(v);
    if text.len() <= 40 { format!("{kind} {text}") } else { kind.to_string() }
}

fn holds(op: Operator, value: &Value, operand: &Value) -> bool {
    let ord = || compare(value, operand);
    match op {
        Operator::Eq => json_eq(value, operand),
        Operator::Neq => !json_eq(value, operand),
        Operator::Gt => ord() == Some(Ordering::Greater),
        Operator::Gte => matches!(ord(), Some(Ordering::Greater | Ordering::Equal)),
        Operator::Lt => ord() == Some(Ordering::Less),
        Operator::Lte => matches!(ord(), Some(Ordering::Less | Ordering::Equal)),
        Operator::In => match (operand, value) {
            (Value::Array(a), v) => a.iter().any(|x| json_eq(x, v)),
            (Value::String(hay), Value::String(needle)) => hay.contains(needle.as_str()),
            (Value::Object(o), Value::String(k)) => o.contains_key(k),
            _ => false,
        },
        Operator::Exists => {
            let want = match operand {
                Value::Bool(b) => *b,
                other => truthy(other),
            };
            value.is_null() != want
        }
    }
}

#[cfg(test)]
mod tests;
