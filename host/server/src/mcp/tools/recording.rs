//! Recording mode: `recording_start`, `recording_list`, `recording_open`,
//! `step_preset`, `step_code`, `recording_remove_step`, `recording_save`
//! and `recording_stop`. While a session records, each proxied call it
//! makes (see `proxy_tools.rs`) and each plugin it runs (`step_code`)
//! becomes a step of its recording, kept after every step in the
//! recording's run (state `recording`, see `recording/journal.rs`), so a
//! kill loses nothing and the recording outlives the session: any session
//! reopens it. Saving turns it into a template (post-hoc templatization:
//! literals equal to input values or earlier outputs become refs, each
//! listed and refusable); saving or stopping stores it as an ordinary
//! completed run (`weft runs show`) under the same id.

use std::sync::Arc;
use weft_engine::clock::system_now_ms as now_ms;

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::{RunId, SeededRng};

use crate::Change;
use crate::Core;
use crate::WeftServer;
use crate::mcp::errors::ToolError;
use crate::mcp::prepare;
use crate::mcp::recording::journal::{Active, ListOut, ensure_open, open_recordings};
use crate::mcp::recording::save::{PlanRefused, SaveOut, SaveParams, plan};
use crate::mcp::recording::{RecordedStep, Recording};
use crate::mcp::wf_tools;

