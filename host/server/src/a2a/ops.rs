//! What an A2A request does, whichever binding carried it: start a run
//! from a message or answer a waiting one, read, list and cancel tasks,
//! and follow a task's log as stream events. Each refusal is an
//! [`A2aError`] naming the field at fault (a JSON Pointer into the
//! request's params) and what to do. Runs are started, answered and
//! canceled through the HTTP audience's use cases, as `/api/v1` does.

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use weft_a2a::errors::{A2aError, ErrorKind};
use weft_a2a::wire::{
    ListTasksRequest, ListTasksResponse, Message, Part, SendMessageRequest, StreamResponse, Task, TaskState,
};
use weft_engine::store::{RunFilter, RunRecord, TemplateRecord};
use weft_engine::view::{WaitOn, WaitView};
use weft_engine::{RunId, RunState, Seq};
use weft_model::Problem;
use weft_runtime::pipeline::Refused;
use weft_runtime::usecase::answer::{CancelRefused, SignalRefused, WaitRefused};
use weft_runtime::usecase::{LookupRefused, RunSource, StartRefused, StartRequest, settles};

use super::task::{self, CONTEXT_LABEL, Links};
use crate::Core;

/// The longest a blocking `SendMessage` waits for its task to end or ask
/// for input (then it answers with the task as it is, still working).
pub const MAX_BLOCK: Duration = Duration::from_secs(300);
/// Events read from the store at a time while streaming.
const PAGE: usize = 500;

/// One agent's endpoint: a template's (`/a2a/{template}`) or the server's
/// (`/a2a`, every template a skill).
#[derive(Clone)]
pub struct Agent {
    pub core: Arc<Core>,
    pub links: Links,
    /// The template this agent runs, as read for this request; `None` for
    /// the server's agent.
    pub template: Option<TemplateRecord>,
}

/// What a message did.
pub enum Sent {
    /// It started a run (or found the run its message id started before).
    Started { id: RunId, fresh: Option<weft_runtime::usecase::Fresh> },
    /// It answered a waiting run; its log goes on after `after`. `waits`:
    /// the run still waits for other answers (it stays input-required).
    Answered { id: RunId, after: Seq, waits: bool },
}

impl Agent {
    /// Starts a run from `req`'s message (with `notify`: its push
    /// notifications), or, when the message names a task, answers the
    /// wait that task's run is parked on.
    pub async fn send(&self, req: &SendMessageRequest, notify: Vec<Value>) -> Result<Sent, A2aError> {
        if let Some(task) = req.message.task_id.as_deref().filter(|t| !t.is_empty()) {
            return self.answer(task, &req.message).await;
        }
        if req.message.role == weft_a2a::wire::Role::Agent {
            return Err(A2aError::invalid("a client's message has role ROLE_USER, not ROLE_AGENT").at("/message/role"));
        }
        let template = self.skill(req)?;
        // A template's agent read its template already (to know it exists).
        let saved = match &self.template {
            Some(t) => t.clone(),
            None => {
                let read = self.core.store.template(&template, None).await.map_err(A2aError::internal)?;
                read.ok_or_else(|| no_skill(&template))?
            }
        };
        let schema = saved.definition.get("input_schema").cloned();
        let input = input_of(&req.message.parts, schema.as_ref(), "/message/parts")?;
        let mut labels = weft_model::Labels::new();
        let given_context = req.message.context_id.clone().filter(|c| !c.is_empty());
        // No context given: the task starts one, named after the message
        // (so a retried message finds the same context too).
        let context = given_context.clone().unwrap_or_else(|| format!("ctx-{}", req.message.message_id));
        labels.insert(CONTEXT_LABEL.to_string(), context);
        let idempotency_key = (!req.message.message_id.is_empty()).then(|| format!("a2a:{}", req.message.message_id));
        let start = StartRequest {
            // Tasks of one context run one at a time, in order (the run's
            // concurrency key), when the client names the context.
            key: given_context,
            labels,
            idempotency_key,
            notify,
            ..StartRequest::new(RunSource::Saved(saved), input)
        };
        let started = self.core.for_http.start(start).await.map_err(start_refused)?;
        Ok(Sent::Started { id: started.id, fresh: started.fresh })
    }

