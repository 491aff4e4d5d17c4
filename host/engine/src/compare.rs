//! Two runs side by side, step by step: where a replay's inputs and
//! outputs departed from its recording (or from any other run of the same
//! template). What MCP `run_compare`, `weft runs diff A B` and `GET
//! /api/v1/runs/{id}/compare` answer.
//!
//! Steps are taken in the order they depend on each other (the first
//! run's plan: layer by layer, then as written), so the first step that
//! differs — in its input, else its output, else its state — is where the
//! runs departed. Values that differ are shown whole and as the list of
//! JSON Pointers where they differ, each with both values.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::store::{RunFilter, RunRecord, Store, StoreError};
use crate::{RunId, Seq};

/// The most differing places listed per value.
pub const MAX_CHANGES: usize = 20;

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Comparison {
    /// The run compared (`run`).
    pub run: String,
    /// The run it is compared with (`with`).
    pub with: String,
    /// `template vN` of each (`run`, then `with`).
    pub templates: [String; 2],
    /// Nothing differs: the same inputs, outputs and states throughout.
    pub same: bool,
    /// The first step (in dependency order) that differs, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<Divergence>,
    /// The runs' inputs.
    pub input: ValueDiff,
    /// Every step of either run, in dependency order.
    pub steps: Vec<StepDiff>,
    /// The runs' outputs.
    pub output: ValueDiff,
    /// What the comparison says, in one sentence.
    pub summary: String,
}

/// Where two runs first differ.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Divergence {
    pub step: String,
    /// `input`, `output`, `state`, or `missing` (one run has no such step).
    pub what: String,
    /// The places that differ, both values side by side.
    pub changes: Vec<Change>,
}

/// One step of both runs.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct StepDiff {
    pub step: String,
    /// Its state in `run` and in `with` (`absent`: that run has no such step).
    pub state: [String; 2],
    /// Its latest attempt's resolved input in each run; null: one run
    /// has none (skipped, preset, not started).
    pub input: Option<ValueDiff>,
    pub output: ValueDiff,
    /// Neither its state, input nor output differs.
    pub same: bool,
}

/// A value in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ValueDiff {
    pub same: bool,
    /// The value in `run` (only when they differ).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<Value>,
    /// The value in `with` (only when they differ).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub with: Option<Value>,
    /// Where they differ (at most 20).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
}

/// One place where two values differ.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Change {
    /// JSON Pointer into the value ("" = the value itself).
    pub path: String,
    /// Absent: the place does not exist in `run`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<Value>,
    /// Absent: the place does not exist in `with`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub with: Option<Value>,
}

impl ValueDiff {
    /// `a` (of `run`) against `b` (of `with`); `None` is no value.
    pub fn of(a: Option<&Value>, b: Option<&Value>) -> ValueDiff {
        if a == b {
            return ValueDiff { same: true, run: None, with: None, changes: vec![] };
        }
        let mut changes = vec![];
        diff("", a, b, &mut changes);
        ValueDiff { same: false, run: a.cloned(), with: b.cloned(), changes }
    }
}

fn diff(at: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Change>) {
    if out.len() >= MAX_CHANGES || a == b {
        return;
    }
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                diff(&p, x.get(k), y.get(k), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                diff(&format!("{at}/{i}"), x.get(i), y.get(i), out);
            }
        }
        _ => out.push(Change { path: at.to_string(), run: a.cloned(), with: b.cloned() }),
    }
}

/// What a run shows of one step: state, latest input, output.
struct Seen<'a> {
    state: String,
    input: Option<&'a Value>,
    output: Option<&'a Value>,
}

fn seen<'a>(r: &'a RunRecord, step: &str) -> Option<Seen<'a>> {
    let s = r.steps.iter().find(|s| s.name == step)?;
    let input = r.attempts.iter().filter(|a| a.step == step && a.item.is_none()).max_by_key(|a| a.attempt);
    Some(Seen { state: s.state.to_string(), input: input.and_then(|a| a.input.as_ref()), output: s.output.as_ref() })
}

/// The step names of both runs in dependency order: `a`'s plan layer by
/// layer (as written within a layer), then steps only `b` has.
fn order(a: &RunRecord, b: &RunRecord) -> Vec<String> {
    let mut names: Vec<String> = match crate::model_glue::parse_definition(&a.definition) {
        Ok(def) => {
            let g = crate::model_glue::Graph::build(&def);
            let layers = g.layers().unwrap_or_else(|| vec![0; g.len()]);
            let mut idx: Vec<usize> = (0..def.steps.len()).collect();
            idx.sort_by_key(|i| (layers[*i], *i));
            idx.into_iter().map(|i| def.steps[i].name.clone()).collect()
        }
        Err(_) => a.steps.iter().map(|s| s.name.clone()).collect(),
    };
    for s in &b.steps {
        if !names.contains(&s.name) {
            names.push(s.name.clone());
        }
    }
    names
}

fn label(r: &RunRecord) -> String {
    match r.version {
        Some(v) => format!("{} v{v}", r.template),
        None => r.template.clone(),
    }
}

