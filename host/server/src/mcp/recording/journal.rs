//! A session's recording in progress ([`Active`]) and where it is kept:
//! a run in state `recording` in the store, which holds the recording as
//! its output, rewritten after every step (so a kill loses nothing, and
//! the recording outlives the session that made it). Any session may list
//! open recordings and reopen one (`recording_list`, `recording_open`);
//! within one process a recording is held by one session at a time, and
//! each write checks that the stored recording is the one this session
//! read (its `revision`), so two processes cannot silently overwrite each
//! other. Saved or stopped, it is stored again as a completed run under
//! the same id. Journal files of older versions
//! (`<data_dir>/recordings/<id>.json`) are stored as completed runs at
//! start ([`recover_journals`]). The tools that drive it are
//! `mcp/tools/recording.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::clock::system_now_ms as now_ms;
use weft_engine::recorded::{DoneStep, completed_run, open_recording, recording_holds, saved_recording};
use weft_engine::store::{Batch, NewRun};
use weft_engine::{RunId, RunState};

use super::{RecordedStep, Recording};
use crate::Core;
use crate::mcp::errors::ToolError;

/// A session's recording in progress (and what its run holds).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Active {
    /// Its run's id.
    pub id: RunId,
    /// `recording_start`'s `name`.
    pub name: String,
    pub started_at: i64,
    pub recording: Recording,
    /// (started_at, ended_at) of each step.
    pub timings: Vec<(i64, i64)>,
    /// How many times it was written: a write expects the stored one to be
    /// the one this session has.
    #[serde(default)]
    pub revision: u64,
}

impl Active {
    /// Opens the recording: its run is created in state `recording`.
    pub async fn open(&self, core: &Core) -> Result<(), ToolError> {
        let batch = open_recording(self.new_run(None, None, None), self.body()).map_err(ToolError::internal)?;
        core.store.commit(batch).await.map_err(ToolError::internal)?;
        Ok(())
    }

    /// The open recording run `id` holds, if it is one.
    pub async fn load(core: &Core, id: &RunId) -> Result<Active, ToolError> {
        let rec = core.store.run(id).await.map_err(ToolError::internal)?;
        let rec =
            rec.ok_or_else(|| ToolError::new(format!("no run {id}")).fix("recording_list lists the open recordings"))?;
        if rec.state != RunState::Recording {
            return Err(ToolError::new(format!("run {id} is not an open recording (it is {})", rec.state))
                .fix("recording_list lists the open recordings; a saved recording is a run (run_get)"));
        }
        let body = rec.output.unwrap_or(Value::Null);
        serde_json::from_value(body).map_err(|e| ToolError::internal(format!("the recording {id} does not read: {e}")))
    }

    /// Appends a step and writes the recording; `Err` says why it could
    /// not be kept (the step stays in this session's recording).
    pub async fn record(&mut self, core: &Core, step: RecordedStep, started: i64) -> Result<(), ToolError> {
        self.recording.push(step);
        self.timings.push((started, now_ms()));
        self.keep(core).await
    }

    /// Writes the recording to its run, if the stored one is still the one
    /// this session read.
    pub(crate) async fn keep(&mut self, core: &Core) -> Result<(), ToolError> {
        let stored = Active::load(core, &self.id).await?;
        if stored.revision != self.revision {
            return Err(ToolError::new(format!(
                "recording {} was changed by another session (revision {} here, {} stored): this change was not kept",
                self.id, self.revision, stored.revision
            ))
            .fix("recording_open it again to continue from what is stored"));
        }
        self.revision += 1;
        let write = recording_holds(&self.id, self.body(), now_ms()).map_err(ToolError::internal)?;
        if let Err(e) = core.store.commit(Batch { writes: vec![write] }).await {
            self.revision -= 1;
            return Err(ToolError::new(format!("the recording could not be kept: {e}"))
                .fix("try again; recording_list shows whether it is still open"));
        }
        Ok(())
    }

