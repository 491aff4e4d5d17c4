//! The typed form of a workflow definition (docs/workflow-format.md): `Definition`,
//! `Step`, `Action` and the small vocabularies (`EdgeOn`, `Join`, `Backoff`,
//! `ErrorKind`, `StepState`). Values are built by `decode` from JSON (so
//! every problem is reported with a path); `Serialize` writes the canonical
//! JSON form back and `JsonSchema` describes it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::condition::Condition;
use crate::template::Template;
use crate::timestamp::Timestamp;

pub use crate::bounds::*;

/// A workflow definition: a name, steps that form a graph (refs such as
/// `@step.field` are dependencies), an optional input schema and output.
// Built by `crate::parse_and_validate` (the doc comment above is the JSON
// Schema's description, read by clients: no Rust links in it).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "weft workflow definition")]
pub struct Definition {
    /// `[a-z0-9][a-z0-9_-]*`
    #[schemars(regex(pattern = r"^[a-z0-9][a-z0-9_-]*$"), length(max = MAX_NAME_CHARS))]
    pub name: String,
    /// The template's plan version (default 1).
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema the run input must match (checked when a run is created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Whole-run deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_DURATION_MS))]
    pub timeout_ms: Option<u64>,
    /// On an unhandled failure, let independent branches finish first.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fail_open: bool,
    /// Fail the run at this many step failures, even handled ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_step_failures: Option<u32>,
    /// Limits of the whole run (a CPU budget shared by its code steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RunLimits>,
    #[schemars(length(min = 1))]
    pub steps: Vec<Step>,
    /// The run's output (refs resolved); default: the return value, else
    /// an object of the sink steps' outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Template>,
    /// What the run did, for whoever picks it up later (a text with refs,
    /// rendered when read): the head of the run's `resume` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Template>,
    /// Whom to tell, and what, when the run ends, asks for input, or a
    /// step's wait is resolved: delivered at least once, in order per `key`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<crate::notify::Notify>,
}

fn one() -> u32 {
    1
}
fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Definition {
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name == name)
    }
    pub fn step_index(&self, name: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.name == name)
    }
}

/// One step of a definition.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// `[A-Za-z_][A-Za-z0-9_]*`, unique, not `input`, `item`, `index` or `run`.
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"), length(max = MAX_NAME_CHARS))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Any JSON; strings may hold refs. For `return`, the run's output.
    #[serde(default, skip_serializing_if = "Template::is_null")]
    pub input: Template,
    #[serde(flatten)]
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
    /// A ref to an array (or a literal array): run once per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<Template>,
    /// With `for_each`: the items to run, by a condition on `@item` (and
    /// `@index`, the item's place in the whole list); the others are left
    /// out (the step's output has one entry per kept item, in order).
    #[serde(rename = "where", default, skip_serializing_if = "Option::is_none")]
    pub where_: Option<Condition>,
    /// Cap on parallel items of a `for_each` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Edge>,
    #[serde(default, skip_serializing_if = "Join::is_all")]
    pub join: Join,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// Per attempt; defaults: code 10 s, tool 30 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_DURATION_MS))]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub continue_on_error: bool,
    /// Code steps only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Higher first among ready steps.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = -MAX_PRIORITY, max = MAX_PRIORITY))]
    pub priority: i64,
    /// Tool steps only: a code step applied to the tool's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<CodeRef>,
}

impl Step {
    /// The per-attempt timeout, with the defaults of docs/workflow-format.md for
    /// code and tool steps (`None`: no per-attempt timeout).
    pub fn effective_timeout_ms(&self) -> Option<u64> {
        self.timeout_ms.or(match self.action {
            Action::Code(_) => Some(DEFAULT_CODE_TIMEOUT_MS),
            Action::Tool(_) => Some(DEFAULT_TOOL_TIMEOUT_MS),
            Action::Agent(_) => Some(crate::bounds::DEFAULT_AGENT_TIMEOUT_MS),
            _ => None,
        })
    }
    /// The retry policy, or the default (one attempt).
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry.clone().unwrap_or_default()
    }

    /// The items of a `for_each` step (`None` without `for_each`). A `null`
    /// value (a skipped step, a missing field) is no items; any other
    /// non-array is an error that fails the step.
    pub fn for_each_items(&self, scope: &dyn crate::scope::Scope) -> Option<Result<Vec<Value>, NotAnArray>> {
        let v = self.for_each.as_ref()?.resolve(scope);
        Some(match v {
            Value::Array(a) => Ok(a),
            Value::Null => Ok(vec![]),
            other => Err(NotAnArray(crate::problem::type_name(&other))),
        })
    }

    /// The input to hand to the action, refs resolved. A code, tool or
    /// workflow step without `input` receives `{}`; other steps `null`.
    pub fn resolve_input(&self, scope: &dyn crate::scope::Scope) -> Value {
        match (&self.action, self.input.is_null()) {
            (Action::Code(_) | Action::Tool(_) | Action::Agent(_) | Action::Workflow(_), true) => {
                Value::Object(Default::default())
            }
            _ => self.input.resolve(scope),
        }
    }
}

