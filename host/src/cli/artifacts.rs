//! `weft runs artifacts RUN [--out DIR]`: the files a run's steps produced
//! (a guest's `artifact(...)`, a WASI command's `$weft` envelope), listed,
//! or written into a folder after checking each against its sha256.

use std::path::Path;

use anyhow::Context;
use sha2::Digest as _;
use weft_engine::RunRecord;
use weft_engine::view::artifact_json;

use super::{Exit, bad, output};
use weft_runtime::app::App;

pub fn artifacts(app: &App, rec: &RunRecord, out: Option<&Path>, json: bool) -> anyhow::Result<Exit> {
    let Some(dir) = out else {
        if json {
            output::json(&serde_json::Value::Array(rec.artifacts.iter().map(artifact_json).collect()));
        } else if rec.artifacts.is_empty() {
            eprintln!("run {} has no artifacts", rec.id);
        } else {
            for a in &rec.artifacts {
                let item = a.item.map(|i| format!(" item {i}")).unwrap_or_default();
                outln!(
                    "{}\t{}\t{} bytes\t{}{item} (attempt {})\t{}",
                    a.name,
                    a.mime,
                    a.size,
                    a.step,
                    a.attempt,
                    &a.sha256[..12]
                );
            }
        }
        return Ok(Exit::Success);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display())).map_err(bad)?;
    let mut written = vec![];
    for a in &rec.artifacts {
        // Names were checked when stored (a plain file name); check again
        // before it becomes a path.
        weft_engine::size_limits::artifact_name(&a.name).map_err(|why| anyhow::anyhow!("artifact refused: {why}"))?;
        let (_, data) = app
            .block_on(app.store.artifact(&rec.id, &a.name))?
            .with_context(|| format!("artifact `{}` of {} is gone", a.name, rec.id))?;
        let sha = hex::encode(sha2::Sha256::digest(&data));
        anyhow::ensure!(sha == a.sha256, "artifact `{}` does not match its sha256 (the store is damaged)", a.name);
        let path = dir.join(&a.name);
        std::fs::write(&path, &data).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {} ({} bytes)", path.display(), data.len());
        written.push(path.display().to_string());
    }
    if json {
        output::json(&serde_json::json!(written));
    }
    if written.is_empty() {
        eprintln!("run {} has no artifacts", rec.id);
    }
    Ok(Exit::Success)
}
