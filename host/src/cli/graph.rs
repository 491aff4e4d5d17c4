//! `weft graph FILE [--format mermaid|dot]`: draws a definition's DAG on
//! stdout. The definition is validated first (an invalid one prints its
//! problems and exits 2). Templates and run ids (with live step states)
//! come later.

use std::collections::HashMap;
use std::path::Path;

use clap::{Args, ValueEnum};

use super::{Exit, bad};
use crate::config::Settings;

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// A definition file (templates and run ids: not yet).
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
    if !path.is_file() {
        return Err(bad(anyhow::anyhow!(
            "`{}` is not a file: `weft graph` draws definition files only so far (templates and run ids are not supported yet)",
            args.target
        )));
    }
    let def = match super::validate::load(settings, path)? {
        Ok(def) => def,
        Err(invalid) => return Err(super::validate::report(path, &invalid, false)),
    };
    let states = HashMap::new();
    let text = match args.format {
        Format::Mermaid => weft_model::graph::to_mermaid(&def, &states),
        Format::Dot => weft_model::graph::to_dot(&def, &states),
    };
    print!("{text}");
    Ok(Exit::Success)
}
