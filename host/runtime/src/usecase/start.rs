//! Starting a run: of a saved template (by name, or already read by a
//! front end that keeps its own view of the templates) or of a client's
//! definition, with its input, concurrency key, presets, fuel budget and
//! the caller's trace context. The definition is validated and the input
//! checked once, by the pipeline; nothing is stored when the start is
//! refused. The run is created and started in one commit, and the caller
//! gets what it needs to wait for it without a read ([`Fresh`]).

use std::collections::BTreeMap;

use serde_json::Value;
use weft_engine::size_limits::Over;
use weft_engine::store::TemplateRecord;
use weft_engine::{EngineError, RunId, RunOptions};
use weft_model::Problem;

use super::UseCases;
use super::settle::Fresh;
use crate::pipeline::{Refused, Source};

/// What to run.
#[derive(Debug, Clone)]
pub enum RunSource {
    /// A saved template, its latest version unless `version`.
    Template { name: String, version: Option<u32> },
    /// A saved template the front end already read.
    Saved(TemplateRecord),
    /// A client's definition (an object; it may name files only under
    /// `[guests] allow_paths`).
    Definition(Value),
}

impl RunSource {
    /// The source a request names with its `template`, `version` and
    /// `definition` fields: exactly one of `template` and `definition`.
    pub fn of(
        template: Option<String>,
        version: Option<u32>,
        definition: Option<Value>,
    ) -> Result<RunSource, StartRefused> {
        match (template, definition) {
            (Some(_), Some(_)) => Err(StartRefused::BothSources),
            (None, None) => Err(StartRefused::NoSource),
            (Some(name), None) => Ok(RunSource::Template { name, version }),
            (None, Some(_)) if version.is_some() => Err(StartRefused::VersionWithDefinition),
            (None, Some(def)) => Ok(RunSource::Definition(def)),
        }
    }
}

/// A request to start a run.
#[derive(Debug, Clone)]
pub struct StartRequest {
    pub source: RunSource,
    /// The run's input, checked against the definition's `input_schema`.
    pub input: Value,
    /// Runs with the same key execute one at a time, in order.
    pub key: Option<String>,
    /// Steps whose output is given instead of computed.
    pub presets: BTreeMap<String, Value>,
    /// A fuel budget for all code steps together (replaces the
    /// definition's `limits.run_fuel`).
    pub run_fuel: Option<u64>,
    /// The caller's W3C trace context: the run's parent span.
    pub traceparent: Option<String>,
    /// The caller's labels (checked: see [`weft_model::labels`]).
    pub labels: weft_model::Labels,
    /// The same key starts one run: a start that repeats it gets that run
    /// back (while the run is kept), or is refused when it asks something
    /// else ([`StartRefused::KeyConflict`]).
    pub idempotency_key: Option<String>,
    /// Notifications added to the definition's `notify` for this run.
    pub notify: Vec<Value>,
}

impl StartRequest {
    /// A run of `source` with `input` and nothing else asked.
    pub fn new(source: RunSource, input: Value) -> StartRequest {
        StartRequest {
            source,
            input,
            key: None,
            presets: BTreeMap::new(),
            run_fuel: None,
            traceparent: None,
            labels: Default::default(),
            idempotency_key: None,
            notify: vec![],
        }
    }
}

/// The longest idempotency key (as Stripe's).
pub const MAX_KEY_CHARS: usize = 255;

/// A run that was created and started (or, for a repeated idempotency
/// key, the run the key started before).
pub struct Started {
    pub id: RunId,
    /// What was watched from before it existed: waiting for it needs no
    /// read (`None` for a run started before).
    pub fresh: Option<Fresh>,
    /// The idempotency key had started this run before: nothing new.
    pub replayed: bool,
}

