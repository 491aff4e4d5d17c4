//! Recording mode's bookkeeping, independent of MCP and of the store: the
//! steps a session's calls became (proxied tool calls and plugin calls,
//! named after the tool or plugin with a counter, and presets), their
//! arguments with refs resolved against what was recorded so far, the
//! definition they add up to, and post-hoc templatization: a literal
//! argument equal to a value of the recording's input or of an earlier
//! step's output is proposed as a ref (`@input.email`, `@get_user_1.id`),
//! each proposal with an id the caller may refuse. What a save says about
//! the result (literals equal to input values that were not proposed, input
//! fields no step uses, what a replay with other input changes) is
//! `review.rs`.
//!
//! Equality is proposed, and only for values specific enough to be more
//! than a coincidence: strings of at least 3 characters, numbers other
//! than small integers (-1..=10), and non-empty objects and arrays. Input
//! values win over step outputs; among steps, the latest earlier one wins.
//! An input string value found as a whole word inside a longer string is
//! proposed too, as that text with the ref in it (`"hello zoe!"` →
//! `"hello @input.name!"`), where the ref reads as written (not inside a
//! word, not followed by what would extend it: `notes.txt` stays text).
//!
//! A step depends on the steps its arguments refer to (typed by the caller
//! or proposed), and on the calls whose side effects it must follow
//! ([`Recording::order`]): a call to a tool its server does not annotate
//! `readOnlyHint: true` follows the write recorded before it (so the
//! writes keep their order), and a read-only call follows the write to
//! the same server recorded before it (a read after a write reads what was
//! written). Plugin calls and presets have no side effects. The caller may
//! let steps run in parallel anyway (`parallel`), or keep the whole
//! recorded order (`keep_order`).

pub mod journal;
mod review;
pub mod save;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};
use weft_model::{MapScope, Template};

pub use review::{Effect, Review};

/// One recorded step.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecordedStep {
    /// `get_user_1`.
    pub name: String,
    /// `tool` steps: the upstream server and tool.
    pub tool: Option<(String, String)>,
    /// `code` steps: the code reference as a definition writes it
    /// (`{"plugin": "json-select"}`). Neither `tool` nor `code`: a preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Value>,
    /// The arguments as the caller wrote them (refs intact).
    pub arguments: Value,
    /// The arguments as they were sent (refs resolved).
    #[serde(default)]
    pub input: Value,
    /// The output that was recorded.
    pub output: Value,
    /// The tool is annotated `readOnlyHint: true` by its server (plugin
    /// calls and presets are: they change nothing). A call recorded before
    /// this was known counts as a write.
    #[serde(default)]
    pub read_only: bool,
}

// An order kept between two recorded calls that pass no data, and why
// (no doc comment: it would be repeated in tools/list).
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Ordered {
    pub step: String,
    pub after: String,
    pub why: String,
}

/// A recording: its input and its steps, in call order.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Recording {
    /// `@input` of the recording.
    pub input: Value,
    /// In call order.
    pub steps: Vec<RecordedStep>,
}

/// A proposed ref: at `path` (a JSON Pointer into step `step`'s
/// arguments) the literal `value` becomes `reference`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Replacement {
    /// `r1`, `r2`, ... in document order; pass ids to refuse them.
    pub id: String,
    /// The step whose argument changes.
    pub step: String,
    /// JSON Pointer into its arguments (`/content`).
    pub path: String,
    /// The literal that was recorded.
    pub value: Value,
    /// The ref that replaces it (`@echo_1`).
    pub reference: String,
}

