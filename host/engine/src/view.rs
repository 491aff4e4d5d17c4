//! The `runs show --json` shape (interfaces.md), stable for scripts.

use serde_json::{Value, json};

use crate::clock::rfc3339;
use crate::store::{EventRecord, RunRecord};

/// `{"id", "template", "version", "state", "input", "output", "error",
/// "parent", "created_at", "updated_at", "steps": [{"name", "state",
/// "attempts", "output", "error", "started_at", "ended_at"}]}`; a step
/// waiting to retry also carries `next_attempt_at`, and one whose attempts
/// were interrupted (their process died) `interruptions`. A parked step is in
/// `waits`: `{"step", "kind": "signal" | "event" | "child" | "sleep",
/// "since", "until"?}` plus `prompt`, `schema`, `reason` (signal), `event`,
/// `match` (event) or `child` (the child run's id).
pub fn run_json(r: &RunRecord) -> Value {
    let steps: Vec<Value> = r
        .steps
        .iter()
        .map(|s| {
            let mut v = json!({
                "name": s.name,
                "state": s.state,
                "attempts": s.attempts,
                "output": s.output,
                "error": s.error,
                "started_at": s.started_at.map(rfc3339),
                "ended_at": s.ended_at.map(rfc3339),
            });
            if let Some(t) = s.next_attempt_at {
                v["next_attempt_at"] = json!(rfc3339(t));
            }
            // Attempts that ran again because their process died.
            let interruptions: u32 = r.attempts.iter().filter(|a| a.step == s.name).map(|a| a.interruptions).sum();
            if interruptions > 0 {
                v["interruptions"] = json!(interruptions);
            }
            v
        })
        .collect();
    json!({
        "id": r.id,
        "template": r.template,
        "version": r.version,
        "state": r.state,
        "input": r.input,
        "output": r.output,
        "error": r.error,
        "parent": r.parent,
        "created_at": rfc3339(r.created_at),
        "updated_at": rfc3339(r.updated_at),
        "steps": steps,
        "waits": r.waits.iter().map(wait_json).collect::<Vec<_>>(),
        "artifacts": r.artifacts.iter().map(artifact_json).collect::<Vec<_>>(),
    })
}

/// One artifact as JSON: `{"name", "mime", "size", "sha256", "step",
/// "item"?, "attempt", "created_at"}` (its bytes: `weft runs artifacts`,
/// or the MCP resource `weft://runs/{id}/artifacts/{name}`).
pub fn artifact_json(a: &crate::store::ArtifactRecord) -> Value {
    let mut v = json!({"name": a.name, "mime": a.mime, "size": a.size, "sha256": a.sha256, "step": a.step,
                       "attempt": a.attempt, "created_at": rfc3339(a.created_at)});
    if let Some(i) = a.item {
        v["item"] = json!(i);
    }
    v
}

/// One open wait as JSON (times as RFC 3339).
pub fn wait_json(w: &crate::outside::WaitRecord) -> Value {
    let mut v = serde_json::to_value(w).unwrap_or_default();
    if let Value::Object(m) = &mut v {
        m.remove("run");
        m.insert("since".into(), json!(rfc3339(w.since)));
        if let Some(u) = w.until {
            m.insert("until".into(), json!(rfc3339(u)));
        }
    }
    v
}

/// One event as JSON (`runs events --json`).
pub fn event_json(e: &EventRecord) -> Value {
    json!({
        "seq": e.seq.0,
        "at": rfc3339(e.at),
        "kind": e.kind,
        "step": e.step,
        "item": e.item,
        "data": e.data,
    })
}