/// Why a run was not started (nothing was stored).
#[derive(Debug, thiserror::Error)]
pub enum StartRefused {
    #[error("neither a template nor a definition is given")]
    NoSource,
    #[error("both a template and a definition are given")]
    BothSources,
    #[error("a version applies to a template only")]
    VersionWithDefinition,
    /// No saved template of this name (and version).
    #[error("no template `{name}`")]
    NoTemplate { name: String, version: Option<u32> },
    /// The definition is not a JSON object (its JSON type is named).
    #[error("the definition is {0}, not an object")]
    DefinitionNotObject(&'static str),
    /// The definition is over `[limits] max_definition_bytes` or too deep.
    #[error("{}", .0.message("the definition", "max_definition_bytes"))]
    DefinitionTooLarge(Over),
    #[error("the concurrency key is empty")]
    EmptyKey,
    /// The idempotency key is empty or over [`MAX_KEY_CHARS`].
    #[error("the idempotency key must be 1 to {MAX_KEY_CHARS} characters")]
    BadIdempotencyKey,
    /// The idempotency key started run `run` with another request:
    /// `differs` names the parts that differ (`input`, `labels`, ...).
    #[error("idempotency key `{key}` already started run {run} with a different request ({} differ)", differs.join(", "))]
    KeyConflict { key: String, run: RunId, differs: Vec<String> },
    #[error("the fuel budget is 0")]
    ZeroFuel,
    /// Labels over their caps (each problem's path is `/KEY`, within the labels).
    #[error("the labels were refused")]
    Labels(Vec<Problem>),
    /// The request's own notifications were refused (each problem's path is
    /// within the request's `notify` list: `/0/webhook`).
    #[error("the notifications were refused")]
    Notify(Vec<Problem>),
    /// The pipeline refused the definition, the template, the input or the
    /// pinning of its code (or the store or sandbox failed meanwhile).
    #[error(transparent)]
    Prepare(Refused),
    /// The engine refused the input (over its cap).
    #[error("the input was refused")]
    Input { problems: Vec<Problem>, schema: Option<Value> },
    /// The store failed (trying again can help).
    #[error(transparent)]
    Failed(EngineError),
}

impl UseCases {
    /// Validates, creates and starts a run; nothing is stored when refused.
    pub async fn start(&self, req: StartRequest) -> Result<Started, StartRefused> {
        let StartRequest { source, input, key, presets, run_fuel, traceparent, labels, idempotency_key, notify } = req;
        if key.as_deref().is_some_and(|k| k.trim().is_empty()) {
            return Err(StartRefused::EmptyKey);
        }
        let start_key = match idempotency_key {
            Some(k) if k.trim().is_empty() || k.chars().count() > MAX_KEY_CHARS => {
                return Err(StartRefused::BadIdempotencyKey);
            }
            Some(k) => {
                let digest =
                    start_digest(&source.described(), &input, key.as_deref(), &presets, run_fuel, &labels, &notify);
                if let Some(found) = self.started_by(&k, &digest).await? {
                    return Ok(found);
                }
                Some((k, digest))
            }
            None => None,
        };
        let bad = weft_model::labels::check_labels(&labels, "");
        if !bad.is_empty() {
            return Err(StartRefused::Labels(bad));
        }
        if run_fuel == Some(0) {
            return Err(StartRefused::ZeroFuel);
        }
        let mut source = match source {
            RunSource::Template { name, version } => match self.store.template(&name, version).await {
                Ok(Some(t)) => Source::Saved(t),
                Ok(None) => return Err(StartRefused::NoTemplate { name, version }),
                Err(e) => return Err(StartRefused::Failed(e.into())),
            },
            RunSource::Saved(t) => Source::Saved(t),
            RunSource::Definition(def) => {
                if !def.is_object() {
                    return Err(StartRefused::DefinitionNotObject(weft_model::type_name(&def)));
                }
                let cap = self.pipeline.settings().size_limits().max_definition_bytes;
                weft_engine::size_limits::check(&def, cap).map_err(StartRefused::DefinitionTooLarge)?;
                Source::Client(def)
            }
        };
        if let Some(fuel) = run_fuel {
            set_run_fuel(&mut source, fuel);
        }
        // The definition's own notifications come first: problems past
        // them are the request's `notify` (see `per_run_notify`).
        let own = notify_of(&source).map_or(0, Vec::len);
        if !notify.is_empty() {
            add_notify(&mut source, notify);
        }
        let opts = RunOptions {
            concurrency_key: key,
            presets: presets.into_iter().collect(),
            traceparent,
            labels,
            start_key: start_key.clone(),
            ..Default::default()
        };
        let p = match self.pipeline.prepare_source(source, input, opts).await {
            Ok(p) => p,
            Err(r) => return Err(per_run_notify(r, own).unwrap_or_else(StartRefused::Prepare)),
        };
        for w in &p.warnings {
            tracing::warn!("{w}");
        }
        // Followed before its driver starts: no change of it goes unheard.
        match self.engine.submit_watched(p.plan.clone(), p.input, p.opts).await {
            Ok((id, end, changes)) => Ok(Started { id, fresh: Some(Fresh { changes, end }), replayed: false }),
            Err(EngineError::Invalid(problems)) => {
                Err(StartRefused::Input { problems: problems.0, schema: p.plan.input_schema.clone() })
            }
            // Another start of the same key won the race: its run.
            Err(EngineError::Store(weft_engine::StoreError::Conflict(why))) if start_key.is_some() => {
                let (k, digest) = start_key.expect("checked");
                match self.started_by(&k, &digest).await? {
                    Some(found) => Ok(found),
                    None => Err(StartRefused::Failed(EngineError::Store(weft_engine::StoreError::Conflict(why)))),
                }
            }
            Err(other) => Err(StartRefused::Failed(other)),
        }
    }