    /// The template `req` asks for: this agent's, or (the server's agent)
    /// the `skill` of the request's or message's metadata.
    fn skill(&self, req: &SendMessageRequest) -> Result<String, A2aError> {
        let named = |m: &Option<Map<String, Value>>| m.as_ref()?.get("skill")?.as_str().map(str::to_string);
        if let Some(t) = self.template.as_ref().map(|t| &t.name) {
            if let Some(other) = named(&req.metadata).or_else(|| named(&req.message.metadata)).filter(|s| s != t) {
                return Err(A2aError::invalid(format!("this agent runs skill `{t}`, not `{other}`"))
                    .at("/metadata/skill")
                    .hint(format!("send to /a2a/{other}, or to /a2a with `metadata.skill`; or leave the skill out")));
            }
            return Ok(t.clone());
        }
        named(&req.metadata).or_else(|| named(&req.message.metadata)).ok_or_else(|| {
            A2aError::invalid("the server's agent runs several skills: name one in `metadata.skill`")
                .at("/metadata/skill")
                .hint("the skills are listed in /.well-known/agent-card.json; or send to the skill's own agent at /a2a/{skill}")
        })
    }

    /// Answers the signal wait task `task`'s run is parked on.
    async fn answer(&self, task: &str, message: &Message) -> Result<Sent, A2aError> {
        let rec = self.task_run(task, "/message/taskId").await?;
        let context = task::context_of(&rec);
        if let Some(c) = message.context_id.as_deref().filter(|c| !c.is_empty() && *c != context) {
            return Err(A2aError::invalid(format!("task {task} is in context `{context}`, not `{c}`"))
                .at("/message/contextId")
                .hint("leave `contextId` out of an answer, or give the task's"));
        }
        let meta = message.metadata.clone().unwrap_or_default();
        let step = meta.get("step").and_then(Value::as_str);
        if !settles(rec.state) || rec.state.is_terminal() {
            if answered_before(&rec, message, step) {
                // The same answer again (its reply was lost): the task as it is.
                return Ok(Sent::Answered { id: rec.id.clone(), after: rec.last_seq, waits: !rec.state.is_terminal() });
            }
            let what = if rec.state.is_terminal() {
                format!("task {task} is {} and takes no more messages", task::task_state(rec.state).as_str())
            } else {
                format!("task {task} is {} and does not wait for input", task::task_state(rec.state).as_str())
            };
            return Err(A2aError::new(ErrorKind::UnsupportedOperation, what)
                .at("/message/taskId")
                .hint("send the message without `taskId` to start a new task; GetTask shows this one"));
        }
        let waits: Vec<WaitView> = WaitView::all(&rec).into_iter().filter(|w| w.kind == WaitOn::Signal).collect();
        let item = meta.get("item").and_then(Value::as_u64).map(|i| i as u32);
        let chosen: Vec<&WaitView> =
            waits.iter().filter(|w| step.is_none_or(|s| s == w.step) && (item.is_none() || w.item == item)).collect();
        let wait = match chosen.as_slice() {
            [one] => *one,
            [] if answered_before(&rec, message, step) => {
                return Ok(Sent::Answered { id: rec.id.clone(), after: rec.last_seq, waits: true });
            }
            [] => {
                return Err(A2aError::invalid(format!(
                    "task {task} waits for no step `{}`{}",
                    step.unwrap_or("?"),
                    item.map(|i| format!(" item {i}")).unwrap_or_default()
                ))
                .at("/message/metadata/step")
                .hint(format!("it waits for: {}", describe_waits(&waits))));
            }
            _ => {
                return Err(A2aError::invalid(format!(
                    "task {task} waits for {} answers; say which in `metadata.step` (and `metadata.item`)",
                    chosen.len()
                ))
                .at("/message/metadata/step")
                .hint(format!("it waits for: {}", describe_waits(&waits))));
            }
        };
        let data = input_of(&message.parts, wait.schema.as_ref(), "/message/parts")?;
        let s =
            self.core.for_http.signal(&rec.id.to_string(), &wait.step, wait.item, data).await.map_err(|e| match e {
                SignalRefused::Wait(WaitRefused::Invalid { errors }) => problems(
                    A2aError::invalid(format!(
                        "the answer does not match what step `{}` asks for ({} problem{}); the task still waits",
                        wait.step,
                        errors.len(),
                        if errors.len() == 1 { "" } else { "s" }
                    )),
                    &data_path(&message.parts, "/message/parts"),
                    &errors,
                ),
                SignalRefused::Wait(WaitRefused::AlreadyResolved { state }) => A2aError::new(
                    ErrorKind::UnsupportedOperation,
                    format!("step `{}` was already answered (it is {state})", wait.step),
                ),
                SignalRefused::Wait(WaitRefused::NotWaiting { message } | WaitRefused::NotFound { message }) => {
                    A2aError::new(ErrorKind::UnsupportedOperation, message)
                }
                SignalRefused::TooLarge(p) => problems(A2aError::invalid("the answer is over its cap"), "", &p),
                SignalRefused::Run(e) => lookup_refused(e, task),
                SignalRefused::Failed(e) => A2aError::internal(e),
            })?;
        let waits = settles(s.state) && !s.state.is_terminal() && waits.len() > 1;
        Ok(Sent::Answered { id: rec.id, after: rec.last_seq, waits })
    }

