//! A cron schedule as the HTTP API and the MCP tools show it: one shape
//! for both (times as RFC 3339, ids as text).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use weft_engine::clock::rfc3339;
use weft_engine::outside::ScheduleRecord;

/// A cron schedule.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScheduleView {
    pub name: String,
    /// The template each fire runs (its latest version then).
    pub template: String,
    /// When it fires (UTC).
    pub cron: String,
    /// Each run's input.
    pub input: Value,
    /// Its next fire (none while it is paused: resumed, it fires at its
    /// next time after the resume).
    pub next_fire_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_fire_at: Option<String>,
    /// The run its last fire started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    /// A paused schedule does not fire.
    pub paused: bool,
}

impl From<ScheduleRecord> for ScheduleView {
    fn from(s: ScheduleRecord) -> ScheduleView {
        ScheduleView {
            name: s.name,
            template: s.template,
            cron: s.cron,
            input: s.input,
            next_fire_at: (!s.paused).then(|| rfc3339(s.next_fire_at)),
            last_fire_at: s.last_fire_at.map(rfc3339),
            last_run: s.last_run.map(|r| r.to_string()),
            paused: s.paused,
        }
    }
}
