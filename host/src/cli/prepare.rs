//! The runtime's prepare-a-run pipeline as the CLI meets it: one for the
//! process, and its refusals printed on stderr (every problem with its
//! JSON path) ending the command with exit code 2.

use std::sync::Arc;

use weft_model::Problem;
use weft_runtime::config::Settings;
use weft_runtime::pipeline::{Pipeline, Refused};

use std::path::Path;

use serde_json::json;
use weft_runtime::lookup::Invalid;

use super::{bad, output};

/// A pipeline for a command that has no store open (definition files).
pub fn pipeline(settings: &Settings) -> anyhow::Result<Pipeline> {
    pipeline_with(settings, Arc::new(settings.upstreams()))
}

/// [`pipeline`] over the caller's upstreams (which it shuts down).
pub fn pipeline_with(settings: &Settings, upstreams: Arc<weft_mcp_client::Upstreams>) -> anyhow::Result<Pipeline> {
    let sandbox = weft_runtime::guests::sandbox(settings)?;
    let here = std::env::current_dir().unwrap_or_else(|_| ".".into());
    Ok(Pipeline::new(settings, sandbox, upstreams, None, here))
}

/// Prints a refusal of `what` (a file or a template name) and returns the
/// error that ends the command (exit 2 unless the machine failed).
pub fn refused(r: Refused, what: &str, json: bool) -> anyhow::Error {
    match r {
        Refused::Unusable(why) => bad(anyhow::anyhow!(why)),
        Refused::Definition(invalid) => report(std::path::Path::new(what), &invalid, json),
        Refused::Template { name, version, problems } => {
            for p in &problems {
                eprintln!("template {name} v{version}: {p}");
            }
            bad(anyhow::anyhow!("template `{name}` version {version} does not validate against the installed plugins"))
        }
        Refused::Input { problems, .. } => input_problems(&problems),
        Refused::Pin(problems) => {
            for p in &problems {
                eprintln!("{what}: {p}");
            }
            bad(anyhow::anyhow!("{what}: cannot pin the code of every step"))
        }
        Refused::Runtime(e) => e.into(),
    }
}

/// Prints problems located in the run input and returns the exit-2 error.
pub fn input_problems(problems: &[Problem]) -> anyhow::Error {
    print_input_problems(problems);
    let n = problems.len();
    bad(anyhow::anyhow!("the input was refused ({n} problem{}); no run was created", if n == 1 { "" } else { "s" }))
}

/// Prints problems located in the run input (`input/email: ...`) on stderr.
pub fn print_input_problems(problems: &[Problem]) {
    for p in problems {
        let at = if p.path.is_empty() { "input".to_string() } else { format!("input{}", p.path) };
        eprintln!("{at}: {}", p.message);
    }
    for h in problems.iter().filter_map(|p| p.hint.as_deref()) {
        eprintln!("  to fix: {h}");
    }
}

/// Prints every problem (stderr, and the JSON object on stdout with
/// `json`) and returns the exit-2 error that ends the command.
pub(super) fn report(file: &Path, invalid: &Invalid, json: bool) -> anyhow::Error {
    let shown = file.display();
    for p in &invalid.problems {
        match invalid.syntax {
            Some((line, col)) if p.path.is_empty() => eprintln!("{shown}:{line}:{col}: {}", p.message),
            _ => eprintln!("{shown}: {p}"),
        }
    }
    if !invalid.input.is_empty() {
        print_input_problems(&invalid.input);
    }
    if json {
        let problems: Vec<serde_json::Value> = invalid
            .problems
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(p).expect("problems serialize");
                if let (Some((line, col)), true) = (invalid.syntax, p.path.is_empty()) {
                    v["line"] = line.into();
                    v["column"] = col.into();
                }
                v
            })
            .collect();
        output::json(&json!({"valid": false, "problems": problems}));
    }
    let n = invalid.problems.len();
    bad(anyhow::anyhow!("{shown} is not a valid workflow definition ({n} problem{})", if n == 1 { "" } else { "s" }))
}