/// `tool` as a step-name stem: non-identifier characters become `_`, and
/// a leading digit gets a `_` in front.
pub fn stem(tool: &str) -> String {
    let mut s: String = tool.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

impl Recording {
    /// A new recording with `input` as `@input`.
    pub fn new(input: Value) -> Self {
        Recording { input, steps: vec![] }
    }

    /// The name the next call of `tool` gets: `<stem>_<n>`, the lowest
    /// counter not taken (so a call made again after its step was removed
    /// takes its name back).
    pub fn next_name(&self, tool: &str) -> String {
        let stem = stem(tool);
        let taken: BTreeSet<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
        (1..).map(|n| format!("{stem}_{n}")).find(|n| !taken.contains(n.as_str())).expect("a free name")
    }

    /// What refs resolve against: the input and every recorded output.
    pub fn scope(&self) -> MapScope {
        self.steps.iter().fold(MapScope::new(self.input.clone()), |s, st| s.with_step(&st.name, st.output.clone()))
    }

    /// Placeholders of another template language in `arguments` that name
    /// a recorded step or the input (`{{get_sum_1}}`, `${input.name}`):
    /// weft would send them as text, and the save would refuse them. One
    /// line each, with the ref to write.
    pub fn lookalikes(&self, arguments: &Value) -> Vec<String> {
        let mut steps: Vec<Value> = self.steps.iter().map(|s| serde_json::json!({"name": s.name})).collect();
        let at = format!("/steps/{}/input", steps.len());
        steps.push(serde_json::json!({"name": "this_call", "input": arguments}));
        let found = weft_model::lookalike::check(&serde_json::json!({"steps": steps}));
        found
            .errors
            .iter()
            .map(|p| {
                let path = p.path.strip_prefix(&at).unwrap_or(&p.path);
                let hint = p.hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default();
                format!("at `{}`: {}{hint}", if path.is_empty() { "/" } else { path }, p.message)
            })
            .collect()
    }

    /// `arguments` with every ref resolved against what was recorded; an
    /// error names a malformed ref, one to a step that does not exist, or
    /// one that leads nowhere (as it would fail the step in a replay).
    pub fn resolve(&self, arguments: &Value) -> Result<Value, String> {
        let t = Template::compile(arguments.clone()).map_err(|errs| {
            errs.iter().map(|e| format!("at `{}`: {}", e.pointer, e.error)).collect::<Vec<_>>().join("; ")
        })?;
        for dep in t.step_deps() {
            if !self.steps.iter().any(|s| s.name == dep) {
                let known: Vec<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
                let mean =
                    weft_model::did_you_mean(dep, known.iter().copied()).map(|m| format!("{m} ")).unwrap_or_default();
                return Err(format!(
                    "`@{dep}` names no recorded step ({mean}recorded so far: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ));
            }
        }
        t.try_resolve(&self.scope()).map_err(|u| u.message)
    }

    /// Appends a step.
    pub fn push(&mut self, step: RecordedStep) {
        self.steps.push(step);
    }

    /// Removes step `name` (the last one when `None`) and returns it,
    /// unless a later step's arguments refer to it.
    pub fn remove(&mut self, name: Option<&str>) -> Result<RecordedStep, String> {
        let i = match name {
            None => self.steps.len().checked_sub(1).ok_or("the recording has no steps")?,
            Some(n) => self.steps.iter().position(|s| s.name == n).ok_or_else(|| {
                let known: Vec<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
                let mean =
                    weft_model::did_you_mean(n, known.iter().copied()).map(|m| format!("{m} ")).unwrap_or_default();
                format!("the recording has no step `{n}` ({mean}its steps: {})", known.join(", "))
            })?,
        };
        let gone = self.steps[i].name.clone();
        let users: Vec<&str> = self.steps[i + 1..]
            .iter()
            .filter(|s| Template::compile_lenient(s.arguments.clone()).0.step_deps().contains(gone.as_str()))
            .map(|s| s.name.as_str())
            .collect();
        if !users.is_empty() {
            return Err(format!(
                "step `{gone}` is used by {} (their arguments refer to `@{gone}`): remove those first",
                users.join(", ")
            ));
        }
        Ok(self.steps.remove(i))
    }

    /// Every literal argument that equals an input value or an earlier
    /// step's output value, as a proposed ref (see the module docs).
    pub fn propose(&self) -> Vec<Replacement> {
        let mut out = vec![];
        let mut sources: Vec<(String, Value)> = Vec::new();
        leaves("@input", &self.input, &mut sources);
        for (i, step) in self.steps.iter().enumerate() {
            let mut found = vec![];
            literals("", &step.arguments, &mut found);
            for (path, value) in found {
                if let Some(reference) = best_source(&sources, &self.steps[..i], &value) {
                    out.push(Replacement {
                        id: format!("r{}", out.len() + 1),
                        step: step.name.clone(),
                        path,
                        value,
                        reference,
                    });
                }
            }
        }
        // Input values inside longer strings: the text with refs in it.
        let words: Vec<(String, String)> = sources
            .iter()
            .filter_map(|(r, v)| match v {
                Value::String(w) if specific(v) && r != "@input" => Some((r.clone(), w.clone())),
                _ => None,
            })
            .collect();
        for step in &self.steps {
            let mut strings = vec![];
            all_strings("", &step.arguments, &mut strings);
            for (path, text) in strings {
                let whole = out
                    .iter()
                    .any(|r| r.step == step.name && (path == r.path || path.starts_with(&format!("{}/", r.path))));
                if whole || words.iter().any(|(_, w)| *w == text) {
                    continue;
                }
                if let Some(with_refs) = embed(&text, &words) {
                    out.push(Replacement {
                        id: format!("r{}", out.len() + 1),
                        step: step.name.clone(),
                        path,
                        value: Value::String(text),
                        reference: with_refs,
                    });
                }
            }
        }
        out
    }

    /// Each step's arguments with the replacements in `accepted` applied.
    pub fn arguments(&self, accepted: &[Replacement]) -> Vec<(String, Value)> {
        self.steps
            .iter()
            .map(|s| {
                let mut args = s.arguments.clone();
                for r in accepted.iter().filter(|r| r.step == s.name) {
                    if let Some(slot) = args.pointer_mut(&r.path) {
                        *slot = Value::String(r.reference.clone());
                    }
                }
                (s.name.clone(), args)
            })
            .collect()
    }

    /// The orders of side effects a replay keeps (see the module docs),
    /// except for the steps named in `parallel`.
    pub fn order(&self, parallel: &[String]) -> Vec<Ordered> {
        let mut out = vec![];
        let mut last_write: Option<&RecordedStep> = None;
        let mut last_write_to: std::collections::HashMap<&str, &RecordedStep> = Default::default();
        let tool = |s: &RecordedStep| s.tool.as_ref().map(|(server, t)| format!("{server}__{t}")).unwrap_or_default();
        for s in &self.steps {
            let Some((server, _)) = &s.tool else { continue };
            let before = if s.read_only { last_write_to.get(server.as_str()).copied() } else { last_write };
            if let Some(w) = before
                && !parallel.contains(&s.name)
            {
                let why = if s.read_only {
                    format!("{} reads from the server `{server}` that {} wrote to before it", tool(s), tool(w))
                } else {
                    format!("{} is not read-only: it keeps its place after the earlier write {}", tool(s), tool(w))
                };
                out.push(Ordered { step: s.name.clone(), after: w.name.clone(), why });
            }
            if !s.read_only {
                last_write = Some(s);
                last_write_to.insert(server, s);
            }
        }
        out
    }

    /// The workflow definition of this recording, with the replacements in
    /// `accepted` applied: one step per recorded call, each depending on
    /// the steps its arguments refer to and `after` the calls in `order`
    /// (with `keep_order`, each `after` the previous instead).
    /// A plugin call is a code step; a preset (a step with a known output
    /// and no call) a `json-select` code step returning that output as a
    /// literal. The output is the last step's; the `input_schema` lists the
    /// recording input's keys and types, those some step uses required.
    pub fn definition(&self, name: &str, accepted: &[Replacement], keep_order: bool, order: &[Ordered]) -> Value {
        let args = self.arguments(accepted);
        let mut steps = vec![];
        let mut prev: Option<&str> = None;
        for (s, (_, args)) in self.steps.iter().zip(&args) {
            let mut step = Map::new();
            step.insert("name".into(), json!(s.name));
            match (&s.tool, &s.code) {
                (Some((server, tool)), _) => {
                    step.insert("tool".into(), json!({"server": server, "name": tool}));
                    step.insert("input".into(), args.clone());
                }
                (None, Some(code)) => {
                    step.insert("code".into(), code.clone());
                    step.insert("input".into(), args.clone());
                }
                (None, None) => {
                    // A preset: its recorded output, as a literal. `json-select`
                    // with an empty path returns its `data` unchanged.
                    step.insert("code".into(), json!({"plugin": "json-select"}));
                    step.insert("input".into(), json!({"data": escape_refs(&s.output), "path": ""}));
                }
            }
            match (prev, keep_order) {
                (Some(p), true) => {
                    step.insert("after".into(), json!([p]));
                }
                _ => {
                    let after: Vec<&str> =
                        order.iter().filter(|o| o.step == s.name).map(|o| o.after.as_str()).collect();
                    if !after.is_empty() {
                        step.insert("after".into(), json!(after));
                    }
                }
            }
            prev = Some(&s.name);
            steps.push(Value::Object(step));
        }
        let mut def = json!({"name": name, "version": 1, "steps": steps});
        if let Some(last) = self.steps.last() {
            def["output"] = json!(format!("@{}", last.name));
        }
        let used = review::used_inputs(&args);
        if let Some(schema) = input_schema(&self.input, &used) {
            def["input_schema"] = schema;
        }
        def
    }
}

/// The best ref for `value`: an input leaf first, else the latest earlier
/// step (its whole output, else a leaf of it).
fn best_source(input: &[(String, Value)], earlier: &[RecordedStep], value: &Value) -> Option<String> {
    if !specific(value) {
        return None;
    }
    if let Some((r, _)) = input.iter().find(|(_, v)| v == value) {
        return Some(r.clone());
    }
    for s in earlier.iter().rev() {
        let mut found = vec![];
        leaves(&format!("@{}", s.name), &s.output, &mut found);
        if let Some((r, _)) = found.into_iter().find(|(_, v)| v == value) {
            return Some(r);
        }
    }
    None
}

/// `(pointer, text)` of every string of an arguments document.
fn all_strings(at: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) => out.push((at.to_string(), s.clone())),
        Value::Object(m) => {
            for (k, x) in m {
                all_strings(&format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), x, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                all_strings(&format!("{at}/{i}"), x, out);
            }
        }
        _ => {}
    }
}

/// `text` with each whole-word occurrence of an input value (`words`:
/// `(ref, value)`, the longest values first) written as its ref, when
/// there is one: `"hello zoe!"` → `"hello @input.name!"`. An occurrence
/// is replaced only where the ref would read as written: not right after
/// a letter, digit, `_`, `.` or `@` (inside a word, or a ref already
/// there), and not before a letter, digit, `_` or a `.` that a name
/// follows (the ref would read on).
fn embed(text: &str, words: &[(String, String)]) -> Option<String> {
    let mut words: Vec<&(String, String)> = words.iter().collect();
    words.sort_by_key(|(_, w)| std::cmp::Reverse(w.len()));
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = text.to_string();
    let mut changed = false;
    for (reference, w) in words {
        let mut from = 0;
        while let Some(k) = out[from..].find(w.as_str()) {
            let at = from + k;
            let end = at + w.len();
            let before = out[..at].chars().next_back();
            let mut after = out[end..].chars();
            let next = after.next();
            let reads_on = match next {
                Some(c) if word_char(c) => true,
                Some('.') => after.next().is_some_and(word_char),
                _ => false,
            };
            let inside = before.is_some_and(|c| word_char(c) || c == '.' || c == '@');
            let starts_word = w.chars().next().is_some_and(word_char) && w.chars().last().is_some_and(word_char);
            if inside || reads_on || !starts_word {
                from = end;
                continue;
            }
            out.replace_range(at..end, reference);
            from = at + reference.len();
            changed = true;
        }
    }
    changed.then_some(out)
}

/// Whether a value is specific enough to be proposed as a ref.
fn specific(v: &Value) -> bool {
    match v {
        Value::String(s) => s.chars().count() >= 3 && !s.starts_with('@'),
        Value::Number(n) => n.as_i64().is_none_or(|i| !(-1..=10).contains(&i)),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => false,
    }
}

/// `(ref, value)` for `v` itself and every nested value reachable by
/// identifier keys and indexes, under `root`.
fn leaves(root: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    out.push((root.to_string(), v.clone()));
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if is_ident(k) {
                    leaves(&format!("{root}.{k}"), x, out);
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                leaves(&format!("{root}.{i}"), x, out);
            }
        }
        _ => {}
    }
}

