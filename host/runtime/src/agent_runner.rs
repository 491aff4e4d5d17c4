//! Agent steps: an attempt sends the step's input to a remote A2A agent
//! (`[agents.NAME]` of weft.toml) as one data part, over A2A 1.0's
//! JSON-RPC binding, and waits for the task it started to end. Its
//! artifacts are the step's output.
//!
//! **One remote task per attempt, across crashes.** The message's
//! `contextId` and `messageId` are derived from the attempt's idempotency
//! key (`weft-{run}/{step}[/{item}]/{attempt}`), which weft commits before
//! the attempt runs and keeps when an attempt cut short by a crash or a
//! lost lease runs again as itself. So an attempt first asks the agent for
//! the tasks of that context (`ListTasks`): finding one, it follows it
//! instead of sending again; finding none, it sends. The remote agent's
//! task store is the record of the remote task id, written before the
//! agent answers the send. (An agent without `ListTasks` is sent to again
//! after a crash; the step's log says so.)
//!
//! The task is followed by `GetTask`, polling with backoff (50 ms doubling
//! to 2 s). Canceling the run (or the attempt's timeout) cancels the
//! remote task (`CancelTask`). A remote `failed`, `canceled` or `rejected`
//! task fails the attempt (retried as the step's retry policy says).
//!
//! **Questions are forwarded.** A remote task that asks for input (or
//! authorization) is this run's question: the attempt ends asking
//! ([`StepOutput::Ask`]) with the agent's words as the prompt and the JSON
//! Schema of its question's part metadata (`schema`), if any; the engine
//! parks the step and runs the attempt again, as itself, with the answer.
//! It then sends the answer to the remote task (a text part for a string,
//! a data part otherwise) with the message id `weft-{key}-{question id}`,
//! and only while the task still asks that question: after a crash, a
//! task that moved on got the answer already, and is followed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use weft_a2a::errors::{A2aError, ErrorKind as A2aKind};
use weft_a2a::wire::{
    AgentCard, ListTasksRequest, ListTasksResponse, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    SendMessageResponse, Task, TaskIdRequest, TaskState,
};
use weft_engine::RunState;
use weft_engine::runner::{Answer, CancelToken, Question, StepFailure, StepOutput, StepRequest};
use weft_model::{AgentRef, ErrorKind};

use crate::a2a::RemoteAgent;

/// The first wait between two polls of a remote task; it doubles.
const FIRST_POLL: Duration = Duration::from_millis(50);
/// The longest wait between two polls.
const MAX_POLL: Duration = Duration::from_secs(2);
/// One request's timeout (the attempt's own timeout bounds the whole).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Calls remote A2A agents.
pub struct AgentRunner {
    agents: HashMap<String, RemoteAgent>,
    http: reqwest::Client,
    /// Each agent's JSON-RPC endpoint, read from its card once.
    endpoints: Mutex<HashMap<String, String>>,
}