/// A `for_each` ref resolved to something other than an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("`for_each` must resolve to an array, got {0}")]
pub struct NotAnArray(pub &'static str);

/// `"agent"`: the agent's name, or `{"name", "skill"?}`.
fn agent_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let object = g.subschema_for::<AgentRef>();
    schemars::json_schema!({"anyOf": [
        {"type": "string", "maxLength": crate::bounds::MAX_NAME_CHARS, "description": "the agent's name: short for {\"name\": NAME}"},
        object
    ]})
}

/// What a step does: exactly one per step.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // a definition holds few steps; no boxing at the API
pub enum Action {
    /// Run a sandboxed WebAssembly guest.
    Code(CodeRef),
    /// Call a tool on an MCP server.
    Tool(ToolRef),
    /// Send the input to a remote A2A agent (`[agents.NAME]` in weft.toml)
    /// and wait for its task to end; its artifacts are the output.
    #[schemars(schema_with = "agent_schema")]
    Agent(AgentRef),
    /// Finish the run now; the step's resolved `input` is the output.
    /// Written `"return": true` with `input`, or `"return": VALUE` (the
    /// same as `"return": true, "input": VALUE`).
    #[serde(serialize_with = "ser_true")]
    #[schemars(with = "Value")]
    Return,
    /// Suspend until a signal or a matching event.
    Wait(WaitSpec),
    /// A durable timer.
    Sleep(SleepSpec),
    /// Start a child run and wait for it.
    Workflow(WorkflowRef),
}

fn ser_true<S: Serializer>(s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bool(true)
}

impl Action {
    /// The JSON key of this action.
    pub fn key(&self) -> &'static str {
        match self {
            Action::Code(_) => "code",
            Action::Tool(_) => "tool",
            Action::Agent(_) => "agent",
            Action::Return => "return",
            Action::Wait(_) => "wait",
            Action::Sleep(_) => "sleep",
            Action::Workflow(_) => "workflow",
        }
    }
}

/// The JSON keys of the actions.
pub const ACTION_KEYS: [&str; 7] = ["code", "tool", "agent", "return", "wait", "sleep", "workflow"];

/// Which guest a code step runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CodeRef {
    /// A registered plugin by name.
    Plugin(String),
    /// A `.wasm` file (relative to the definition file's folder).
    Path(String),
    /// Content-addressed module (64 hex digits).
    Sha256(String),
}

impl CodeRef {
    /// The plugin name, path or digest, as messages show it.
    pub fn shown(&self) -> &str {
        match self {
            CodeRef::Plugin(s) | CodeRef::Path(s) | CodeRef::Sha256(s) => s,
        }
    }
}

pub use crate::tool_ref::{AgentRef, ToolRef};

/// A wait for a signal (`prompt`/`schema`/`reason`) or an event (`event`/`match`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitSpec {
    /// Shown to whoever answers; may hold refs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Template>,
    /// What the answer is about, shown before the question (A2A sends it
    /// as a `preview` artifact first): any JSON, refs allowed (e.g. the
    /// draft to approve, `"@draft.text"`). Signal waits only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<Template>,
    /// JSON Schema the signal's data must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    #[serde(default, skip_serializing_if = "WaitReason::is_default")]
    pub reason: WaitReason,
    /// Fails the step with a `timeout` error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_DURATION_MS))]
    pub timeout_ms: Option<u64>,
    /// Event name to wait for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub event: Option<String>,
    /// Object of field → value (refs allowed); every field must hold for the
    /// same top-level field of the event's data (a nested object matches a
    /// subset; a key starting with `/` is a JSON Pointer into the data).
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Template>,
}

impl WaitSpec {
    /// Whether an event's data matches: every `match` field (refs resolved)
    /// holds for `data` (see [`crate::condition::match_holds`]). A wait
    /// without `match` matches every event of its name.
    pub fn matches_event(&self, scope: &dyn crate::scope::Scope, data: &Value) -> bool {
        let Some(m) = &self.matches else { return true };
        match m.resolve(scope) {
            Value::Object(fields) => crate::condition::match_holds(&fields, data),
            _ => false,
        }
    }
}

/// Why a run waits for a signal: the run's A2A state while waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WaitReason {
    #[default]
    InputRequired,
    AuthRequired,
}

impl WaitReason {
    fn is_default(&self) -> bool {
        *self == WaitReason::InputRequired
    }
}

/// A durable timer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SleepSpec {
    /// Milliseconds from the moment the step starts.
    Ms(#[schemars(range(max = MAX_DURATION_MS))] u64),
    /// An RFC 3339 instant.
    Until(Timestamp),
}

/// A child workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowRef {
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub template: String,
    /// Pinned template version; default: the latest at run creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub version: Option<u32>,
}

