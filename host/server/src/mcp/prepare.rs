//! Definitions from tool arguments: parsing (an object, or its JSON text)
//! under the definition cap, then the runtime's one prepare-a-run pipeline
//! (`weft_runtime::pipeline`: validation against the installed plugins,
//! configured servers and their live tools, the input against
//! `input_schema`, pinning), its refusals rendered as tool errors that name
//! MCP tools (the core's pipeline writes its hints for an MCP reader).
//! Nothing here stores a run.

use std::sync::Arc;

use serde_json::Value;
use weft_engine::RunRecord;
use weft_model::Problem;
use weft_runtime::lookup::Invalid;
use weft_runtime::pipeline::{Loaded, Refused, Saving, Source};
use weft_runtime::usecase::{LookupRefused, StartRefused};

use crate::Core;
use crate::mcp::errors::{ProblemOut, ToolError};

/// The schema of a tool's `definition` argument: described in a few
/// words with a pointer to the format, not inlined (the whole JSON Schema
/// is the resource `weft://schema/definition`, the guide `weft://guide`).
pub struct DefinitionArg;

impl schemars::JsonSchema for DefinitionArg {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WorkflowDefinition".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["object", "string"],
            "description": "A workflow definition: {\"name\", \"steps\": [...], \"input_schema\"?, \"output\"?} (or its JSON text). The format, with examples: resource weft://guide; its JSON Schema: weft://schema/definition.",
            "required": ["name", "steps"],
            "properties": {
                "name": {"type": "string"},
                "steps": {"type": "array", "items": {"type": "object"}, "description": "Each: {\"name\", one action (tool, code, agent, return, wait, sleep, workflow), \"input\"?, \"when\"?, \"for_each\"?, ...}"}
            }
        })
    }
}

/// A short, complete definition for tool descriptions (uses a bundled
/// plugin, so it validates on every server).
macro_rules! definition_example {
    () => {
        r#"{"name": "pick-name", "steps": [{"name": "pick", "code": {"plugin": "json-select"}, "input": {"data": "@input.user", "path": "name"}}, {"name": "greet", "return": {"greeting": "hello @pick"}}]}"#
    };
}
pub(crate) use definition_example;

/// A definition argument under the definition cap (`[limits]
/// max_definition_bytes`), as a JSON document (see [`definition_doc`]).
pub fn capped_definition_doc(v: Value, cap: usize) -> Result<Value, ToolError> {
    let doc = definition_doc(v)?;
    weft_engine::size_limits::check(&doc, cap)
        .map_err(|o| ToolError::new(o.message("`definition`", "max_definition_bytes")).fix(FIX_TOO_LARGE))?;
    Ok(doc)
}

/// A definition argument as a JSON document: an object, or a string with
/// its JSON text (a syntax error is reported with its line and column).
pub fn definition_doc(v: Value) -> Result<Value, ToolError> {
    let fix = "pass the workflow definition as a JSON object: {\"name\": ..., \"steps\": [...]}";
    match v {
        Value::Object(_) => Ok(v),
        Value::String(text) => match weft_model::parse_json_text(&text) {
            Ok(doc @ Value::Object(_)) => Ok(doc),
            Ok(other) => Err(ToolError::new(format!(
                "`definition` is JSON text of {}, not of an object",
                weft_model::type_name(&other)
            ))
            .fix(fix)),
            Err(e) => Err(ToolError::with_problems(
                "`definition` is a string that is not valid JSON",
                vec![ProblemOut {
                    argument: "definition".into(),
                    path: e.path.clone().unwrap_or_default(),
                    message: e.to_string(),
                    hint: e.path.is_some().then(|| "keep one of the two keys".to_string()),
                }],
            )
            .fix(fix)),
        },
        other => {
            Err(ToolError::new(format!("`definition` is {}, not an object", weft_model::type_name(&other))).fix(fix))
        }
    }
}

/// Runs `f` on a blocking thread (the sandbox compiles and describes guests).
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f).await.map_err(ToolError::internal)?
}

