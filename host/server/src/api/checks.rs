//! Checks over HTTP: `POST /validate` runs the pipeline's one validation
//! (the same as `weft validate`, MCP `workflow_validate` and what `PUT
//! /templates/{name}` and `POST /runs` do before storing anything), and
//! `GET /runs/{id}/compare?with=` sets a run beside another, step by step
//! (by default beside its template's recording: see `weft_engine::compare`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::compare::{Comparison, counterpart};
use weft_runtime::pipeline::{Refused, Source};

use super::{ApiError, Body, Params, ProblemView};
use crate::Core;

/// `POST /validate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateBody {
    /// The definition to check.
    pub definition: Value,
}

/// A definition checked.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Validated {
    pub valid: bool,
    /// Its name, when valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Every problem (paths into the request body: `/definition/...`).
    pub problems: Vec<ProblemView>,
    /// What does not make it invalid but is worth a look.
    pub warnings: Vec<ProblemView>,
}

pub(super) async fn validate(
    State(core): State<Arc<Core>>,
    Body(b): Body<ValidateBody>,
) -> Result<Json<Validated>, ApiError> {
    let doc = super::runs::capped(&core, b.definition)?;
    Ok(Json(match core.for_http.pipeline().load(Source::Client(doc)).await {
        Ok(loaded) => Validated {
            valid: true,
            name: Some(loaded.def.name),
            problems: vec![],
            warnings: ProblemView::all("/definition", &loaded.warnings),
        },
        Err(Refused::Definition(invalid)) => Validated {
            valid: false,
            name: None,
            problems: ProblemView::all("/definition", &invalid.problems),
            warnings: ProblemView::all("/definition", &invalid.warnings),
        },
        Err(other) => return Err(ApiError::refused(other)),
    }))
}

/// `?with=` of `GET /runs/{id}/compare`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompareQuery {
    /// The run to compare with (default: the recording of the run's
    /// template, else the run of the same template before it).
    pub with: Option<String>,
}

pub(super) async fn compare(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    Params(q): Params<CompareQuery>,
) -> Result<Json<Comparison>, ApiError> {
    let run = super::runs::load(&core, &id).await?;
    let with = match q.with {
        Some(w) => super::runs::load(&core, &w).await.map_err(|e| e.at("/with"))?,
        None => {
            let other = counterpart(core.store.as_ref(), &run).await.map_err(ApiError::internal)?;
            let other = other.ok_or_else(|| {
                ApiError::not_found(format!(
                    "run {} has no recording or other run of template `{}` to compare with",
                    run.id, run.template
                ))
                .at("/with")
                .hint("name a run: ?with=r_... (GET /api/v1/runs lists them)")
            })?;
            super::runs::load(&core, other.as_str()).await?
        }
    };
    Ok(Json(Comparison::of(&run, &with)))
}