impl AgentRunner {
    pub fn new(agents: &[RemoteAgent]) -> AgentRunner {
        let http = reqwest::Client::builder()
            .user_agent(concat!("weft/", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .build()
            .unwrap_or_default();
        let agents = agents.iter().map(|a| (a.name.clone(), a.clone())).collect();
        AgentRunner { agents, http, endpoints: Mutex::default() }
    }

    /// The calls to agent `name`.
    async fn rpc(&self, name: &str) -> Result<Rpc<'_>, StepFailure> {
        let agent = self.agents.get(name).ok_or_else(|| {
            StepFailure::new(
                ErrorKind::Validation,
                format!("no agent `{name}` is configured (any more) in weft.toml ([agents.{name}])"),
                false,
            )
        })?;
        let endpoint = self.endpoint(agent).await?;
        Ok(Rpc { runner: self, agent, endpoint })
    }

    /// One attempt of an agent step: the remote task's outcome, or its
    /// question.
    pub async fn call(&self, a: &AgentRef, req: &StepRequest, cancel: &CancelToken) -> Result<StepOutput, StepFailure> {
        let rpc = self.rpc(&a.name).await?;
        let context = format!("weft-{}", req.idempotency_key);
        let task = match &req.answer {
            Some(answer) => rpc.reply(answer, req).await?,
            None => self.start(&rpc, &context, a, req).await?,
        };
        req.events.progress(json!({"message": format!("remote task {} is {}", task.id, short(task.status.state)),
                                   "remote_task": task.id, "agent": a.name}));
        let ended = tokio::select! {
            t = rpc.follow(task.clone()) => t?,
            _ = cancel.canceled() => {
                // The run was canceled or the attempt timed out: so is the
                // remote task (best effort; the agent may have ended it).
                let _ = rpc.call::<Task>("CancelTask", json!({"id": task.id})).await;
                return Err(StepFailure::canceled(format!("canceled; remote task {} was canceled too", task.id)));
            }
        };
        if ended.status.state.is_interrupted() {
            return Ok(StepOutput::Ask(question(&a.name, &ended)));
        }
        outcome(&a.name, ended).map(StepOutput::Done)
    }

    /// A question asked and left unanswered (the run ended): the remote
    /// task is canceled, best effort.
    pub async fn abandon(&self, a: &AgentRef, resume: &Value) {
        let Some(task) = resume.get("task").and_then(Value::as_str) else { return };
        if let Ok(rpc) = self.rpc(&a.name).await
            && let Err(e) = rpc.call::<Task>("CancelTask", json!({"id": task})).await
        {
            tracing::info!(agent = %a.name, task, error = %e.message, "cannot cancel an abandoned remote task");
        }
    }

    /// The attempt's remote task: the one it sent before a crash, or a
    /// new one.
    async fn start(&self, rpc: &Rpc<'_>, context: &str, a: &AgentRef, req: &StepRequest) -> Result<Task, StepFailure> {
        Ok(match rpc.find(context).await {
            Ok(Some(t)) => {
                req.events.log(format!("[weft: following remote task {} of agent `{}`, sent before]", t.id, a.name));
                t
            }
            found => {
                if let Err(e) = found {
                    req.events.log(format!(
                        "[weft: agent `{}` cannot list its tasks ({}); a crash while its task runs sends it again]",
                        a.name, e.message
                    ));
                }
                let t = rpc.send(context, a, req).await?;
                req.events.log(format!("[weft: sent to agent `{}`: remote task {}]", a.name, t.id));
                t
            }
        })
    }

    /// The agent's JSON-RPC URL: from its card's interfaces, on the
    /// configured origin only (a card cannot send weft elsewhere).
    async fn endpoint(&self, agent: &RemoteAgent) -> Result<String, StepFailure> {
        if let Some(e) = self.endpoints.lock().unwrap_or_else(|p| p.into_inner()).get(&agent.name) {
            return Ok(e.clone());
        }
        let card_url = format!("{}{}", agent.url, weft_a2a::CARD_PATH);
        let mut get = self.http.get(&card_url);
        if let Some(t) = &agent.token {
            get = get.bearer_auth(t);
        }
        let transport = |e: String| StepFailure::new(ErrorKind::Transport, e, true);
        let resp = get.send().await.map_err(|e| transport(format!("agent `{}`: its card: {e}", agent.name)))?;
        if !resp.status().is_success() {
            return Err(transport(format!(
                "agent `{}`: its card at {card_url} answered {}",
                agent.name,
                resp.status()
            )));
        }
        let card: AgentCard = resp.json().await.map_err(|e| {
            StepFailure::new(ErrorKind::Protocol, format!("agent `{}`: its card does not read: {e}", agent.name), true)
        })?;
        let rpc = card.supported_interfaces.iter().find(|i| i.protocol_binding == "JSONRPC").ok_or_else(|| {
            StepFailure::new(
                ErrorKind::Validation,
                format!("agent `{}` offers no JSON-RPC interface (weft's agent steps speak JSON-RPC)", agent.name),
                false,
            )
        })?;
        if !same_origin(&rpc.url, &agent.url) {
            return Err(StepFailure::new(
                ErrorKind::Validation,
                format!(
                    "agent `{}`'s card points at {}, not at the configured {}: weft calls only what weft.toml names",
                    agent.name, rpc.url, agent.url
                ),
                false,
            ));
        }
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner()).insert(agent.name.clone(), rpc.url.clone());
        Ok(rpc.url.clone())
    }
}

/// JSON-RPC calls to one agent.
struct Rpc<'a> {
    runner: &'a AgentRunner,
    agent: &'a RemoteAgent,
    endpoint: String,
}

