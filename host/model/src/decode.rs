//! Decoding a definition from a `serde_json::Value` into typed form while
//! collecting EVERY shape problem (unknown field, wrong type, missing field,
//! zero or two actions, malformed ref) with its JSON Pointer. Range, name
//! and cross-step rules are checked afterwards by `validate`.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::definition::{ACTION_KEYS, Action, Definition, Step};
use crate::problem::{Problem, did_you_mean, shown, type_name};
use crate::refs::parse_ref;
use crate::template::{Template, ptr};

const DEF_FIELDS: [&str; 12] = [
    "name",
    "version",
    "description",
    "input_schema",
    "timeout_ms",
    "fail_open",
    "max_step_failures",
    "limits",
    "steps",
    "output",
    "summary",
    "notify",
];
const STEP_FIELDS: [&str; 15] = [
    "name",
    "description",
    "input",
    "when",
    "for_each",
    "where",
    "concurrency",
    "after",
    "join",
    "retry",
    "timeout_ms",
    "continue_on_error",
    "limits",
    "priority",
    "transform",
];

/// Which top-level fields decoded well enough to be checked further.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DefFlags {
    pub name_ok: bool,
    pub steps_ok: bool,
}

/// Where a decoded step's parts sit in the document.
#[derive(Debug, Clone)]
pub(crate) struct StepMeta {
    /// `/steps/<i>`
    pub at: String,
    /// Where the step's input was written (`/steps/i/input` or `/steps/i/return`).
    pub input_at: String,
    /// False when the name was missing or not a string (checks on it are skipped).
    pub name_ok: bool,
    /// False when the action was missing or malformed (a placeholder is stored).
    pub action_ok: bool,
}

impl StepMeta {
    pub(crate) fn plain(i: usize) -> StepMeta {
        let at = format!("/steps/{i}");
        StepMeta { input_at: format!("{at}/input"), at, name_ok: true, action_ok: true }
    }

    /// Where step `i` of a decoded definition sits (its input under
    /// `return` for a return step).
    pub(crate) fn of_step(i: usize, step: &crate::definition::Step) -> StepMeta {
        let at = format!("/steps/{i}");
        let field = if matches!(step.action, crate::definition::Action::Return) { "return" } else { "input" };
        StepMeta { input_at: format!("{at}/{field}"), at, name_ok: true, action_ok: true }
    }
}

pub(crate) struct Decoded {
    pub def: Definition,
    pub metas: Vec<StepMeta>,
    pub flags: DefFlags,
}

/// A field's value; `null` counts as absent.
fn opt<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    m.get(k).filter(|v| !v.is_null())
}

#[path = "decode_parts.rs"]
mod parts;

#[path = "decode_notify.rs"]
mod notify_parts;

struct D<'p> {
    out: &'p mut Vec<Problem>,
}

/// Decode a definition; `None` only when the root is not an object.
pub(crate) fn decode(v: &Value, out: &mut Vec<Problem>) -> Option<Decoded> {
    let mut d = D { out };
    let m = d.obj(v, "", "a definition")?;
    d.fields(m, "", &DEF_FIELDS, "definition");
    let name = d.req(m, "name", "").and_then(|n| d.string(n, "/name", "name"));
    let mut steps_ok = false;
    let mut steps = vec![];
    let mut metas = vec![];
    if let Some(sv) = d.req(m, "steps", "") {
        match sv {
            Value::Array(a) => {
                steps_ok = true;
                for (i, s) in a.iter().enumerate() {
                    let (step, meta) = d.step(s, i);
                    steps.push(step);
                    metas.push(meta);
                }
            }
            other => d.push("/steps", format!("`steps` must be an array of steps, got {}", type_name(other))),
        }
    }
    let flags = DefFlags { name_ok: name.is_some(), steps_ok };
    let notify = opt(m, "notify").map(|v| d.notify_list(v, &steps)).unwrap_or_default();
    let def = Definition {
        name: name.unwrap_or_default(),
        version: opt(m, "version")
            .and_then(|v| d.uint(v, "/version", "version", u32::MAX as u64))
            .map_or(1, |n| n as u32),
        description: opt(m, "description").and_then(|v| d.string(v, "/description", "description")),
        input_schema: opt(m, "input_schema").and_then(|v| d.schema(v, "/input_schema", "input_schema")),
        timeout_ms: opt(m, "timeout_ms").and_then(|v| d.uint(v, "/timeout_ms", "timeout_ms", u64::MAX)),
        fail_open: opt(m, "fail_open").and_then(|v| d.boolean(v, "/fail_open", "fail_open")).unwrap_or(false),
        max_step_failures: m
            .get("max_step_failures")
            .and_then(|v| d.uint(v, "/max_step_failures", "max_step_failures", u32::MAX as u64))
            .map(|n| n as u32),
        limits: opt(m, "limits").and_then(|v| d.run_limits(v, "/limits")),
        steps,
        output: opt(m, "output").map(|v| d.template(v, "/output")),
        summary: opt(m, "summary").map(|v| d.template(v, "/summary")),
        notify,
    };
    Some(Decoded { def, metas, flags })
}

