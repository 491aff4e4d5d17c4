//! The outbox: notifications a run's transitions send out (a definition's
//! `notify`), as stored records, and the keys that make starts idempotent.
//!
//! A [`DeliveryRecord`] is written in the same batch as the transition
//! that causes it (a run ending, asking for input, a step's wait
//! resolved), so a crash can lose neither: the transition without its
//! notification, or a notification of a transition that did not happen.
//! The sender ([`crate::scheduler`]'s outbox loop) tries each one until a
//! try succeeds or its retries run out, with the same id on every try (the
//! receiver's deduplication key), one at a time per `key` in the order
//! they were written.
//!
//! A [`StartKeyRecord`] ties an idempotency key to the run it started, in
//! the batch that creates the run: a second start with the same key finds
//! it (and is refused when it asks something else).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::RunId;

/// Where a notification goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeliveryTarget {
    /// A webhook configured in `weft.toml` (`[webhooks.NAME]`).
    Webhook { name: String },
    /// A tool of a configured MCP server.
    Tool { server: String, name: String },
    /// An A2A client's push notification URL, with what its receiver
    /// checks (`X-A2A-Notification-Token`, `Authorization`).
    Push {
        url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        authorization: Option<String>,
    },
}

impl std::fmt::Display for DeliveryTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeliveryTarget::Webhook { name } => write!(f, "webhook {name}"),
            DeliveryTarget::Tool { server, name } => write!(f, "tool {server}/{name}"),
            DeliveryTarget::Push { url, .. } => write!(f, "push {url}"),
        }
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Not delivered yet: its next try is due at `next_at`.
    Pending,
    /// A try succeeded.
    Delivered,
    /// Its retries ran out (it can be sent again).
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }
}

impl std::fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DeliveryState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pending" => Ok(DeliveryState::Pending),
            "delivered" => Ok(DeliveryState::Delivered),
            "failed" => Ok(DeliveryState::Failed),
            other => Err(format!("unknown delivery state `{other}` (pending, delivered, failed)")),
        }
    }
}

/// How a delivery is retried (a step's policy, in ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRetry {
    /// Tries in all (the first one included).
    pub max_attempts: u32,
    /// The wait after the first failed try; it doubles after each.
    pub backoff_ms: u64,
    pub max_backoff_ms: u64,
}

impl DeliveryRetry {
    /// The wait after `attempts` failed tries.
    pub fn delay_ms(&self, attempts: u32) -> u64 {
        let shift = attempts.saturating_sub(1).min(30);
        self.backoff_ms.saturating_mul(1u64 << shift).min(self.max_backoff_ms)
    }
}

/// A notification to send, with what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// Stable over every try (`dlv_...`): the receiver's deduplication key.
    pub id: String,
    pub run: RunId,
    /// What happened: a run state (`completed`, `input-required`, ...) or
    /// `resolved:STEP`.
    pub on: String,
    pub target: DeliveryTarget,
    /// Deliveries of one key go out one at a time, in the order written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// What is sent (a webhook's `data`, a tool's arguments).
    pub body: Value,
    pub retry: DeliveryRetry,
    pub state: DeliveryState,
    /// Tries made so far.
    pub attempts: u32,
    /// When the next try is due (ms since epoch).
    pub next_at: i64,
    /// A sender on a store shared by many workers holds it until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<i64>,
    /// Why the last try failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Which deliveries to list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeliveryFilter {
    pub run: Option<RunId>,
    pub state: Option<DeliveryState>,
    /// Newest first; at most this many.
    pub limit: Option<usize>,
}

impl DeliveryFilter {
    pub fn matches(&self, d: &DeliveryRecord) -> bool {
        self.run.as_ref().is_none_or(|r| *r == d.run) && self.state.is_none_or(|s| s == d.state)
    }
}

/// An idempotency key and the run it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartKeyRecord {
    pub key: String,
    pub run: RunId,
    /// A digest of what the start asked (template, input, ...): the same
    /// key with another digest is a conflict.
    pub digest: String,
    pub created_at: i64,
}

/// The stable id of the delivery of notification `index` of run `run` for
/// the transition logged at `seq` (one id per run, target and event).
pub fn delivery_id(run: &RunId, index: usize, seq: u64) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(format!("{run}/{index}/{seq}").as_bytes());
    let hex: String = h.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("dlv_{hex}")
}

/// The seam that sends a delivery (the runtime's webhooks and MCP tools).
#[async_trait::async_trait]
pub trait Deliverer: Send + Sync + 'static {
    /// One try: `Ok` once the receiver took it.
    async fn deliver(&self, d: &DeliveryRecord) -> Result<(), DeliveryFailure>;
}

/// Why a try failed, and whether another try can help (a timeout, a 5xx,
/// a refused connection can; a target that is not configured cannot).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DeliveryFailure {
    pub message: String,
    pub retryable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let r = DeliveryRetry { max_attempts: 5, backoff_ms: 1000, max_backoff_ms: 5000 };
        assert_eq!([r.delay_ms(1), r.delay_ms(2), r.delay_ms(3), r.delay_ms(4)], [1000, 2000, 4000, 5000]);
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        let run: RunId = "r_0000000000000000000000000a".parse().unwrap();
        assert_eq!(delivery_id(&run, 0, 7), delivery_id(&run, 0, 7));
        assert_ne!(delivery_id(&run, 0, 7), delivery_id(&run, 1, 7));
        assert_ne!(delivery_id(&run, 0, 7), delivery_id(&run, 0, 8));
        assert!(delivery_id(&run, 0, 7).starts_with("dlv_"));
    }
}
