//! Validating a definition against what is installed: a [`SchemaLookup`]
//! backed by the plugin registry, so a code step's literal input is checked
//! against the input schema its guest declares (`describe()`), and a check
//! that every code step's guest exists (an unknown plugin, a missing file or
//! an unknown digest is a problem at the step's `code` path).
//!
//! `weft-model` only asks the lookup for schemas (an unknown guest is "no
//! schema" to it), so the existence check is done here, on the raw JSON.
//! So are strings that look like another template language's refs
//! (`weft_model::lookalike`: a placeholder naming a step is a problem).
//! Hints name what the [`Audience`] can use (commands, MCP tools, routes).

use crate::audience::Audience;
use crate::guests::resolve_code;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;
use weft_model::{CodeRef, Definition, Problem, SchemaLookup};
use weft_sandbox::Sandbox;
use weft_sandbox::registry::Registry;

/// What is known about one guest: its declared input and output schemas,
/// or why it cannot be used.
type Known = Result<GuestSchemas, String>;

/// A guest's declared schemas (none, for a WASI command).
#[derive(Debug, Clone, Default)]
pub struct GuestSchemas {
    pub input: Option<Value>,
    pub output: Option<Value>,
}

/// Schemas of code steps from the plugin registry (tools and templates:
/// unknown for now). Each guest is resolved and described once.
pub struct RegistryLookup<'a> {
    sandbox: &'a Sandbox,
    registry: &'a Registry,
    base_dir: PathBuf,
    known: Mutex<HashMap<CodeRef, Known>>,
    /// Configured MCP server names (`None`: not checked).
    servers: Option<Vec<String>>,
    /// Configured remote A2A agents (`[agents.*]`; `None`: not checked).
    agents: Option<Vec<String>>,
    /// Input schemas of tools, by (server, tool), when fetched online.
    tool_schemas: HashMap<(String, String), Value>,
    /// Output schemas of the tools that declare one, by (server, tool).
    tool_output_schemas: HashMap<(String, String), Value>,
    /// `input_schema`s of saved templates (child runs), by (name, version).
    template_schemas: HashMap<(String, Option<u32>), Value>,
    /// Whom the hints are for.
    audience: Audience,
}

impl<'a> RegistryLookup<'a> {
    /// A lookup resolving relative `path`s against `base_dir`.
    pub fn new(sandbox: &'a Sandbox, registry: &'a Registry, base_dir: impl Into<PathBuf>) -> Self {
        RegistryLookup {
            sandbox,
            registry,
            base_dir: base_dir.into(),
            known: Mutex::default(),
            servers: None,
            agents: None,
            tool_schemas: HashMap::new(),
            tool_output_schemas: HashMap::new(),
            template_schemas: HashMap::new(),
            audience: Audience::default(),
        }
    }

    /// Hints for `audience`.
    pub fn for_audience(mut self, audience: Audience) -> Self {
        self.audience = audience;
        self
    }

    /// The `input_schema`s of the templates child runs start: a
    /// `workflow` step's literal input is checked against them.
    pub fn with_template_schemas(mut self, schemas: HashMap<(String, Option<u32>), Value>) -> Self {
        self.template_schemas = schemas;
        self
    }

    /// Also checks that every tool step names one of `servers` (the
    /// configured `[servers.*]`).
    pub fn with_servers(mut self, servers: impl IntoIterator<Item = String>) -> Self {
        self.servers = Some(servers.into_iter().collect());
        self
    }

    /// Also checks that every agent step names one of `agents` (the
    /// configured `[agents.*]`).
    pub fn with_agents(mut self, agents: impl IntoIterator<Item = String>) -> Self {
        self.agents = Some(agents.into_iter().collect());
        self
    }

    /// Tool input schemas fetched from the upstreams (see [`crate::online`]):
    /// a tool step's literal input is checked against them.
    pub fn with_tool_schemas(mut self, schemas: HashMap<(String, String), Value>) -> Self {
        self.tool_schemas = schemas;
        self
    }