impl D<'_> {
    fn push(&mut self, at: &str, msg: impl Into<String>) {
        self.out.push(Problem::new(at, msg));
    }

    fn obj<'a>(&mut self, v: &'a Value, at: &str, what: &str) -> Option<&'a Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                let p = Problem::new(at, format!("{what} must be an object, got {}", type_name(other)));
                self.out.push(p.hint(parts::example(what, other)));
                None
            }
        }
    }

    fn fields(&mut self, m: &Map<String, Value>, at: &str, allowed: &[&str], what: &str) {
        for k in m.keys() {
            if !allowed.contains(&k.as_str()) {
                let hint = did_you_mean(k, allowed.iter().copied())
                    .unwrap_or_else(|| format!("{what} fields are: {}", allowed.join(", ")));
                self.out.push(Problem::new(ptr(at, k), format!("unknown field `{}`", shown(k))).hint(hint));
            }
        }
    }

    fn req<'a>(&mut self, m: &'a Map<String, Value>, key: &str, at: &str) -> Option<&'a Value> {
        let v = opt(m, key);
        if v.is_none() {
            self.push(at, format!("missing required field `{key}`"));
        }
        v
    }

    fn string(&mut self, v: &Value, at: &str, field: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            other => {
                self.push(at, format!("`{field}` must be a string, got {}", type_name(other)));
                None
            }
        }
    }

    fn boolean(&mut self, v: &Value, at: &str, field: &str) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            other => {
                self.push(at, format!("`{field}` must be true or false, got {}", type_name(other)));
                None
            }
        }
    }

    /// A non-negative integer up to `max` (ranges are checked by `validate`).
    fn uint(&mut self, v: &Value, at: &str, field: &str, max: u64) -> Option<u64> {
        match v.as_u64() {
            Some(n) if n <= max => Some(n),
            _ => {
                let got = match v {
                    Value::Number(n) => n.to_string(),
                    other => type_name(other).to_owned(),
                };
                let limit = if max < u64::MAX { format!(" (at most {max})") } else { String::new() };
                self.push(at, format!("`{field}` must be a non-negative integer{limit}, got {got}"));
                None
            }
        }
    }

    fn enum_val<T: DeserializeOwned>(&mut self, v: &Value, at: &str, field: &str, options: &str) -> Option<T> {
        match serde_json::from_value::<T>(v.clone()) {
            Ok(t) => Some(t),
            Err(_) => {
                self.push(at, format!("`{field}` must be one of {options}, got {}", shown(&v.to_string())));
                None
            }
        }
    }

    /// A JSON Schema: an object or a boolean (meta-validated by `validate`).
    fn schema(&mut self, v: &Value, at: &str, field: &str) -> Option<Value> {
        match v {
            Value::Object(_) | Value::Bool(_) => Some(v.clone()),
            other => {
                self.push(
                    at,
                    format!("`{field}` must be a JSON Schema (an object or a boolean), got {}", type_name(other)),
                );
                None
            }
        }
    }

    fn template(&mut self, v: &Value, at: &str) -> Template {
        let (t, errs) = Template::compile_lenient(v.clone());
        for e in errs {
            self.push(&format!("{at}{}", e.pointer), e.error.to_string());
        }
        t
    }

    fn step(&mut self, v: &Value, i: usize) -> (Step, StepMeta) {
        let mut meta = StepMeta::plain(i);
        let at = meta.at.clone();
        let empty = Map::new();
        let m = self.obj(v, &at, "a step").unwrap_or(&empty);
        let allowed: Vec<&str> = STEP_FIELDS.iter().chain(ACTION_KEYS.iter()).copied().collect();
        self.fields(m, &at, &allowed, "step");
        let name = if m.is_empty() && !v.is_object() {
            None
        } else {
            self.req(m, "name", &at).and_then(|n| self.string(n, &format!("{at}/name"), "name"))
        };
        meta.name_ok = name.is_some();
        let f = |k: &str| format!("{at}/{k}");

        let mut input = opt(m, "input").map(|v| self.template(v, &f("input"))).unwrap_or_default();
        let present: Vec<&str> = ACTION_KEYS.iter().copied().filter(|k| opt(m, k).is_some()).collect();
        let action = match present.as_slice() {
            [] => {
                if v.is_object() {
                    self.out.push(
                        Problem::new(&at, "step has no action")
                            .hint(format!("add exactly one of: {}", ACTION_KEYS.join(", "))),
                    );
                }
                None
            }
            [one] => self.action(one, opt(m, one).expect("present"), &at, &mut input, &mut meta),
            [first, rest @ ..] => {
                for second in rest {
                    let msg = if *first == "return" || *second == "return" {
                        format!("`return` cannot be combined with another action (`{}` and `{}`)", first, second)
                    } else {
                        format!("step has two actions (`{first}` and `{second}`): a step has exactly one")
                    };
                    self.push(&f(second), msg);
                }
                None
            }
        };
        meta.action_ok = action.is_some();

        let when = opt(m, "when").and_then(|v| self.condition(v, &f("when")));
        let for_each = opt(m, "for_each").and_then(|v| match v {
            Value::String(s) => match parse_ref(s) {
                Ok(_) => Some(self.template(v, &f("for_each"))),
                Err(e) => {
                    self.out.push(
                        Problem::new(f("for_each"), e.to_string())
                            .hint("`for_each` takes a ref to an array, like `@input.items`"),
                    );
                    None
                }
            },
            Value::Array(_) => Some(self.template(v, &f("for_each"))),
            other => {
                self.push(
                    &f("for_each"),
                    format!("`for_each` must be a ref to an array or an array, got {}", type_name(other)),
                );
                None
            }
        });
        let where_ = opt(m, "where").and_then(|v| self.condition(v, &f("where")));
        if where_.is_some() && for_each.is_none() && opt(m, "for_each").is_none() {
            self.out.push(
                Problem::new(f("where"), "`where` picks the items of a `for_each`: this step has no `for_each`")
                    .hint("use `when` to run or skip the whole step"),
            );
        }
        let after = match opt(m, "after") {
            None => vec![],
            Some(Value::Array(a)) => {
                a.iter().enumerate().filter_map(|(k, e)| self.edge(e, &format!("{at}/after/{k}"))).collect()
            }
            Some(other) => {
                self.push(
                    &f("after"),
                    format!(
                        "`after` must be an array of step names or {{\"step\", \"on\"}} objects, got {}",
                        type_name(other)
                    ),
                );
                vec![]
            }
        };
        let step = Step {
            name: name.unwrap_or_default(),
            description: opt(m, "description").and_then(|v| self.string(v, &f("description"), "description")),
            input,
            action: action.unwrap_or(Action::Return),
            when,
            for_each,
            where_,
            concurrency: opt(m, "concurrency")
                .and_then(|v| self.uint(v, &f("concurrency"), "concurrency", u32::MAX as u64))
                .map(|n| n as u32),
            after,
            join: opt(m, "join")
                .and_then(|v| self.enum_val(v, &f("join"), "join", "\"all\", \"any\", \"race\""))
                .unwrap_or_default(),
            retry: opt(m, "retry").and_then(|v| self.retry(v, &f("retry"))),
            timeout_ms: opt(m, "timeout_ms").and_then(|v| self.uint(v, &f("timeout_ms"), "timeout_ms", u64::MAX)),
            continue_on_error: m
                .get("continue_on_error")
                .and_then(|v| self.boolean(v, &f("continue_on_error"), "continue_on_error"))
                .unwrap_or(false),
            limits: opt(m, "limits").and_then(|v| self.limits(v, &f("limits"))),
            priority: opt(m, "priority")
                .and_then(|v| match v.as_i64() {
                    Some(p) => Some(p),
                    None => {
                        self.push(
                            &f("priority"),
                            format!("`priority` must be an integer, got {}", shown(&v.to_string())),
                        );
                        None
                    }
                })
                .unwrap_or(0),
            transform: opt(m, "transform").and_then(|v| self.code_ref(v, &f("transform"), "transform")),
        };
        (step, meta)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(v: serde_json::Value) -> (Option<Decoded>, Vec<String>) {
        let mut out = vec![];
        let d = decode(&v, &mut out);
        (d, out.into_iter().map(|p| format!("{}: {}", p.path, p.message)).collect())
    }

    #[test]
    fn return_value_becomes_input_and_keeps_its_location() {
        let (d, p) = run(json!({"name": "x", "steps": [{"name": "r", "return": {"e": "@input.x"}}]}));
        assert!(p.is_empty(), "{p:?}");
        let d = d.unwrap();
        assert_eq!(d.def.steps[0].action, Action::Return);
        assert_eq!(d.def.steps[0].input.raw(), &json!({"e": "@input.x"}));
        assert_eq!(d.metas[0].input_at, "/steps/0/return");
    }

    #[test]
    fn nulls_are_absent_and_defaults_apply() {
        let (d, p) = run(json!({"name": "x", "version": null, "steps": [
            {"name": "a", "code": {"plugin": "p"}, "tool": null, "retry": {"max_attempts": 2}, "join": null}]}));
        assert!(p.is_empty(), "{p:?}");
        let d = d.unwrap().def;
        assert_eq!(d.version, 1);
        let r = d.steps[0].retry.as_ref().unwrap();
        assert_eq!((r.max_attempts, r.initial_delay_ms, r.jitter), (2, 1000, true));
    }

    #[test]
    fn every_shape_problem_of_a_step_is_collected() {
        let (d, p) =
            run(json!({"name": "x", "steps": [{"name": 1, "sleep": {"ms": "5"}, "priority": "hi", "extra": 0}]}));
        assert_eq!(
            p,
            [
                "/steps/0/extra: unknown field `extra`",
                "/steps/0/name: `name` must be a string, got a number",
                "/steps/0/sleep/ms: `ms` must be a non-negative integer, got a string",
                "/steps/0/priority: `priority` must be an integer, got \"hi\"",
            ]
        );
        let m = &d.unwrap().metas[0];
        assert!(!m.name_ok && !m.action_ok);
        let (d, p) = run(json!("nope"));
        assert!(d.is_none());
        assert_eq!(p, [": a definition must be an object, got a string"]);
    }

    fn hints(v: serde_json::Value) -> Vec<(String, String)> {
        let mut out = vec![];
        decode(&v, &mut out);
        out.into_iter().map(|p| (p.path, format!("{} / {}", p.message, p.hint.unwrap_or_default()))).collect()
    }

    #[test]
    fn every_must_be_an_object_comes_with_a_worked_example() {
        let step = |extra: serde_json::Value| {
            let mut s = json!({"name": "a"});
            s.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            json!({"name": "w", "steps": [s]})
        };
        let cases = [
            (
                step(json!({"tool": "everything__echo"})),
                "/steps/0/tool",
                r#"{"tool":{"server":"everything","name":"echo"}}"#,
            ),
            (step(json!({"tool": {"name": "everything__echo"}})), "/steps/0/tool", r#""server":"everything""#),
            (step(json!({"tool": "echo"})), "/steps/0/tool", r#"{"tool":{"server":"SERVER","name":"echo"}}"#),
            (step(json!({"code": "json-select"})), "/steps/0/code", r#"{"code": {"plugin": "json-select"}}"#),
            (step(json!({"return": true, "when": "@x.ok"})), "/steps/0/when", r#"{"when": {"ref":"@x.ok"}}"#),
            (step(json!({"return": true, "when": "@x.n >= 3"})), "/steps/0/when", r#""gte":3"#),
            (step(json!({"return": true, "when": "@x.s == 'a'"})), "/steps/0/when", r#""eq":"a""#),
            (step(json!({"sleep": 5})), "/steps/0/sleep", r#"{"sleep": {"ms": 60000}}"#),
            (step(json!({"wait": "yes?"})), "/steps/0/wait", r#""prompt""#),
            (step(json!({"workflow": "child"})), "/steps/0/workflow", r#"{"workflow":{"template":"child"}}"#),
            (step(json!({"return": true, "retry": 3})), "/steps/0/retry", r#""max_attempts": 3"#),
            (json!({"name": "w", "steps": ["a"]}), "/steps/0", r#""tool": {"server""#),
            (json!([]), "", r#""steps": [{"name""#),
        ];
        for (doc, path, want) in cases {
            let h = hints(doc.clone());
            let hit = h.iter().find(|(p, _)| p == path);
            assert!(hit.is_some_and(|(_, t)| t.contains(want)), "{doc}: want {want} at {path} in {h:?}");
        }
    }
}
