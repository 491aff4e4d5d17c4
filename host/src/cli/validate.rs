//! `weft validate FILE [--json]`: every problem of a definition, each with
//! its JSON path, checked against the installed plugins' input schemas.
//!
//! Valid: `ok: NAME vN (S steps)` on stderr, exit 0. Invalid: one line per
//! problem on stderr (`FILE: /steps/1/input/email: message (hint)`; a JSON
//! syntax error as `FILE:LINE:COLUMN: ...`), exit 2. `--json` prints
//! `{"valid": true, "name", "version", "steps"}` or
//! `{"valid": false, "problems": [{"path", "message", "hint"?}]}` on stdout.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use weft_model::Definition;

use super::{Exit, bad, output};
use crate::config::Settings;
use crate::guests;
use crate::lookup::{Invalid, RegistryLookup, validate_text};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The definition file (JSON).
    file: PathBuf,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(settings: &Settings, args: ValidateArgs) -> anyhow::Result<Exit> {
    match load(settings, &args.file)? {
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
    if !file.exists() {
        return Err(bad(anyhow::anyhow!("no file `{}`", file.display())));
    }
    if file.is_dir() {
        return Err(bad(anyhow::anyhow!("`{}` is a folder, not a definition file", file.display())));
    }
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display())).map_err(bad)?;
    let text =
        String::from_utf8(bytes).map_err(|e| bad(anyhow::anyhow!("{} is not UTF-8 text: {e}", file.display())))?;
    let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base };
    let sandbox = guests::sandbox(settings)?;
    let registry = guests::registry(settings);
    let lookup = RegistryLookup::new(&sandbox, &registry, base);
    Ok(validate_text(&text, &lookup))
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
