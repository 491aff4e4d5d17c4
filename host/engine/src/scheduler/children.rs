//! `workflow` steps: child runs. A parent pins each child template's
//! version when it is created; the child's id is derived from the parent
//! and the step, so creating it again after a crash is a conflict rather
//! than a second child. The parent's step waits (`waiting`) until the
//! child ends; its output is the child's output, its error the child's.
//! A parent that ends cancels its children; a child whose creation was in
//! flight then (the cancel found no run) is not created, or, once stored,
//! ends canceled as its driver starts (`driver::drive` looks at the
//! parent).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::{Engine, EngineError, RunOptions, Shared};
use crate::error::{ErrorKind, StepError};
use crate::ids::{ItemIndex, RunId};
use crate::model_glue::{Action, Definition, Problem, Problems, parse_definition};
use crate::state::RunState;
use crate::store::{RunRecord, Store, StoreError};

/// The definition with every `workflow` step's template version pinned
/// (the latest now, when it names none); `def` itself when it has no
/// `workflow` step. An unknown template is refused.
pub(crate) async fn pin_versions<'a>(
    store: &dyn Store,
    def: &'a Arc<Definition>,
) -> Result<Cow<'a, Arc<Definition>>, EngineError> {
    if !def.steps.iter().any(|s| matches!(s.action, Action::Workflow(_))) {
        return Ok(Cow::Borrowed(def));
    }
    let mut out = Definition::clone(def);
    let mut problems = vec![];
    for (i, s) in out.steps.iter_mut().enumerate() {
        let Action::Workflow(w) = &mut s.action else { continue };
        match store.template(&w.template, w.version).await? {
            Some(t) => w.version = Some(t.version),
            None => problems.push(
                Problem::new(
                    format!("/steps/{i}/workflow/template"),
                    match w.version {
                        Some(v) => format!("no template `{}` version {v}", w.template),
                        None => format!("no template `{}`", w.template),
                    },
                )
                .hint("save the template first (template_save over MCP, `weft templates save FILE`, PUT /api/v1/templates/NAME)"),
            ),
        }
    }
    if problems.is_empty() { Ok(Cow::Owned(Arc::new(out))) } else { Err(EngineError::Invalid(Problems(problems))) }
}

/// The id of the child run of `step` in `parent` (of its item `item`, for
/// a `for_each` step; a step's name has no `#`).
pub(crate) fn child_id(parent: &RunId, step: &str, item: Option<ItemIndex>) -> RunId {
    match item {
        None => RunId::derive(parent.timestamp_ms(), &format!("{parent}/{step}")),
        Some(k) => RunId::derive(parent.timestamp_ms(), &format!("{parent}/{step}#{k}")),
    }
}

/// What a parent's driver needs to start (or find again) a child.
pub(crate) struct ChildSpec {
    pub step: usize,
    /// The unit of a `for_each` step the child is for.
    pub unit: Option<usize>,
    pub id: RunId,
    pub parent: RunId,
    pub depth: u32,
    pub template: String,
    pub version: Option<u32>,
    pub input: Value,
    /// The parent run's span: the child's trace goes on under it.
    pub traceparent: String,
}

/// Creates the child unless it exists, drives it, and waits for its end.
pub(crate) async fn run_child(sh: Arc<Shared>, c: ChildSpec) -> (usize, Option<usize>, Result<RunRecord, StepError>) {
    let (step, unit) = (c.step, c.unit);
    (step, unit, run_child_inner(sh, c).await)
}

fn plan_error(msg: String) -> StepError {
    StepError::new(ErrorKind::Validation, msg, false)
}

async fn run_child_inner(sh: Arc<Shared>, c: ChildSpec) -> Result<RunRecord, StepError> {
    let engine = Engine::from_shared(sh.clone());
    let store_err = |e: StoreError| StepError::new(ErrorKind::Transport, format!("the store: {e}"), e.is_retryable());
    // A parent that ended has canceled its children; one not created yet
    // must not start (see `parent_ended`).
    let parent_ended = || async {
        let parent = sh.store.run(&c.parent).await.map_err(store_err)?;
        Ok::<_, StepError>(parent.is_none_or(|p| p.state.is_terminal()))
    };
    if sh.store.run(&c.id).await.map_err(store_err)?.is_none() {
        if parent_ended().await? {
            return Err(StepError::canceled("the parent run ended before its child run was created"));
        }
        let t = sh.store.template(&c.template, c.version).await.map_err(store_err)?.ok_or_else(|| {
            plan_error(format!("no template `{}` version {}", c.template, c.version.unwrap_or_default()))
        })?;
        let doc = match sh.planner.get() {
            Some(p) => {
                p.prepare(t.definition.clone()).map_err(|e| plan_error(format!("template `{}`: {e}", t.name)))?
            }
            None => t.definition.clone(),
        };
        let def = parse_definition(&doc).map_err(|p| plan_error(format!("template `{}`: {p}", t.name)))?;
        let opts = RunOptions {
            id: Some(c.id.clone()),
            template: Some(t.name.clone()),
            version: Some(t.version),
            parent: Some(c.parent.clone()),
            depth: c.depth,
            traceparent: Some(c.traceparent.clone()),
            ..Default::default()
        };
        match engine.create_run(&def, c.input.clone(), opts).await {
            Ok(_) | Err(EngineError::Store(StoreError::Conflict(_))) => {}
            Err(EngineError::Invalid(p)) => {
                return Err(plan_error(format!("the child's input does not match `{}`'s input_schema: {p}", t.name)));
            }
            Err(e) => return Err(plan_error(format!("cannot create the child run: {e}"))),
        }
    }
    loop {
        engine.start(&c.id);
        let rec = engine.wait(&c.id).await.map_err(|e| plan_error(e.to_string()))?;
        if rec.state.is_terminal() {
            return Ok(rec);
        }
        // Its driver stopped without ending it (e.g. a store error): again.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The parent step's outcome from its child's record.
pub(crate) fn outcome(rec: &RunRecord) -> Result<Value, StepError> {
    match rec.state {
        RunState::Completed => Ok(rec.output.clone().unwrap_or(Value::Null)),
        s => {
            let e =
                rec.error.clone().unwrap_or_else(|| StepError::new(ErrorKind::GuestError, "no error recorded", false));
            let kind = if s == RunState::Canceled { ErrorKind::Canceled } else { e.kind };
            Err(StepError::new(kind, format!("child run {} {s}: {}", rec.id, e.message), e.retryable))
        }
    }
}
