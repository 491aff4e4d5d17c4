//! Templates: JSON values whose strings may hold refs, compiled once
//! (exact refs keep the JSON type, embedded refs become text, `@@` is a
//! literal `@`, a string that is exactly a ref and `?` is an optional ref)
//! and resolved against a [`Scope`] without re-parsing: leniently
//! ([`Template::resolve`], a ref that leads nowhere is `null`) or as a
//! run does ([`Template::try_resolve`], it is an [`Unresolved`] error).

use std::collections::BTreeSet;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::refs::{Ref, RefError, Unresolved, exact_ref, is_word, scan};
use crate::scope::Scope;

/// A piece of an interpolated string.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Ref(Ref),
}

/// A JSON value with its refs parsed, ready to resolve without re-parsing.
#[derive(Debug, Clone, PartialEq)]
pub enum CompiledValue {
    /// No refs inside (escapes already applied).
    Literal(Value),
    /// A string that is exactly a ref: resolves to the value, any JSON type.
    Ref(Ref),
    /// A string with refs inside: resolves to a string.
    Interpolated(Vec<Part>),
    Array(Vec<CompiledValue>),
    Object(Vec<(String, CompiledValue)>),
}

/// Where a ref sits inside a [`Template`].
#[derive(Debug, Clone, PartialEq)]
pub struct RefSite {
    /// JSON Pointer relative to the template's root ("" = the root itself).
    pub pointer: String,
    pub reference: Ref,
    /// True when the string is exactly this ref (its JSON type is unknown
    /// until run time); false when it is embedded in a longer string.
    pub exact: bool,
}

/// A ref problem found while compiling, with its relative JSON Pointer.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateError {
    pub pointer: String,
    pub error: RefError,
}

/// A JSON value as written (`raw`) plus its compiled form.
#[derive(Debug, Clone)]
pub struct Template {
    raw: Value,
    compiled: CompiledValue,
    sites: Vec<RefSite>,
}

impl PartialEq for Template {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl Default for Template {
    fn default() -> Self {
        Template::literal(Value::Null)
    }
}

impl Serialize for Template {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(s)
    }
}

impl schemars::JsonSchema for Template {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Template".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Any JSON value; strings may contain refs such as `@input.email` (`@@` is a literal `@`)."
        })
    }
}

/// Append one token to a JSON Pointer, escaping `~` and `/`.
pub(crate) fn ptr(base: &str, token: &str) -> String {
    format!("{base}/{}", token.replace('~', "~0").replace('/', "~1"))
}

impl Template {
    /// A value taken literally (no ref processing at all).
    pub fn literal(v: Value) -> Template {
        Template { compiled: CompiledValue::Literal(v.clone()), raw: v, sites: vec![] }
    }

    /// Compile, failing on any malformed ref.
    pub fn compile(raw: Value) -> Result<Template, Vec<TemplateError>> {
        let (t, errs) = Template::compile_lenient(raw);
        if errs.is_empty() { Ok(t) } else { Err(errs) }
    }

    /// Compile, keeping malformed refs as literal text and reporting them.
    pub fn compile_lenient(raw: Value) -> (Template, Vec<TemplateError>) {
        let mut sites = vec![];
        let mut errs = vec![];
        let compiled = compile_value(&raw, "", &mut sites, &mut errs);
        (Template { raw, compiled, sites }, errs)
    }

    /// The value as written.
    pub fn raw(&self) -> &Value {
        &self.raw
    }
    pub fn compiled(&self) -> &CompiledValue {
        &self.compiled
    }
    /// Every ref with its location.
    pub fn sites(&self) -> &[RefSite] {
        &self.sites
    }
    pub fn is_null(&self) -> bool {
        self.raw.is_null()
    }
    /// Steps named by refs in this template.
    pub fn step_deps(&self) -> BTreeSet<&str> {
        self.sites.iter().filter_map(|s| s.reference.step()).collect()
    }
    /// Resolve every ref against `scope`; a ref that leads nowhere is `null`.
    pub fn resolve(&self, scope: &dyn Scope) -> Value {
        self.compiled.resolve(scope)
    }
    /// Resolve every ref against `scope` as a run does: the first ref that
    /// leads nowhere (and is not optional) is the error.
    pub fn try_resolve(&self, scope: &dyn Scope) -> Result<Value, Unresolved> {
        self.compiled.try_resolve(scope)
    }
}

