//! Cron schedules as every front end asks for them: add (the cron
//! expression, the template and the input checked now), list, pause or
//! resume, remove. The CLI (`weft schedule`), the MCP tools
//! (`schedule_*`) and the HTTP API (`/api/v1/schedules`) are adapters over
//! these; each phrases [`ScheduleRefused`] in its reader's terms.

use serde_json::Value;
use weft_engine::EngineError;
use weft_engine::model_glue::Problems;
use weft_engine::outside::ScheduleRecord;

use super::UseCases;

/// A schedule to add.
#[derive(Debug, Clone)]
pub struct ScheduleRequest {
    /// Its name (default: the template's).
    pub name: Option<String>,
    /// The template each fire runs (its latest version then).
    pub template: String,
    /// When (UTC): five fields, six with seconds first, or `@daily`-style.
    pub cron: String,
    /// The runs' input, checked against the template's `input_schema` now.
    pub input: Value,
}

/// Why a schedule was not added, changed or removed.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleRefused {
    /// What was asked is wrong; each problem has the path of the field
    /// (`/name`, `/cron`, `/template`, `/input/...`).
    #[error("{0}")]
    Invalid(Problems),
    /// No schedule has this name.
    #[error("no schedule `{0}`")]
    NotFound(String),
    /// The store failed (trying again can help).
    #[error(transparent)]
    Failed(crate::RuntimeError),
}

impl ScheduleRefused {
    fn of(e: EngineError) -> ScheduleRefused {
        match e {
            EngineError::Invalid(p) => ScheduleRefused::Invalid(p),
            other => ScheduleRefused::Failed(other.into()),
        }
    }
}

impl UseCases {
    /// Every schedule, by name.
    pub async fn schedules(&self) -> Result<Vec<ScheduleRecord>, ScheduleRefused> {
        self.store
            .schedules()
            .await
            .map_err(|e| ScheduleRefused::Failed(crate::RuntimeError::store("listing schedules")(e)))
    }

    /// Adds a schedule; the store's owner fires it.
    pub async fn add_schedule(&self, req: ScheduleRequest) -> Result<ScheduleRecord, ScheduleRefused> {
        let name = req.name.unwrap_or_else(|| req.template.clone());
        self.engine.add_schedule(&name, &req.template, &req.cron, req.input).await.map_err(ScheduleRefused::of)
    }

    /// Pauses (`paused`) or resumes schedule `name`. Resumed, it fires at
    /// its next time after now; the times it was paused over are not made up.
    pub async fn pause_schedule(&self, name: &str, paused: bool) -> Result<ScheduleRecord, ScheduleRefused> {
        self.engine
            .pause_schedule(name, paused)
            .await
            .map_err(ScheduleRefused::of)?
            .ok_or_else(|| ScheduleRefused::NotFound(name.to_string()))
    }

    /// Removes schedule `name` (the runs it started are kept).
    pub async fn remove_schedule(&self, name: &str) -> Result<(), ScheduleRefused> {
        match self.engine.remove_schedule(name).await.map_err(ScheduleRefused::of)? {
            true => Ok(()),
            false => Err(ScheduleRefused::NotFound(name.to_string())),
        }
    }
}
