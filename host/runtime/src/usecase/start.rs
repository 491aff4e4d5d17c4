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
        }
    }
}

/// A run that was created and started.
pub struct Started {
    pub id: RunId,
    /// What was watched from before it existed: waiting for it needs no read.
    pub fresh: Fresh,
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
    #[error("the fuel budget is 0")]
    ZeroFuel,
    /// Labels over their caps (each problem's path is `/KEY`, within the labels).
    #[error("the labels were refused")]
    Labels(Vec<Problem>),
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
        let StartRequest { source, input, key, presets, run_fuel, traceparent, labels } = req;
        if key.as_deref().is_some_and(|k| k.trim().is_empty()) {
            return Err(StartRefused::EmptyKey);
        }
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
        let opts = RunOptions {
            concurrency_key: key,
            presets: presets.into_iter().collect(),
            traceparent,
            labels,
            ..Default::default()
        };
        let p = self.pipeline.prepare_source(source, input, opts).await.map_err(StartRefused::Prepare)?;
        for w in &p.warnings {
            tracing::warn!("{w}");
        }
        // Subscribed before the run exists: no change of it goes unheard.
        let changes = self.engine.subscribe();
        match self.engine.submit_watched(p.plan.clone(), p.input, p.opts).await {
            Ok((id, end)) => Ok(Started { id, fresh: Fresh { changes, end } }),
            Err(EngineError::Invalid(problems)) => {
                Err(StartRefused::Input { problems: problems.0, schema: p.plan.input_schema.clone() })
            }
            Err(other) => Err(StartRefused::Failed(other)),
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
