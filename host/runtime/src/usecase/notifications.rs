//! A run's notifications (the outbox): listing them with where each
//! stands, sending a failed one again, and changing a started run's
//! `notify` (an A2A push configuration added or deleted later). Every
//! front end shows them through [`NotificationView`].

use serde::Serialize;
use serde_json::Value;
use weft_engine::clock::rfc3339;
use weft_engine::delivery::{DeliveryFilter, DeliveryRecord, DeliveryState, DeliveryTarget};
use weft_engine::{EngineError, RunId, StoreError};

use super::UseCases;

/// A delivery as every front end shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct NotificationView {
    /// Stable over every try: the receiver's deduplication key
    /// (`webhook-id`, the tool call's idempotency key).
    pub id: String,
    pub run_id: String,
    /// What happened: a run state or `resolved:STEP`.
    pub on: String,
    /// `{"webhook": NAME}` or `{"tool": {"server", "name"}}`.
    pub target: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `pending`, `delivered` or `failed`.
    #[schemars(with = "String")]
    pub state: DeliveryState,
    /// Tries so far, of `max_attempts`.
    pub attempts: u32,
    pub max_attempts: u32,
    /// When the next try is due (pending only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_try_at: Option<String>,
    /// Why the last try failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl NotificationView {
    pub fn of(d: &DeliveryRecord) -> NotificationView {
        let target = match &d.target {
            DeliveryTarget::Webhook { name } => serde_json::json!({"webhook": name}),
            DeliveryTarget::Tool { server, name } => serde_json::json!({"tool": {"server": server, "name": name}}),
            DeliveryTarget::Push { url, .. } => serde_json::json!({"push": url}),
        };
        NotificationView {
            id: d.id.clone(),
            run_id: d.run.to_string(),
            on: d.on.clone(),
            target,
            key: d.key.clone(),
            state: d.state,
            attempts: d.attempts,
            max_attempts: d.retry.max_attempts,
            next_try_at: (d.state == DeliveryState::Pending).then(|| rfc3339(d.next_at)),
            error: d.error.clone(),
            created_at: rfc3339(d.created_at),
            updated_at: rfc3339(d.updated_at),
        }
    }
}

/// Why a notification was not sent again.
#[derive(Debug, thiserror::Error)]
pub enum ResendRefused {
    #[error("no notification `{0}`")]
    NotFound(String),
    /// Only a failed one is sent again (a pending one is still being tried).
    #[error("notification `{id}` is {state}: only a failed one is sent again")]
    NotFailed { id: String, state: DeliveryState },
    /// It was never sent: its `input` or `key` did not resolve when its
    /// transition happened (sending it again would send nothing useful).
    #[error("notification `{id}` was never sent ({error}): sending it again would send nothing")]
    NeverSent { id: String, error: String },
    /// The store failed (trying again can help).
    #[error(transparent)]
    Failed(EngineError),
}

/// Why a started run's notifications did not change.
#[derive(Debug, thiserror::Error)]
pub enum NotifyEditRefused {
    /// The run has ended: nothing would be sent.
    #[error("the run has ended: its notifications no longer change")]
    Ended,
    /// The edited definition does not hold (or would change its steps).
    #[error("{0}")]
    Invalid(String),
    /// The store failed, or the run is gone.
    #[error(transparent)]
    Failed(EngineError),
}

impl UseCases {
    /// Changes the `notify` list of run `run`, which started: `edit`
    /// changes it (applied again to what another change left, if one won
    /// the race), and the transitions after now follow the new list.
    pub async fn edit_run_notify(
        &self,
        run: &RunId,
        edit: impl Fn(&mut Vec<Value>),
        what: Value,
    ) -> Result<(), NotifyEditRefused> {
        let edited = |d: &Value| {
            let mut d = d.clone();
            if let Some(o) = d.as_object_mut()
                && let Some(list) = o.entry("notify").or_insert_with(|| Value::Array(vec![])).as_array_mut()
            {
                edit(list);
            }
            d
        };
        match self.engine.redefine(run, edited, what).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(NotifyEditRefused::Ended),
            Err(EngineError::Plan(m)) => Err(NotifyEditRefused::Invalid(m)),
            Err(e) => Err(NotifyEditRefused::Failed(e)),
        }
    }

    /// Notifications matching `filter`, newest first.
    pub async fn notifications(&self, filter: &DeliveryFilter) -> Result<Vec<NotificationView>, StoreError> {
        Ok(self.store.deliveries(filter).await?.iter().map(NotificationView::of).collect())
    }

    /// The view of run `rec` with its notifications.
    pub async fn run_view(&self, rec: &weft_engine::RunRecord) -> weft_engine::view::RunView {
        let mut v = weft_engine::view::RunView::of(rec);
        if rec.definition.get("notify").is_some() {
            let filter = DeliveryFilter { run: Some(rec.id.clone()), ..Default::default() };
            match self.notifications(&filter).await {
                Ok(list) => {
                    v.notifications = list.iter().rev().filter_map(|n| serde_json::to_value(n).ok()).collect();
                }
                Err(e) => tracing::warn!(run = %rec.id, error = %e, "cannot read the run's notifications"),
            }
        }
        v
    }

    /// Sends failed notification `id` again, from its first try.
    pub async fn resend(&self, id: &str) -> Result<NotificationView, ResendRefused> {
        let id = id.trim();
        let found = self.store.delivery(id).await.map_err(|e| ResendRefused::Failed(e.into()))?;
        let Some(d) = found else { return Err(ResendRefused::NotFound(id.to_string())) };
        if d.state != DeliveryState::Failed {
            return Err(ResendRefused::NotFailed { id: d.id, state: d.state });
        }
        if d.attempts == 0 {
            return Err(ResendRefused::NeverSent { id: d.id, error: d.error.unwrap_or_default() });
        }
        match self.engine.resend(id).await {
            Ok(d) => Ok(NotificationView::of(&d)),
            // Sent again by someone else meanwhile.
            Err(EngineError::Store(StoreError::Conflict(_))) => {
                let state = self.store.delivery(id).await.ok().flatten().map_or(DeliveryState::Pending, |d| d.state);
                Err(ResendRefused::NotFailed { id: id.to_string(), state })
            }
            Err(e) => Err(ResendRefused::Failed(e)),
        }
    }
}