impl Rpc<'_> {
    async fn call<T: serde::de::DeserializeOwned>(&self, method: &str, params: Value) -> Result<T, A2aError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut post =
            self.runner.http.post(&self.endpoint).header("a2a-version", weft_a2a::PROTOCOL_VERSION).json(&body);
        if let Some(t) = &self.agent.token {
            post = post.bearer_auth(t);
        }
        let resp = post.send().await.map_err(|e| A2aError::internal(format!("the request failed: {e}")))?;
        let status = resp.status();
        let v: Value = resp
            .json()
            .await
            .map_err(|e| A2aError::new(A2aKind::InvalidAgentResponse, format!("answered {status}, not JSON: {e}")))?;
        if let Some(e) = v.get("error") {
            return Err(A2aError::from_jsonrpc(e));
        }
        let result = v.get("result").cloned().unwrap_or(Value::Null);
        serde_json::from_value(result).map_err(|e| {
            A2aError::new(A2aKind::InvalidAgentResponse, format!("its {method} result does not read: {e}"))
        })
    }

    /// The newest task of `context`, if the agent has one.
    async fn find(&self, context: &str) -> Result<Option<Task>, A2aError> {
        let page: ListTasksResponse = self
            .call(
                "ListTasks",
                serde_json::to_value(ListTasksRequest {
                    context_id: Some(context.to_string()),
                    page_size: Some(10),
                    ..ListTasksRequest::default()
                })
                .unwrap_or_default(),
            )
            .await?;
        let Some(listed) = page.tasks.into_iter().find(|t| t.context_id == context) else { return Ok(None) };
        // A listed task may come without its artifacts: read it whole.
        self.call("GetTask", json!({"id": listed.id})).await.map(Some)
    }

    /// Sends the step's input; the task it started.
    async fn send(&self, context: &str, a: &AgentRef, req: &StepRequest) -> Result<Task, StepFailure> {
        let metadata = a.skill.as_ref().map(|s| {
            let mut m = serde_json::Map::new();
            m.insert("skill".into(), json!(s));
            m
        });
        let message = Message {
            message_id: format!("weft-{}", req.idempotency_key),
            context_id: Some(context.to_string()),
            role: Role::User,
            parts: vec![Part::data(req.input.clone())],
            metadata: metadata.clone(),
            ..Message::default()
        };
        let send = SendMessageRequest {
            message,
            configuration: Some(SendMessageConfiguration { return_immediately: true, ..Default::default() }),
            metadata,
        };
        let answer: SendMessageResponse = self
            .call("SendMessage", serde_json::to_value(send).unwrap_or_default())
            .await
            .map_err(|e| failure(&a.name, "SendMessage", e))?;
        match answer {
            SendMessageResponse::Task(t) => Ok(t),
            // A direct answer, no task: a finished task of its own.
            SendMessageResponse::Message(m) => Ok(Task {
                id: m.task_id.clone().unwrap_or_else(|| m.message_id.clone()),
                context_id: context.to_string(),
                status: weft_a2a::wire::TaskStatus { state: TaskState::Completed, message: Some(m), timestamp: None },
                artifacts: vec![],
                history: vec![],
                metadata: None,
            }),
        }
    }

    /// Sends `answer` to the remote task that asked, while it still asks
    /// that question; the task as it stands then.
    async fn reply(&self, answer: &Answer, req: &StepRequest) -> Result<Task, StepFailure> {
        let id = answer.resume.get("task").and_then(Value::as_str).unwrap_or_default();
        let asked = answer.resume.get("question").and_then(Value::as_str);
        let task: Task =
            self.call("GetTask", json!({"id": id})).await.map_err(|e| failure(&self.agent.name, "GetTask", e))?;
        let still_asks =
            task.status.state.is_interrupted() && task.status.message.as_ref().map(|m| m.message_id.as_str()) == asked;
        if !still_asks {
            req.events.log(format!("[weft: remote task {id} has the answer already; following it]"));
            return Ok(task);
        }
        let part = match &answer.data {
            Value::String(s) => Part::text(s.clone()),
            v => Part::data(v.clone()),
        };
        let message = Message {
            message_id: format!("weft-{}-{}", req.idempotency_key, asked.unwrap_or("answer")),
            context_id: Some(task.context_id.clone()),
            task_id: Some(task.id.clone()),
            role: Role::User,
            parts: vec![part],
            ..Message::default()
        };
        let send = SendMessageRequest {
            message,
            configuration: Some(SendMessageConfiguration { return_immediately: true, ..Default::default() }),
            metadata: None,
        };
        let sent: SendMessageResponse = self
            .call("SendMessage", serde_json::to_value(send).unwrap_or_default())
            .await
            .map_err(|e| failure(&self.agent.name, "SendMessage", e))?;
        req.events.log(format!("[weft: answered remote task {id} of agent `{}`]", self.agent.name));
        Ok(match sent {
            SendMessageResponse::Task(t) => t,
            SendMessageResponse::Message(_) => task,
        })
    }

    /// `task` once it ended or is interrupted, polled with backoff.
    async fn follow(&self, mut task: Task) -> Result<Task, StepFailure> {
        let mut wait = FIRST_POLL;
        while !task.status.state.is_terminal() && !task.status.state.is_interrupted() {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_POLL);
            task = self
                .call(
                    "GetTask",
                    serde_json::to_value(TaskIdRequest { id: task.id.clone(), history_length: None })
                        .unwrap_or_default(),
                )
                .await
                .map_err(|e| failure(&self.agent.name, "GetTask", e))?;
        }
        Ok(task)
    }
}

