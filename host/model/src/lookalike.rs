//! Strings that look like another template language's placeholders —
//! `{{sum.output}}` (Mustache, Jinja, n8n, GitHub Actions' `${{ … }}`),
//! `${sum}` (JavaScript, shell) and `$sum.output` — where a weft ref
//! (`@sum`) was meant. weft passes such text on unchanged, so a definition
//! written that way runs and produces wrong values.
//!
//! A placeholder whose first name is a step of the definition or a ref
//! root (`input`, `item`, `index`, `run`; also `steps.X`, `inputs.X`) is a
//! problem: the definition does not validate, and the hint gives the ref
//! to write. Any other `{{…}}` or `${…}`, or a whole string `$name`, is a
//! warning (it may be meant literally). A placeholder whose name is a key
//! of a `values` object around it (the `text-template` plugin's input:
//! `{"template": "Hi {{name}}", "values": {"name": "@input.name"}}`) is
//! what that plugin reads, and is left alone.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::problem::{Problem, shown};
use crate::refs::RESERVED_ROOTS;
use crate::template::ptr;

/// The look-alikes of a definition document.
#[derive(Debug, Default)]
pub struct Lookalikes {
    /// Placeholders naming a step or a ref root: the definition is invalid.
    pub errors: Vec<Problem>,
    /// Other placeholders: the definition is valid, the reader is told.
    pub warnings: Vec<Problem>,
}

/// One placeholder found in a string.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    /// As written (`{{ sum.output }}`).
    text: String,
    /// Its dotted path (`["sum", "output"]`).
    path: Vec<String>,
    /// `{{…}}`, `${…}` or the whole string `$x`: worth a warning even when
    /// it names nothing weft knows.
    loud: bool,
}

/// Every look-alike in the parts of `doc` that hold refs: step inputs
/// (`input`, a `return` value), `when`, `wait` prompts and matches, and
/// the definition's `output` (and `summary`, and the `input` and `key` of
/// its notifications).
pub fn check(doc: &Value) -> Lookalikes {
    let mut out = Lookalikes::default();
    let Some(steps) = doc.get("steps").and_then(Value::as_array) else { return out };
    let names: BTreeSet<&str> = steps.iter().filter_map(|s| s.get("name").and_then(Value::as_str)).collect();
    let mut scan = |v: &Value, at: String| walk(v, &at, &names, &mut vec![], &mut out);
    for (i, step) in steps.iter().enumerate() {
        let at = format!("/steps/{i}");
        for field in ["input", "return", "when"] {
            if let Some(v) = step.get(field) {
                scan(v, format!("{at}/{field}"));
            }
        }
        for field in ["prompt", "match"] {
            if let Some(v) = step.get("wait").and_then(|w| w.get(field)) {
                scan(v, format!("{at}/wait/{field}"));
            }
        }
    }
    for field in ["output", "summary"] {
        if let Some(v) = doc.get(field) {
            scan(v, format!("/{field}"));
        }
    }
    for (i, n) in doc.get("notify").and_then(Value::as_array).into_iter().flatten().enumerate() {
        for field in ["input", "key"] {
            if let Some(v) = n.get(field) {
                scan(v, format!("/notify/{i}/{field}"));
            }
        }
    }
    out
}

/// Scans `v` at `at`; `values` holds the keys of the `values` objects
/// around it (placeholders a text-template step reads).
fn walk<'a>(v: &'a Value, at: &str, names: &BTreeSet<&str>, values: &mut Vec<&'a Value>, out: &mut Lookalikes) {
    match v {
        Value::String(s) => {
            output_field(s, at, names, out);
            optional_in_text(s, at, out);
            for f in find(s) {
                let known = |k: &str| values.iter().any(|m| m.get(k).is_some());
                if f.path.first().is_some_and(|r| known(r)) {
                    continue;
                }
                report(&f, at, names, out);
            }
        }
        Value::Array(a) => {
            a.iter().enumerate().for_each(|(i, x)| walk(x, &ptr(at, &i.to_string()), names, values, out))
        }
        Value::Object(m) => {
            let pushed = match m.get("values") {
                Some(vals @ Value::Object(_)) => {
                    values.push(vals);
                    true
                }
                _ => false,
            };
            for (k, x) in m {
                walk(x, &ptr(at, k), names, values, out);
            }
            if pushed {
                values.pop();
            }
        }
        _ => {}
    }
}

/// A warning for each weft ref in `text` that reads a field `output` or
/// `result` of a step's output (`@sum.output`): a step's output is `@sum`
/// itself, so such a ref only works when the output has that field.
fn output_field(text: &str, at: &str, names: &BTreeSet<&str>, out: &mut Lookalikes) {
    if !text.contains('@') {
        return;
    }
    let (template, _) = crate::template::Template::compile_lenient(Value::String(text.to_string()));
    for site in template.sites() {
        let crate::refs::RefRoot::Step(step) = &site.reference.root else { continue };
        let Some(crate::refs::Segment::Key(first)) = site.reference.path.first() else { continue };
        if names.contains(step.as_str()) && (first == "output" || first == "result") {
            out.warnings.push(
                Problem::new(at, format!("`{}` reads a field `{first}` of step `{step}`'s output", site.reference))
                    .hint(format!(
                        "a step's output is `@{step}` itself (there is no `.{first}`); keep this only if the output has a field `{first}`"
                    )),
            );
        }
    }
}

