//! Refs (`@input.a`, `@step.list.3`, `@item`, `@index`, `@run.id`,
//! `@step.$status`, `@@`, the optional `@step.field?`): the grammar,
//! parsing, and resolving one ref against a [`Scope`]. Whole JSON values
//! are compiled by `template`.
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
//!
//! A ref that walks off its value (a field an object does not have, an
//! index past an array's end, a field of a string) resolves to nothing:
//! [`Ref::lookup`] says so ([`Unresolved`], which fails the step), unless
//! the ref is optional — a string that is exactly a ref followed by `?`
//! (`"@step.field?"`), or a `when`/`for_each` ref ending in `?` — which
//! gives `null` instead. In a longer string a `?` after a ref is text
//! (`"Approve @input.amount?"`). Refs to skipped or unfinished steps give
//! `null` either way (their output is `null`).

use std::fmt;

use serde_json::Value;

use crate::problem::shown;
use crate::scope::Scope;
use crate::status::StepState;

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
    /// `@run.labels`: the run's labels (an object of strings).
    RunLabels,
    /// `@run.resume`: what the run did so far (its summary, each step's
    /// description, state, result or error): see the engine's `resume`.
    RunResume,
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
    /// Written with a trailing `?`: a path that leads nowhere gives
    /// `null` instead of failing the step.
    pub optional: bool,
}

/// A ref that resolves to nothing (see the module docs): which ref, and
/// what the value it walked off holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Unresolved {
    /// The ref as written (`@sum.text`).
    pub reference: String,
    /// A sentence naming the ref, the value it walked off and what that
    /// value holds, and how to fix it.
    pub message: String,
}

/// Why a string is not a valid ref.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("`{}` is not a ref: a ref is `@` followed by a name, like `@input.email` or `@step.field`", shown(.0))]
    NotARef(String),
    #[error("`@run` needs a field: `@run.id`, `@run.labels` or `@run.resume`")]
    RunWithoutField,
    #[error("unknown run field `{}`: only `@run.id`, `@run.labels` and `@run.resume` exist", shown(.0))]
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

    /// Resolve against a scope, leniently: a path that leads nowhere,
    /// a skipped or unfinished step give `null` (for previews such as a
    /// recording's; a run resolves with [`Ref::lookup`]).
    pub fn resolve(&self, scope: &dyn Scope) -> Value {
        self.walk_from(scope).unwrap_or(Value::Null)
    }

    /// Resolve against a scope as a run does: a path that leads nowhere is
    /// [`Unresolved`] (`null` when the ref is optional); a skipped or
    /// unfinished step's output is `null`.
    pub fn lookup(&self, scope: &dyn Scope) -> Result<Value, Unresolved> {
        match self.walk_from(scope) {
            Ok(v) => Ok(v),
            Err(_) if self.optional => Ok(Value::Null),
            Err((k, holds)) => Err(self.unresolved(k, &holds)),
        }
    }

    /// The value, or where the path broke: the index of the segment that
    /// found nothing and (a copy of) the value it was applied to.
    fn walk_from(&self, scope: &dyn Scope) -> Result<Value, (usize, Value)> {
        let base: &Value = match &self.root {
            RefRoot::Input => scope.input(),
            RefRoot::Item => match scope.item() {
                Some(v) => v,
                None => return Ok(Value::Null),
            },
            RefRoot::Index => return Ok(scope.index().map(Value::from).unwrap_or(Value::Null)),
            RefRoot::RunId => return Ok(Value::String(scope.run_id().to_owned())),
            RefRoot::RunLabels => &scope.labels(),
            RefRoot::RunResume => &scope.resume(),
            RefRoot::StepStatus(name) => {
                let status = scope.step(name).map(|v| v.status).unwrap_or(StepState::Pending);
                return Ok(Value::String(status.as_str().to_owned()));
            }
            RefRoot::Step(name) => match scope.step(name) {
                Some(view) if view.status != StepState::Skipped => view.output,
                _ => return Ok(Value::Null),
            },
        };
        walk(base, &self.path)
    }

    /// The error for a path that broke at segment `k` of a value holding
    /// `holds`.
    fn unresolved(&self, k: usize, holds: &Value) -> Unresolved {
        let written = self.to_string();
        let prefix = Ref { root: self.root.clone(), path: self.path[..k].to_vec(), optional: false }.to_string();
        let missing = match &self.path[k] {
            Segment::Key(key) => format!("no field `{}`", shown(key)),
            Segment::Index(i) => match holds {
                Value::Array(a) => format!("no item {i} (it has {})", a.len()),
                _ => format!("no item {i}"),
            },
        };
        let whose = match &self.root {
            RefRoot::Input if k == 0 => "the run's input".to_string(),
            RefRoot::Step(s) if k == 0 => format!("step `{s}`'s output"),
            RefRoot::Item if k == 0 => "the item".to_string(),
            _ => format!("`{prefix}`"),
        };
        let fix = match holds {
            Value::Object(m) if !m.is_empty() => {
                let keys: Vec<String> = m.keys().take(3).map(|k| format!("`{prefix}.{}`", shown(k))).collect();
                format!("refer to a field it has ({}), ", keys.join(", "))
            }
            Value::Object(_) | Value::Array(_) => String::new(),
            _ => format!("use `{prefix}` for the whole value, "),
        };
        Unresolved {
            reference: written.clone(),
            message: format!(
                "`{written}` resolves to nothing: {whose} is {}, which has {missing}; {fix}or write `{written}?` (as a whole string, not inside a text) to get null when it is missing",
                describe(holds)
            ),
        }
    }
}

