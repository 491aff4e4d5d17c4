//! Runs whose steps were done outside the scheduler — a recording
//! session's proxied tool calls and preset steps — stored as ordinary
//! runs: one batch that creates the run and walks it and each step through
//! the same state machine and event kinds the scheduler uses
//! (`submitted → working → completed`, `pending → running → succeeded`,
//! one succeeded attempt per step), so `runs show`, `runs events` and
//! `graph` treat it like any other run. [`done_step`] also serves presets:
//! steps of a new run whose output is given instead of computed.
//!
//! While a session records, its recording is a run in state `recording`
//! ([`open_recording`]) that holds what was recorded as its output
//! ([`recording_holds`]); saved, it is stored again whole as a completed
//! run under the same id ([`saved_recording`]).

use crate::state::Transition as _;
use serde_json::{Value, json};

use crate::ids::{AttemptNo, RunId, Seq};
use crate::state::{AttemptState, RunEvent, RunState, StepEvent, StepState, TransitionRefused};
use crate::store::{Batch, NewEvent, NewRun, Write};

/// One step that already happened.
#[derive(Debug, Clone, PartialEq)]
pub struct DoneStep {
    /// Its name in the run's definition.
    pub name: String,
    /// What it was given (refs resolved), if anything: a recorded call's
    /// arguments.
    pub input: Option<Value>,
    /// What it produced.
    pub output: Value,
    /// When it started and ended (ms since epoch).
    pub started_at: i64,
    pub ended_at: i64,
    /// `preset` (a known output, nothing was called) or `recorded`.
    pub how: &'static str,
}

/// The batch that stores `run` with `steps` all succeeded and the run
/// `completed` with `output` at `at`. `run.definition` should name the
/// steps in the same order.
pub fn completed_run(run: NewRun, steps: &[DoneStep], output: Value, at: i64) -> Result<Batch, TransitionRefused> {
    let id = run.id.clone();
    let mut b = Batch::new();
    let mut seq = 0u64;
    let event = |b: &mut Batch, seq: &mut u64, at: i64, kind: String, step: Option<&str>, data: Value| {
        *seq += 1;
        b.push(Write::Event(NewEvent {
            run: id.clone(),
            seq: Seq(*seq),
            at,
            kind,
            step: step.map(String::from),
            item: None,
            data,
        }));
    };
    let created = run.created_at;
    b.push(Write::CreateRun { run, steps: steps.iter().map(|s| s.name.clone()).collect() });
    event(&mut b, &mut seq, created, "run.submitted".into(), None, json!({"state": "submitted"}));
    let working = RunState::Submitted.apply(RunEvent::Start)?;
    b.push(Write::RunState {
        run: id.clone(),
        from: RunState::Submitted,
        to: working,
        output: None,
        error: None,
        at: created,
    });
    event(&mut b, &mut seq, created, format!("run.{working}"), None, json!({"state": working.as_str()}));
    for s in steps {
        for w in done_step(&id, s, &mut seq)? {
            b.push(w);
        }
    }
    let end = working.apply(RunEvent::Complete)?;
    b.push(Write::RunState { run: id.clone(), from: working, to: end, output: Some(output), error: None, at });
    event(&mut b, &mut seq, at, format!("run.{end}"), None, json!({"state": end.as_str()}));
    Ok(b)
}

/// The batch that opens a recording: `run`, with no steps yet, in state
/// `recording`, holding `body` (what is recorded so far) as its output.
pub fn open_recording(run: NewRun, body: Value) -> Result<Batch, TransitionRefused> {
    let (id, at) = (run.id.clone(), run.created_at);
    let to = RunState::Submitted.apply(RunEvent::Record)?;
    let event = |seq: u64, state: RunState| {
        Write::Event(NewEvent {
            run: id.clone(),
            seq: Seq(seq),
            at,
            kind: format!("run.{state}"),
            step: None,
            item: None,
            data: json!({"state": state.as_str()}),
        })
    };
    Ok(Batch {
        writes: vec![
            Write::CreateRun { run, steps: vec![] },
            event(1, RunState::Submitted),
            Write::RunState { run: id.clone(), from: RunState::Submitted, to, output: Some(body), error: None, at },
            event(2, to),
        ],
    })
}

/// The write that keeps `body` as what open recording `run` holds
/// (refused once it is no longer `recording`: saved or discarded).
pub fn recording_holds(run: &RunId, body: Value, at: i64) -> Result<Write, TransitionRefused> {
    let to = RunState::Recording.apply(RunEvent::Record)?;
    Ok(Write::RunState { run: run.clone(), from: RunState::Recording, to, output: Some(body), error: None, at })
}