    /// The run idempotency key `key` started, if it did: refused when it
    /// was asked with another `digest` (see [`start_digest`]).
    pub async fn started_by(&self, key: &str, digest: &str) -> Result<Option<Started>, StartRefused> {
        match self.store.start_key(key).await {
            Ok(None) => Ok(None),
            Ok(Some(k)) if k.digest == digest => Ok(Some(Started { id: k.run, fresh: None, replayed: true })),
            Ok(Some(k)) => {
                let differs = differing(&k.digest, digest);
                Err(StartRefused::KeyConflict { key: key.to_string(), run: k.run, differs })
            }
            Err(e) => Err(StartRefused::Failed(e.into())),
        }
    }
}

/// What a start asked, as the digest its idempotency key is stored with:
/// the same request from any front end gives the same digest (`source`:
/// `{"template", "version"}` or `{"definition"}`; object keys in any order).
pub fn start_digest(
    source: &Value,
    input: &Value,
    key: Option<&str>,
    presets: &BTreeMap<String, Value>,
    run_fuel: Option<u64>,
    labels: &weft_model::Labels,
    notify: &[Value],
) -> String {
    // One short hash per part, so a conflict can say which part differs.
    let parts = serde_json::json!({
        "template or definition": digest(source), "input": digest(input),
        "concurrency key": digest(&serde_json::json!(key)), "presets": digest(&serde_json::json!(presets)),
        "fuel": digest(&serde_json::json!(run_fuel)), "labels": digest(&serde_json::json!(labels)),
        "notify": digest(&serde_json::json!(notify)),
    });
    parts.to_string()
}

/// The parts of the request whose digests differ (see [`start_digest`]).
fn differing(stored: &str, asked: &str) -> Vec<String> {
    let parse = |t: &str| serde_json::from_str::<serde_json::Map<String, Value>>(t).unwrap_or_default();
    let (a, b) = (parse(stored), parse(asked));
    b.iter().filter(|(k, v)| a.get(*k) != Some(v)).map(|(k, _)| k.clone()).collect()
}

impl RunSource {
    /// What the source names, for an idempotency key's digest.
    pub fn described(&self) -> Value {
        match self {
            RunSource::Template { name, version } => serde_json::json!({"template": name, "version": version}),
            // A front end's own read of the latest version (`wf_<name>`):
            // the same request as naming the template without a version.
            RunSource::Saved(t) => serde_json::json!({"template": t.name, "version": null}),
            RunSource::Definition(d) => serde_json::json!({"definition": d}),
        }
    }
}

/// A digest of `v` that does not depend on the order of object keys.
fn digest(v: &Value) -> String {
    use sha2::Digest as _;
    fn canonical(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let h = sha2::Sha256::digest(canonical(v).to_string().as_bytes());
    h.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// The definition's `notify` list, if it has one.
fn notify_of(source: &Source) -> Option<&Vec<Value>> {
    let doc = match source {
        Source::Saved(t) => &t.definition,
        Source::Client(doc) => doc,
        Source::File(_) | Source::Template(_) => return None,
    };
    doc.get("notify").and_then(Value::as_array)
}

/// A refusal whose every problem is in the request's own notifications
/// (past the definition's `own` ones), as [`StartRefused::Notify`] with
/// paths into the request's list; otherwise the refusal as it is.
fn per_run_notify(r: Refused, own: usize) -> Result<StartRefused, Refused> {
    let problems = match &r {
        Refused::Definition(i) => &i.problems,
        Refused::Template { problems, .. } => problems,
        _ => return Err(r),
    };
    let rebase = |p: &Problem| {
        let rest = p.path.strip_prefix("/notify/")?;
        let (k, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let k: usize = k.parse().ok()?;
        (k >= own).then(|| Problem { path: format!("/{}{tail}", k - own), ..p.clone() })
    };
    match problems.iter().map(rebase).collect::<Option<Vec<_>>>() {
        Some(mut ps) if !ps.is_empty() => {
            ps.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(StartRefused::Notify(ps))
        }
        _ => Err(r),
    }
}

/// Adds this run's notifications to the definition's `notify`.
fn add_notify(source: &mut Source, extra: Vec<Value>) {
    let doc = match source {
        Source::Saved(t) => &mut t.definition,
        Source::Client(doc) => doc,
        Source::File(_) | Source::Template(_) => return,
    };
    if let Some(def) = doc.as_object_mut() {
        let list = def.entry("notify").or_insert_with(|| Value::Array(vec![]));
        if let Some(l) = list.as_array_mut() {
            l.extend(extra);
        }
    }
}

/// Puts a fuel budget into the definition's `limits.run_fuel`.
fn set_run_fuel(source: &mut Source, fuel: u64) {
    let doc = match source {
        Source::Saved(t) => &mut t.definition,
        Source::Client(doc) => doc,
        Source::File(_) | Source::Template(_) => return,
    };
    if let Some(def) = doc.as_object_mut() {
        let limits = def.entry("limits").or_insert_with(|| Value::Object(Default::default()));
        if let Some(l) = limits.as_object_mut() {
            l.insert("run_fuel".into(), Value::from(fuel));
        }
    }
}