    /// Tool output schemas fetched from the upstreams: refs into a tool
    /// step's output are checked against them.
    pub fn with_tool_output_schemas(mut self, schemas: HashMap<(String, String), Value>) -> Self {
        self.tool_output_schemas = schemas;
        self
    }

    /// The guest's declared schemas (none, for a WASI command), or why it
    /// cannot be resolved or loaded.
    pub fn check(&self, code: &CodeRef) -> Known {
        if let Some(k) = self.known.lock().unwrap_or_else(|p| p.into_inner()).get(code) {
            return k.clone();
        }
        let k = self.describe(code);
        self.known.lock().unwrap_or_else(|p| p.into_inner()).insert(code.clone(), k.clone());
        k
    }

    fn describe(&self, code: &CodeRef) -> Known {
        let meta = match code {
            CodeRef::Plugin(name) => {
                let r = self.registry.resolve(name).map_err(|e| match e {
                    weft_sandbox::SandboxError::UnknownPlugin { .. } => format!("unknown plugin `{name}`"),
                    other => other.to_string(),
                })?;
                self.registry.metadata(self.sandbox, &r).map_err(|e| e.to_string())?
            }
            other => {
                let c = resolve_code(self.registry, &self.base_dir, other).map_err(|why| match other {
                    CodeRef::Sha256(hex) => format!("no module with digest `{hex}` is stored"),
                    _ => why,
                })?;
                let guest = self.sandbox.load_pinned(c.digest, c.bytes).map_err(|e| format!("`{}`: {e}", c.name))?;
                self.sandbox.describe(&guest).map_err(|e| format!("`{}`: {e}", c.name))?
            }
        };
        Ok(meta.map(|m| GuestSchemas { input: m.input_schema, output: m.output_schema }).unwrap_or_default())
    }

    /// A problem for each code step (and tool-step `transform`) of the raw
    /// document `doc` whose guest cannot be found or loaded, at the path of
    /// its `code` (or `transform`) field. Malformed code fields are left to
    /// the model's own checks.
    pub fn code_problems(&self, doc: &Value) -> Vec<Problem> {
        let mut out = vec![];
        let Some(steps) = doc.get("steps").and_then(Value::as_array) else { return out };
        for (i, step) in steps.iter().enumerate() {
            if let (Some(servers), Some(server)) =
                (&self.servers, step.pointer("/tool/server").and_then(Value::as_str).filter(|s| !s.is_empty()))
                && !servers.iter().any(|s| s == server)
            {
                let known = if servers.is_empty() { "none is configured".to_string() } else { servers.join(", ") };
                let hint = match weft_model::closest(server, servers.iter().map(String::as_str)) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => self.audience.add_server(server),
                };
                out.push(
                    Problem::new(
                        format!("/steps/{i}/tool/server"),
                        format!("unknown MCP server `{server}` (configured: {known})"),
                    )
                    .hint(hint),
                );
            }
            let agent = step.get("agent").and_then(|a| a.as_str().or_else(|| a.get("name")?.as_str()));
            if let (Some(agents), Some(name)) = (&self.agents, agent.filter(|a| !a.is_empty()))
                && !agents.iter().any(|a| a == name)
            {
                let known = if agents.is_empty() { "none is configured".to_string() } else { agents.join(", ") };
                let hint = match weft_model::closest(name, agents.iter().map(String::as_str)) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => self.audience.add_agent(name),
                };
                let at = if step.get("agent").is_some_and(Value::is_string) { "agent" } else { "agent/name" };
                out.push(
                    Problem::new(format!("/steps/{i}/{at}"), format!("unknown agent `{name}` (configured: {known})"))
                        .hint(hint),
                );
            }
            for field in ["code", "transform"] {
                let Some(code) = step.get(field).and_then(code_ref) else { continue };
                if let Err(why) = self.check(&code) {
                    let hint = match &code {
                        CodeRef::Plugin(name) => {
                            let names = self.registry.names().unwrap_or_default();
                            match weft_model::closest(name, names.iter().map(String::as_str)) {
                                Some(n) => format!("did you mean `{n}`? {}", self.audience.plugins()),
                                None => format!("known plugins: {}; {}", names.join(", "), self.audience.plugins()),
                            }
                        }
                        CodeRef::Path(_) => "a relative path is resolved against the definition file's folder".into(),
                        CodeRef::Sha256(_) => self.audience.digests().into(),
                    };
                    out.push(Problem::new(format!("/steps/{i}/{field}"), why).hint(hint));
                }
            }
            if let Some(p) = jq_filter_problem(i, step) {
                out.push(p);
            }
        }
        out
    }
}

