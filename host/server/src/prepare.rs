//! Definitions from tool arguments: parsing (an object, or its JSON text)
//! under the definition cap, then the runtime's one prepare-a-run pipeline
//! (`weft_runtime::pipeline`: validation against the installed plugins and
//! configured servers, the input against `input_schema`, tool steps
//! against their servers, pinning), its refusals rendered as tool errors
//! that name MCP tools. Nothing here stores a run.

use std::sync::Arc;

use serde_json::Value;
use weft_engine::RunOptions;
use weft_model::{Definition, Problem};
use weft_runtime::pipeline::{Prepared, Refused, Source};

use super::Core;
use super::errors::{ProblemOut, ToolError};

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

/// Validates `doc` (a client's) against the installed plugins and
/// servers: the definition, or every problem with its JSON path.
pub async fn validate(core: &Core, doc: Value) -> Result<Result<Definition, Vec<Problem>>, ToolError> {
    match core.pipeline.load(Source::Client(doc)).await {
        Ok(loaded) => Ok(Ok(loaded.def)),
        Err(Refused::Definition(invalid)) => Ok(Err(invalid.problems)),
        Err(other) => Err(refused(other, None)),
    }
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
    core.pipeline.for_template(Source::Client(doc)).await.map_err(|r| refused(r, None))
}

/// Validates `source` (with `opts` naming its template, if any) and
/// `input`, checks tool steps against their servers, and pins the code:
/// the pipeline `weft run` goes through too.
pub async fn for_run(core: &Arc<Core>, source: Source, input: Value, opts: RunOptions) -> Result<Prepared, ToolError> {
    let template = opts.template.clone();
    let prepared = async {
        let loaded = core.pipeline.load(source).await?;
        core.pipeline.prepare(loaded, input, opts).await
    };
    let p = prepared.await.map_err(|r| refused(r, template.as_deref()))?;
    for w in &p.warnings {
        tracing::warn!("{w}");
    }
    Ok(p)
}

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
            None => invalid_definition(&invalid.problems),
        },
        Refused::Template { name, problems, .. } => ToolError::with_problems(
            format!("template `{name}` does not validate against the installed plugins and servers"),
            ProblemOut::all("definition", &problems),
        )
        .fix("save a corrected version with `template_save`, or add the missing plugin or server"),
        Refused::Input { problems, schema } => invalid_input(&problems, schema.as_ref()),
        Refused::Tools(problems) => ToolError::with_problems(
            "the tool steps do not match what their MCP servers offer; no run was created",
            ProblemOut::all("definition", &problems),
        )
        .fix("name tools the server lists, with inputs that match their input schemas"),
        Refused::Pin(problems) => invalid_definition(&problems),
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