/// Validates `doc` (a client's) as `run_start` would (the installed
/// plugins, the configured servers and their live tools, saved child
/// templates): the definition with its warnings, or every problem.
pub async fn validate(core: &Core, doc: Value) -> Result<Result<Loaded, Invalid>, ToolError> {
    match core.for_mcp.pipeline().load(Source::Client(doc)).await {
        Ok(loaded) => Ok(Ok(loaded)),
        Err(Refused::Definition(invalid)) => Ok(Err(invalid)),
        Err(other) => Err(refused(other, None)),
    }
}

/// The refusal of an invalid definition (and of the run's input, when
/// one was given with it).
pub fn invalid_definition(invalid: &Invalid) -> ToolError {
    let n = invalid.problems.len() + invalid.input.len();
    let mut problems = ProblemOut::all("definition", &invalid.problems);
    problems.extend(ProblemOut::all("input", &invalid.input));
    ToolError::with_problems(
        format!("the definition is not valid ({n} problem{}); nothing was stored", if n == 1 { "" } else { "s" }),
        problems,
    )
    .fix(FIX_DEFINITION)
}

const FIX_DEFINITION: &str = "correct each path listed (JSON Pointers into `definition`); `workflow_validate` checks a definition without storing it, `plugin_list` shows the plugins and their input schemas, the resource weft://guide explains the format";

/// Validates a definition for saving as a template and stores the code of
/// steps that name a file (plugin names stay names): the document to save,
/// its name and its warnings.
pub async fn for_template(core: &Arc<Core>, doc: Value) -> Result<Saving, ToolError> {
    core.for_mcp.pipeline().for_template(Source::Client(doc)).await.map_err(|r| refused(r, None))
}

/// A run the use-case layer did not start, as a tool error in MCP's
/// terms (`template`: the saved template the run was asked of).
pub async fn start_refused(core: &Core, e: StartRefused, template: Option<&str>) -> ToolError {
    match e {
        StartRefused::NoSource => ToolError::new("neither `template` nor `definition` is given")
            .fix("give `template` (see template_list) or an inline `definition`"),
        StartRefused::BothSources => ToolError::new("both `template` and `definition` are given")
            .fix("give `template` to run a saved template, or `definition` to run an inline one, not both"),
        StartRefused::VersionWithDefinition => ToolError::new("`version` applies to `template` only")
            .fix("leave `version` out when running an inline `definition`"),
        StartRefused::NoTemplate { name, version } => no_template_near(core, &name, version).await,
        StartRefused::DefinitionNotObject(kind) => ToolError::new(format!("`definition` is {kind}, not an object"))
            .fix("pass the workflow definition as a JSON object: {\"name\": ..., \"steps\": [...]}"),
        StartRefused::DefinitionTooLarge(over) => {
            ToolError::new(over.message("`definition`", "max_definition_bytes")).fix(FIX_TOO_LARGE)
        }
        StartRefused::BadIdempotencyKey => ToolError::new("`idempotency_key` is empty or longer than 255 characters")
            .fix("give a key of 1 to 255 characters that names this request (e.g. a session and turn id)"),
        StartRefused::KeyConflict { key, run, differs } => ToolError::new(format!(
            "idempotency key `{key}` already started run {run} with a different request (its {} differ); nothing was started",
            differs.join(", ")
        ))
        .fix(format!("run_get {{\"run_id\": \"{run}\"}} shows that run; use a new key for a different request")),
        StartRefused::EmptyKey => {
            ToolError::new("`concurrency_key` is empty").fix("give a non-empty key, or leave `concurrency_key` out")
        }
        StartRefused::ZeroFuel => ToolError::new("`run_fuel` is 0")
            .fix("give a budget of at least 1 fuel unit, or leave `run_fuel` out for no budget"),
        StartRefused::Labels(problems) => {
            ToolError::with_problems("`labels` were refused; nothing was started", ProblemOut::all("labels", &problems))
                .fix("keep at most 32 labels, keys of letters, digits, `_ - . /`, values of at most 256 characters")
        }
        StartRefused::Notify(problems) => ToolError::with_problems(
            "`notify` was refused; nothing was started",
            ProblemOut::all("notify", &problems),
        )
        .fix("each entry is {\"on\": [events], \"webhook\": NAME | \"tool\": {server, name}, \"input\"?, \"key\"?}; weft://guide, \"Called back\", shows one"),
        StartRefused::Prepare(r) => refused(r, template),
        StartRefused::Input { problems, schema } => invalid_input(&problems, schema.as_ref()),
        StartRefused::Failed(e) => ToolError::internal(e),
    }
}