/// A problem when step `i` runs the bundled `jq` plugin with a literal
/// `filter` that does not compile: validation agrees with running. A
/// filter with weft refs in it is only known at run time.
fn jq_filter_problem(i: usize, step: &Value) -> Option<Problem> {
    if step.pointer("/code/plugin").and_then(Value::as_str) != Some("jq") {
        return None;
    }
    let raw = step.pointer("/input/filter").filter(|f| f.is_string())?;
    let template = weft_model::Template::compile(raw.clone()).ok()?;
    if !template.sites().is_empty() {
        return None;
    }
    let filter = template.resolve(&weft_model::MapScope::new(Value::Null));
    let why = weft_plugin_jq::check(filter.as_str()?).err()?;
    Some(
        Problem::new(format!("/steps/{i}/input/filter"), why)
            .hint("jq's language: `map(select(.qty > 10)) | length`; a literal `@` (jq's `@csv`) is written `@@`"),
    )
}

/// A well-formed code reference in raw JSON (one key, a non-empty string;
/// a digest of 64 hex digits), else `None`.
fn code_ref(v: &Value) -> Option<CodeRef> {
    let obj = v.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    let (k, v) = obj.iter().next()?;
    let s = v.as_str().filter(|s| !s.is_empty())?.to_string();
    match k.as_str() {
        "plugin" => Some(CodeRef::Plugin(s)),
        "path" => Some(CodeRef::Path(s)),
        "sha256" if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => Some(CodeRef::Sha256(s)),
        _ => None,
    }
}

impl SchemaLookup for RegistryLookup<'_> {
    fn code_input_schema(&self, code: &CodeRef) -> Option<Value> {
        self.check(code).ok().and_then(|s| s.input)
    }
    fn code_output_schema(&self, code: &CodeRef) -> Option<Value> {
        self.check(code).ok().and_then(|s| s.output)
    }
    fn tool_input_schema(&self, server: &str, tool: &str) -> Option<Value> {
        self.tool_schemas.get(&(server.to_string(), tool.to_string())).cloned()
    }
    fn tool_output_schema(&self, server: &str, tool: &str) -> Option<Value> {
        self.tool_output_schemas.get(&(server.to_string(), tool.to_string())).cloned()
    }
    fn template_input_schema(&self, template: &str, version: Option<u32>) -> Option<Value> {
        self.template_schemas.get(&(template.to_string(), version)).cloned()
    }
}

/// Why a definition file is not usable.
#[derive(Debug, Default)]
pub struct Invalid {
    /// Every problem, in document order.
    pub problems: Vec<Problem>,
    /// For a JSON syntax error: its line and column.
    pub syntax: Option<(usize, usize)>,
    /// Problems of the run's input (against the definition's
    /// `input_schema`), found together with the definition's when a run
    /// was asked for: every problem at once.
    pub input: Vec<Problem>,
    /// What would be worth a look even if it were valid (text that looks
    /// like another template language's refs, servers that could not be
    /// reached): kept with the problems so a fix does not hide them.
    pub warnings: Vec<Problem>,
}