fn compile_value(v: &Value, at: &str, sites: &mut Vec<RefSite>, errs: &mut Vec<TemplateError>) -> CompiledValue {
    match v {
        Value::String(s) => compile_str(s, at, sites, errs),
        Value::Array(a) => {
            let items: Vec<_> =
                a.iter().enumerate().map(|(i, x)| compile_value(x, &ptr(at, &i.to_string()), sites, errs)).collect();
            if items.iter().all(|c| matches!(c, CompiledValue::Literal(_))) {
                CompiledValue::Literal(Value::Array(items.into_iter().map(unlit).collect()))
            } else {
                CompiledValue::Array(items)
            }
        }
        Value::Object(m) => {
            let items: Vec<_> =
                m.iter().map(|(k, x)| (k.clone(), compile_value(x, &ptr(at, k), sites, errs))).collect();
            if items.iter().all(|(_, c)| matches!(c, CompiledValue::Literal(_))) {
                CompiledValue::Literal(Value::Object(items.into_iter().map(|(k, c)| (k, unlit(c))).collect()))
            } else {
                CompiledValue::Object(items)
            }
        }
        other => CompiledValue::Literal(other.clone()),
    }
}

fn unlit(c: CompiledValue) -> Value {
    match c {
        CompiledValue::Literal(v) => v,
        _ => unreachable!("checked all literal"),
    }
}

fn compile_str(s: &str, at: &str, sites: &mut Vec<RefSite>, errs: &mut Vec<TemplateError>) -> CompiledValue {
    if !s.contains('@') {
        return CompiledValue::Literal(Value::String(s.to_owned()));
    }
    // Exactly one ref, optional with a trailing `?`.
    if s.ends_with('?')
        && let Some(Ok(r)) = exact_ref(s)
    {
        sites.push(RefSite { pointer: at.to_owned(), reference: r.clone(), exact: true });
        return CompiledValue::Ref(r);
    }
    let b = s.as_bytes();
    let mut parts: Vec<Part> = vec![];
    let mut text = String::new();
    let mut i = 0;
    let mut last = 0; // start of pending literal bytes
    while i < b.len() {
        if b[i] != b'@' {
            i += 1;
            continue;
        }
        if i + 1 < b.len() && b[i + 1] == b'@' {
            text.push_str(&s[last..=i]);
            i += 2;
            last = i;
            continue;
        }
        if i > 0 && is_word(b[i - 1]) {
            i += 1;
            continue;
        }
        match scan(s, i) {
            None => i += 1,
            Some((Ok(r), end)) => {
                text.push_str(&s[last..i]);
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(Part::Ref(r));
                i = end;
                last = end;
            }
            Some((Err(e), end)) => {
                errs.push(TemplateError { pointer: at.to_owned(), error: e });
                i = end;
            }
        }
    }
    text.push_str(&s[last..]);
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    let exact = parts.len() == 1 && matches!(parts[0], Part::Ref(_));
    for p in &parts {
        if let Part::Ref(r) = p {
            sites.push(RefSite { pointer: at.to_owned(), reference: r.clone(), exact });
        }
    }
    match parts.as_slice() {
        [] => CompiledValue::Literal(Value::String(String::new())),
        [Part::Ref(r)] => CompiledValue::Ref(r.clone()),
        [Part::Text(t)] => CompiledValue::Literal(Value::String(t.clone())),
        _ => CompiledValue::Interpolated(parts),
    }
}

impl CompiledValue {
    /// Resolved leniently (see [`Template::resolve`]).
    pub fn resolve(&self, scope: &dyn Scope) -> Value {
        self.resolve_with(&|r: &Ref| Ok::<_, Unresolved>(r.resolve(scope))).expect("lenient resolution never fails")
    }

    /// Resolved as a run does (see [`Template::try_resolve`]).
    pub fn try_resolve(&self, scope: &dyn Scope) -> Result<Value, Unresolved> {
        self.resolve_with(&|r: &Ref| r.lookup(scope))
    }

    fn resolve_with(&self, one: &dyn Fn(&Ref) -> Result<Value, Unresolved>) -> Result<Value, Unresolved> {
        Ok(match self {
            CompiledValue::Literal(v) => v.clone(),
            CompiledValue::Ref(r) => one(r)?,
            CompiledValue::Interpolated(parts) => {
                let mut out = String::new();
                for p in parts {
                    match p {
                        Part::Text(t) => out.push_str(t),
                        Part::Ref(r) => match one(r)? {
                            Value::String(s) => out.push_str(&s),
                            other => out.push_str(&other.to_string()),
                        },
                    }
                }
                Value::String(out)
            }
            CompiledValue::Array(a) => Value::Array(a.iter().map(|c| c.resolve_with(one)).collect::<Result<_, _>>()?),
            CompiledValue::Object(m) => Value::Object(
                m.iter().map(|(k, c)| Ok((k.clone(), c.resolve_with(one)?))).collect::<Result<_, Unresolved>>()?,
            ),
        })
    }
}
