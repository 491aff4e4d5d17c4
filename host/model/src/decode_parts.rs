//! Decoding the parts of a step (actions, `when`, `after` edges, `retry`,
//! `limits`): more methods of the decoder in `decode`.

use serde_json::Value;

use super::{D, StepMeta, opt};
use crate::condition::{Condition, Operator, Test};
use crate::definition::{Action, AgentRef, CodeRef, Edge, EdgeOn, Limits, SleepSpec, ToolRef, WaitSpec, WorkflowRef};
use crate::problem::{Problem, did_you_mean, shown, type_name};
use crate::refs::parse_ref;
use crate::retry::RetryPolicy;
use crate::template::{Template, ptr};
use crate::timestamp::Timestamp;

impl D<'_> {
    pub(super) fn action(
        &mut self,
        key: &str,
        v: &Value,
        at: &str,
        input: &mut Template,
        meta: &mut StepMeta,
    ) -> Option<Action> {
        let a = format!("{at}/{key}");
        match key {
            "code" => self.code_ref(v, &a, "code").map(Action::Code),
            "tool" => {
                let m = self.obj(v, &a, "`tool`")?;
                self.fields(m, &a, &["server", "name"], "tool");
                // `{"name": "everything__echo"}`: the proxy's name of a tool.
                if let (None, Some(Value::String(n))) = (opt(m, "server"), opt(m, "name"))
                    && let Some((server, tool)) = n.split_once("__")
                {
                    self.out.push(Problem::new(&a, "missing required field `server`").hint(format!(
                        "`{}` is the proxy's name of a tool: write {}",
                        shown(n),
                        tool_example(server, tool)
                    )));
                    return None;
                }
                let server = self.req(m, "server", &a).and_then(|s| self.string(s, &format!("{a}/server"), "server"));
                let name = self.req(m, "name", &a).and_then(|s| self.string(s, &format!("{a}/name"), "name"));
                Some(Action::Tool(ToolRef { server: server?, name: name? }))
            }
            "agent" => match v {
                // `"agent": "NAME"`, short for `{"name": "NAME"}`.
                Value::String(name) => Some(Action::Agent(AgentRef { name: name.clone(), skill: None })),
                _ => {
                    let m = self.obj(v, &a, "`agent`")?;
                    self.fields(m, &a, &["name", "skill"], "agent");
                    let name = self.req(m, "name", &a).and_then(|s| self.string(s, &format!("{a}/name"), "name"));
                    let skill = opt(m, "skill").and_then(|s| self.string(s, &format!("{a}/skill"), "skill"));
                    Some(Action::Agent(AgentRef { name: name?, skill }))
                }
            },
            "return" => match v {
                Value::Bool(true) => Some(Action::Return),
                Value::Bool(false) => {
                    self.out.push(
                        Problem::new(&a, "`return: false` means nothing")
                            .hint("use `\"return\": true` (the step's input is the output) or `\"return\": VALUE`"),
                    );
                    None
                }
                value => {
                    if !input.is_null() {
                        self.out.push(
                            Problem::new(&a, "`return` holds a value and `input` is also set")
                                .hint("write the output once: `\"return\": VALUE` or `\"return\": true` with `input`"),
                        );
                        return None;
                    }
                    *input = self.template(value, &a);
                    meta.input_at = a;
                    Some(Action::Return)
                }
            },
            "wait" => self.wait(v, &a).map(Action::Wait),
            "sleep" => {
                let m = self.obj(v, &a, "`sleep`")?;
                self.fields(m, &a, &["ms", "until"], "sleep");
                match (opt(m, "ms"), opt(m, "until")) {
                    (Some(ms), None) => {
                        self.uint(ms, &format!("{a}/ms"), "ms", u64::MAX).map(|n| Action::Sleep(SleepSpec::Ms(n)))
                    }
                    (None, Some(u)) => {
                        let s = self.string(u, &format!("{a}/until"), "until")?;
                        match Timestamp::parse(&s) {
                            Ok(t) => Some(Action::Sleep(SleepSpec::Until(t))),
                            Err(e) => {
                                self.push(&format!("{a}/until"), e.to_string());
                                None
                            }
                        }
                    }
                    _ => {
                        self.push(&a, "`sleep` needs exactly one of `ms` or `until`");
                        None
                    }
                }
            }
            "workflow" => {
                let m = self.obj(v, &a, "`workflow`")?;
                self.fields(m, &a, &["template", "version"], "workflow");
                let template =
                    self.req(m, "template", &a).and_then(|s| self.string(s, &format!("{a}/template"), "template"));
                let version = opt(m, "version")
                    .and_then(|v| self.uint(v, &format!("{a}/version"), "version", u32::MAX as u64))
                    .map(|n| n as u32);
                Some(Action::Workflow(WorkflowRef { template: template?, version }))
            }
            _ => unreachable!("only action keys are passed"),
        }
    }

    pub(super) fn code_ref(&mut self, v: &Value, at: &str, what: &str) -> Option<CodeRef> {
        let m = self.obj(v, at, &format!("`{what}`"))?;
        self.fields(m, at, &["plugin", "path", "sha256"], what);
        let present: Vec<&str> = ["plugin", "path", "sha256"].into_iter().filter(|k| opt(m, k).is_some()).collect();
        if present.len() != 1 {
            self.out.push(
                Problem::new(
                    at,
                    format!("`{what}` needs exactly one of `plugin`, `path` or `sha256`, got {}", present.len()),
                )
                .hint("e.g. {\"plugin\": \"validate-email\"}"),
            );
            return None;
        }
        let k = present[0];
        let s = self.string(opt(m, k).expect("present"), &format!("{at}/{k}"), k)?;
        Some(match k {
            "plugin" => CodeRef::Plugin(s),
            "path" => CodeRef::Path(s),
            _ => CodeRef::Sha256(s),
        })
    }

    pub(super) fn wait(&mut self, v: &Value, a: &str) -> Option<WaitSpec> {
        let m = self.obj(v, a, "`wait`")?;
        self.fields(m, a, &["prompt", "preview", "schema", "reason", "timeout_ms", "event", "match"], "wait");
        let f = |k: &str| format!("{a}/{k}");
        let prompt = opt(m, "prompt").and_then(|p| match p {
            Value::String(_) => Some(self.template(p, &f("prompt"))),
            other => {
                self.push(&f("prompt"), format!("`prompt` must be a string, got {}", type_name(other)));
                None
            }
        });
        let matches = opt(m, "match").and_then(|p| match p {
            Value::Object(_) => Some(self.template(p, &f("match"))),
            other => {
                self.out.push(
                    Problem::new(
                        f("match"),
                        format!("`match` must be an object of field → value, got {}", type_name(other)),
                    )
                    .hint(r#"write it as an object, e.g. {"event": "order.paid", "match": {"order": "@input.order"}}"#),
                );
                None
            }
        });
        let preview = opt(m, "preview").map(|p| self.template(p, &f("preview")));
        Some(WaitSpec {
            prompt,
            preview,
            schema: opt(m, "schema").and_then(|s| self.schema(s, &f("schema"), "schema")),
            reason: opt(m, "reason")
                .and_then(|r| self.enum_val(r, &f("reason"), "reason", "\"input-required\", \"auth-required\""))
                .unwrap_or_default(),
            timeout_ms: opt(m, "timeout_ms").and_then(|t| self.uint(t, &f("timeout_ms"), "timeout_ms", u64::MAX)),
            event: opt(m, "event").and_then(|e| self.string(e, &f("event"), "event")),
            matches,
        })
    }

    pub(super) fn condition(&mut self, v: &Value, at: &str) -> Option<Condition> {
        let m = self.obj(v, at, "`when`")?;
        let ops: Vec<(&String, Operator)> =
            m.keys().filter(|k| *k != "ref").filter_map(|k| Operator::parse(k).map(|o| (k, o))).collect();
        for k in m.keys().filter(|k| *k != "ref" && Operator::parse(k).is_none()) {
            let names: Vec<&str> = Operator::ALL.iter().map(|o| o.as_str()).chain(["ref"]).collect();
            let hint = did_you_mean(k, names.iter().copied())
                .unwrap_or_else(|| format!("a `when` has `ref` and at most one of: {}", names[..8].join(", ")));
            self.out.push(Problem::new(ptr(at, k), format!("unknown operator `{}`", shown(k))).hint(hint));
        }
        for (k, _) in ops.iter().skip(1) {
            self.out.push(
                Problem::new(ptr(at, k), format!("a `when` has at most one operator; found `{}` and `{k}`", ops[0].0))
                    .hint("split the condition, or compute it in a code step"),
            );
        }
        let rv = self.req(m, "ref", at)?;
        let text = self.string(rv, &format!("{at}/ref"), "ref")?;
        let reference = match parse_ref(&text) {
            Ok(r) => r,
            Err(e) => {
                self.push(&format!("{at}/ref"), e.to_string());
                return None;
            }
        };
        let test = match ops.first() {
            None => None,
            Some((k, op)) => {
                let ov = &m[k.as_str()];
                let oat = ptr(at, k);
                let operand = self.template(ov, &oat);
                let is_ref = matches!(operand.compiled(), crate::template::CompiledValue::Ref(_));
                let ok = is_ref
                    || match op {
                        Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte => ov.is_number() || ov.is_string(),
                        Operator::In => ov.is_array() || ov.is_string() || ov.is_object(),
                        Operator::Exists => ov.is_boolean(),
                        Operator::Eq | Operator::Neq => true,
                    };
                if !ok {
                    let want = match op {
                        Operator::In => "an array, a string or an object",
                        Operator::Exists => "true or false",
                        _ => "a number or a string",
                    };
                    self.push(&oat, format!("`{k}` needs {want}, got {}", type_name(ov)));
                }
                Some(Test { op: *op, operand })
            }
        };
        if ops.len() > 1 {
            return None;
        }
        Some(Condition { reference, ref_text: text, test })
    }

    pub(super) fn edge(&mut self, v: &Value, at: &str) -> Option<Edge> {
        match v {
            Value::String(s) => Some(Edge { step: s.clone(), on: EdgeOn::Success, when: None }),
            Value::Object(m) => {
                self.fields(m, at, &["step", "on", "when"], "edge");
                let step = self.req(m, "step", at).and_then(|s| self.string(s, &format!("{at}/step"), "step"));
                let on = match opt(m, "on") {
                    None => Some(EdgeOn::Success),
                    Some(o) => {
                        self.enum_val(o, &format!("{at}/on"), "on", "\"success\", \"failure\", \"always\", \"skipped\"")
                    }
                };
                let when = match opt(m, "when") {
                    None => Some(None),
                    Some(w) => self.condition(w, &format!("{at}/when")).map(Some),
                };
                Some(Edge { step: step?, on: on?, when: when? })
            }
            other => {
                self.push(
                    at,
                    format!("an `after` entry must be a step name or {{\"step\", \"on\"}}, got {}", type_name(other)),
                );
                None
            }
        }
    }

    pub(super) fn retry(&mut self, v: &Value, at: &str) -> Option<RetryPolicy> {
        let m = self.obj(v, at, "`retry`")?;
        let keys = ["max_attempts", "backoff", "initial_delay_ms", "max_delay_ms", "jitter", "retry_on"];
        self.fields(m, at, &keys, "retry");
        let f = |k: &str| format!("{at}/{k}");
        let mut p = RetryPolicy::default();
        if let Some(n) =
            opt(m, "max_attempts").and_then(|x| self.uint(x, &f("max_attempts"), "max_attempts", u32::MAX as u64))
        {
            p.max_attempts = n as u32;
        }
        if let Some(b) = opt(m, "backoff")
            .and_then(|x| self.enum_val(x, &f("backoff"), "backoff", "\"fixed\", \"linear\", \"exponential\""))
        {
            p.backoff = b;
        }
        if let Some(n) =
            opt(m, "initial_delay_ms").and_then(|x| self.uint(x, &f("initial_delay_ms"), "initial_delay_ms", u64::MAX))
        {
            p.initial_delay_ms = n;
        }
        if let Some(n) = opt(m, "max_delay_ms").and_then(|x| self.uint(x, &f("max_delay_ms"), "max_delay_ms", u64::MAX))
        {
            p.max_delay_ms = n;
        }
        if let Some(j) = opt(m, "jitter").and_then(|x| self.boolean(x, &f("jitter"), "jitter")) {
            p.jitter = j;
        }
        match opt(m, "retry_on") {
            None => {}
            Some(Value::Array(a)) => {
                let kinds = crate::definition::ErrorKind::ALL.map(|k| k.as_str()).join(", ");
                p.retry_on = a
                    .iter()
                    .enumerate()
                    .filter_map(|(k, x)| self.enum_val(x, &format!("{at}/retry_on/{k}"), "retry_on", &kinds))
                    .collect();
            }
            Some(other) => self
                .push(&f("retry_on"), format!("`retry_on` must be an array of error kinds, got {}", type_name(other))),
        }
        Some(p)
    }

    pub(super) fn limits(&mut self, v: &Value, at: &str) -> Option<Limits> {
        let m = self.obj(v, at, "`limits`")?;
        self.fields(m, at, &["fuel", "memory_mb"], "limits");
        Some(Limits {
            fuel: opt(m, "fuel").and_then(|x| self.uint(x, &format!("{at}/fuel"), "fuel", u64::MAX)),
            memory_mb: opt(m, "memory_mb")
                .and_then(|x| self.uint(x, &format!("{at}/memory_mb"), "memory_mb", u32::MAX as u64))
                .map(|n| n as u32),
        })
    }

    pub(super) fn run_limits(&mut self, v: &Value, at: &str) -> Option<crate::definition::RunLimits> {
        let m = self.obj(v, at, "`limits`")?;
        self.fields(m, at, &["run_fuel"], "limits");
        Some(crate::definition::RunLimits {
            run_fuel: opt(m, "run_fuel").and_then(|x| self.uint(x, &format!("{at}/run_fuel"), "run_fuel", u64::MAX)),
        })
    }
}