    /// The run of task `task`, if this agent shows it.
    pub async fn task_run(&self, task: &str, at: &str) -> Result<RunRecord, A2aError> {
        let rec = self.core.for_http.run(task).await.map_err(|e| lookup_refused(e, task).at(at))?;
        let ours = self.template.as_ref().is_none_or(|t| t.name == rec.template) && rec.state != RunState::Recording;
        if !ours {
            return Err(A2aError::new(ErrorKind::TaskNotFound, format!("this agent has no task {task}"))
                .at(at)
                .hint(format!("it is a task of the agent at /a2a/{}", rec.template)));
        }
        Ok(rec)
    }

    /// The run `id` once it ended or asks for input, or `wait` passed.
    pub async fn settle(&self, sent: Sent, wait: Duration) -> Result<RunRecord, A2aError> {
        let never = CancellationToken::new();
        let (id, fresh) = match sent {
            Sent::Started { id, fresh, .. } => (id, fresh),
            Sent::Answered { id, waits: true, .. } => (id, None),
            Sent::Answered { id, .. } => {
                // The answer was taken; the run moves on from its wait.
                let moved = self.moved_on(&id, wait).await?;
                if !moved {
                    return self.read(&id).await;
                }
                (id, None)
            }
        };
        self.core.for_http.settle(&id, wait, fresh, None, &never).await.map_err(A2aError::internal)
    }

