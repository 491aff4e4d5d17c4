//! `weft validate FILE [--json]`: every problem of a definition, each with
//! its JSON path, checked against the installed plugins' input schemas.
//!
//! Valid: `ok: NAME vN (S steps)` on stderr, exit 0. Invalid: one line per
//! problem on stderr (`FILE: /steps/1/input/email: message (hint)`; a JSON
//! syntax error as `FILE:LINE:COLUMN: ...`), exit 2. `--json` prints
//! `{"valid": true, "name", "version", "steps"}` or
//! `{"valid": false, "problems": [{"path", "message", "hint"?}]}` on stdout.
//!
//! Tool steps must name a configured `[servers.*]`; with `--online` each
//! named server is also asked for its tools, so an unknown tool, an
//! unreachable server or an input that breaks the tool's input schema is a
//! problem too.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use weft_model::Definition;

use super::{Exit, bad, output};
use weft_runtime::config::Settings;
use weft_runtime::guests;
use weft_runtime::lookup::{Invalid, RegistryLookup, validate_text};
use weft_runtime::online::{self, Online};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The definition file (JSON).
    file: PathBuf,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Also ask the upstream MCP servers of tool steps for their tools and
    /// check each step's input against the tool's input schema.
    #[arg(long)]
    online: bool,
}

pub fn run(settings: &Settings, args: ValidateArgs) -> anyhow::Result<Exit> {
    let online = if args.online { Some(fetch_online(settings, &args.file)?) } else { None };
    let loaded = match &online {
        None => load(settings, &args.file)?,
        Some(o) => load_checked(settings, &args.file, Some(o))?.map_err(|mut invalid| {
            invalid.problems.extend(o.unreachable.iter().cloned());
            invalid
        }),
    };
    let loaded = match (loaded, &online) {
        (Ok(_), Some(o)) if !o.unreachable.is_empty() => Err(Invalid { problems: o.unreachable.clone(), syntax: None }),
        (other, _) => other,
    };
    match loaded {
        Ok(def) => {
            eprintln!("ok: {} v{} ({} step{})", def.name, def.version, def.steps.len(), plural(def.steps.len()));
            if args.json {
                output::json(&json!({
                    "valid": true, "name": def.name, "version": def.version, "steps": def.steps.len(),
                }));
            }
            Ok(Exit::Success)
        }
        Err(invalid) => Err(report(&args.file, &invalid, args.json)),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Reads and validates a definition file. `Err` only for a file that cannot
/// be read (bad input) or a sandbox that cannot be built.
pub(super) fn load(settings: &Settings, file: &Path) -> anyhow::Result<Result<Definition, Invalid>> {
    load_checked(settings, file, None)
}

/// Asks the upstreams named by `file`'s tool steps for their tools (a file
/// that is not JSON yields nothing: the offline check reports it).
fn fetch_online(settings: &Settings, file: &Path) -> anyhow::Result<Online> {
    let Ok(text) = std::fs::read_to_string(file) else { return Ok(Online::default()) };
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else { return Ok(Online::default()) };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start a runtime")?;
    let upstreams = settings.upstreams();
    let online = rt.block_on(async {
        let o = online::check(&upstreams, &doc).await;
        upstreams.shutdown().await;
        o
    });
    Ok(online)
}

/// [`load`], with the tool schemas and tool problems of `online`.
pub(super) fn load_checked(
    settings: &Settings,
    file: &Path,
    online: Option<&Online>,
) -> anyhow::Result<Result<Definition, Invalid>> {
    let cap = settings.caps().max_definition_bytes;
    let text = weft_runtime::pipeline::read_definition(file, cap).map_err(|why| bad(anyhow::anyhow!(why)))?;
    let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base };
    let sandbox = guests::sandbox(settings)?;
    let registry = guests::registry(settings);
    let servers = settings.servers.iter().map(|s| s.name.clone());
    let mut lookup = RegistryLookup::new(&sandbox, &registry, base).with_servers(servers);
    if let Some(o) = online {
        lookup = lookup.with_tool_schemas(o.schemas.clone());
    }
    let result = validate_text(&text, &lookup);
    Ok(match (result, online) {
        (r, None) => r,
        (Ok(_), Some(o)) if !o.problems.is_empty() => Err(Invalid { problems: o.problems.clone(), syntax: None }),
        (Err(mut invalid), Some(o)) => {
            invalid.problems.extend(o.problems.iter().cloned());
            Err(invalid)
        }
        (ok, Some(_)) => ok,
    })
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
    bad(anyhow::anyhow!("{shown} is not a valid workflow definition ({n} problem{})", plural(n)))
}
