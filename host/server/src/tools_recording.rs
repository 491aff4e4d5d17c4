//! Recording mode: `recording_start`, `step_preset`, `recording_save` and
//! `recording_stop`. While a session records, each proxied call it makes
//! (see `proxy_tools.rs`) becomes a step of its recording; the recording is
//! journaled to `<data_dir>/recordings/<run_id>.json` after every step, so
//! a crash loses nothing. Saving turns it into a template (post-hoc
//! templatization: literals equal to input values or earlier outputs become
//! refs, each listed and refusable); saving or stopping stores it as an
//! ordinary completed run (`weft runs show`). A journal left by a crash, or
//! by a session that ended while recording, is stored the same way (as a
//! run, without a template) when `weft serve` starts or the session ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use weft_engine::clock::system_now_ms as now_ms;

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::recorded::{DoneStep, completed_run};
use weft_engine::store::NewRun;
use weft_engine::{RunId, SeededRng};

use super::errors::ToolError;
use super::{Change, Core, WeftServer, prepare, wf_tools};
use crate::recording::{RecordedStep, Recording, Replacement};

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
    pub async fn record(
        &mut self,
        core: &Core,
        name: String,
        tool: Option<(String, String)>,
        arguments: Value,
        output: Value,
        started: i64,
    ) {
        self.recording.push(RecordedStep { name, tool, arguments, output });
        self.timings.push((started, now_ms()));
        if let Err(e) = self.write_journal(core) {
            tracing::error!(recording = %self.id, "cannot journal the recording: {e}");
        }
    }

    fn write_journal(&self, core: &Core) -> std::io::Result<()> {
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
        let definition = definition.unwrap_or_else(|| self.recording.definition(&self.name, &[]));
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
        };
        let steps: Vec<DoneStep> = self
            .recording
            .steps
            .iter()
            .zip(&self.timings)
            .map(|(s, (a, b))| DoneStep {
                name: s.name.clone(),
                output: s.output.clone(),
                started_at: *a,
                ended_at: *b,
                how: if s.tool.is_some() { "recorded" } else { "preset" },
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

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StartParams {
    /// A name for the recording (the run's template name until it is saved
    /// under another). Default `recording`.
    #[serde(default)]
    pub name: Option<String>,
    /// The recording's input: refs `@input.key` in later calls resolve
    /// against it, and values equal to its values become `@input` refs
    /// when the recording is saved.
    #[serde(default)]
    pub input: Option<Value>,
}

/// A recording that started.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StartOut {
    /// The id of the run the recording becomes.
    pub recording_id: String,
    pub name: String,
    /// What to do next.
    pub note: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PresetParams {
    /// The step's name (letters, digits, `_`; not starting with a digit).
    /// Default `preset_<n>`.
    #[serde(default)]
    pub name: Option<String>,
    /// The step's output, as if it had run.
    pub output: Value,
}

/// A preset step.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PresetOut {
    /// Its name: later calls may use `@<step>` refs to its output.
    pub step: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SaveParams {
    /// The template to save the recording as (a new version if it exists).
    pub template: String,
    /// Ids of proposed replacements (`r1`, ...) to refuse: those literals
    /// stay literal.
    #[serde(default)]
    pub refuse: Vec<String>,
    /// Only propose: return the definition and the replacements, store
    /// nothing, keep recording.
    #[serde(default)]
    pub dry_run: bool,
    /// A description for the template.
    #[serde(default)]
    pub description: Option<String>,
}

/// A proposed replacement and whether it was applied.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReplacementOut {
    /// `r1`, ...: pass to `refuse` to keep the literal.
    pub id: String,
    pub step: String,
    /// JSON Pointer into the step's input.
    pub path: String,
    /// The literal that was recorded.
    pub value: Value,
    /// The ref that replaces it.
    pub reference: String,
    pub applied: bool,
}

/// A saved (or proposed) template.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SaveOut {
    pub template: String,
    /// The version saved (absent for a dry run).
    pub version: Option<u32>,
    /// The tool that replays it (absent for a dry run).
    pub tool: Option<String>,
    /// The recording's run (absent for a dry run).
    pub run_id: Option<String>,
    /// Every proposed replacement.
    pub replacements: Vec<ReplacementOut>,
    /// The template's definition.
    pub definition: Value,
}

/// A stopped recording.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StopOut {
    /// Its run.
    pub run_id: String,
    /// How many steps it recorded.
    pub steps: usize,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct NoParams {}

fn not_recording() -> ToolError {
    ToolError::new("this session is not recording").fix("call recording_start first")
}