    /// Waits (up to `wait`) until run `id` is no longer parked on the
    /// wait just answered; whether it did.
    async fn moved_on(&self, id: &RunId, wait: Duration) -> Result<bool, A2aError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut changes = self.core.engine.subscribe();
        loop {
            let rec = self.read(id).await?;
            if !settles(rec.state) || rec.state.is_terminal() {
                return Ok(true);
            }
            tokio::select! {
                _ = changes.of_run(id) => {}
                _ = tokio::time::sleep(weft_runtime::usecase::FALLBACK_POLL) => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(false),
            }
        }
    }

    async fn read(&self, id: &RunId) -> Result<RunRecord, A2aError> {
        self.core
            .store
            .run(id)
            .await
            .map_err(A2aError::internal)?
            .ok_or_else(|| A2aError::new(ErrorKind::TaskNotFound, format!("task {id} is gone (deleted by retention)")))
    }

    pub fn task(&self, rec: &RunRecord) -> Task {
        task::task_of(rec, &self.links)
    }

    /// `CancelTask`.
    pub async fn cancel(&self, task: &str) -> Result<Task, A2aError> {
        let rec = self.task_run(task, "/id").await?;
        if rec.state.is_terminal() {
            return Err(A2aError::new(
                ErrorKind::TaskNotCancelable,
                format!("task {task} is {} already", task::task_state(rec.state).as_str()),
            )
            .at("/id"));
        }
        let c = self.core.for_http.cancel(task).await.map_err(|e| match e {
            CancelRefused::Run(e) => lookup_refused(e, task),
            CancelRefused::Failed(e) => A2aError::internal(e),
        })?;
        Ok(self.task(&c.run))
    }

    /// `ListTasks`: this agent's tasks, newest first.
    pub async fn list(&self, req: &ListTasksRequest) -> Result<ListTasksResponse, A2aError> {
        // 0 is proto3's "not set".
        let size = req.page_size.filter(|s| *s != 0).unwrap_or(50);
        if !(1..=100).contains(&size) {
            return Err(A2aError::invalid(format!("`pageSize` is {size}; give 1 to 100")).at("/pageSize"));
        }
        let state = match req.status {
            None | Some(TaskState::Unspecified) => None,
            Some(s) => Some(task::run_state(s).ok_or_else(|| A2aError::invalid("unknown status").at("/status"))?),
        };
        let before = match req.page_token.as_deref().filter(|t| !t.is_empty()) {
            None => None,
            Some(t) => Some(t.parse::<RunId>().map_err(|_| {
                A2aError::invalid(format!("{t:?} is not a page token of this agent"))
                    .at("/pageToken")
                    .hint("pass the `nextPageToken` of the previous page")
            })?),
        };
        let mut labels = weft_model::Labels::new();
        if let Some(c) = req.context_id.as_deref().filter(|c| !c.is_empty()) {
            labels.insert(CONTEXT_LABEL.to_string(), c.to_string());
        }
        let filter = RunFilter {
            state,
            template: self.template.as_ref().map(|t| t.name.clone()),
            limit: Some(size as usize + 1),
            before,
            labels,
            ..RunFilter::default()
        };
        let all = RunFilter { limit: None, before: None, ..filter.clone() };
        let total = self.core.store.count_runs(&all).await.map_err(A2aError::internal)?;
        let mut page = self.core.store.list_runs(&filter).await.map_err(A2aError::internal)?;
        page.retain(|r| r.state != RunState::Recording);
        let next = if page.len() > size as usize { page[size as usize - 1].id.to_string() } else { String::new() };
        page.truncate(size as usize);
        let ids: Vec<RunId> = page.into_iter().map(|r| r.id).collect();
        let runs = self.core.store.runs(&ids).await.map_err(A2aError::internal)?;
        let tasks = runs
            .iter()
            .map(|r| {
                let mut t = self.task(r);
                if !req.include_artifacts.unwrap_or(false) {
                    t.artifacts.clear();
                }
                t
            })
            .collect();
        Ok(ListTasksResponse { tasks, next_page_token: next, page_size: size, total_size: total as i32 })
    }

    /// The task's stream: `first` (a snapshot) if given, then a stream
    /// event for each logged event after `after`, until the task has ended
    /// (or, with `until` [`Until::Interrupted`], asks for input); `ended`:
    /// it already had, as of `first`.
    /// Each item carries the `seq` of its event (the SSE id), when it is
    /// the last one sent for that event.
    pub fn follow(
        &self,
        id: RunId,
        after: Seq,
        first: Option<Task>,
        ended: bool,
        until: Until,
    ) -> impl futures::Stream<Item = (Option<u64>, StreamResponse)> + Send + 'static {
        let follow = Follow {
            agent: self.clone(),
            id,
            after: after.0,
            changes: self.core.engine.subscribe(),
            pending: first.map(|t| vec![(None, StreamResponse::Task(t))]).unwrap_or_default(),
            settled: ended,
            until,
            done: false,
        };
        futures::stream::unfold(follow, |mut f| async move {
            let e = f.next().await?;
            Some((e, f))
        })
    }
}

