//! A run as an A2A task, and its logged events as A2A stream events
//! (docs/a2a.md, "The mapping"). A task's id is its run's id; its context
//! is the run's `a2a/context` label; its states are the run's (weft's run
//! states are the A2A task lifecycle). An open signal wait is the status
//! message of an `input-required` (or `auth-required`) task: one text part
//! per wait, its prompt, with the JSON Schema the answer must match, the
//! step and the item in the part's metadata. The run's output is its last
//! artifact, `output` (one data part); files steps produced are artifacts
//! with a URL part (the API's address of their bytes).

use serde_json::{Map, Value, json};
use weft_a2a::wire::{
    Artifact, Message, Part, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use weft_engine::store::{ArtifactRecord, EventRecord, RunRecord};
use weft_engine::view::{WaitOn, WaitView};
use weft_engine::{RunState, clock::rfc3339};

/// The label that holds a task's context id.
pub const CONTEXT_LABEL: &str = "a2a/context";
/// The id of the artifact that holds the run's output.
pub const OUTPUT_ARTIFACT: &str = "output";

/// A run state in A2A's words.
pub fn task_state(s: RunState) -> TaskState {
    match s {
        RunState::Submitted => TaskState::Submitted,
        RunState::Working => TaskState::Working,
        RunState::InputRequired => TaskState::InputRequired,
        RunState::AuthRequired => TaskState::AuthRequired,
        RunState::Completed => TaskState::Completed,
        RunState::Failed => TaskState::Failed,
        RunState::Canceled => TaskState::Canceled,
        RunState::Rejected => TaskState::Rejected,
        // Never reached: recordings are not tasks (they are not listed).
        RunState::Recording => TaskState::Unspecified,
    }
}

/// An A2A task state as a run state (for `ListTasks`' `status`).
pub fn run_state(s: TaskState) -> Option<RunState> {
    RunState::ALL.into_iter().find(|r| *r != RunState::Recording && task_state(*r) == s)
}

/// Where a run's artifacts and API view are: `base` is the server's
/// address as the client reached it (`http://host:port`).
#[derive(Debug, Clone)]
pub struct Links {
    pub base: String,
}

/// The task of `rec` as it stands now.
pub fn task_of(rec: &RunRecord, links: &Links) -> Task {
    let context_id = context_of(rec);
    let mut artifacts: Vec<Artifact> =
        rec.artifacts.iter().map(|a| file_artifact(a, &rec.id.to_string(), links)).collect();
    if rec.state == RunState::Completed {
        artifacts.push(output_artifact(rec.output.clone().unwrap_or(Value::Null)));
    }
    if matches!(rec.state, RunState::InputRequired | RunState::AuthRequired) {
        artifacts.extend(previews(rec));
    }
    let mut metadata = Map::new();
    metadata.insert("template".into(), json!(rec.template));
    if let Some(v) = rec.version {
        metadata.insert("version".into(), json!(v));
    }
    metadata.insert("run".into(), json!(format!("{}/api/v1/runs/{}", links.base, rec.id)));
    if let Some(p) = &rec.parent {
        // A child run (a `workflow` step's) is a task of its template too.
        metadata.insert("parent".into(), json!(p.to_string()));
        metadata.insert("depth".into(), json!(rec.depth));
    }
    Task {
        id: rec.id.to_string(),
        context_id,
        status: status_of(rec),
        artifacts,
        history: vec![],
        metadata: Some(metadata),
    }
}

/// The task's context: its `a2a/context` label, or its run id for a run
/// started elsewhere.
pub fn context_of(rec: &RunRecord) -> String {
    rec.labels.get(CONTEXT_LABEL).cloned().unwrap_or_else(|| rec.id.to_string())
}

/// The status of `rec`: its state, when it last changed, and the agent's
/// message about it (the waits' prompts; a failure's error).
pub fn status_of(rec: &RunRecord) -> TaskStatus {
    let state = task_state(rec.state);
    let message = match rec.state {
        RunState::InputRequired | RunState::AuthRequired => Some(waits_message(rec)),
        RunState::Failed | RunState::Rejected | RunState::Canceled => rec.error.as_ref().map(|e| {
            let mut m = agent_message(rec, &format!("{}", rec.state), vec![Part::text(e.message.clone())]);
            m.parts[0].metadata = Some(json!({"error": e.to_value()}).as_object().cloned().unwrap_or_default());
            m
        }),
        _ => None,
    };
    TaskStatus { state, message, timestamp: Some(rfc3339(rec.updated_at)) }
}

fn agent_message(rec: &RunRecord, tag: &str, parts: Vec<Part>) -> Message {
    Message {
        message_id: format!("{}-{tag}-{}", rec.id, rec.updated_at),
        context_id: Some(context_of(rec)),
        task_id: Some(rec.id.to_string()),
        role: Role::Agent,
        parts,
        ..Message::default()
    }
}

/// The open signal waits of `rec`, one text part each: the prompt, with
/// `{"schema", "step", "item"?}` in its metadata.
fn waits_message(rec: &RunRecord) -> Message {
    let parts = WaitView::all(rec).into_iter().filter(|w| w.kind == WaitOn::Signal).map(|w| wait_part(&w)).collect();
    agent_message(rec, "input", parts)
}

/// One open wait as a part (`metadata.preview`: its preview artifact's id).
pub fn wait_part(w: &WaitView) -> Part {
    let text = w.prompt.clone().unwrap_or_else(|| format!("step `{}` waits for an answer", w.step));
    let mut meta = Map::new();
    meta.insert("schema".into(), w.schema.clone().unwrap_or_else(|| json!({})));
    meta.insert("step".into(), json!(w.step));
    if let Some(i) = w.item {
        meta.insert("item".into(), json!(i));
    }
    if w.preview.is_some() {
        meta.insert("preview".into(), json!(preview_id(w)));
    }
    Part { text: Some(text), metadata: Some(meta), ..Part::default() }
}

/// The open signal waits' previews (what each answer is about), one
/// artifact each: sent before the status that asks.
fn previews(rec: &RunRecord) -> Vec<Artifact> {
    let waits = WaitView::all(rec).into_iter().filter(|w| w.kind == WaitOn::Signal);
    waits
        .filter_map(|w| {
            let value = w.preview.clone()?;
            let mut meta = Map::new();
            meta.insert("step".into(), json!(w.step));
            if let Some(i) = w.item {
                meta.insert("item".into(), json!(i));
            }
            Some(Artifact {
                artifact_id: preview_id(&w),
                name: Some("preview".into()),
                description: Some(format!("what step `{}` asks about", w.step)),
                parts: vec![match value {
                    Value::String(t) => Part::text(t),
                    v => Part::data(v),
                }],
                metadata: Some(meta),
            })
        })
        .collect()
}

/// `preview:STEP` (`preview:STEP/ITEM` for a `for_each` wait's item).
fn preview_id(w: &WaitView) -> String {
    match w.item {
        Some(i) => format!("preview:{}/{i}", w.step),
        None => format!("preview:{}", w.step),
    }
}

/// `run.<state>`'s state.
pub fn parse_state(s: &str) -> Option<RunState> {
    RunState::ALL.into_iter().find(|r| r.as_str() == s)
}

/// The run's output as the final artifact.
pub fn output_artifact(output: Value) -> Artifact {
    Artifact {
        artifact_id: OUTPUT_ARTIFACT.into(),
        name: Some(OUTPUT_ARTIFACT.into()),
        description: Some("the run's output".into()),
        parts: vec![Part::data(output)],
        metadata: None,
    }
}

/// A file a step produced, as an artifact whose part is its address.
fn file_artifact(a: &ArtifactRecord, run: &str, links: &Links) -> Artifact {
    artifact_at(&a.name, &a.mime, a.size, &a.step, run, links)
}

fn artifact_at(name: &str, mime: &str, size: u64, step: &str, run: &str, links: &Links) -> Artifact {
    let url = format!("{}/api/v1/runs/{run}/artifacts/{}", links.base, encode_segment(name));
    let mut meta = Map::new();
    meta.insert("step".into(), json!(step));
    meta.insert("size".into(), json!(size));
    Artifact {
        artifact_id: format!("file:{name}"),
        name: Some(name.to_string()),
        description: None,
        parts: vec![Part {
            url: Some(url),
            filename: Some(name.to_string()),
            media_type: Some(mime.to_string()),
            ..Part::default()
        }],
        metadata: Some(meta),
    }
}

/// `s` as one URL path segment.
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What a client streaming the task hears of a logged event (`rec`: the
/// run as read after it, for the states that carry a message): a status
/// update for each state the run enters and each progress report, an
/// artifact update for each file and for the output. Step transitions
/// and log lines are not sent (they are in `GET /api/v1/runs/{id}/events`).
pub fn stream_events(e: &EventRecord, rec: &RunRecord, links: &Links) -> Vec<StreamResponse> {
    let task_id = rec.id.to_string();
    let context_id = context_of(rec);
    let status_update = |status: TaskStatus| {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: task_id.clone(),
            context_id: context_id.clone(),
            status,
            metadata: Some(seq_meta(e)),
        })
    };
    let artifact_update = |artifact: Artifact| {
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: task_id.clone(),
            context_id: context_id.clone(),
            artifact,
            append: false,
            last_chunk: true,
            metadata: Some(seq_meta(e)),
        })
    };
    let at = Some(rfc3339(e.at));
    match e.kind.as_str() {
        "progress" => {
            let text = e.data.get("message").and_then(Value::as_str).map(str::to_string);
            let mut parts = vec![];
            if let Some(t) = text {
                parts.push(Part::text(t));
            }
            parts.push(Part::data(e.data.clone()));
            if let Some(step) = &e.step {
                parts[0].metadata = json!({"step": step}).as_object().cloned();
            }
            let message = Message {
                message_id: format!("{}-progress-{}", rec.id, e.seq.0),
                context_id: Some(context_id.clone()),
                task_id: Some(task_id.clone()),
                role: Role::Agent,
                parts,
                ..Message::default()
            };
            vec![status_update(TaskStatus { state: TaskState::Working, message: Some(message), timestamp: at })]
        }
        "artifact" => {
            let name = e.data.get("name").and_then(Value::as_str).unwrap_or_default();
            let mime = e.data.get("mime").and_then(Value::as_str).unwrap_or("application/octet-stream");
            let size = e.data.get("size").and_then(Value::as_u64).unwrap_or(0);
            let step = e.step.as_deref().unwrap_or_default();
            vec![artifact_update(artifact_at(name, mime, size, step, &task_id, links))]
        }
        kind => {
            let Some(state) = kind.strip_prefix("run.").and_then(parse_state) else { return vec![] };
            if state == RunState::Submitted {
                // Every stream starts with the task, which says so.
                return vec![];
            }
            let mut out = vec![];
            // The status of a state the run is still in carries its message
            // (the waits it asks about); an earlier one, only its state.
            let status = if state == rec.state {
                TaskStatus { timestamp: at, ..status_of(rec) }
            } else {
                TaskStatus { state: task_state(state), message: None, timestamp: at }
            };
            if state == RunState::Completed {
                out.push(artifact_update(output_artifact(rec.output.clone().unwrap_or(Value::Null))));
            }
            if state == rec.state {
                // What the questions are about, before they are asked.
                out.extend(previews(rec).into_iter().map(artifact_update));
            }
            out.push(status_update(status));
            out
        }
    }
}

/// `{"seq": N}`: where an event is in the run's log (the SSE id too).
fn seq_meta(e: &EventRecord) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("seq".into(), json!(e.seq.0));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_state_but_recording_is_a_task_state_and_back() {
        for s in RunState::ALL {
            if s == RunState::Recording {
                continue;
            }
            assert_eq!(run_state(task_state(s)), Some(s), "{s}");
        }
        assert_eq!(run_state(TaskState::Unspecified), None);
    }

    #[test]
    fn an_artifact_name_is_one_path_segment() {
        assert_eq!(encode_segment("a b/c.txt"), "a%20b%2Fc.txt");
    }
}
