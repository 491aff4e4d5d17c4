//! `weft graph FILE|TEMPLATE|RUN_ID [--format mermaid|dot]`: draws a
//! definition's DAG on stdout. A file is validated first (an invalid one
//! prints its problems and exits 2); a template is drawn at its latest
//! version; a run is drawn with each step coloured by its current state.

use std::collections::HashMap;
use std::path::Path;

use clap::{Args, ValueEnum};

use super::{Exit, bad};
use weft_runtime::config::Settings;

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// A definition file, a saved template's name, or a run id.
    target: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Mermaid)]
    format: Format,
}

/// How to draw the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A Mermaid flowchart.
    Mermaid,
    /// Graphviz DOT.
    Dot,
}

pub fn run(settings: &Settings, args: GraphArgs) -> anyhow::Result<Exit> {
    let path = Path::new(&args.target);
    let (def, states) = if path.is_file() {
        let def = match super::validate::load(settings, path)? {
            Ok(def) => def,
            Err(invalid) => return Err(super::prepare::report(path, &invalid, false)),
        };
        (def, HashMap::new())
    } else {
        stored(settings, &args.target)?
    };
    let text = match args.format {
        Format::Mermaid => weft_model::graph::to_mermaid(&def, &states),
        Format::Dot => weft_model::graph::to_dot(&def, &states),
    };
    print!("{text}");
    Ok(Exit::Success)
}

/// A saved template (its latest version) or a run, whose steps are coloured
/// by their current state.
fn stored(
    settings: &Settings,
    target: &str,
) -> anyhow::Result<(weft_model::Definition, HashMap<String, weft_model::StepState>)> {
    let app = weft_runtime::app::App::open(settings)?;
    if let Ok(id) = target.parse::<weft_engine::RunId>() {
        let run = app
            .block_on(app.store.run(&id))?
            .ok_or_else(|| bad(anyhow::anyhow!("no run `{target}` in this store (see `weft runs list`)")))?;
        let def = weft_model::from_value(&run.definition, &weft_model::NoSchemas)
            .map_err(|p| anyhow::anyhow!("the stored definition of {target} does not parse: {p:?}"))?;
        let states = run.steps.iter().map(|s| (s.name.clone(), s.state)).collect();
        return Ok((def, states));
    }
    let t = app.block_on(app.store.template(target, None))?.ok_or_else(|| {
        bad(anyhow::anyhow!(
            "`{target}` is neither a file, a saved template nor a run id (see `weft templates list`, `weft runs list`)"
        ))
    })?;
    let def = weft_model::from_value(&t.definition, &weft_model::NoSchemas)
        .map_err(|p| anyhow::anyhow!("the stored template `{target}` does not parse: {p:?}"))?;
    Ok((def, HashMap::new()))
}
