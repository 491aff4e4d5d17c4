//! A session's recording in progress ([`Active`]) and its journal: the
//! recording is written to `<data_dir>/recordings/<run_id>.json` after
//! every step (atomically), so a crash loses nothing; a journal left by a
//! crash, or by a session that ended while recording, is stored as a run
//! ([`recover_journals`]). The tools that drive it are
//! `mcp/tools/recording.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::RunId;
use weft_engine::clock::system_now_ms as now_ms;
use weft_engine::recorded::{DoneStep, completed_run};
use weft_engine::store::NewRun;

use super::{RecordedStep, Recording};
use crate::Core;
use crate::mcp::errors::ToolError;

/// A session's recording in progress (and its journal file's content).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Active {
    /// The id its run gets when stored.
    pub id: RunId,
    /// `recording_start`'s `name`.
    pub name: String,
    pub started_at: i64,
    pub recording: Recording,
    /// (started_at, ended_at) of each step.
    pub timings: Vec<(i64, i64)>,
}

impl Active {
    fn journal(core: &Core, id: &RunId) -> PathBuf {
        journal_dir(&core.settings.data_dir).join(format!("{id}.json"))
    }

    /// Appends a step and rewrites the journal (atomically).
    pub async fn record(&mut self, core: &Core, step: RecordedStep, started: i64) {
        self.recording.push(step);
        self.timings.push((started, now_ms()));
        self.journal_now(core);
    }

    /// Rewrites the journal, logging a failure (the recording goes on).
    pub(crate) fn journal_now(&self, core: &Core) {
        if let Err(e) = self.write_journal(core) {
            tracing::error!(recording = %self.id, "cannot journal the recording: {e}");
        }
    }

    pub(crate) fn write_journal(&self, core: &Core) -> std::io::Result<()> {
        let path = Self::journal(core, &self.id);
        std::fs::create_dir_all(path.parent().expect("a journal has a folder"))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(self).map_err(std::io::Error::other)?)?;
        std::fs::rename(tmp, path)
    }

    /// Stores the recording as a completed run (template `template` at
    /// `version` with `definition`, or the recording's own name and plan),
    /// then removes its journal.
    pub async fn store(
        &self,
        core: &Core,
        template: Option<(String, u32)>,
        definition: Option<Value>,
    ) -> Result<(), ToolError> {
        let definition = definition.unwrap_or_else(|| self.recording.definition(&self.name, &[], true, &[]));
        let (template, version) = match template {
            Some((t, v)) => (t, Some(v)),
            None => (self.name.clone(), None),
        };
        let run = NewRun {
            id: self.id.clone(),
            template,
            version,
            definition: std::sync::Arc::new(definition),
            input: self.recording.input.clone(),
            parent: None,
            depth: 0,
            concurrency_key: None,
            created_at: self.started_at,
            deadline_at: None,
            traceparent: None,
            labels: Default::default(),
        };
        let steps: Vec<DoneStep> = self
            .recording
            .steps
            .iter()
            .zip(&self.timings)
            .map(|(s, (a, b))| {
                let called = s.tool.is_some() || s.code.is_some();
                DoneStep {
                    name: s.name.clone(),
                    input: called.then(|| s.input.clone()),
                    output: s.output.clone(),
                    started_at: *a,
                    ended_at: *b,
                    how: if called { "recorded" } else { "preset" },
                }
            })
            .collect();
        let output = self.recording.steps.last().map(|s| s.output.clone()).unwrap_or(Value::Null);
        let batch = completed_run(run, &steps, output, now_ms()).map_err(ToolError::internal)?;
        core.store.commit(batch).await.map_err(ToolError::internal)?;
        let _ = std::fs::remove_file(Self::journal(core, &self.id));
        Ok(())
    }
}

fn journal_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("recordings")
}

/// Stores every recording a previous process left unfinished as a run.
pub async fn recover_journals(core: &Core) {
    let Ok(entries) = std::fs::read_dir(journal_dir(&core.settings.data_dir)) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let active: Option<Active> = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok());
        match active {
            Some(a) => match a.store(core, None, None).await {
                Ok(()) => tracing::warn!(run = %a.id, "stored an interrupted recording as a run"),
                Err(err) => tracing::error!(file = %path.display(), "cannot store an interrupted recording: {err}"),
            },
            None => tracing::error!(file = %path.display(), "an unreadable recording journal was left in place"),
        }
    }
}

/// Shared so the session's end can store an unfinished recording.
pub type RecordingSlot = Arc<tokio::sync::Mutex<Option<Active>>>;