/// A run named by a client that cannot be found, as a tool error.
pub fn lookup_refused(e: LookupRefused) -> ToolError {
    match e {
        LookupRefused::NotAnId(text) => ToolError::new(format!("`run_id` {text:?} is not a run id"))
            .fix("a run id looks like r_01k…; run_list shows them"),
        LookupRefused::NotFound(id) => ToolError::new(format!("no run `{id}`")).fix("run_list shows the runs"),
        LookupRefused::Failed(e) => ToolError::internal(e),
    }
}

/// "no template" with a did-you-mean among the saved ones.
pub async fn no_template_near(core: &Core, name: &str, version: Option<u32>) -> ToolError {
    let all = core.store.list_templates().await.unwrap_or_default();
    let e = no_template(name, version);
    match weft_model::did_you_mean(name, all.iter().map(|t| t.name.as_str())) {
        Some(m) => ToolError { message: format!("{} ({m})", e.message), ..e },
        None => e,
    }
}

/// "no template" (with the version asked for, if any).
fn no_template(name: &str, version: Option<u32>) -> ToolError {
    match version {
        Some(v) => ToolError::new(format!("no version {v} of template `{name}`")),
        None => ToolError::new(format!("no template `{name}`")),
    }
    .fix("template_list shows the saved templates and their latest versions")
}

const FIX_TOO_LARGE: &str =
    "split the workflow into templates run by `workflow` steps (child runs), or ask the operator to raise the cap";

/// A refusal of the pipeline as a tool error (`template`: the definition
/// is that saved template's).
pub fn refused(r: Refused, template: Option<&str>) -> ToolError {
    match r {
        Refused::Definition(invalid) => match template {
            Some(t) => ToolError::with_problems(
                format!("template `{t}` does not validate against the installed plugins and servers"),
                ProblemOut::all("definition", &invalid.problems),
            )
            .fix("save a corrected version with `template_save`, or add the missing plugin or server"),
            None => invalid_definition(&invalid),
        },
        Refused::Template { name, problems, .. } => ToolError::with_problems(
            format!("template `{name}` does not validate against the installed plugins and servers"),
            ProblemOut::all("definition", &problems),
        )
        .fix("save a corrected version with `template_save`, or add the missing plugin or server"),
        Refused::Input { problems, schema } => invalid_input(&problems, schema.as_ref()),
        Refused::Pin(problems) => invalid_definition(&Invalid { problems, ..Default::default() }),
        Refused::Unusable(why) => ToolError::new(why),
        Refused::Runtime(e) => ToolError::internal(e),
    }
}

/// The refusal of an input that does not match `input_schema`.
pub fn invalid_input(problems: &[Problem], schema: Option<&Value>) -> ToolError {
    let n = problems.len();
    let schema = schema.map(|s| s.to_string()).unwrap_or_else(|| "{}".into());
    let hints: Vec<&str> = problems.iter().filter_map(|p| p.hint.as_deref()).collect();
    ToolError::with_problems(
        format!("the input was refused ({n} problem{}); no run was created", if n == 1 { "" } else { "s" }),
        ProblemOut::all("input", problems),
    )
    .fix(if hints.is_empty() {
        format!("pass an `input` that matches this JSON Schema: {schema}")
    } else {
        hints.join("; ")
    })
}

impl Core {
    /// The stored run `id`, or an error naming it.
    pub async fn load_run(&self, id: &str) -> Result<RunRecord, ToolError> {
        self.for_mcp.run(id).await.map_err(lookup_refused)
    }
}