/// An explicit dependency: `"name"` or `{"step": NAME, "on": ..., "when": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    pub step: String,
    pub on: EdgeOn,
    /// A condition checked when the edge would fire (its `on` holds):
    /// false, and the edge does not fire (the step follows its join rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
}

impl JsonSchema for Edge {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Edge".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let on = generator.subschema_for::<EdgeOn>();
        let when = generator.subschema_for::<Condition>();
        schemars::json_schema!({
            "description": "A step name (an `on: success` edge) or {\"step\", \"on\", \"when\"}.",
            "anyOf": [
                {"type": "string"},
                {"type": "object", "additionalProperties": false, "required": ["step"],
                 "properties": {"step": {"type": "string"}, "on": on, "when": when}}
            ]
        })
    }
}

/// When an edge's condition is met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EdgeOn {
    /// The dependency succeeded (or failed with `continue_on_error`).
    #[default]
    Success,
    /// The dependency failed.
    Failure,
    /// The dependency reached any terminal state.
    Always,
    /// The dependency was skipped (its `when` was false, or a skip
    /// cascaded to it).
    Skipped,
}

impl EdgeOn {
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeOn::Success => "success",
            EdgeOn::Failure => "failure",
            EdgeOn::Always => "always",
            EdgeOn::Skipped => "skipped",
        }
    }
}

/// When a step with several dependencies is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Join {
    /// Every dependency is terminal.
    #[default]
    All,
    /// The first dependency that succeeded.
    Any,
    /// The first dependency that is terminal.
    Race,
}

impl Join {
    fn is_all(&self) -> bool {
        *self == Join::All
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Join::All => "all",
            Join::Any => "any",
            Join::Race => "race",
        }
    }
}

pub use crate::retry::{Backoff, RetryPolicy};
pub use crate::status::{ErrorKind, RunState, StepState, UnknownState};

/// Resource limits of a code step (defaults come from weft.toml `[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub fuel: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub memory_mb: Option<u32>,
}

/// Limits of a whole run (`limits` at the top of a definition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunLimits {
    /// A CPU budget in fuel units for all code steps of the run together:
    /// each step may use at most what is left, and fails `fuel_exhausted`
    /// (naming the run's budget) when it would exceed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub run_fuel: Option<u64>,
}

/// Which part of a step a ref sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepPart {
    Input,
    WhenRef,
    WhenOperand(crate::condition::Operator),
    ForEach,
    WhereRef,
    WhereOperand(crate::condition::Operator),
    WaitPrompt,
    WaitPreview,
    WaitMatch,
}

/// A ref inside a step, with where it sits.
#[derive(Debug, Clone, Copy)]
pub struct StepRef<'a> {
    pub part: StepPart,
    /// JSON Pointer relative to the part (e.g. `/email` inside `input`).
    pub pointer: &'a str,
    pub reference: &'a crate::refs::Ref,
    /// The string is exactly this ref.
    pub exact: bool,
}

impl Step {
    /// The `when` of this step's `after` edge from step `from`, if any.
    pub fn edge_when(&self, from: &str) -> Option<&Condition> {
        self.after.iter().find(|e| e.step == from).and_then(|e| e.when.as_ref())
    }

    /// Whether this step depends on step `name` (by `after` or a ref).
    pub fn depends_on(&self, name: &str) -> bool {
        self.after.iter().any(|e| e.step == name) || self.refs().iter().any(|r| r.reference.step() == Some(name))
    }

    /// Every ref of the step: `input`, `when` (ref and operand), `for_each`,
    /// `where` (ref and operand),
    /// and a wait's `prompt` and `match`.
    pub fn refs(&self) -> Vec<StepRef<'_>> {
        let mut out = vec![];
        let mut parts: Vec<(StepPart, &Template)> = vec![(StepPart::Input, &self.input)];
        if let Some(c) = &self.when {
            out.push(StepRef { part: StepPart::WhenRef, pointer: "", reference: &c.reference, exact: true });
            if let Some(t) = &c.test {
                parts.push((StepPart::WhenOperand(t.op), &t.operand));
            }
        }
        if let Some(f) = &self.for_each {
            parts.push((StepPart::ForEach, f));
        }
        if let Some(c) = &self.where_ {
            out.push(StepRef { part: StepPart::WhereRef, pointer: "", reference: &c.reference, exact: true });
            if let Some(t) = &c.test {
                parts.push((StepPart::WhereOperand(t.op), &t.operand));
            }
        }
        if let Action::Wait(w) = &self.action {
            if let Some(p) = &w.prompt {
                parts.push((StepPart::WaitPrompt, p));
            }
            if let Some(p) = &w.preview {
                parts.push((StepPart::WaitPreview, p));
            }
            if let Some(m) = &w.matches {
                parts.push((StepPart::WaitMatch, m));
            }
        }
        for (part, t) in parts {
            for s in t.sites() {
                out.push(StepRef { part, pointer: &s.pointer, reference: &s.reference, exact: s.exact });
            }
        }
        out
    }
}