/// A refused or failed call, as the attempt's failure: the agent's
/// refusals of the request are not retried; transport faults are.
fn failure(agent: &str, method: &str, e: A2aError) -> StepFailure {
    let retryable = matches!(e.kind, A2aKind::Internal | A2aKind::InvalidAgentResponse);
    let kind = match e.kind {
        A2aKind::Internal => ErrorKind::Transport,
        A2aKind::InvalidAgentResponse => ErrorKind::Protocol,
        _ => ErrorKind::Validation,
    };
    StepFailure::new(kind, format!("agent `{agent}` {method}: {} ({})", e.message, e.kind.reason()), retryable)
}

/// A remote task that asks, as this attempt's question: the agent's words
/// (its status message's text), the JSON Schema in a part's metadata
/// (`schema`) if one has it (else a string: words, sent as text), what it published before it asked (see
/// [`preview`]), and the task and question ids to go on with.
fn question(agent: &str, t: &Task) -> Question {
    let said = t.status.message.as_ref().map(|m| texts(&m.parts)).unwrap_or_default();
    let schema = t
        .status
        .message
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| p.metadata.as_ref().and_then(|m| m.get("schema")).filter(|s| s.is_object()).cloned())
        // A question without a schema is answered in words: a JSON string,
        // sent as text (an object would reach the agent as data it may misread).
        .unwrap_or_else(|| json!({"type": "string", "description": "the answer, in words (sent as text)"}));
    let what = if t.status.state == TaskState::AuthRequired { "needs authorization" } else { "asks" };
    Question {
        prompt: Some(if said.is_empty() {
            format!("agent `{agent}` {what} (it gave no words)")
        } else {
            format!("agent `{agent}` {what}: {said}")
        }),
        schema: Some(schema),
        preview: preview(t),
        reason: if t.status.state == TaskState::AuthRequired {
            RunState::AuthRequired
        } else {
            RunState::InputRequired
        },
        resume: json!({"task": t.id, "question": t.status.message.as_ref().map(|m| &m.message_id)}),
    }
}

/// What a remote task that asks published before it asked (a draft to
/// approve): its last artifact's first data part, or its artifacts' text.
fn preview(t: &Task) -> Option<Value> {
    let data = t.artifacts.iter().rev().flat_map(|a| &a.parts).find_map(|p| p.data.clone());
    let text = texts(&t.artifacts.iter().flat_map(|a| a.parts.clone()).collect::<Vec<_>>());
    data.or_else(|| (!text.is_empty()).then(|| Value::String(text)))
}