#[tool_router(router = recording_router, vis = "pub(super)")]
impl WeftServer {
    #[tool(
        description = "Start recording this session: every proxied tool call (`<server>__<tool>`) you make from now on becomes a step of a workflow. Arguments may hold refs to earlier results (`@echo_1`, `@write_file_1.content`) or to the recording's input (`@input.key`); each result's `_meta` names its step as `dev.weft/step`. Finish with recording_save (a template you can replay with new input) or recording_stop.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn recording_start(&self, Parameters(p): Parameters<StartParams>) -> Result<Json<StartOut>, ToolError> {
        let mut slot = self.session.recording.lock().await;
        if let Some(a) = slot.as_ref() {
            return Err(ToolError::new(format!("this session is already recording (`{}`, {})", a.name, a.id))
                .fix("save it with recording_save or end it with recording_stop first"));
        }
        let name = p.name.unwrap_or_else(|| "recording".into());
        if name.trim().is_empty() {
            return Err(ToolError::new("`name` is empty").fix("give the recording a name, or leave `name` out"));
        }
        let input = p.input.unwrap_or_else(|| Value::Object(Default::default()));
        let now = now_ms();
        let id = RunId::generate(now, &SeededRng::from_entropy());
        let active = Active {
            id: id.clone(),
            name: name.clone(),
            started_at: now,
            recording: Recording::new(input),
            timings: vec![],
        };
        active.write_journal(&self.core).map_err(ToolError::internal)?;
        *slot = Some(active);
        drop(slot);
        // A session that ends while recording keeps what it recorded.
        let (rec, core, closed) = (self.session.recording.clone(), self.core.clone(), self.session.closed.clone());
        tokio::spawn(async move {
            closed.cancelled().await;
            if let Some(a) = rec.lock().await.take() {
                let _ = a.store(&core, None, None).await;
            }
        });
        Ok(Json(StartOut {
            recording_id: id.to_string(),
            name,
            note: "call upstream tools as `<server>__<tool>`; then recording_save {template} or recording_stop".into(),
        }))
    }

    #[tool(
        description = "Add a step with a known output to the recording without calling anything (inject data, mock a step). Later calls may refer to it as `@<step>`.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn step_preset(&self, Parameters(p): Parameters<PresetParams>) -> Result<Json<PresetOut>, ToolError> {
        let mut slot = self.session.recording.lock().await;
        let active = slot.as_mut().ok_or_else(not_recording)?;
        let step = match p.name {
            Some(n) => {
                let ok = n.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !["input", "item", "index", "run"].contains(&n.as_str());
                if !ok {
                    return Err(ToolError::new(format!("`{n}` is not a valid step name"))
                        .fix("use letters, digits and `_`, not starting with a digit (not input/item/index/run)"));
                }
                if active.recording.steps.iter().any(|s| s.name == n) {
                    return Err(ToolError::new(format!("the recording already has a step `{n}`"))
                        .fix("pick another name, or leave `name` out"));
                }
                n
            }
            None => active.recording.next_name("preset"),
        };
        active.record(&self.core, step.clone(), None, Value::Null, p.output, now_ms()).await;
        Ok(Json(PresetOut { step }))
    }

    #[tool(
        description = "Save the session's recording as a template and end the recording. Literal arguments equal to an input value or an earlier step's output are proposed as refs, so a replay with new input flows through; the result lists each replacement (refuse some by id with `refuse`, or look first with dry_run: true). The recording is stored as a completed run; the template appears as the tool wf_<template>.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn recording_save(&self, Parameters(p): Parameters<SaveParams>) -> Result<Json<SaveOut>, ToolError> {
        let mut slot = self.session.recording.lock().await;
        let active = slot.as_ref().ok_or_else(not_recording)?;
        if active.recording.steps.is_empty() {
            return Err(ToolError::new("the recording has no steps yet")
                .fix("call an upstream tool (`<server>__<tool>`) or step_preset first"));
        }
        let proposals = active.recording.propose();
        if let Some(bad) = p.refuse.iter().find(|id| !proposals.iter().any(|r| &r.id == *id)) {
            let ids: Vec<&str> = proposals.iter().map(|r| r.id.as_str()).collect();
            return Err(ToolError::new(format!("`refuse` names `{bad}`, which is not a proposed replacement")).fix(
                format!(
                    "the proposals are: {} (see a dry_run)",
                    if ids.is_empty() { "none".into() } else { ids.join(", ") }
                ),
            ));
        }
        let accepted: Vec<Replacement> = proposals.iter().filter(|r| !p.refuse.contains(&r.id)).cloned().collect();
        let mut definition = active.recording.definition(&p.template, &accepted);
        if let Some(d) = &p.description {
            definition["description"] = Value::String(d.clone());
        }
        let replacements = proposals
            .iter()
            .map(|r| ReplacementOut {
                id: r.id.clone(),
                step: r.step.clone(),
                path: r.path.clone(),
                value: r.value.clone(),
                reference: r.reference.clone(),
                applied: !p.refuse.contains(&r.id),
            })
            .collect();
        if p.dry_run {
            return Ok(Json(SaveOut {
                template: p.template,
                version: None,
                tool: None,
                run_id: None,
                replacements,
                definition,
            }));
        }
        let (doc, name) = prepare::for_template(&self.core, definition).await?;
        let version = self.core.store.save_template(&name, &doc, now_ms()).await.map_err(ToolError::internal)?;
        let active = slot.take().expect("checked above");
        active.store(&self.core, Some((name.clone(), version)), Some(doc.clone())).await?;
        self.core.changed(Change::Templates);
        Ok(Json(SaveOut {
            tool: Some(wf_tools::tool_name(&name)),
            template: name,
            version: Some(version),
            run_id: Some(active.id.to_string()),
            replacements,
            definition: doc,
        }))
    }

    #[tool(
        description = "End the session's recording without saving a template; it is stored as a completed run (see run_get).",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn recording_stop(&self, Parameters(_): Parameters<NoParams>) -> Result<Json<StopOut>, ToolError> {
        let mut slot = self.session.recording.lock().await;
        let active = slot.take().ok_or_else(not_recording)?;
        active.store(&self.core, None, None).await?;
        Ok(Json(StopOut { run_id: active.id.to_string(), steps: active.recording.steps.len() }))
    }
}

/// Shared so the session's end can store an unfinished recording.
pub type RecordingSlot = Arc<tokio::sync::Mutex<Option<Active>>>;