impl Core {
    /// Runs `code` once on `input`, outside any run (as step `step` of the
    /// recording `id`): its output, or an error saying why it failed.
    pub async fn run_code(
        &self,
        id: &RunId,
        step: &str,
        code: weft_model::CodeRef,
        input: Value,
    ) -> Result<Value, ToolError> {
        use weft_engine::{AttemptNo, CancelToken, StepOutput, StepRequest, StepRunner};
        let req = StepRequest {
            run: id.clone(),
            step: step.to_string(),
            item: None,
            attempt: AttemptNo::FIRST,
            idempotency_key: weft_engine::ids::idempotency_key(id, step, None, AttemptNo::FIRST),
            deadline_ms: None,
            action: weft_model::Action::Code(code),
            priority: 0,
            input,
            limits: None,
            run_fuel_left: None,
            transform: None,
            events: Arc::new(weft_engine::runner::NoEvents),
            trace: None,
            answer: None,
        };
        match self.code.run(req, CancelToken::new()).await {
            Ok(StepOutput::Done(v)) => Ok(v),
            Ok(StepOutput::Reject(why)) => Err(ToolError::new(format!("the plugin rejected the input: {why}"))),
            // A code step never asks; only agent steps do.
            Ok(StepOutput::Ask(_)) => {
                Err(ToolError::new("the plugin asked for input, which a recorded call cannot give"))
            }
            Err(e) => {
                let fix = match e.kind {
                    weft_engine::ErrorKind::Validation => "plugin_list shows the plugins and their input schemas",
                    _ => "check the input against the plugin's input schema (plugin_list); nothing was recorded",
                };
                Err(ToolError::new(format!("the plugin failed ({}): {}", e.kind.as_str(), e.message)).fix(fix))
            }
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
pub struct CodeParams {
    /// The plugin to run (plugin_list shows them with their input schemas).
    /// Give this or `sha256`.
    #[serde(default)]
    pub plugin: Option<String>,
    /// A module the operator stored, by its digest (64 hex digits; a
    /// saved template's pinned code steps show them), instead of `plugin`.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Its input. Refs to recorded steps (`@echo_1.field`) and to the
    /// recording's input (`@input.key`) are resolved first.
    #[serde(default)]
    pub input: Option<Value>,
    /// The step's name (letters, digits, `_`). Default `<plugin>_<n>`.
    #[serde(default)]
    pub name: Option<String>,
}

/// A plugin's result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CodeOut {
    /// The step it became (absent when no recording is in progress).
    pub step: Option<String>,
    /// The plugin's output.
    pub output: Value,
    /// What was recorded.
    pub note: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RemoveParams {
    /// The step to remove. Default: the last one.
    #[serde(default)]
    pub step: Option<String>,
}

/// A removed step.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RemoveOut {
    pub removed: String,
    /// The recording's steps now, in call order.
    pub steps: Vec<String>,
    pub note: String,
}

/// A stopped recording.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct OpenParams {
    pub run_id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct OpenOut {
    pub run_id: String,
    pub name: String,
    pub steps: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StopOut {
    /// Its run.
    pub run_id: String,
    /// How many steps it recorded.
    pub steps: usize,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct NoParams {}

impl WeftServer {
    /// This session holds open recording `id` (see `recording_open`).
    fn hold(&self, id: &RunId) {
        self.core.held_recordings.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone());
        self.release_at_end(id);
    }

    /// When the session ends, it lets go of `id` (which stays open).
    fn release_at_end(&self, id: &RunId) {
        let (core, closed, id) = (self.core.clone(), self.session.closed.clone(), id.clone());
        tokio::spawn(async move {
            closed.cancelled().await;
            core.held_recordings.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        });
    }

    /// The recording `id` was saved or stopped: nobody holds it.
    fn release(&self, id: &RunId) {
        self.core.held_recordings.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

/// A save's choices refused, in MCP terms.
fn plan_refused(e: PlanRefused) -> ToolError {
    let fix = match &e {
        PlanRefused::Empty => "call an upstream tool (`<server>__<tool>`), step_code or step_preset first".to_string(),
        PlanRefused::NotProposed { what, known, .. } => format!(
            "the {what}s are: {} (see a dry_run)",
            if known.is_empty() { "none".into() } else { known.join(", ") }
        ),
        PlanRefused::NotRecorded { known, .. } => format!("the recorded steps are: {}", known.join(", ")),
    };
    ToolError::new(e.to_string()).fix(fix)
}

fn not_recording() -> ToolError {
    ToolError::new("this session is not recording").fix("call recording_start first")
}

/// The name a new step of `active` gets: `name` if it is a valid, free
/// step name, else `<stem>_<n>`.
fn step_name(active: &Active, name: Option<String>, stem: &str) -> Result<String, ToolError> {
    let Some(n) = name else { return Ok(active.recording.next_name(stem)) };
    if !weft_model::validate::is_step_name(&n) || weft_model::refs::RESERVED_ROOTS.contains(&n.as_str()) {
        return Err(ToolError::new(format!("`{n}` is not a valid step name"))
            .fix("use letters, digits and `_`, not starting with a digit (not input/item/index/run)"));
    }
    if active.recording.steps.iter().any(|s| s.name == n) {
        return Err(ToolError::new(format!("the recording already has a step `{n}`"))
            .fix("pick another name, leave `name` out, or recording_remove_step it first"));
    }
    Ok(n)
}

/// The code reference of `step_code`'s arguments, as a definition writes it.
fn code_of(p: &CodeParams) -> Result<(weft_model::CodeRef, Value, String), ToolError> {
    use weft_model::CodeRef;
    match (&p.plugin, &p.sha256) {
        (Some(name), None) => {
            Ok((CodeRef::Plugin(name.clone()), serde_json::json!({"plugin": name}), name.clone()))
        }
        (None, Some(hex)) => Ok((CodeRef::Sha256(hex.clone()), serde_json::json!({"sha256": hex}), "code".into())),
        _ => Err(ToolError::new("give exactly one of `plugin` and `sha256`")
            .fix("e.g. {\"plugin\": \"json-select\", \"input\": {\"data\": {\"a\": 1}, \"path\": \"a\"}} (plugin_list shows the plugins)")),
    }
}

#[tool_router(router = recording_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = "Start recording: each proxied tool call (`<server>__<tool>`) you make becomes a workflow step. Arguments may hold refs to earlier results (`@echo_1`) or the recording's input (`@input.key`); each result's `_meta` names its step (`dev.weft/step`). It outlives the session (recording_open). Finish with recording_save or recording_stop.",
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
            revision: 0,
        };
        active.open(&self.core).await?;
        self.hold(&id);
        *slot = Some(active);
        Ok(Json(StartOut {
            recording_id: id.to_string(),
            name,
            note: "call upstream tools as `<server>__<tool>`; then recording_save {template} or recording_stop. The recording is kept as run `recording_id` (state `recording`) after every step: if this session ends, any session can recording_open it".into(),
        }))
    }

    #[tool(
        description = "Open recordings (runs in state `recording`) with their steps; `held`: a session records into it now.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn recording_list(&self, Parameters(_): Parameters<NoParams>) -> Result<Json<ListOut>, ToolError> {
        let recordings = open_recordings(&self.core).await.map_err(ToolError::internal)?;
        Ok(Json(ListOut { recordings }))
    }

    #[tool(
        description = "Continue an open recording (recording_list) in this session: your calls add steps to it.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn recording_open(&self, Parameters(p): Parameters<OpenParams>) -> Result<Json<OpenOut>, ToolError> {
        let mut slot = self.session.recording.lock().await;
        if let Some(a) = slot.as_ref() {
            return Err(ToolError::new(format!("this session is already recording (`{}`, {})", a.name, a.id))
                .fix("save it with recording_save or end it with recording_stop first"));
        }
        let id = weft_runtime::usecase::parse_run_id(&p.run_id).map_err(crate::mcp::prepare::lookup_refused)?;
        let active = Active::load(&self.core, &id).await?;
        {
            let mut held = self.core.held_recordings.lock().unwrap_or_else(|p| p.into_inner());
            if !held.insert(id.clone()) {
                return Err(ToolError::new(format!("recording {id} is held by another session of this server"))
                    .fix("end it there (recording_save or recording_stop), or wait until that session ends"));
            }
        }
        self.release_at_end(&id);
        let steps = active.recording.steps.iter().map(|s| s.name.clone()).collect();
        let name = active.name.clone();
        *slot = Some(active);
        Ok(Json(OpenOut { run_id: id.to_string(), name, steps }))
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
        ensure_open(&self.core, &mut slot).await?;
        let active = slot.as_mut().ok_or_else(not_recording)?;
        let step = step_name(active, p.name, "preset")?;
        let preset = RecordedStep {
            name: step.clone(),
            tool: None,
            code: None,
            arguments: Value::Null,
            input: Value::Null,
            output: p.output,
            read_only: true,
        };
        active.record(&self.core, preset, now_ms()).await?;
        Ok(Json(PresetOut { step }))
    }

