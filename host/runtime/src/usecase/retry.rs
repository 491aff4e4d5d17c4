//! Retry from failure (Temporal's reset, DBOS's fork): a new run of the
//! ended run's own definition (the same template version, pinned), linked
//! to it by the label `weft/retry-of`, that keeps the outputs of the steps
//! that succeeded (committed as presets: they do not run again) and runs
//! the others, the failed, canceled and skipped ones.
//!
//! - `from`: that step and every step after it (downstream) run again,
//!   whatever they did before.
//! - `input`: the new run's input; a step that succeeded is kept only when
//!   every ref it reads (its `input`, `when`, `for_each`, `where`, a wait's
//!   `prompt`) resolves to the same value as before, and every step it
//!   depends on is kept: only what the change reaches runs again.
//!
//! A `for_each` step runs again (its items cannot be preset), and so does
//! every step after it. Its front ends: CLI `weft runs retry`, MCP
//! `run_retry`, `POST /api/v1/runs/{id}/retry`, the page's Retry button.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use weft_engine::store::TemplateRecord;
use weft_engine::{RunRecord, StepState};
use weft_model::refs::RefRoot;
use weft_model::{Graph, MapScope};

use super::UseCases;
use super::start::{RunSource, StartRefused, StartRequest, Started};

/// The label that links a retry to the run it retries.
pub const RETRY_OF_LABEL: &str = "weft/retry-of";

/// What to retry, and how.
#[derive(Debug, Clone, Default)]
pub struct RetryRequest {
    /// Run this step and every step after it again.
    pub from: Option<String>,
    /// The new run's input (default: the ended run's).
    pub input: Option<Value>,
}

/// Why a run was not retried.
#[derive(Debug, thiserror::Error)]
pub enum RetryRefused {
    #[error(transparent)]
    Run(#[from] super::LookupRefused),
    /// Only an ended run is retried.
    #[error("run {id} is {state}: only an ended run is retried (cancel it first, or wait for its end)")]
    NotEnded { id: String, state: weft_engine::RunState },
    /// `from` names no step of the run.
    #[error("run {id} has no step `{step}` (its steps: {steps})")]
    NoStep { id: String, step: String, steps: String },
    /// The ended run's stored plan does not load any more.
    #[error("the run's stored definition does not load: {0}")]
    Plan(String),
    /// The new run was refused (its input, say).
    #[error(transparent)]
    Start(StartRefused),
}

/// A retry that started: the new run, and what it keeps.
pub struct Retried {
    pub started: Started,
    /// The steps whose outputs it keeps (in definition order).
    pub kept: Vec<String>,
    /// The steps it runs again.
    pub again: Vec<String>,
}

/// What a retry starts: the ended run's definition as a template record
/// (its name and version), the input, the presets of the steps it keeps,
/// its labels (with [`RETRY_OF_LABEL`]) and concurrency key.
pub struct RetryPlan {
    pub source: TemplateRecord,
    pub input: Value,
    pub presets: BTreeMap<String, Value>,
    pub labels: weft_model::Labels,
    pub key: Option<String>,
    /// The steps whose outputs it keeps (in definition order).
    pub kept: Vec<String>,
    /// The steps it runs again.
    pub again: Vec<String>,
}

impl UseCases {
    /// What retrying ended run `run` would start (see the module's doc).
    pub async fn retry_plan(&self, run: &str, req: &RetryRequest) -> Result<RetryPlan, RetryRefused> {
        let rec = self.run(run).await?;
        plan_of(&rec, req)
    }

