//! Definitions from tool arguments: parsing (an object, or its JSON text),
//! validation against the installed plugins and configured servers (the
//! same checks as `weft validate`), pinning code for templates and runs,
//! and, before a run, checking its input against `input_schema` and its
//! tool steps against what their MCP servers offer (the same steps as
//! `weft run`). The sandbox work runs on a blocking thread; nothing here
//! stores a run.

use std::sync::Arc;

use serde_json::Value;
use weft_engine::RunOptions;
use weft_model::{Definition, NoSchemas, Problem};

use super::Core;
use super::errors::{ProblemOut, ToolError};
use crate::lookup::{RegistryLookup, validate_text};
use crate::{app, guests, online};

/// A definition argument under the definition cap (`[limits]
/// max_definition_bytes`), as a JSON document (see [`definition_doc`]).
pub fn capped_definition_doc(v: Value, cap: usize) -> Result<Value, ToolError> {
    let doc = definition_doc(v)?;
    weft_engine::caps::check(&doc, cap).map_err(|o| {
        ToolError::new(o.message("`definition`", "max_definition_bytes"))
            .fix("split the workflow into templates run by `workflow` steps (child runs), or ask the operator to raise the cap")
    })?;
    Ok(doc)
}

/// A definition argument as a JSON document: an object, or a string with
/// its JSON text (a syntax error is reported with its line and column).
pub fn definition_doc(v: Value) -> Result<Value, ToolError> {
    let fix = "pass the workflow definition as a JSON object: {\"name\": ..., \"steps\": [...]}";
    match v {
        Value::Object(_) => Ok(v),
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
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
                    path: String::new(),
                    message: format!("{e} (line {}, column {})", e.line(), e.column()),
                    hint: None,
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

/// Validates `doc` against the installed plugins: the definition, or every
/// problem with its JSON path.
pub fn validate(core: &Core, doc: &Value) -> Result<Definition, Vec<Problem>> {
    // A client names plugins and digests; files only where the operator
    // allowed, and none is read before that is checked.
    let paths = client_paths(core, doc);
    if !paths.is_empty() {
        return Err(paths);
    }
    let registry = guests::registry(&core.settings);
    let servers = core.settings.servers.iter().map(|s| s.name.clone());
    let lookup = RegistryLookup::new(&core.sandbox, &registry, core.base_dir.clone()).with_servers(servers);
    validate_text(&doc.to_string(), &lookup).map_err(|invalid| invalid.problems)
}

/// A problem for each `code.path` (or `transform.path`) of a client's
/// definition outside `[guests] allow_paths`.
fn client_paths(core: &Core, doc: &Value) -> Vec<Problem> {
    let allowed = &core.settings.file.guests.allow_paths;
    let Some(steps) = doc.get("steps").and_then(Value::as_array) else { return vec![] };
    let mut out = vec![];
    for (i, step) in steps.iter().enumerate() {
        for field in ["code", "transform"] {
            if let Some(p) = step.get(field).and_then(|c| c.get("path")).and_then(Value::as_str)
                && let Err(why) = crate::lookup::client_path_allowed(allowed, &core.base_dir, p)
            {
                out.push(Problem::new(format!("/steps/{i}/{field}/path"), why));
            }
        }
    }
    out
}

/// The refusal of an invalid definition.
pub fn invalid_definition(problems: &[Problem]) -> ToolError {
    let n = problems.len();
    ToolError::with_problems(
        format!("the definition is not valid ({n} problem{}); nothing was stored", if n == 1 { "" } else { "s" }),
        ProblemOut::all("definition", problems),
    )
    .fix("correct each path listed (JSON Pointers into `definition`); `workflow_validate` checks a definition without storing it, `plugin_list` shows the plugins and their input schemas")
}

/// Validates a definition for saving as a template and stores the code of
/// steps that name a file (plugin names stay names): the document to save
/// and its name.
pub async fn for_template(core: &Arc<Core>, doc: Value) -> Result<(Value, String), ToolError> {
    let core = core.clone();
    blocking(move || {
        let mut doc = doc;
        let def = validate(&core, &doc).map_err(|p| invalid_definition(&p))?;
        let registry = guests::registry(&core.settings);
        app::pin_code(&mut doc, &registry, &core.base_dir, true).map_err(|p| invalid_definition(&p))?;
        Ok((doc, def.name))
    })
    .await
}

/// A run ready to be created: its pinned plan and options.
pub struct Prepared {
    /// The definition with every guest pinned by digest.
    pub plan: Definition,
    /// Template name and version.
    pub opts: RunOptions,
}

/// Validates `doc` (with `opts` naming its template, if any) and `input`,
/// checks the engine runs every step kind, and pins the code: what
/// `weft run` does before it creates a run.
pub async fn for_run(core: &Arc<Core>, doc: Value, input: Value, opts: RunOptions) -> Result<Prepared, ToolError> {
    let c = core.clone();
    let template = opts.template.clone();
    let doc = blocking(move || {
        let def = validate(&c, &doc).map_err(|p| match &template {
            Some(t) => ToolError::with_problems(
                format!("template `{t}` does not validate against the installed plugins and servers"),
                ProblemOut::all("definition", &p),
            )
            .fix("save a corrected version with `template_save`, or add the missing plugin or server"),
            None => invalid_definition(&p),
        })?;
        if let Err(problems) = weft_model::validate_input(&def, &input) {
            return Err(invalid_input(&problems, &def));
        }
        Ok(doc)
    })
    .await?;
    // Tool steps: ask their servers for their tools (an unreachable server
    // is only a warning: the run's attempts retry per policy).
    let online =
        if online::tool_steps(&doc).is_empty() { None } else { Some(online::check(&core.upstreams, &doc).await) };
    let c = core.clone();
    blocking(move || {
        let mut doc = doc;
        if let Some(online) = online {
            for p in &online.unreachable {
                tracing::warn!("{p}");
            }
            let mut problems = online.problems;
            if !online.schemas.is_empty() {
                let registry = guests::registry(&c.settings);
                let lookup =
                    RegistryLookup::new(&c.sandbox, &registry, c.base_dir.clone()).with_tool_schemas(online.schemas);
                if let Err(ps) = weft_model::from_value(&doc, &lookup) {
                    problems.extend(ps);
                }
            }
            if !problems.is_empty() {
                return Err(ToolError::with_problems(
                    "the tool steps do not match what their MCP servers offer; no run was created",
                    ProblemOut::all("definition", &problems),
                )
                .fix("name tools the server lists, with inputs that match their input schemas"));
            }
        }
        let registry = guests::registry(&c.settings);
        app::pin_code(&mut doc, &registry, &c.base_dir, false).map_err(|p| invalid_definition(&p))?;
        let plan = weft_model::from_value(&doc, &NoSchemas).map_err(|p| invalid_definition(&p))?;
        Ok(Prepared { plan, opts })
    })
    .await
}

/// The refusal of an input that does not match `input_schema`.
pub fn invalid_input(problems: &[Problem], def: &Definition) -> ToolError {
    let n = problems.len();
    let schema = def.input_schema.as_ref().map(|s| s.to_string()).unwrap_or_else(|| "{}".into());
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