/// `(pointer, value)` of every literal in an arguments document: strings
/// that are not refs, numbers, booleans, and containers that hold no refs
/// (a container is offered whole before its parts).
fn literals(at: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::String(s) if s.starts_with('@') => {}
        Value::Object(m) => {
            if !holds_ref(v) && !at.is_empty() {
                out.push((at.to_string(), v.clone()));
            }
            for (k, x) in m {
                literals(&format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), x, out);
            }
        }
        Value::Array(a) => {
            if !holds_ref(v) {
                out.push((at.to_string(), v.clone()));
            }
            for (i, x) in a.iter().enumerate() {
                literals(&format!("{at}/{i}"), x, out);
            }
        }
        Value::String(_) | Value::Number(_) | Value::Bool(_) => out.push((at.to_string(), v.clone())),
        Value::Null => {}
    }
}

fn holds_ref(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('@'),
        Value::Array(a) => a.iter().any(holds_ref),
        Value::Object(m) => m.values().any(holds_ref),
        _ => false,
    }
}

fn is_ident(k: &str) -> bool {
    let mut c = k.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_') && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// A literal whose strings may contain `@`: escaped as `@@` so the engine
/// reads them literally.
fn escape_refs(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace('@', "@@")),
        Value::Array(a) => Value::Array(a.iter().map(escape_refs).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), escape_refs(x))).collect()),
        other => other.clone(),
    }
}

/// An `input_schema` naming the recording input's top-level keys and
/// their JSON types, those in `used` required (a field no step uses is
/// not asked for), so the template's tool says what it needs.
fn input_schema(input: &Value, used: &BTreeSet<String>) -> Option<Value> {
    let m = input.as_object().filter(|m| !m.is_empty())?;
    let props: Map<String, Value> =
        m.iter().map(|(k, v)| (k.clone(), json!({"type": weft_model::schema_type(v)}))).collect();
    let required: Vec<&String> = m.keys().filter(|k| used.contains(*k)).collect();
    Some(json!({"type": "object", "properties": props, "required": required}))
}