/// Where a task's stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// At an end or a question (`SendStreamingMessage`: A2A ends a
    /// message's stream at an interrupted state).
    Interrupted,
    /// At an end only (`SubscribeToTask`: a client subscribing to a
    /// waiting task watches it get answered or canceled).
    Ended,
}

impl Until {
    fn stops(self, s: RunState) -> bool {
        match self {
            Until::Interrupted => settles(s),
            Until::Ended => s.is_terminal(),
        }
    }
}

/// The state of one task stream.
struct Follow {
    agent: Agent,
    id: RunId,
    after: u64,
    changes: weft_engine::Changes,
    /// Ready to send, in reverse order.
    pending: Vec<(Option<u64>, StreamResponse)>,
    /// The last run state sent ends the stream (see `until`).
    settled: bool,
    until: Until,
    done: bool,
}

impl Follow {
    async fn next(&mut self) -> Option<(Option<u64>, StreamResponse)> {
        loop {
            if let Some(e) = self.pending.pop() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            let page = match self.agent.core.store.events_after(&self.id, Seq(self.after), PAGE).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(run = %self.id, error = %e, "cannot read the run's events for an A2A stream");
                    return None;
                }
            };
            // Read after the events, so it is at least as new as the last
            // of them: the state a run is still in is sent with its message
            // (the questions and their previews), never without.
            let rec = self.agent.core.store.run(&self.id).await.ok().flatten()?;
            let full = page.len() == PAGE;
            let mut ready = vec![];
            for e in &page {
                self.after = e.seq.0;
                if let Some(state) = e.kind.strip_prefix("run.").and_then(task::parse_state) {
                    self.settled = self.until.stops(state);
                }
                let mut out = task::stream_events(e, &rec, &self.agent.links);
                let n = out.len();
                for (i, r) in out.drain(..).enumerate() {
                    ready.push((if i + 1 == n { Some(e.seq.0) } else { None }, r));
                }
            }
            ready.reverse();
            self.pending = ready;
            if !full && self.settled && self.until.stops(rec.state) && rec.last_seq.0 <= self.after {
                self.done = true;
            }
            if !self.pending.is_empty() || self.done {
                continue;
            }
            tokio::select! {
                _ = self.changes.of_run(&self.id) => {}
                _ = tokio::time::sleep(weft_runtime::usecase::FALLBACK_POLL) => {}
            }
        }
    }
}

/// Whether `message` is an answer `rec` already took: its data part is
/// the output of a signal wait step that is no longer waiting (`step`, if
/// named). Only asked when the message could not answer an open wait, so
/// an answer that could is never swallowed.
fn answered_before(rec: &RunRecord, message: &Message, step: Option<&str>) -> bool {
    let Some(data) = message.parts.iter().find_map(|p| p.data.as_ref()) else { return false };
    let waits_for_signal = |name: &str| {
        rec.definition
            .get("steps")
            .and_then(Value::as_array)
            .and_then(|s| s.iter().find(|x| x.get("name").and_then(Value::as_str) == Some(name)))
            .is_some_and(|x| x.pointer("/wait/prompt").is_some() || x.pointer("/wait/schema").is_some())
    };
    rec.steps.iter().any(|s| {
        step.is_none_or(|n| n == s.name)
            && s.state == weft_engine::StepState::Succeeded
            && s.output.as_ref() == Some(data)
            && waits_for_signal(&s.name)
    })
}