/// `{"server": S, "name": T}` as a definition writes it.
fn tool_example(server: &str, tool: &str) -> String {
    serde_json::json!({"tool": {"server": server, "name": tool}}).to_string()
}

/// A worked example for "`what` must be an object, got `got`": the value
/// written the right way (from `got` where it says enough, as a tool
/// string `server__tool` or a `when` string `@a.n > 3`).
pub(super) fn example(what: &str, got: &Value) -> String {
    let text = got.as_str().unwrap_or_default();
    let e = match what {
        "a definition" => r#"{"name": "my-flow", "steps": [{"name": "hello", "return": {"greeting": "@input.name"}}]}"#
            .to_string(),
        "a step" => {
            r#"{"name": "sum", "tool": {"server": "everything", "name": "get-sum"}, "input": {"a": "@input.a", "b": 2}}"#
                .to_string()
        }
        "`tool`" => match text.split_once("__") {
            Some((server, tool)) => {
                return format!("`{}` is the proxy's name of a tool: write {}", shown(text), tool_example(server, tool));
            }
            None if !text.is_empty() => tool_example("SERVER", text),
            None => tool_example("SERVER", "TOOL"),
        },
        "`code`" => r#"{"code": {"plugin": "json-select"}}  (plugin_list shows the plugins)"#.to_string(),
        "`transform`" => r#"{"transform": {"plugin": "json-select"}}"#.to_string(),
        "`sleep`" => r#"{"sleep": {"ms": 60000}} or {"sleep": {"until": "2030-01-01T00:00:00Z"}}"#.to_string(),
        "`workflow`" => match text {
            "" => r#"{"workflow": {"template": "child-flow"}}"#.to_string(),
            t => serde_json::json!({"workflow": {"template": t}}).to_string(),
        },
        "`wait`" => r#"{"wait": {"prompt": "Approve?", "schema": {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}}} or {"wait": {"event": "order.paid", "match": {"order": "@input.order"}}}"#.to_string(),
        "`when`" => return when_example(text),
        "`retry`" => r#"{"retry": {"max_attempts": 3, "backoff": "exponential", "initial_delay_ms": 200}}"#.to_string(),
        "`limits`" => r#"{"limits": {"fuel": 1000000000, "memory_mb": 64}}"#.to_string(),
        _ => return format!("{what} is a JSON object"),
    };
    format!("write it as an object, e.g. {e}")
}

/// A `when` written as a string (`"@check.ok"`, `"@a.n > 3"`) as the
/// object it should be.
fn when_example(text: &str) -> String {
    let ops = [(">=", "gte"), ("<=", "lte"), ("!=", "neq"), ("==", "eq"), (">", "gt"), ("<", "lt"), ("=", "eq")];
    let written = ops.iter().find_map(|(sym, op)| {
        let (l, r) = text.split_once(sym)?;
        let (l, r) = (l.trim(), r.trim());
        let operand = serde_json::from_str::<Value>(r).unwrap_or_else(|_| Value::String(r.trim_matches('\'').into()));
        l.starts_with('@').then(|| serde_json::json!({"ref": l, *op: operand}))
    });
    let written = written.unwrap_or_else(|| match text.trim() {
        t if t.starts_with('@') => serde_json::json!({"ref": t}),
        _ => serde_json::json!({"ref": "@check.ok", "eq": true}),
    });
    format!(
        "a `when` is an object: `ref` plus at most one of eq, neq, gt, gte, lt, lte, in, exists (no operator: the value's truthiness), e.g. {{\"when\": {written}}}"
    )
}
