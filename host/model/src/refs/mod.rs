//! Refs (`@input.a`, `@step.list.3`, `@item`, `@index`, `@run.id`,
//! `@step.$status`, `@@`): the grammar, parsing, and resolving one ref
//! against a [`Scope`]. Whole JSON values are compiled by `template`.
//!
//! Grammar (see docs/workflow-format.md, "Refs"):
//!
//! ```text
//! ref     = "@" root { "." segment }
//! root    = ident                      ; input | item | index | run | <step name>
//! segment = word | "$" ident           ; word = [A-Za-z0-9_]+, all digits = array index
//! ident   = [A-Za-z_][A-Za-z0-9_]*
//! ```
//!
//! A ref ends at the first character that cannot continue it; a `.` is part
//! of the ref only when a segment follows, so `"id @create.id."` ends the ref
//! before the final dot. An `@` directly after a letter, digit or `_` is
//! literal text (so `bob@example.com` is not a ref), `@@` is a literal `@`,
//! and an `@` not followed by an identifier is literal text too.

use std::fmt;

use serde_json::Value;

use crate::definition::StepState;
use crate::problem::shown;
use crate::scope::Scope;

/// Names that cannot be step names because they are ref roots.
pub const RESERVED_ROOTS: [&str; 4] = ["input", "item", "index", "run"];

/// Where a ref starts looking.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RefRoot {
    /// `@input`: the run input.
    Input,
    /// `@name`: a step's output.
    Step(String),
    /// `@name.$status`: a step's state as a string (`"succeeded"`, ...).
    StepStatus(String),
    /// `@item`: the current `for_each` item.
    Item,
    /// `@index`: the current `for_each` index (a number).
    Index,
    /// `@run.id`: the id of the run.
    RunId,
}

/// One `.segment` after the root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// `.field`: an object member.
    Key(String),
    /// `.3`: an array element; on an object, the member named `"3"`.
    Index(usize),
}

/// A parsed ref.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ref {
    pub root: RefRoot,
    pub path: Vec<Segment>,
}

/// Why a string is not a valid ref.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("`{}` is not a ref: a ref is `@` followed by a name, like `@input.email` or `@step.field`", shown(.0))]
    NotARef(String),
    #[error("`@run` needs a field: only `@run.id` exists")]
    RunWithoutField,
    #[error("unknown run field `{}`: only `@run.id` exists", shown(.0))]
    UnknownRunField(String),
    #[error("`@index` is a number and has no fields")]
    IndexHasNoFields,
    #[error("`${}` is not a known step property: only `$status` exists", shown(.0))]
    UnknownDollar(String),
    #[error("`$status` must follow a step name directly, as in `@step.$status`")]
    MisplacedStatus,
    #[error("`@{n}` is not followed by anything: did you mean a field of `@{n}`?", n = shown(.0))]
    Empty(String),
}

impl Ref {
    /// The step this ref reads, if any.
    pub fn step(&self) -> Option<&str> {
        match &self.root {
            RefRoot::Step(s) | RefRoot::StepStatus(s) => Some(s),
            _ => None,
        }
    }

    /// True for `@item` / `@index`, which only exist inside `for_each`.
    pub fn needs_item(&self) -> bool {
        matches!(self.root, RefRoot::Item | RefRoot::Index)
    }

    /// Resolve against a scope. Missing fields and skipped steps give `null`.
    pub fn resolve(&self, scope: &dyn Scope) -> Value {
        let base: Value = match &self.root {
            RefRoot::Input => return walk(scope.input(), &self.path),
            RefRoot::Item => match scope.item() {
                Some(v) => return walk(v, &self.path),
                None => Value::Null,
            },
            RefRoot::Index => scope.index().map(Value::from).unwrap_or(Value::Null),
            RefRoot::RunId => Value::String(scope.run_id().to_owned()),
            RefRoot::StepStatus(name) => {
                let status = scope.step(name).map(|v| v.status).unwrap_or(StepState::Pending);
                Value::String(status.as_str().to_owned())
            }
            RefRoot::Step(name) => match scope.step(name) {
                Some(view) if view.status != StepState::Skipped => {
                    return walk(view.output, &self.path);
                }
                _ => Value::Null,
            },
        };
        base
    }
}

