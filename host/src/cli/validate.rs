//! `weft validate FILE [--json] [--online | --offline]`: every problem of a
//! definition, each with its JSON path, from the runtime pipeline's one
//! validation — the checks `weft run`, MCP `workflow_validate`,
//! `template_save`, `run_start` and the HTTP API make: the installed
//! plugins and their input schemas, refs, the configured servers and, where
//! they answer, their live tools (an unknown tool, or a literal input that
//! breaks a tool's schema, is a problem).
//!
//! Valid: `ok: NAME vN (S steps)` on stderr, exit 0, after a `warning:`
//! line for each warning (a server that could not be reached to check its
//! tools, text that looks like another template language's refs). Invalid:
//! one line per problem on stderr (`FILE: /steps/1/input/email: message
//! (hint)`; a JSON syntax error as `FILE:LINE:COLUMN: ...`), exit 2.
//! `--json` prints `{"valid": true, "name", "version", "steps",
//! "warnings"?}` or `{"valid": false, "problems": [{"path", "message",
//! "hint"?}]}` on stdout.
//!
//! `--online` makes a server that cannot be reached a problem; `--offline`
//! asks no server (only that each tool step names a configured one). When
//! the data directory holds a store, the templates `workflow` steps start
//! are looked up in it (a missing one is a warning, with a did-you-mean).

use std::path::Path;

use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use weft_model::{Definition, Problem};

use super::{Exit, output};
use weft_runtime::config::Settings;
use weft_runtime::lookup::Invalid;
use weft_runtime::pipeline::{Loaded, Refused, Source};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The definition file (JSON).
    file: std::path::PathBuf,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Treat an MCP server that cannot be reached as a problem (by default
    /// its tool steps are only warned about).
    #[arg(long, conflicts_with = "offline")]
    online: bool,
    /// Ask no MCP server for its tools.
    #[arg(long)]
    offline: bool,
}

pub fn run(settings: &Settings, args: ValidateArgs) -> anyhow::Result<Exit> {
    let loaded = if args.offline {
        super::prepare::pipeline(settings)?.load_file(&args.file)
    } else if match weft_runtime::app::database(settings) {
        Ok(weft_runtime::app::Database::Sqlite(p)) => p.exists(),
        Ok(weft_runtime::app::Database::Postgres(_)) => true,
        Err(_) => false,
    } {
        // A store is there: the templates of `workflow` steps are checked
        // too (nothing is written to it).
        let app = weft_runtime::app::App::open(settings)?;
        let loaded = app.block_on(app.pipeline()?.load(Source::File(args.file.clone())));
        app.shutdown_upstreams();
        loaded
    } else {
        let upstreams = std::sync::Arc::new(settings.upstreams());
        let pipeline = super::prepare::pipeline_with(settings, upstreams.clone())?;
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start a runtime")?;
        let loaded = rt.block_on(pipeline.load(Source::File(args.file.clone())));
        rt.block_on(upstreams.shutdown());
        loaded
    };
    let loaded = match loaded {
        Ok(l) if args.online && l.unanswered => {
            let unreachable: Vec<Problem> =
                l.warnings.into_iter().filter(|w| w.path.ends_with("/tool/server")).collect();
            Err(Refused::Definition(Invalid { problems: unreachable, ..Default::default() }))
        }
        other => other,
    };
    match loaded {
        Ok(Loaded { def, warnings, .. }) => {
            let shown = args.file.display();
            for w in &warnings {
                eprintln!("warning: {shown}: {w}");
            }
            eprintln!("ok: {} v{} ({} step{})", def.name, def.version, def.steps.len(), plural(def.steps.len()));
            if args.json {
                let mut v = json!({"valid": true, "name": def.name, "version": def.version, "steps": def.steps.len()});
                if !warnings.is_empty() {
                    v["warnings"] = serde_json::to_value(&warnings).expect("problems serialize");
                }
                output::json(&v);
            }
            Ok(Exit::Success)
        }
        Err(Refused::Definition(invalid)) => Err(super::prepare::report(&args.file, &invalid, args.json)),
        Err(other) => Err(super::prepare::refused(other, &args.file.display().to_string(), args.json)),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Reads and validates a definition file offline (asking no server).
/// `Err` only for a file that cannot be read (bad input) or a sandbox that
/// cannot be built.
pub(super) fn load(settings: &Settings, file: &Path) -> anyhow::Result<Result<Definition, Invalid>> {
    match super::prepare::pipeline(settings)?.load_file(file) {
        Ok(loaded) => Ok(Ok(loaded.def)),
        Err(Refused::Definition(invalid)) => Ok(Err(invalid)),
        Err(other) => Err(super::prepare::refused(other, &file.display().to_string(), false)),
    }
}
