//! `weft plugin add | list | inspect`: the registry of named code plugins
//! (added ones in the data directory, plus those bundled into the binary).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use serde_json::json;

use super::{Exit, bad, output};
use super::{find_error, sandbox_error};
use weft_runtime::config::Settings;
use weft_runtime::guests::{self, Origin};

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Validate a guest, store it by digest, precompile it, and name it.
    Add {
        /// The .wasm file.
        file: PathBuf,
        /// The name to use (default: the name its describe() gives).
        #[arg(long)]
        name: Option<String>,
    },
    /// List every plugin: added and bundled.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show a plugin's kind, digest, description and schemas (JSON).
    Inspect {
        /// A plugin name, a .wasm file, or sha256:HEX.
        guest: String,
    },
}

pub fn run(settings: &Settings, cmd: PluginCommand) -> anyhow::Result<Exit> {
    match cmd {
        PluginCommand::Add { file, name } => {
            let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display())).map_err(bad)?;
            let sandbox = guests::sandbox(settings)?;
            let registry = guests::registry(settings);
            // A command guest has no describe(): default to the file stem.
            let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned());
            let guest = sandbox.load(&bytes).map_err(sandbox_error)?;
            let name = match (name, guest.kind()) {
                (Some(n), _) => Some(n),
                (None, weft_sandbox::GuestKindName::Command) => stem,
                (None, weft_sandbox::GuestKindName::Component) => None,
            };
            let entry = registry.add(&sandbox, &bytes, name.as_deref()).map_err(sandbox_error)?;
            eprintln!("added plugin `{}` (sha256:{})", entry.name, &entry.digest[..12]);
            output::json(&entry);
            Ok(Exit::Success)
        }
        PluginCommand::List { json } => {
            let sandbox = guests::sandbox(settings)?;
            let registry = guests::registry(settings);
            let list = registry.list(&sandbox).map_err(sandbox_error)?;
            if json {
                output::json(&list);
            } else {
                outln!("{:<20} {:<8} {:<10} {:<8} DESCRIPTION", "NAME", "SOURCE", "KIND", "VERSION");
                for p in &list {
                    let (kind, version, desc) = match &p.metadata {
                        Some(m) => ("component", m.version.as_str(), m.description.lines().next().unwrap_or("")),
                        None => ("command", "-", "(WASI command)"),
                    };
                    let source = serde_json::to_value(p.source).ok().and_then(|v| v.as_str().map(String::from));
                    outln!("{:<20} {:<8} {:<10} {:<8} {}", p.name, source.unwrap_or_default(), kind, version, desc);
                }
            }
            Ok(Exit::Success)
        }
        PluginCommand::Inspect { guest } => inspect(settings, &guest),
    }
}

/// Prints what a guest is and declares.
pub(super) fn inspect(settings: &Settings, what: &str) -> anyhow::Result<Exit> {
    let registry = guests::registry(settings);
    let found = guests::find(&registry, what).map_err(find_error)?;
    let sandbox = guests::sandbox(settings)?;
    let size = found.bytes.size().map_err(sandbox_error)?;
    let guest = sandbox.load_pinned(found.digest, found.bytes).map_err(sandbox_error)?;
    let metadata = sandbox.describe(&guest).map_err(|e| sandbox_error(e.into()))?;
    let source = match &found.origin {
        Origin::File(p) => json!({"file": p}),
        Origin::Plugin(s) => json!({"plugin": s}),
        Origin::Digest => json!("store"),
    };
    let mut out = json!({
        "name": metadata.as_ref().map(|m| m.name.clone()).unwrap_or(found.name.clone()),
        "kind": guest.kind(),
        "digest": format!("sha256:{}", found.digest),
        "size": size,
        "source": source,
    });
    if let Some(m) = metadata {
        out["description"] = m.description.into();
        out["version"] = m.version.into();
        out["input_schema"] = m.input_schema.unwrap_or(serde_json::Value::Null);
        out["output_schema"] = m.output_schema.unwrap_or(serde_json::Value::Null);
    } else {
        out["io"] = json!("stdin: input JSON; stdout: output JSON; stderr: log lines; env: WEFT_* context");
    }
    output::json(&out);
    Ok(Exit::Success)
}