    fn body(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    fn new_run(&self, template: Option<String>, version: Option<u32>, definition: Option<Value>) -> NewRun {
        let definition = definition.unwrap_or_else(|| self.recording.definition(&self.name, &[], true, &[]));
        NewRun {
            id: self.id.clone(),
            template: template.unwrap_or_else(|| self.name.clone()),
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
        }
    }

    /// The recording's steps as done steps of a run.
    fn done_steps(&self) -> Vec<DoneStep> {
        self.recording
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
            .collect()
    }

    /// Stores the recording as a completed run in place of its open run
    /// (template `template` at `version` with `definition`, or the
    /// recording's own name and plan); refused when it is no longer open.
    pub async fn store(
        &self,
        core: &Core,
        template: Option<(String, u32)>,
        definition: Option<Value>,
    ) -> Result<(), ToolError> {
        let (template, version) = template.map_or((None, None), |(t, v)| (Some(t), Some(v)));
        let run = self.new_run(template, version, definition);
        let output = self.recording.steps.last().map(|s| s.output.clone()).unwrap_or(Value::Null);
        let batch = saved_recording(run, &self.done_steps(), output, now_ms()).map_err(ToolError::internal)?;
        core.store.commit(batch).await.map_err(|e| match e {
            weft_engine::StoreError::Conflict(_) => ToolError::new(format!(
                "recording {} is no longer open (another session saved or discarded it)",
                self.id
            ))
            .fix("run_get shows what became of it"),
            e => ToolError::internal(e),
        })?;
        Ok(())
    }
}

// The open recordings (no doc comments here: they would be repeated in
// tools/list).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ListOut {
    pub recordings: Vec<OpenRecording>,
}

// An open recording: its run, name, steps so far, and whether a session
// of this process records into it now (`held`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct OpenRecording {
    pub run_id: String,
    pub name: String,
    pub steps: Vec<String>,
    pub started_at: String,
    pub updated_at: String,
    pub held: bool,
}

/// The open recordings (at most 100, newest first), for `recording_list`
/// and `GET /api/v1/recordings`.
pub async fn open_recordings(core: &Core) -> Result<Vec<OpenRecording>, weft_engine::StoreError> {
    let filter =
        weft_engine::store::RunFilter { state: Some(RunState::Recording), limit: Some(100), ..Default::default() };
    let runs = core.store.list_runs(&filter).await?;
    let held = core.held_recordings.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut out = vec![];
    for r in runs {
        let Ok(a) = Active::load(core, &r.id).await else { continue };
        out.push(OpenRecording {
            run_id: r.id.to_string(),
            name: a.name,
            steps: a.recording.steps.iter().map(|s| s.name.clone()).collect(),
            started_at: weft_engine::clock::rfc3339(a.started_at),
            updated_at: weft_engine::clock::rfc3339(r.updated_at),
            held: held.contains(&r.id),
        });
    }
    Ok(out)
}

/// The session's recording `slot`, checked to be still open: when its run
/// was saved, stopped or discarded elsewhere (`run_cancel`, another
/// server), the session lets go of it and the error says so (nothing was
/// done). An empty slot is fine.
pub async fn ensure_open(core: &Core, slot: &mut Option<Active>) -> Result<(), ToolError> {
    let Some(a) = slot.as_ref() else { return Ok(()) };
    let state = match core.store.run(&a.id).await {
        Ok(Some(r)) if r.state == RunState::Recording => return Ok(()),
        Ok(Some(r)) => r.state.to_string(),
        Ok(None) => "gone".to_string(),
        Err(e) => return Err(ToolError::internal(e)),
    };
    let id = a.id.clone();
    *slot = None;
    core.held_recordings.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    Err(ToolError::new(format!(
        "this session's recording {id} is no longer open (it is {state}): the session stopped recording, and nothing was done now"
    ))
    .fix(format!("call again to do it without recording, or recording_start a new recording; run_get {{\"run_id\": \"{id}\"}} shows what became of it")))
}

fn journal_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("recordings")
}

/// Stores every recording journal an older version left unfinished as a
/// completed run (this version keeps recordings in the store).
pub async fn recover_journals(core: &Core) {
    let Ok(entries) = std::fs::read_dir(journal_dir(&core.settings.data_dir)) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let active: Option<Active> = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok());
        match active {
            Some(a) => {
                let stored = async {
                    let run = a.new_run(None, None, None);
                    let output = a.recording.steps.last().map(|s| s.output.clone()).unwrap_or(Value::Null);
                    let batch = completed_run(run, &a.done_steps(), output, now_ms()).map_err(|e| e.to_string())?;
                    core.store.commit(batch).await.map_err(|e| e.to_string())
                };
                match stored.await {
                    Ok(()) => {
                        let _ = std::fs::remove_file(&path);
                        tracing::warn!(run = %a.id, "stored an older version's interrupted recording as a run");
                    }
                    Err(err) => tracing::error!(file = %path.display(), "cannot store an interrupted recording: {err}"),
                }
            }
            None => tracing::error!(file = %path.display(), "an unreadable recording journal was left in place"),
        }
    }
}

/// Shared so the session's end can store an unfinished recording.
pub type RecordingSlot = Arc<tokio::sync::Mutex<Option<Active>>>;
