//! `weft templates save FILE | list | show NAME [--version N] | delete NAME`:
//! versioned workflow definitions in the store. Saving a definition under
//! an existing name adds a version; `weft run NAME` runs the latest one and
//! the run pins that version. Code steps that name a file are pinned by
//! digest when saved (a template has no folder to resolve paths against);
//! plugin names stay names until a run pins them.

use std::path::PathBuf;
use weft_engine::clock::system_now_ms as now_ms;

use clap::Subcommand;
use serde_json::json;
use weft_engine::clock::rfc3339;
use weft_engine::store::TemplateRecord;

use super::{Exit, bad, output};
use weft_runtime::app::App;
use weft_runtime::config::Settings;

#[derive(Debug, Subcommand)]
pub enum TemplatesCommand {
    /// Validate a definition file and save it as the next version of its `name`.
    Save {
        /// The definition file (JSON).
        file: PathBuf,
    },
    /// The latest version of every template.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// A template's definition (its latest version unless --version).
    #[command(disable_version_flag = true)]
    Show {
        /// The template's name.
        name: String,
        /// A specific version.
        #[arg(long)]
        version: Option<u32>,
    },
    /// Delete every version of a template (runs keep their pinned plan).
    Delete {
        /// The template's name.
        name: String,
    },
}

fn record_json(t: &TemplateRecord, with_definition: bool) -> serde_json::Value {
    let mut v = json!({"name": t.name, "version": t.version, "created_at": rfc3339(t.created_at)});
    if let Some(d) = t.definition.get("description") {
        v["description"] = d.clone();
    }
    if with_definition {
        v["definition"] = t.definition.clone();
    }
    v
}

pub fn run(settings: &Settings, cmd: TemplatesCommand) -> anyhow::Result<Exit> {
    match cmd {
        TemplatesCommand::Save { file } => {
            let what = file.display().to_string();
            // Checked offline first: a definition with problems touches no store.
            let pipeline = super::prepare::pipeline(settings)?;
            pipeline.load_file(&file).map_err(|r| super::prepare::refused(r, &what, false))?;
            let app = App::open(settings)?;
            let saving = app
                .block_on(app.pipeline()?.for_template(weft_runtime::pipeline::Source::File(file.clone())))
                .map_err(|r| super::prepare::refused(r, &what, false))?;
            for w in &saving.warnings {
                eprintln!("warning: {what}: {w}");
            }
            let (doc, name) = (saving.doc, saving.name);
            let version = app.block_on(app.store.save_template(&name, &doc, now_ms()))?;
            app.shutdown_upstreams();
            eprintln!("saved template {name} version {version}");
            output::json(&json!({"name": name, "version": version}));
            Ok(Exit::Success)
        }
        TemplatesCommand::List { json } => {
            let app = App::open(settings)?;
            let all = app.block_on(app.store.list_templates())?;
            if json {
                output::json(&all.iter().map(|t| record_json(t, false)).collect::<Vec<_>>());
            } else if all.is_empty() {
                eprintln!("no templates (save one with `weft templates save FILE`)");
            } else {
                let w = all.iter().map(|t| t.name.len()).max().unwrap_or(0).max(4);
                outln!("{:<w$}  {:>7}  {:<24}  DESCRIPTION", "NAME", "VERSION", "SAVED");
                for t in &all {
                    let d = t.definition.get("description").and_then(|d| d.as_str()).unwrap_or("");
                    outln!("{:<w$}  {:>7}  {:<24}  {d}", t.name, t.version, rfc3339(t.created_at));
                }
            }
            Ok(Exit::Success)
        }
        TemplatesCommand::Show { name, version } => {
            let app = App::open(settings)?;
            let t = app.block_on(app.store.template(&name, version))?.ok_or_else(|| match version {
                Some(v) => bad(anyhow::anyhow!("no version {v} of template `{name}` (see `weft templates list`)")),
                None => bad(anyhow::anyhow!("no template `{name}` (see `weft templates list`)")),
            })?;
            output::json(&record_json(&t, true));
            Ok(Exit::Success)
        }
        TemplatesCommand::Delete { name } => {
            let app = App::open(settings)?;
            let n = app.block_on(app.store.delete_template(&name))?;
            if n == 0 {
                return Err(bad(anyhow::anyhow!("no template `{name}` (see `weft templates list`)")));
            }
            eprintln!("deleted template {name} ({n} version{})", if n == 1 { "" } else { "s" });
            Ok(Exit::Success)
        }
    }
}
