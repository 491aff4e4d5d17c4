//! The store conformance suite: what every implementation of [`Store`]
//! must do, checked against [`MemStore`] (the reference semantics) where
//! the two can be compared. Each check is an async function over a fresh,
//! empty store; a store crate runs them all with [`conformance_suite!`],
//! given an async block that opens one (and something to keep alive while
//! the check runs, such as its temporary folder):
//!
//! ```ignore
//! weft_engine::conformance_suite!(async { (Arc::new(open_a_fresh_store()) as Arc<dyn Store>, guard) });
//! ```
//!
//! Built with the `conformance` feature (a dev-dependency of the stores).
//!
//! [`MemStore`]: crate::MemStore
//! [`conformance_suite!`]: crate::conformance_suite

mod engine;
mod manage;
mod outbox;
mod outside;
mod writes;

pub use engine::{crash_and_recover, runs_complete};
pub use manage::{copies_runs_and_templates, retention_deletes_finished_runs_only};
pub use outbox::outbox_agrees_with_the_reference;
pub use outside::{
    early_signals_and_events_agree_with_the_reference, recordings_open_hold_and_save_like_the_reference,
    waits_inbox_schedules_and_queues_agree_with_the_reference,
};
pub use writes::{
    a_failed_batch_leaves_no_trace, concurrent_lives_agree_with_the_reference,
    every_write_kind_round_trips_like_the_reference, group_commit_under_concurrent_callers,
    last_seq_and_updated_at_come_from_the_last_event, list_runs_filters, refused_writes_match_the_reference,
    templates_are_versioned, templates_changed_by_another_handle_read_fresh, unfinished_runs_are_those_not_terminal,
};

use serde_json::{Value, json};

use crate::state::AttemptState;
use crate::store::*;
use crate::{AttemptNo, ErrorKind, ItemIndex, RunId, RunState, SeededRng, Seq, StepError, StepState};

/// Runs every check of the suite, each as a `#[tokio::test]` of the
/// calling crate, on a fresh store made by `$fresh` (an async block
/// giving an `Arc<dyn Store>` and a guard kept until the check ends).
#[macro_export]
macro_rules! conformance_suite {
    ($fresh:expr) => {
        mod conformance {
            use super::*;
            $crate::conformance_suite!(@each $fresh;
                every_write_kind_round_trips_like_the_reference,
                refused_writes_match_the_reference,
                last_seq_and_updated_at_come_from_the_last_event,
                a_failed_batch_leaves_no_trace,
                group_commit_under_concurrent_callers,
                concurrent_lives_agree_with_the_reference,
                list_runs_filters,
                templates_are_versioned,
                unfinished_runs_are_those_not_terminal,
                waits_inbox_schedules_and_queues_agree_with_the_reference,
                early_signals_and_events_agree_with_the_reference,
                recordings_open_hold_and_save_like_the_reference,
                outbox_agrees_with_the_reference,
                retention_deletes_finished_runs_only,
                runs_complete,
                crash_and_recover,
            );
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn copies_runs_and_templates() {
                let (from, _a) = $fresh.await;
                let (to, _b) = $fresh.await;
                $crate::conformance::copies_runs_and_templates(from, to).await;
            }
        }
    };
    (@each $fresh:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (store, _guard) = $fresh.await;
                $crate::conformance::$name(store).await;
            }
        )*
    };
}

pub fn rid(n: i64) -> RunId {
    RunId::generate(1_700_000_000_000 + n, &SeededRng::new(n as u64))
}

pub fn create(id: &RunId, steps: &[&str]) -> Write {
    Write::CreateRun {
        run: NewRun {
            id: id.clone(),
            template: "t".into(),
            version: Some(2),
            definition: std::sync::Arc::new(json!({"name": "t", "steps": []})),
            input: json!({"email": "a@b"}),
            parent: None,
            depth: 0,
            concurrency_key: Some("k".into()),
            created_at: 100,
            deadline_at: Some(9_999),
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
            labels: [("origin", "slack"), ("session/id", "s-42")].map(|(k, v)| (k.into(), v.into())).into(),
        },
        steps: steps.iter().map(|s| s.to_string()).collect(),
    }
}

