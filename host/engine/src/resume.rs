//! A run's `resume` block: what it did so far, for whoever picks it up
//! later (a person opening the run, an agent told it ended, a message sent
//! out): the definition's `summary` rendered with the run's values, and
//! each step with its `description`, state, and its result (small, or
//! said to be large) or error. Built the same way for every run view
//! (`RunView::resume`) and for `@run.resume` while the run executes, so a
//! last step can send it on.

use serde_json::{Value, json};

use crate::state::StepState;

/// A step's result larger than this (bytes of JSON) is described, not shown.
pub const RESULT_BYTES: usize = 1024;

/// One step as the resume shows it.
pub struct StepSeen<'a> {
    pub name: &'a str,
    pub description: Option<&'a str>,
    pub state: StepState,
    pub output: &'a Value,
    pub error: Option<&'a str>,
}

/// The resume block: `{"summary"?, "steps": [{name, description?, state,
/// result? | error?}]}`.
pub fn build<'a>(summary: Option<Value>, steps: impl IntoIterator<Item = StepSeen<'a>>) -> Value {
    let steps: Vec<Value> = steps
        .into_iter()
        .map(|s| {
            let mut o = json!({"name": s.name, "state": s.state});
            if let Some(d) = s.description {
                o["description"] = json!(d);
            }
            match (s.state, s.error) {
                (_, Some(e)) if s.state != StepState::Succeeded => o["error"] = json!(e),
                (StepState::Succeeded, _) => {
                    let mut r = s.output.clone();
                    cap(&mut r, RESULT_BYTES);
                    o["result"] = r;
                }
                _ => {}
            }
            o
        })
        .collect();
    let mut out = json!({"steps": steps});
    if let Some(s) = summary {
        out["summary"] = s;
    }
    out
}

/// A value over `max` bytes of JSON replaced by its type and size.
pub fn cap(v: &mut Value, max: usize) {
    let bytes = v.to_string().len();
    if bytes > max {
        *v = json!({"large": {"type": weft_model::schema_type(v), "bytes": bytes}});
    }
}

/// The block with every result (and the summary) over `max` bytes capped.
pub fn cap_all(resume: &mut Value, max: usize) {
    if let Some(steps) = resume.get_mut("steps").and_then(Value::as_array_mut) {
        for r in steps.iter_mut().filter_map(|s| s.get_mut("result")) {
            cap(r, max);
        }
    }
    if let Some(s) = resume.get_mut("summary") {
        cap(s, max);
    }
}

/// The description of step `name` in a stored definition (JSON).
pub fn description<'a>(definition: &'a Value, name: &str) -> Option<&'a str> {
    definition
        .get("steps")?
        .as_array()?
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(name))?
        .get("description")?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_results_shown_large_ones_described_errors_kept() {
        let big = json!("x".repeat(2000));
        let steps = [
            StepSeen {
                name: "a",
                description: Some("fetch"),
                state: StepState::Succeeded,
                output: &json!(1),
                error: None,
            },
            StepSeen { name: "b", description: None, state: StepState::Succeeded, output: &big, error: None },
            StepSeen {
                name: "c",
                description: None,
                state: StepState::Failed,
                output: &Value::Null,
                error: Some("boom"),
            },
            StepSeen { name: "d", description: None, state: StepState::Waiting, output: &Value::Null, error: None },
        ];
        let r = build(Some(json!("did a")), steps);
        assert_eq!(r["summary"], "did a");
        assert_eq!(r["steps"][0], json!({"name": "a", "description": "fetch", "state": "succeeded", "result": 1}));
        assert_eq!(r["steps"][1]["result"]["large"], json!({"type": "string", "bytes": 2002}));
        assert_eq!(r["steps"][2], json!({"name": "c", "state": "failed", "error": "boom"}));
        assert_eq!(r["steps"][3], json!({"name": "d", "state": "waiting"}));
        assert!(build(None, []).get("summary").is_none());
    }
}