/// A warning for each ref inside a longer text written with a trailing `?`
/// (`"id: @fetch.id? / @other.id?"`): only a string that is the ref alone
/// may be optional; inside a text the `?` stays as a character and the ref
/// is required. A question is left alone: a wait's prompt, and a `?` that
/// ends the text (`"Ship order @item.id?"`).
fn optional_in_text(text: &str, at: &str, out: &mut Lookalikes) {
    if !text.contains('?') || !text.contains('@') || at.ends_with("/wait/prompt") {
        return;
    }
    let (template, _) = crate::template::Template::compile_lenient(Value::String(text.to_string()));
    let crate::template::CompiledValue::Interpolated(parts) = template.compiled() else { return };
    for w in parts.windows(2) {
        if let [crate::template::Part::Ref(r), crate::template::Part::Text(t)] = w
            && t.starts_with('?')
            && t.len() > 1
        {
            out.warnings.push(
                Problem::new(at, format!("the `?` after `{r}` is kept as text: inside a longer text a ref is required"))
                    .hint(format!(
                        "a ref is optional (null when it leads nowhere) only when the string is the ref alone: give `\"{r}?\"` its own field or step input"
                    )),
            );
        }
    }
}

/// Adds the problem or warning for one placeholder at `at`.
fn report(f: &Found, at: &str, names: &BTreeSet<&str>, out: &mut Lookalikes) {
    let text = shown(&f.text);
    match weft_ref(&f.path, names) {
        Some(r) => out.errors.push(
            Problem::new(at, format!("`{text}` is not a weft ref: it would be passed on as this very text"))
                .hint(format!(
                    "write `{r}`: weft refs are `@step` for a step's output, `@step.field` for a field of it, `@input.field` for the run's input, and a string that is exactly a ref keeps the value's JSON type"
                )),
        ),
        None if f.loud => out.warnings.push(
            Problem::new(at, format!("`{text}` looks like a placeholder of another template language; weft passes it on as text"))
                .hint("weft refs are `@step.field` or `@input.field` (`@@` is a literal `@`); ignore this if the text is meant literally"),
        ),
        None => {}
    }
}

/// The weft ref a placeholder path meant, when its first name is a step of
/// the definition or a ref root (`steps.X…` and `inputs.X…` understood).
fn weft_ref(path: &[String], names: &BTreeSet<&str>) -> Option<String> {
    let (root, rest) = path.split_first()?;
    let (root, rest): (&str, &[String]) = match root.as_str() {
        "steps" | "step" if !rest.is_empty() => (rest[0].as_str(), &rest[1..]),
        "inputs" | "input" | "params" | "args" => ("input", rest),
        other => (other, rest),
    };
    let is_root = RESERVED_ROOTS.contains(&root);
    if !is_root && !names.contains(root) {
        return None;
    }
    // `{{sum.output}}`: a step's output is `@sum` itself.
    let rest = match rest.split_first() {
        Some((first, tail)) if !is_root && ["output", "outputs", "result"].contains(&first.as_str()) => tail,
        _ => rest,
    };
    let mut r = format!("@{root}");
    if root == "run" {
        r.push_str(".id");
    } else {
        for seg in rest {
            r.push('.');
            r.push_str(seg);
        }
    }
    Some(r)
}

/// The placeholders in `s`.
fn find(s: &str) -> Vec<Found> {
    let b = s.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        if s[i..].starts_with("{{{{") {
            i += 4; // text-template's escape of a literal `{{`
        } else if s[i..].starts_with("{{") {
            match s[i + 2..].find("}}") {
                Some(close) => {
                    let end = i + 2 + close + 2;
                    let start = if i > 0 && b[i - 1] == b'$' { i - 1 } else { i };
                    out.push(Found { text: s[start..end].into(), path: path_of(&s[i + 2..i + 2 + close]), loud: true });
                    i = end;
                }
                None => i += 2,
            }
        } else if s[i..].starts_with("${") && !s[i..].starts_with("${{") {
            match s[i + 2..].find('}') {
                Some(close) => {
                    let end = i + 2 + close + 1;
                    out.push(Found { text: s[i..end].into(), path: path_of(&s[i + 2..i + 2 + close]), loud: true });
                    i = end;
                }
                None => i += 2,
            }
        } else if b[i] == b'$'
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'$'))
            && b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        {
            let mut end = i + 1;
            while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_' || b[end] == b'.') {
                end += 1;
            }
            let text = s[i..end].trim_end_matches('.');
            out.push(Found { text: text.into(), path: path_of(&text[1..]), loud: text.len() == s.len() });
            i = end;
        } else {
            i += 1;
        }
    }
    out.retain(|f| !f.path.is_empty());
    out
}