pub fn event(id: &RunId, seq: u64, kind: &str) -> Write {
    Write::Event(NewEvent {
        run: id.clone(),
        seq: Seq(seq),
        at: 100 + seq as i64,
        kind: kind.into(),
        step: None,
        item: None,
        data: json!({"k": kind}),
    })
}

pub fn step_to(id: &RunId, step: &str, from: StepState, to: StepState, output: Option<Value>, at: i64) -> Write {
    Write::StepState { run: id.clone(), step: step.into(), from, to, output, error: None, next_attempt_at: None, at }
}

pub fn run_to(id: &RunId, from: RunState, to: RunState, output: Option<Value>, at: i64) -> Write {
    Write::RunState { run: id.clone(), from, to, output, error: None, at }
}

pub fn start(id: &RunId, step: &str, item: Option<u32>, n: u32, lease: i64) -> Write {
    Write::StartAttempt {
        run: id.clone(),
        step: step.into(),
        item: item.map(ItemIndex),
        attempt: AttemptNo::new(n).unwrap(),
        lease_until: lease,
        at: 110,
        input: Some(json!({"n": n})),
    }
}

pub fn finish(
    id: &RunId,
    step: &str,
    item: Option<u32>,
    n: u32,
    state: AttemptState,
    output: Option<Value>,
    error: Option<StepError>,
) -> Write {
    Write::FinishAttempt {
        run: id.clone(),
        step: step.into(),
        item: item.map(ItemIndex),
        attempt: AttemptNo::new(n).unwrap(),
        state,
        output,
        error,
        fuel: None,
        blame: 0,
        at: 120,
    }
}

pub fn b(writes: Vec<Write>) -> Batch {
    Batch { writes }
}

/// Every write kind, in the order an engine would make them.
pub fn life(id: &RunId) -> Vec<Batch> {
    let err = StepError::new(ErrorKind::Transport, "down", true);
    vec![
        b(vec![create(id, &["a", "each", "z"]), event(id, 1, "run.submitted")]),
        b(vec![
            Write::RunState {
                run: id.clone(),
                from: RunState::Submitted,
                to: RunState::Working,
                output: None,
                error: None,
                at: 105,
            },
            event(id, 2, "run.working"),
            step_to(id, "a", StepState::Pending, StepState::Running, None, 106),
            start(id, "a", None, 1, 5_000),
        ]),
        b(vec![
            finish(id, "a", None, 1, AttemptState::Failed, None, Some(err.clone())),
            Write::StepState {
                run: id.clone(),
                step: "a".into(),
                from: StepState::Running,
                to: StepState::Retrying,
                output: None,
                error: Some(err.clone()),
                next_attempt_at: Some(300),
                at: 121,
            },
            event(id, 3, "step.retrying"),
        ]),
        b(vec![step_to(id, "a", StepState::Retrying, StepState::Running, None, 300), start(id, "a", None, 2, 6_000)]),
        b(vec![
            finish(id, "a", None, 2, AttemptState::Succeeded, Some(json!({"ok": true})), None),
            step_to(id, "a", StepState::Running, StepState::Succeeded, Some(json!({"ok": true})), 301),
            step_to(id, "each", StepState::Pending, StepState::Running, None, 302),
            start(id, "each", Some(0), 1, 7_000),
            start(id, "each", Some(1), 1, 200),
        ]),
        b(vec![
            finish(id, "each", Some(0), 1, AttemptState::Succeeded, Some(json!(0)), None),
            event(id, 4, "item.succeeded"),
        ]),
    ]
}

pub async fn apply_all(s: &dyn Store, batches: &[Batch]) {
    for (k, batch) in batches.iter().enumerate() {
        s.commit(batch.clone()).await.unwrap_or_else(|e| panic!("batch {k}: {e}"));
    }
}