    #[tool(
        description = "Run a code plugin now on an input (refs to recorded steps and to the recording's input resolved first) and return its output. While recording, the call becomes a code step of the recording (named `<plugin>_<n>`, or `name`); later calls may refer to it as `@<step>`.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn step_code(&self, Parameters(p): Parameters<CodeParams>) -> Result<Json<CodeOut>, ToolError> {
        let (code, code_json, stem) = code_of(&p)?;
        let arguments = p.input.clone().unwrap_or_else(|| Value::Object(Default::default()));
        let mut slot = self.session.recording.lock().await;
        ensure_open(&self.core, &mut slot).await?;
        let (id, step, input) = match slot.as_ref() {
            Some(active) => {
                let step = step_name(active, p.name.clone(), &stem)?;
                let lookalikes = active.recording.lookalikes(&arguments);
                if !lookalikes.is_empty() {
                    return Err(ToolError::new(format!(
                        "not run, not recorded: the input holds another template language's placeholders, which the plugin would get as text:\n- {}",
                        lookalikes.join("\n- ")
                    ))
                    .fix("write weft refs (`@get_sum_1`, `@input.name`) and call again"));
                }
                let input = active.recording.resolve(&arguments).map_err(|why| {
                    ToolError::new(format!("the input holds a ref that cannot be resolved: {why}"))
                        .fix("refs name recorded steps (`@echo_1.field`) or the recording's input (`@input.key`); write `@@` for a literal `@`")
                })?;
                (active.id.clone(), step, input)
            }
            None => {
                let input = crate::mcp::recording::Recording::default().resolve(&arguments).map_err(|why| {
                    ToolError::new(format!("the input holds a ref, but nothing is recorded to resolve it: {why}"))
                        .fix("start a recording first (recording_start), or pass literal values")
                })?;
                (RunId::generate(now_ms(), &SeededRng::from_entropy()), stem.clone(), input)
            }
        };
        let started = now_ms();
        let output = self.core.run_code(&id, &step, code, input.clone()).await?;
        let Some(active) = slot.as_mut() else {
            let note = "no recording is in progress: nothing was recorded".to_string();
            return Ok(Json(CodeOut { step: None, output, note }));
        };
        let recorded = RecordedStep {
            name: step.clone(),
            tool: None,
            code: Some(code_json),
            arguments,
            input,
            output: output.clone(),
            read_only: true,
        };
        active.record(&self.core, recorded, started).await?;
        let note = format!("recorded as step `{step}`: later calls may refer to `@{step}`");
        Ok(Json(CodeOut { step: Some(step), output, note }))
    }

    #[tool(
        description = "Remove a step from the recording: the last one, or `step`. To replace a call, remove its step and call again (it takes the name back: later refs stay valid). A step others refer to cannot be removed before them.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn recording_remove_step(
        &self,
        Parameters(p): Parameters<RemoveParams>,
    ) -> Result<Json<RemoveOut>, ToolError> {
        let mut slot = self.session.recording.lock().await;
        ensure_open(&self.core, &mut slot).await?;
        let active = slot.as_mut().ok_or_else(not_recording)?;
        let at = p.step.as_deref().and_then(|n| active.recording.steps.iter().position(|s| s.name == n));
        let removed = active.recording.remove(p.step.as_deref()).map_err(|why| {
            ToolError::new(why)
                .fix("recording_save {\"template\": ..., \"dry_run\": true} lists the steps and their arguments")
        })?;
        let at = at.unwrap_or(active.timings.len().saturating_sub(1));
        if at < active.timings.len() {
            active.timings.remove(at);
        }
        active.keep(&self.core).await?;
        let steps = active.recording.steps.iter().map(|s| s.name.clone()).collect();
        let note = format!("removed `{}`; calling the same tool again records it as `{}`", removed.name, removed.name);
        Ok(Json(RemoveOut { removed: removed.name, steps, note }))
    }

    #[tool(
        description = "Save the session's recording as a template and end it (dry_run: true only shows it). Each call is a step (`get_sum_1`) depending on the steps its arguments refer to; side effects keep their order (`order` says why; `parallel: [steps]` frees them, keep_order: true chains all). A literal equal to an input value or an earlier output (or a field of it) is proposed as a ref (`replacements`, applied unless refused by id) when specific: strings of 3+ characters, numbers outside -1..10, non-empty objects and arrays. Smaller equal values (5, \"ab\", true) are `candidates`: apply them with `accept`. The template is the tool wf_<template>; run_compare shows how a replay departed.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn recording_save(&self, Parameters(p): Parameters<SaveParams>) -> Result<Json<SaveOut>, ToolError> {
        let mut slot = self.session.recording.lock().await;
        ensure_open(&self.core, &mut slot).await?;
        let active = slot.as_ref().ok_or_else(not_recording)?;
        let mut answer = plan(&active.recording, &p).map_err(plan_refused)?;
        if p.dry_run {
            // The save's own checks, storing nothing: a dry run that passes
            // is a save that passes.
            match prepare::validate(&self.core, answer.definition.clone()).await? {
                Ok(loaded) => {
                    answer.warnings.extend(loaded.warnings.iter().map(|w| format!("{}: {}", w.path, w.message)))
                }
                Err(invalid) => return Err(prepare::invalid_definition(&invalid)),
            }
            return Ok(Json(answer));
        }
        let saving = prepare::for_template(&self.core, answer.definition.clone()).await?;
        let (doc, name) = (saving.doc, saving.name);
        answer.warnings.extend(saving.warnings.iter().map(|w| format!("{}: {}", w.path, w.message)));
        let version = self.core.store.save_template(&name, &doc, now_ms()).await.map_err(ToolError::internal)?;
        active.store(&self.core, Some((name.clone(), version)), Some(doc.clone())).await?;
        let active = slot.take().expect("checked above");
        self.release(&active.id);
        self.core.changed(Change::Templates);
        answer.tool = Some(wf_tools::tool_name(&name));
        answer.template = name;
        answer.version = Some(version);
        answer.run_id = Some(active.id.to_string());
        answer.definition = doc;
        Ok(Json(answer))
    }

    #[tool(
        description = "End the recording without saving a template; it is stored as a completed run (run_get).",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn recording_stop(&self, Parameters(_): Parameters<NoParams>) -> Result<Json<StopOut>, ToolError> {
        let mut slot = self.session.recording.lock().await;
        ensure_open(&self.core, &mut slot).await?;
        let active = slot.as_ref().ok_or_else(not_recording)?;
        active.store(&self.core, None, None).await?;
        let active = slot.take().expect("checked above");
        self.release(&active.id);
        Ok(Json(StopOut { run_id: active.id.to_string(), steps: active.recording.steps.len() }))
    }
}