/// The value a message's parts carry for a run's input or a wait's
/// answer, checked against `schema` by whoever takes it: its one data
/// part; or its one text part when `schema` takes a string (`{"type":
/// "string"}`) or an object of one string field.
pub fn input_of(parts: &[Part], schema: Option<&Value>, at: &str) -> Result<Value, A2aError> {
    let data: Vec<(usize, &Part)> = parts.iter().enumerate().filter(|(_, p)| p.data.is_some()).collect();
    let texts: Vec<(usize, &Part)> = parts.iter().enumerate().filter(|(_, p)| p.text.is_some()).collect();
    if data.len() > 1 {
        return Err(A2aError::invalid(format!("the message has {} data parts; send one", data.len()))
            .at(format!("{at}/{}", data[1].0)));
    }
    if let [(_, p)] = data.as_slice() {
        return Ok(p.data.clone().unwrap_or(Value::Null));
    }
    let shape = text_shape(schema);
    match (texts.as_slice(), shape) {
        ([(_, p)], Some(TextShape::Whole)) => Ok(Value::String(p.text.clone().unwrap_or_default())),
        ([(_, p)], Some(TextShape::Field(f))) => Ok(json!({ f: p.text.clone().unwrap_or_default() })),
        ([_, (i, _), ..], Some(_)) => {
            Err(A2aError::invalid("the message has several text parts; send one").at(format!("{at}/{i}")))
        }
        ([(i, _), ..], None) => {
            Err(A2aError::new(ErrorKind::ContentTypeNotSupported, "this takes JSON, not text: send a data part")
                .at(format!("{at}/{i}"))
                .hint(schema_hint(schema)))
        }
        ([], _) if !parts.is_empty() => Err(A2aError::new(
            ErrorKind::ContentTypeNotSupported,
            format!("a {} part cannot be read; send a data part", parts[0].kind()),
        )
        .at(format!("{at}/0"))
        .hint(schema_hint(schema))),
        _ => Err(A2aError::invalid("the message has no parts").at(at).hint(schema_hint(schema))),
    }
}

enum TextShape {
    /// The schema is a string.
    Whole,
    /// The schema is an object whose one field is a string.
    Field(String),
}