    /// Retries ended run `run` (see the module's doc).
    pub async fn retry(&self, run: &str, req: RetryRequest) -> Result<Retried, RetryRefused> {
        let plan = self.retry_plan(run, &req).await?;
        let mut start = StartRequest::new(RunSource::Saved(plan.source), plan.input);
        (start.presets, start.key, start.labels) = (plan.presets, plan.key, plan.labels);
        let started = self.start(start).await.map_err(RetryRefused::Start)?;
        Ok(Retried { started, kept: plan.kept, again: plan.again })
    }
}

/// The retry of `rec` that `req` asks.
pub fn plan_of(rec: &RunRecord, req: &RetryRequest) -> Result<RetryPlan, RetryRefused> {
    if !rec.state.is_terminal() {
        return Err(RetryRefused::NotEnded { id: rec.id.to_string(), state: rec.state });
    }
    let def = weft_model::from_value(&rec.definition, &weft_model::NoSchemas)
        .map_err(|p| RetryRefused::Plan(weft_model::Problems(p).to_string()))?;
    if let Some(from) = &req.from
        && !def.steps.iter().any(|s| &s.name == from)
    {
        let steps = def.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ");
        return Err(RetryRefused::NoStep { id: rec.id.to_string(), step: from.clone(), steps });
    }
    let input = req.input.clone().unwrap_or_else(|| rec.input.clone());
    let kept = kept_steps(&def, rec, req.from.as_deref(), &input);
    let presets = def
        .steps
        .iter()
        .zip(&rec.steps)
        .enumerate()
        .filter(|(i, _)| kept.contains(i))
        .map(|(_, (s, r))| (s.name.clone(), r.output.clone().unwrap_or(Value::Null)))
        .collect();
    let mut labels = rec.labels.clone();
    labels.insert(RETRY_OF_LABEL.to_string(), rec.id.to_string());
    let (k, a): (Vec<usize>, Vec<usize>) = (0..def.steps.len()).partition(|i| kept.contains(i));
    let names = |v: Vec<usize>| v.into_iter().map(|i| def.steps[i].name.clone()).collect();
    Ok(RetryPlan {
        source: TemplateRecord {
            name: rec.template.clone(),
            version: rec.version.unwrap_or_default(),
            definition: (*rec.definition).clone(),
            created_at: rec.created_at,
        },
        input,
        presets,
        labels,
        key: rec.concurrency_key.clone(),
        kept: names(k),
        again: names(a),
    })
}

/// The steps of `rec` whose outputs a retry keeps (indices).
fn kept_steps(def: &weft_model::Definition, rec: &RunRecord, from: Option<&str>, input: &Value) -> HashSet<usize> {
    let graph = Graph::build(def);
    let Ok(order) = graph.topo_order() else { return HashSet::new() };
    // `from` and everything downstream of it run again.
    let mut again: HashSet<usize> = HashSet::new();
    if let Some(i) = from.and_then(|f| def.steps.iter().position(|s| s.name == f)) {
        let mut todo = vec![i];
        while let Some(k) = todo.pop() {
            if again.insert(k) {
                todo.extend(graph.dependents(k).map(|e| e.to));
            }
        }
    }
    let scope = |input: &Value| {
        let mut s = MapScope::new(input.clone());
        s.run_id = rec.id.to_string();
        s.labels = serde_json::to_value(&rec.labels).unwrap_or_default();
        s
    };
    let output = |i: usize| (rec.steps[i].state, rec.steps[i].output.clone().unwrap_or(Value::Null));
    let mut before = scope(&rec.input);
    before.steps = rec.steps.iter().enumerate().map(|(i, r)| (r.name.clone(), output(i))).collect();
    // The new run's scope as far as it is known: the steps kept so far (in
    // topological order, so a step's dependencies are in it when it is looked at).
    let mut now = scope(input);
    let same_input = input == &rec.input;
    let mut kept = HashSet::new();
    for i in order {
        let (step, stored) = (&def.steps[i], &rec.steps[i]);
        let succeeded = stored.state == StepState::Succeeded && step.for_each.is_none();
        if !succeeded || again.contains(&i) || graph.dependencies(i).any(|e| !kept.contains(&e.from)) {
            continue;
        }
        // What it reads, as it would read it now, against before.
        let reads_same = same_input
            || step.refs().iter().all(|r| {
                matches!(r.reference.root, RefRoot::Item | RefRoot::Index)
                    || r.reference.resolve(&before) == r.reference.resolve(&now)
            });
        if reads_same {
            kept.insert(i);
            now.steps.insert(stored.name.clone(), output(i));
        }
    }
    kept
}