/// What a value holds, for a message: its type and a short preview.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Object(m) if m.is_empty() => "an empty object".into(),
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().take(8).map(|k| shown(k)).collect();
            let more = if m.len() > 8 { format!(" and {} more", m.len() - 8) } else { String::new() };
            format!("an object with field{} {}{more}", if m.len() == 1 { "" } else { "s" }, keys.join(", "))
        }
        Value::Array(a) => format!("an array of {} item{}", a.len(), if a.len() == 1 { "" } else { "s" }),
        other => format!("{} ({})", crate::problem::type_name(other), shown(&other.to_string())),
    }
}

fn walk(mut v: &Value, path: &[Segment]) -> Result<Value, (usize, Value)> {
    for (k, seg) in path.iter().enumerate() {
        let next = match (seg, v) {
            (Segment::Key(key), Value::Object(m)) => m.get(key),
            (Segment::Index(i), Value::Array(a)) => a.get(*i),
            (Segment::Index(i), Value::Object(m)) => m.get(&i.to_string()),
            _ => None,
        };
        match next {
            Some(n) => v = n,
            None => return Err((k, v.clone())),
        }
    }
    Ok(v.clone())
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
            RefRoot::RunLabels => write!(f, "@run.labels")?,
            RefRoot::RunResume => write!(f, "@run.resume")?,
        }
        for seg in &self.path {
            match seg {
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(i) => write!(f, ".{i}")?,
            }
        }
        if self.optional {
            write!(f, "?")?;
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
                [(false, "id")] => Ok(Ref { root: RefRoot::RunId, path: vec![], optional: false }),
                [(false, "labels"), rest @ ..] => {
                    Ok(Ref { root: RefRoot::RunLabels, path: path(rest), optional: false })
                }
                [(false, "resume"), rest @ ..] => {
                    Ok(Ref { root: RefRoot::RunResume, path: path(rest), optional: false })
                }
                [(_, f), ..] if *f != "id" => Err(RefError::UnknownRunField((*f).to_owned())),
                _ => Err(RefError::UnknownRunField(
                    segs.iter().map(|(_, t)| *t).collect::<Vec<_>>().join(".").to_owned(),
                )),
            };
        }
        step => {
            if let [(true, _)] = segs {
                return Ok(Ref { root: RefRoot::StepStatus(step.to_owned()), path: vec![], optional: false });
            }
            RefRoot::Step(step.to_owned())
        }
    };
    Ok(Ref { root, path: path(segs), optional: false })
}

/// Parse a string that must be exactly one ref (`when.ref`, `for_each`),
/// optionally followed by `?`.
pub fn parse_ref(s: &str) -> Result<Ref, RefError> {
    exact_ref(s).unwrap_or_else(|| Err(RefError::NotARef(s.to_owned())))
}

/// `s` as exactly one ref (with its trailing `?`, if any); `None` when `s`
/// is not a single ref.
pub(crate) fn exact_ref(s: &str) -> Option<Result<Ref, RefError>> {
    let (body, optional) = match s.strip_suffix('?') {
        Some(b) => (b, true),
        None => (s, false),
    };
    if body.starts_with('@')
        && let Some((r, end)) = scan(body, 0)
        && end == body.len()
    {
        return Some(r.map(|r| Ref { optional, ..r }));
    }
    None
}

#[cfg(test)]
mod tests;