/// Parses and validates `text` with `lookup`: the model's problems plus one
/// for each guest that cannot be found, in document order.
pub fn validate_text(text: &str, lookup: &RegistryLookup<'_>) -> Result<Definition, Invalid> {
    match weft_model::parse_json_text(text) {
        Ok(doc) => validate_doc(&doc, lookup),
        Err(e) => {
            let problems = vec![weft_model::json_text_problem(&e)];
            let syntax = e.path.is_none().then_some((e.line, e.column));
            Err(Invalid { problems, syntax, ..Default::default() })
        }
    }
}

/// Validates a parsed document with `lookup` (see [`validate_text`]).
pub fn validate_doc(doc: &Value, lookup: &RegistryLookup<'_>) -> Result<Definition, Invalid> {
    let mut code = lookup.code_problems(doc);
    code.extend(weft_model::lookalike::check(doc).errors);
    match weft_model::from_value(doc, lookup) {
        Ok(def) if code.is_empty() => Ok(def),
        Ok(_) => Err(Invalid { problems: code, ..Default::default() }),
        Err(problems) => {
            // The guest's own problem before the model's about the same step.
            let mut all = code;
            all.extend(problems);
            sort_problems(&mut all);
            Err(Invalid { problems: all, ..Default::default() })
        }
    }
}

/// Sorts problems in document order: top-level fields first, then steps
/// by index, then `output` (stable, so problems of one step keep their
/// order).
pub fn sort_problems(problems: &mut [Problem]) {
    problems.sort_by_key(|p| order_key(&p.path));
}

fn order_key(path: &str) -> (u8, usize) {
    if let Some(rest) = path.strip_prefix("/steps/") {
        let n = rest.split('/').next().and_then(|s| s.parse().ok()).unwrap_or(0);
        (1, n)
    } else if path.starts_with("/output") {
        (2, 0)
    } else {
        (0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixtures() -> (tempfile::TempDir, Sandbox, Registry) {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(weft_sandbox::SandboxConfig::default(), None).unwrap();
        let registry = Registry::new(dir.path(), crate::guests::bundled());
        (dir, sandbox, registry)
    }

    #[test]
    fn unknown_guests_are_problems_at_the_code_path() {
        let (dir, sandbox, registry) = fixtures();
        let lookup = RegistryLookup::new(&sandbox, &registry, dir.path());
        let doc = json!({"name": "x", "steps": [
            {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": 1, "path": "a"}},
            {"name": "b", "code": {"plugin": "no-such"}},
            {"name": "c", "code": {"path": "missing.wasm"}},
            {"name": "d", "code": {"sha256": "00".repeat(32)}},
            {"name": "e", "code": {"plugin": ""}}
        ]});
        let p = lookup.code_problems(&doc);
        let paths: Vec<&str> = p.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/steps/1/code", "/steps/2/code", "/steps/3/code"], "{p:?}");
        assert!(p[0].message.contains("unknown plugin `no-such`"), "{}", p[0].message);
        assert!(p[1].message.contains("missing.wasm"), "{}", p[1].message);
    }

    #[test]
    fn plugin_schemas_check_literal_inputs_and_problems_come_in_order() {
        let (dir, sandbox, registry) = fixtures();
        let lookup = RegistryLookup::new(&sandbox, &registry, dir.path());
        assert!(lookup.code_input_schema(&CodeRef::Plugin("json-select".into())).is_some());
        let text = json!({"name": "x", "steps": [
            {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": 1}},
            {"name": "b", "code": {"plugin": "nope"}, "input": "@zzz"}
        ]})
        .to_string();
        let err = validate_text(&text, &lookup).unwrap_err();
        let paths: Vec<&str> = err.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/steps/0/input", "/steps/1/code", "/steps/1/input"], "{:?}", err.problems);
        let err = validate_text("{\n  \"name\": ", &lookup).unwrap_err();
        assert_eq!(err.syntax.map(|s| s.0), Some(2));
        assert_eq!(err.problems.len(), 1);
    }
}