fn text_shape(schema: Option<&Value>) -> Option<TextShape> {
    let s = schema?;
    match s.get("type").and_then(Value::as_str) {
        Some("string") => Some(TextShape::Whole),
        Some("object") => {
            let props = s.get("properties")?.as_object()?;
            match props.iter().collect::<Vec<_>>().as_slice() {
                [(name, p)] if p.get("type").and_then(Value::as_str) == Some("string") => {
                    Some(TextShape::Field((*name).clone()))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

fn schema_hint(schema: Option<&Value>) -> String {
    match schema {
        Some(s) => format!("a data part (`{{\"data\": {{...}}}}`) matching the JSON Schema {s}"),
        None => "a data part: `{\"data\": {...}}`".to_string(),
    }
}

/// The path of the message's data part (or text part), for the problems
/// of its value.
fn data_path(parts: &[Part], at: &str) -> String {
    match parts.iter().position(|p| p.data.is_some()) {
        Some(i) => format!("{at}/{i}/data"),
        None => format!("{at}/{}/text", parts.iter().position(|p| p.text.is_some()).unwrap_or(0)),
    }
}

fn describe_waits(waits: &[WaitView]) -> String {
    let all: Vec<String> = waits
        .iter()
        .map(|w| match w.item {
            Some(i) => format!("step `{}` item {i}", w.step),
            None => format!("step `{}`", w.step),
        })
        .collect();
    if all.is_empty() { "nothing".into() } else { all.join(", ") }
}

/// `e` with each problem (its path under `base`) in its details: the
/// first problem's path as `path`, all of them as `problems`.
fn problems(e: A2aError, base: &str, ps: &[Problem]) -> A2aError {
    let list: Vec<Value> = ps
        .iter()
        .map(|p| {
            let mut o = json!({"path": format!("{base}{}", p.path), "message": p.message});
            if let Some(h) = &p.hint {
                o["hint"] = json!(h);
            }
            o
        })
        .collect();
    let first = ps.first().map(|p| format!("{base}{}", p.path)).unwrap_or_else(|| base.to_string());
    let message = match ps.first() {
        Some(p) if p.path.is_empty() => format!("{}: {}", e.message, p.message),
        Some(p) => format!("{}: at {}, {}", e.message, p.path, p.message),
        None => e.message.clone(),
    };
    A2aError { message, ..e }.at(first).with("problems", Value::Array(list))
}

fn no_skill(name: &str) -> A2aError {
    A2aError::invalid(format!("no skill `{name}`: no template of that name is saved"))
        .at("/metadata/skill")
        .hint("the agents are listed as skills in /.well-known/agent-card.json")
}

fn lookup_refused(e: LookupRefused, task: &str) -> A2aError {
    match e {
        LookupRefused::NotAnId(_) | LookupRefused::NotFound(_) => {
            A2aError::new(ErrorKind::TaskNotFound, format!("no task {task:?}"))
                .hint("ListTasks lists this agent's tasks; a task id looks like r_…")
        }
        LookupRefused::Failed(e) => A2aError::internal(e),
    }
}

/// A run the use cases did not start, in A2A's terms.
fn start_refused(e: StartRefused) -> A2aError {
    match e {
        StartRefused::Input { problems: ps, .. } => problems(
            A2aError::invalid("the input does not match the skill's input schema"),
            "/message/parts/0/data",
            &ps,
        ),
        StartRefused::KeyConflict { run, differs, .. } => A2aError::invalid(format!(
            "message id already started task {run} with another message (different: {}); nothing was started",
            differs.join(", ")
        ))
        .at("/message/messageId")
        .hint("give each new message a new messageId"),
        StartRefused::BadIdempotencyKey => {
            A2aError::invalid("the messageId is over 250 characters").at("/message/messageId")
        }
        StartRefused::NoTemplate { name, .. } => no_skill(&name),
        StartRefused::Prepare(Refused::Input { problems: ps, .. }) => problems(
            A2aError::invalid("the input does not match the skill's input schema"),
            "/message/parts/0/data",
            &ps,
        ),
        StartRefused::Prepare(Refused::Template { name, problems: ps, .. }) => problems(
            A2aError::internal(format!("template `{name}` cannot run now (a plugin or server it names is gone)")),
            "",
            &ps,
        ),
        StartRefused::Prepare(Refused::Runtime(e)) => A2aError::internal(e),
        StartRefused::Prepare(other) => A2aError::internal(other),
        StartRefused::Failed(e) => A2aError::internal(e),
        other => A2aError::invalid(other.to_string()),
    }
}

/// `params` as `T`; a field of the wrong shape is named by its path.
pub fn decode<T: DeserializeOwned>(params: Value) -> Result<T, A2aError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let pointer = if path == "." { String::new() } else { format!("/{}", path.replace('.', "/")) };
        A2aError::invalid(format!("the params are not valid: {}", e.inner())).at(pointer)
    })
}

pub fn to_value<T: serde::Serialize>(v: T) -> Result<Value, A2aError> {
    serde_json::to_value(v).map_err(A2aError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_taken_only_where_the_schema_takes_one_string() {
        let one = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let parts = vec![Part::text("Paris")];
        assert_eq!(input_of(&parts, Some(&one), "/p").unwrap(), json!({"city": "Paris"}));
        assert_eq!(input_of(&parts, Some(&json!({"type": "string"})), "/p").unwrap(), json!("Paris"));
        let two = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}});
        let e = input_of(&parts, Some(&two), "/p").unwrap_err();
        assert_eq!(e.kind, ErrorKind::ContentTypeNotSupported);
        assert_eq!(e.details["path"], "/p/0");
        let data = vec![Part::text("x"), Part::data(json!({"a": "1"}))];
        assert_eq!(input_of(&data, Some(&two), "/p").unwrap(), json!({"a": "1"}));
        let e = input_of(&[Part::data(json!(1)), Part::data(json!(2))], None, "/p").unwrap_err();
        assert_eq!(e.details["path"], "/p/1");
        assert!(input_of(&[], None, "/p").is_err());
    }
}