impl Comparison {
    /// Run `a` compared with run `b`.
    pub fn of(a: &RunRecord, b: &RunRecord) -> Comparison {
        let absent = || "absent".to_string();
        let mut steps = vec![];
        let mut first = None;
        for name in order(a, b) {
            let (x, y) = (seen(a, &name), seen(b, &name));
            let state = [
                x.as_ref().map_or_else(absent, |s| s.state.clone()),
                y.as_ref().map_or_else(absent, |s| s.state.clone()),
            ];
            // An input one side does not know (a preset, a step that never
            // started, a run stored before inputs were kept) is not compared.
            let input = match (x.as_ref().and_then(|s| s.input), y.as_ref().and_then(|s| s.input)) {
                (Some(p), Some(q)) => Some(ValueDiff::of(Some(p), Some(q))),
                _ => None,
            };
            let output = ValueDiff::of(x.as_ref().and_then(|s| s.output), y.as_ref().and_then(|s| s.output));
            let input_same = input.as_ref().is_none_or(|d| d.same);
            let same = state[0] == state[1] && input_same && output.same;
            if !same && first.is_none() {
                let (what, changes) = if x.is_none() || y.is_none() {
                    ("missing", vec![])
                } else if let Some(d) = input.as_ref().filter(|d| !d.same) {
                    ("input", d.changes.clone())
                } else if !output.same {
                    ("output", output.changes.clone())
                } else {
                    let c = Change {
                        path: String::new(),
                        run: Some(state[0].clone().into()),
                        with: Some(state[1].clone().into()),
                    };
                    ("state", vec![c])
                };
                first = Some(Divergence { step: name.clone(), what: what.into(), changes });
            }
            steps.push(StepDiff { step: name, state, input, output, same });
        }
        let input = ValueDiff::of(Some(&a.input), Some(&b.input));
        let output = ValueDiff::of(a.output.as_ref(), b.output.as_ref());
        let same = first.is_none() && input.same && output.same && a.state == b.state;
        // The runs' inputs differ, yet these steps were given the same
        // input: in a replay, a literal where a ref was meant.
        let unmoved: Vec<&str> = if input.same {
            vec![]
        } else {
            steps.iter().filter(|s| s.input.as_ref().is_some_and(|d| d.same)).map(|s| s.step.as_str()).collect()
        };
        let mut summary = match &first {
            None if same => "the runs are the same: every step had the same input, output and state".to_string(),
            None => "every step is the same; the runs differ only in their own input, output or state".to_string(),
            Some(d) => {
                let differing = steps.iter().filter(|s| !s.same).count();
                let why = if input.same { "" } else { " (the runs' own inputs differ)" };
                format!(
                    "the runs depart at step `{}`: {}{why}; {differing} of {} steps differ; the output {}",
                    d.step,
                    match d.what.as_str() {
                        "missing" => "only one run has it",
                        "input" => "its input differs",
                        "output" => "same input, different output",
                        _ => "its state differs",
                    },
                    steps.len(),
                    if output.same { "is the same" } else { "differs" }
                )
            }
        };
        if !unmoved.is_empty() {
            let shown: Vec<String> = unmoved.iter().take(8).map(|n| format!("`{n}`")).collect();
            let more = if unmoved.len() > 8 { format!(" and {} more", unmoved.len() - 8) } else { String::new() };
            summary.push_str(&format!(
                "; the runs' inputs differ but these steps got the same input (a literal where a ref was meant?): {}{more}",
                shown.join(", ")
            ));
        }
        Comparison {
            run: a.id.to_string(),
            with: b.id.to_string(),
            templates: [label(a), label(b)],
            same,
            first_divergence: first,
            input,
            steps,
            output,
            summary,
        }
    }
}

/// Whether run `id` is a recording (its steps were proxied calls of a
/// recording session): its first step says `how: recorded`.
async fn is_recording(store: &dyn Store, id: &RunId) -> Result<bool, StoreError> {
    let first = store.events_after(id, Seq::ZERO, 4).await?;
    Ok(first.iter().any(|e| e.data.get("how").and_then(Value::as_str) == Some("recorded")))
}

/// What `run` is compared with when no other run is named: the recording
/// of its template (of its version if there is one, else the newest), else
/// the run of the same template created just before it.
pub async fn counterpart(store: &dyn Store, run: &RunRecord) -> Result<Option<RunId>, StoreError> {
    let filter = RunFilter { template: Some(run.template.clone()), limit: Some(200), ..Default::default() };
    let others: Vec<_> = store.list_runs(&filter).await?.into_iter().filter(|r| r.id != run.id).collect();
    let mut recordings = vec![];
    for r in &others {
        if is_recording(store, &r.id).await? {
            recordings.push(r);
        }
    }
    if let Some(r) = recordings.iter().find(|r| r.version == run.version).or(recordings.first()) {
        return Ok(Some(r.id.clone()));
    }
    Ok(others.iter().find(|r| r.id < run.id).or(others.first()).map(|r| r.id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_differ_by_json_pointer_with_both_sides() {
        let d =
            ValueDiff::of(Some(&json!({"a": 5, "b": [1, 2], "c": "x"})), Some(&json!({"a": 100, "b": [1], "c": "x"})));
        assert!(!d.same);
        let got: Vec<(&str, Option<Value>, Option<Value>)> =
            d.changes.iter().map(|c| (c.path.as_str(), c.run.clone(), c.with.clone())).collect();
        assert_eq!(got, vec![("/a", Some(json!(5)), Some(json!(100))), ("/b/1", Some(json!(2)), None)]);
        assert!(ValueDiff::of(Some(&json!(1)), Some(&json!(1))).same);
        let whole = ValueDiff::of(Some(&json!("a")), None);
        assert_eq!(whole.changes, vec![Change { path: String::new(), run: Some(json!("a")), with: None }]);
    }
}