/// The leading dotted path of a placeholder's inside (`" $json.x | y "` →
/// `["json", "x"]`).
fn path_of(inner: &str) -> Vec<String> {
    let t = inner.trim().trim_start_matches('$');
    let end = t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')).unwrap_or(t.len());
    t[..end].split('.').filter(|p| !p.is_empty()).map(String::from).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(input: Value) -> Value {
        json!({"name": "w", "steps": [
            {"name": "sum", "tool": {"server": "s", "name": "t"}, "input": {}},
            {"name": "say", "tool": {"server": "s", "name": "t"}, "input": input}
        ]})
    }

    #[test]
    fn placeholders_naming_steps_or_roots_are_errors_with_the_ref_to_write() {
        let cases = [
            (json!({"m": "{{sum.output}}"}), "/steps/1/input/m", "`@sum`"),
            (json!({"m": "total: ${sum.total}"}), "/steps/1/input/m", "`@sum.total`"),
            (json!({"m": "$sum.output"}), "/steps/1/input/m", "`@sum`"),
            (json!({"m": "${{ steps.sum.outputs.result }}"}), "/steps/1/input/m", "`@sum.result`"),
            (json!({"m": ["{{input.a}}"]}), "/steps/1/input/m/0", "`@input.a`"),
            (json!({"m": "{{ inputs.b }}"}), "/steps/1/input/m", "`@input.b`"),
            (json!("${sum}"), "/steps/1/input", "`@sum`"),
            (json!({"m": "run {{run.id}}"}), "/steps/1/input/m", "`@run.id`"),
        ];
        for (input, path, want) in cases {
            let l = check(&doc(input.clone()));
            assert_eq!(l.errors.len(), 1, "{input}: {l:?}");
            assert_eq!(l.errors[0].path, path, "{input}");
            assert!(l.errors[0].hint.as_deref().unwrap().contains(want), "{input}: {:?}", l.errors[0]);
            assert!(l.warnings.is_empty(), "{input}: {l:?}");
        }
    }

    #[test]
    fn other_placeholders_are_warnings_and_plain_text_is_left_alone() {
        let l = check(&doc(json!({"a": "Hello {{name}}", "b": "${HOME}/x", "c": "$PATH"})));
        assert!(l.errors.is_empty(), "{l:?}");
        let paths: Vec<&str> = l.warnings.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/steps/1/input/a", "/steps/1/input/b", "/steps/1/input/c"]);
        for quiet in ["costs $5", "pay $USD now", "a@b.c", "{{{{literal}}", "@sum.total", "@nope.output", "echo $HOME"]
        {
            let l = check(&doc(json!({"m": quiet})));
            assert!(l.errors.is_empty() && l.warnings.is_empty(), "{quiet}: {l:?}");
        }
    }

    #[test]
    fn a_refs_output_field_is_a_warning() {
        let l = check(&doc(json!({"m": "sum: @sum.output", "n": "@sum.result.x"})));
        assert!(l.errors.is_empty(), "{l:?}");
        let paths: Vec<&str> = l.warnings.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/steps/1/input/m", "/steps/1/input/n"], "{l:?}");
        assert!(l.warnings[0].hint.as_deref().unwrap().contains("`@sum` itself"), "{l:?}");
    }

    #[test]
    fn text_template_values_are_what_the_plugin_reads() {
        let input = json!({"template": "Hi {{name}}, {{sum.x}}", "values": {"name": "@input.name", "sum": "@sum"}});
        let l = check(&doc(input));
        assert!(l.errors.is_empty() && l.warnings.is_empty(), "{l:?}");
        // A step name that is not among the values is still a mistake.
        let l = check(&doc(json!({"template": "Hi {{sum}}", "values": {"name": 1}})));
        assert_eq!(l.errors.len(), 1, "{l:?}");
    }

    #[test]
    fn output_when_and_waits_are_scanned_too() {
        let d = json!({"name": "w", "output": {"r": "{{sum}}"}, "steps": [
            {"name": "sum", "tool": {"server": "s", "name": "t"}},
            {"name": "w", "wait": {"prompt": "ok {{ sum.total }}?"}, "when": {"ref": "@sum.ok", "eq": "{{input.x}}"}}
        ]});
        let paths: Vec<String> = check(&d).errors.into_iter().map(|p| p.path).collect();
        assert_eq!(paths, ["/steps/1/when/eq", "/steps/1/wait/prompt", "/output/r"]);
    }

    #[test]
    fn a_question_mark_after_a_ref_inside_a_text_is_a_warning() {
        let d = json!({"name": "w", "steps": [
            {"name": "a", "return": {"t": "got @input.x? and @input.y", "ok": "@input.z?", "ask": "pay @input.z?"}},
            {"name": "b", "wait": {"prompt": "Ship @input.z? Say yes or no."}}]});
        let found = check(&d);
        assert_eq!(found.warnings.len(), 1, "{:?}", found.warnings);
        assert_eq!(found.warnings[0].path, "/steps/0/return/t");
        assert!(found.warnings[0].message.contains("the `?` after `@input.x` is kept as text"));
    }
}