fn walk(mut v: &Value, path: &[Segment]) -> Value {
    for seg in path {
        let next = match (seg, v) {
            (Segment::Key(k), Value::Object(m)) => m.get(k),
            (Segment::Index(i), Value::Array(a)) => a.get(*i),
            (Segment::Index(i), Value::Object(m)) => m.get(&i.to_string()),
            _ => None,
        };
        match next {
            Some(n) => v = n,
            None => return Value::Null,
        }
    }
    v.clone()
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.root {
            RefRoot::Input => write!(f, "@input")?,
            RefRoot::Step(s) => write!(f, "@{s}")?,
            RefRoot::StepStatus(s) => write!(f, "@{s}.$status")?,
            RefRoot::Item => write!(f, "@item")?,
            RefRoot::Index => write!(f, "@index")?,
            RefRoot::RunId => write!(f, "@run.id")?,
        }
        for seg in &self.path {
            match seg {
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(i) => write!(f, ".{i}")?,
            }
        }
        Ok(())
    }
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}
pub(crate) fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Scan a ref starting at `s[at] == '@'`. Returns the ref (or its error)
/// and the end offset, or `None` when the `@` does not start a ref.
pub(crate) fn scan(s: &str, at: usize) -> Option<(Result<Ref, RefError>, usize)> {
    let b = s.as_bytes();
    let mut i = at + 1;
    if i >= b.len() || !is_ident_start(b[i]) {
        return None;
    }
    let start = i;
    while i < b.len() && is_word(b[i]) {
        i += 1;
    }
    let root = &s[start..i];
    // Raw segments: (is_dollar, text)
    let mut segs: Vec<(bool, &str)> = Vec::new();
    loop {
        if i + 1 < b.len() && b[i] == b'.' {
            let c = b[i + 1];
            if is_word(c) {
                let st = i + 1;
                let mut j = st;
                while j < b.len() && is_word(b[j]) {
                    j += 1;
                }
                segs.push((false, &s[st..j]));
                i = j;
                continue;
            }
            if c == b'$' && i + 2 < b.len() && is_ident_start(b[i + 2]) {
                let st = i + 2;
                let mut j = st;
                while j < b.len() && is_word(b[j]) {
                    j += 1;
                }
                segs.push((true, &s[st..j]));
                i = j;
                continue;
            }
        }
        break;
    }
    Some((build(root, &segs), i))
}

fn build(root: &str, segs: &[(bool, &str)]) -> Result<Ref, RefError> {
    for (k, (dollar, text)) in segs.iter().enumerate() {
        if *dollar {
            if *text != "status" {
                return Err(RefError::UnknownDollar((*text).to_owned()));
            }
            if k != 0 || segs.len() != 1 || RESERVED_ROOTS.contains(&root) {
                return Err(RefError::MisplacedStatus);
            }
        }
    }
    let path = |segs: &[(bool, &str)]| {
        segs.iter()
            .map(|(_, t)| match t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse::<usize>()) {
                Some(Ok(n)) => Segment::Index(n),
                _ => Segment::Key((*t).to_owned()),
            })
            .collect::<Vec<_>>()
    };
    let root = match root {
        "input" => RefRoot::Input,
        "item" => RefRoot::Item,
        "index" => {
            if !segs.is_empty() {
                return Err(RefError::IndexHasNoFields);
            }
            RefRoot::Index
        }
        "run" => {
            return match segs {
                [] => Err(RefError::RunWithoutField),
                [(false, "id")] => Ok(Ref { root: RefRoot::RunId, path: vec![] }),
                [(_, f), ..] if *f != "id" => Err(RefError::UnknownRunField((*f).to_owned())),
                _ => Err(RefError::UnknownRunField(
                    segs.iter().map(|(_, t)| *t).collect::<Vec<_>>().join(".").to_owned(),
                )),
            };
        }
        step => {
            if let [(true, _)] = segs {
                return Ok(Ref { root: RefRoot::StepStatus(step.to_owned()), path: vec![] });
            }
            RefRoot::Step(step.to_owned())
        }
    };
    Ok(Ref { root, path: path(segs) })
}

/// Parse a string that must be exactly one ref (`when.ref`, `for_each`).
pub fn parse_ref(s: &str) -> Result<Ref, RefError> {
    if s.starts_with('@')
        && let Some((r, end)) = scan(s, 0)
        && end == s.len()
    {
        return r;
    }
    Err(RefError::NotARef(s.to_owned()))
}

#[cfg(test)]
mod tests;