/// The step's output from the remote task's end: `{"task_id",
/// "context_id", "state", "data", "text", "artifacts"}`, `data` being the
/// first data part of its last artifact (or of its final message), `text`
/// every text part joined. Any end but `completed` fails the attempt.
fn outcome(agent: &str, t: Task) -> Result<Value, StepFailure> {
    let said = t.status.message.as_ref().map(|m| texts(&m.parts)).unwrap_or_default();
    match t.status.state {
        TaskState::Completed => {}
        other => {
            return Err(StepFailure::new(
                ErrorKind::ToolError,
                format!(
                    "agent `{agent}`'s task {} ended {}: {}",
                    t.id,
                    short(other),
                    if said.is_empty() { "(no reason given)" } else { &said }
                ),
                other == TaskState::Failed,
            ));
        }
    }
    let mut parts: Vec<&Part> = t.artifacts.iter().flat_map(|a| &a.parts).collect();
    if let Some(m) = &t.status.message {
        parts.extend(&m.parts);
    }
    let data = t
        .artifacts
        .iter()
        .rev()
        .flat_map(|a| &a.parts)
        .chain(t.status.message.iter().flat_map(|m| &m.parts))
        .find_map(|p| p.data.clone())
        .unwrap_or(Value::Null);
    let text = texts(&parts.into_iter().cloned().collect::<Vec<_>>());
    Ok(json!({
        "task_id": t.id,
        "context_id": t.context_id,
        "state": "completed",
        "data": data,
        "text": text,
        "artifacts": t.artifacts,
    }))
}

fn texts(parts: &[Part]) -> String {
    parts.iter().filter_map(|p| p.text.as_deref()).filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n")
}

/// `TASK_STATE_INPUT_REQUIRED` as `input-required`.
fn short(s: TaskState) -> String {
    s.as_str().trim_start_matches("TASK_STATE_").to_ascii_lowercase().replace('_', "-")
}

fn same_origin(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a), reqwest::Url::parse(b)) {
        (Ok(x), Ok(y)) => {
            x.scheme() == y.scheme()
                && x.host_str() == y.host_str()
                && x.port_or_known_default() == y.port_or_known_default()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_a2a::wire::{Artifact, TaskStatus};

    fn task(state: TaskState, artifacts: Vec<Artifact>, said: Option<&str>) -> Task {
        let message = said.map(|s| Message { parts: vec![Part::text(s)], ..Message::default() });
        Task {
            id: "t1".into(),
            context_id: "c".into(),
            status: TaskStatus { state, message, timestamp: None },
            artifacts,
            history: vec![],
            metadata: None,
        }
    }

    #[test]
    fn a_completed_task_gives_its_last_data_and_its_text() {
        let arts = vec![
            Artifact {
                artifact_id: "a".into(),
                parts: vec![Part::text("hello"), Part::data(json!({"n": 1}))],
                ..Artifact::default()
            },
            Artifact { artifact_id: "b".into(), parts: vec![Part::data(json!({"n": 2}))], ..Artifact::default() },
        ];
        let v = outcome("x", task(TaskState::Completed, arts, None)).unwrap();
        assert_eq!(v["data"], json!({"n": 2}));
        assert_eq!(v["text"], "hello");
        assert_eq!(v["task_id"], "t1");
    }

    #[test]
    fn a_question_carries_the_agents_words_its_schema_and_ids() {
        let mut t = task(TaskState::InputRequired, vec![], Some("which city?"));
        let m = t.status.message.as_mut().unwrap();
        m.message_id = "q1".into();
        let schema = json!({"type": "object", "required": ["city"]});
        m.parts.push(Part { metadata: Some(json!({"schema": schema}).as_object().unwrap().clone()), ..Part::text("") });
        let q = question("x", &t);
        assert_eq!(q.prompt.as_deref(), Some("agent `x` asks: which city?"));
        assert_eq!(q.schema, Some(schema));
        assert_eq!(q.reason, RunState::InputRequired);
        assert_eq!(q.resume, json!({"task": "t1", "question": "q1"}));
        let q = question("x", &task(TaskState::AuthRequired, vec![], None));
        assert_eq!(q.reason, RunState::AuthRequired);
        assert_eq!(q.schema.unwrap()["type"], "string", "no schema given: answered in words");
        assert_eq!(q.prompt.as_deref(), Some("agent `x` needs authorization (it gave no words)"));
    }

    #[test]
    fn other_ends_fail_with_what_the_agent_said() {
        let e = outcome("x", task(TaskState::Failed, vec![], Some("boom"))).unwrap_err();
        assert!(e.message.contains("ended failed: boom") && e.retryable, "{}", e.message);
    }

    #[test]
    fn a_card_may_not_send_weft_to_another_origin() {
        assert!(same_origin("http://127.0.0.1:9000/rpc", "http://127.0.0.1:9000"));
        assert!(!same_origin("http://127.0.0.1:9001/rpc", "http://127.0.0.1:9000"));
        assert!(!same_origin("http://169.254.169.254/", "http://127.0.0.1:9000"));
    }
}