/// The batch that stores open recording `run.id` as a completed run (as
/// [`completed_run`]), in place of the recording: refused when it is no
/// longer `recording`, so a recording is saved once.
pub fn saved_recording(run: NewRun, steps: &[DoneStep], output: Value, at: i64) -> Result<Batch, TransitionRefused> {
    let mut b = Batch { writes: vec![Write::DeleteRecording { run: run.id.clone() }] };
    b.writes.extend(completed_run(run, steps, output, at)?.writes);
    Ok(b)
}

/// The writes that take pending step `s.name` of run `run` through
/// `running` to `succeeded` with one succeeded attempt, and their events
/// (numbered after `*seq`, which is advanced). Also used for presets: steps
/// whose output is given when a run is created.
pub fn done_step(run: &RunId, s: &DoneStep, seq: &mut u64) -> Result<Vec<Write>, TransitionRefused> {
    let mut out = vec![];
    let mut event = |out: &mut Vec<Write>, at: i64, kind: String, data: Value| {
        *seq += 1;
        out.push(Write::Event(NewEvent {
            run: run.clone(),
            seq: Seq(*seq),
            at,
            kind,
            step: Some(s.name.clone()),
            item: None,
            data,
        }));
    };
    let running = StepState::Pending.apply(StepEvent::Claim)?;
    out.push(Write::StepState {
        run: run.clone(),
        step: s.name.clone(),
        from: StepState::Pending,
        to: running,
        output: None,
        error: None,
        next_attempt_at: None,
        at: s.started_at,
    });
    event(&mut out, s.started_at, "step.running".into(), json!({"attempt": 1, "how": s.how}));
    out.push(Write::StartAttempt {
        run: run.clone(),
        step: s.name.clone(),
        item: None,
        attempt: AttemptNo::FIRST,
        lease_until: s.ended_at,
        at: s.started_at,
        input: s.input.as_ref().map(crate::size_limits::shown_input),
    });
    out.push(Write::FinishAttempt {
        run: run.clone(),
        step: s.name.clone(),
        item: None,
        attempt: AttemptNo::FIRST,
        state: AttemptState::Succeeded,
        output: Some(s.output.clone()),
        error: None,
        fuel: None,
        blame: 0,
        at: s.ended_at,
    });
    let done = running.apply(StepEvent::Succeed)?;
    out.push(Write::StepState {
        run: run.clone(),
        step: s.name.clone(),
        from: running,
        to: done,
        output: Some(s.output.clone()),
        error: None,
        next_attempt_at: None,
        at: s.ended_at,
    });
    event(&mut out, s.ended_at, format!("step.{done}"), json!({"attempt": 1, "how": s.how}));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstore::MemStore;
    use crate::store::RunStore;

    #[tokio::test]
    async fn a_recorded_run_reads_like_any_other() {
        let store = MemStore::default();
        let id: RunId = "r_0000000000000000000000000a".parse().unwrap();
        let run = NewRun {
            id: id.clone(),
            template: "rec".into(),
            version: None,
            definition: std::sync::Arc::new(json!({"name": "rec", "version": 1, "steps": []})),
            input: json!({"m": "hi"}),
            parent: None,
            depth: 0,
            concurrency_key: None,
            created_at: 1_000,
            deadline_at: None,
            traceparent: None,
            labels: Default::default(),
        };
        let steps = [
            DoneStep {
                name: "echo_1".into(),
                input: Some(json!({"message": "hi"})),
                output: json!("Echo: hi"),
                started_at: 1_001,
                ended_at: 1_005,
                how: "recorded",
            },
            DoneStep {
                name: "note_1".into(),
                input: None,
                output: json!({"k": 1}),
                started_at: 1_006,
                ended_at: 1_006,
                how: "preset",
            },
        ];
        let b = completed_run(run, &steps, json!({"k": 1}), 1_010).unwrap();
        store.commit(b).await.unwrap();
        let r = store.run(&id).await.unwrap().unwrap();
        assert_eq!(r.state, RunState::Completed);
        assert_eq!(r.output, Some(json!({"k": 1})));
        assert_eq!(r.steps.len(), 2);
        assert!(r.steps.iter().all(|s| s.state == StepState::Succeeded && s.attempts == 1));
        assert_eq!(r.steps[0].output, Some(json!("Echo: hi")));
        assert_eq!(r.attempts[0].input, Some(json!({"message": "hi"})), "a recorded call keeps its arguments");
        let evs = store.events_after(&id, Seq::ZERO, 100).await.unwrap();
        assert_eq!(evs.first().unwrap().kind, "run.submitted");
        assert_eq!(evs.last().unwrap().kind, "run.completed");
    }
}
