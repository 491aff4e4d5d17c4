//! The outbox's sender: a task of each store owner that tries every due
//! delivery through the [`Deliverer`] the runtime set, writes each try's
//! outcome, and retries with the delivery's backoff until a try succeeds
//! or its tries run out (then it is kept `failed`, and can be sent again:
//! [`Engine::resend`]).
//!
//! At least once: a delivery is committed with its transition before any
//! try; a sender that dies mid-try leaves it pending, and the next owner
//! (or, on a store shared by many workers, another worker once the dead
//! one's lease on it ran out) tries it again with the same id. In order
//! per key: the store only offers the oldest pending delivery of a key,
//! so the next one waits for its predecessor's last try. A run never
//! waits for its notifications.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::task::JoinSet;

use super::{Engine, EngineError, Shared};
use crate::delivery::{Deliverer, DeliveryRecord, DeliveryState};
use crate::store::{Batch, NewEvent, StoreError, Write};

/// How often the sender looks when nothing woke it (a retry's due time,
/// deliveries written by other processes).
pub const OUTBOX_POLL: Duration = Duration::from_millis(250);

/// Deliveries tried at once.
const IN_FLIGHT: usize = 32;

/// The sender's task; stops when dropped.
pub struct OutboxTask {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OutboxTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Engine {
    /// Who sends deliveries (set once; later calls are ignored). Without
    /// one, deliveries are kept pending for a process that has one.
    pub fn set_deliverer(&self, d: Arc<dyn Deliverer>) {
        let _ = self.sh.deliverer.set(d);
    }

    /// Starts sending due deliveries (`None` without a deliverer).
    pub fn start_outbox(&self) -> Option<OutboxTask> {
        let d = self.sh.deliverer.get()?.clone();
        let sh = self.sh.clone();
        Some(OutboxTask { task: tokio::spawn(send_loop(sh, d)) })
    }

    /// A failed delivery goes out again from its first try.
    pub async fn resend(&self, id: &str) -> Result<DeliveryRecord, EngineError> {
        let at = self.sh.clock.now_ms();
        let mut b = Batch::new();
        b.push(Write::DeliveryResend { id: id.to_string(), at });
        self.sh.commit(b).await?;
        self.sh.outbox_wake.notify_one();
        let d = self.sh.store.delivery(id).await?;
        d.ok_or_else(|| EngineError::Store(StoreError::NotFound(format!("delivery {id}"))))
    }
}

impl Shared {
    /// A committed batch wrote deliveries: the sender looks now.
    pub(super) fn wake_outbox(&self, batch: &Batch) {
        if self.deliverer.get().is_some()
            && batch.writes.iter().any(|w| matches!(w, Write::PutDelivery(_) | Write::DeliveryResend { .. }))
        {
            self.outbox_wake.notify_one();
        }
    }
}

async fn send_loop(sh: Arc<Shared>, deliverer: Arc<dyn Deliverer>) {
    let mut tries: JoinSet<String> = JoinSet::new();
    let mut busy: HashSet<String> = HashSet::new();
    loop {
        if busy.len() < IN_FLIGHT {
            match sh.store.deliveries_due(sh.clock.now_ms(), IN_FLIGHT).await {
                Ok(due) => {
                    for d in due {
                        if busy.len() >= IN_FLIGHT || !busy.insert(d.id.clone()) {
                            continue;
                        }
                        let (sh, deliverer) = (sh.clone(), deliverer.clone());
                        tries.spawn(async move {
                            let id = d.id.clone();
                            try_once(&sh, deliverer.as_ref(), d).await;
                            id
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the deliveries due"),
            }
        }
        tokio::select! {
            _ = sh.outbox_wake.notified() => {}
            Some(Ok(id)) = tries.join_next() => {
                busy.remove(&id);
                // Its key's next delivery may go now.
                while let Some(Ok(id)) = tries.try_join_next() {
                    busy.remove(&id);
                }
            }
            _ = tokio::time::sleep(OUTBOX_POLL) => {}
        }
    }
}

/// One try of `d`, its outcome committed.
async fn try_once(sh: &Shared, deliverer: &dyn Deliverer, d: DeliveryRecord) {
    if sh.store.is_shared() {
        let now = sh.clock.now_ms();
        let until = now + sh.config.delivery_lease_ms as i64;
        let mut b = Batch::new();
        b.push(Write::DeliveryLease { id: d.id.clone(), attempts: d.attempts, until, now });
        if sh.store.commit(b).await.is_err() {
            return; // another worker took it (or the store failed: it stays due)
        }
    }
    let result = deliverer.deliver(&d).await;
    let now = sh.clock.now_ms();
    let tried = d.attempts + 1;
    let (state, next_at, error) = match &result {
        Ok(()) => (DeliveryState::Delivered, now, None),
        Err(f) if f.retryable && tried < d.retry.max_attempts => {
            (DeliveryState::Pending, now + d.retry.delay_ms(tried) as i64, Some(f.message.clone()))
        }
        Err(f) => (DeliveryState::Failed, now, Some(f.message.clone())),
    };
    if crate::trace::metrics_on() {
        let target = match &d.target {
            crate::delivery::DeliveryTarget::Webhook { .. } => "webhook",
            crate::delivery::DeliveryTarget::Tool { .. } => "tool",
            crate::delivery::DeliveryTarget::Push { .. } => "push",
        };
        let outcome = match (&result, state) {
            (Ok(()), _) => "delivered",
            (Err(_), DeliveryState::Pending) => "retrying",
            _ => "failed",
        };
        metrics::counter!("weft_notifications_total", "target" => target, "outcome" => outcome).increment(1);
    }
    match &error {
        Some(e) if state == DeliveryState::Failed => {
            tracing::warn!(delivery = %d.id, run = %d.run, target = %d.target, tries = tried, error = %e,
                "a notification failed for good; resending sends it again (`weft notifications resend`, MCP `notification_resend`, POST /api/v1/notifications/ID/resend)")
        }
        Some(e) => {
            tracing::info!(delivery = %d.id, run = %d.run, target = %d.target, tries = tried, error = %e,
                "a notification try failed; trying again later")
        }
        None => {}
    }
    let mut b = Batch::new();
    let at = now;
    b.push(Write::DeliveryTried { id: d.id.clone(), attempts: d.attempts, state, next_at, error: error.clone(), at });
    if let Err(e) = sh.store.commit(b).await {
        // Tried again as it stands (pending): at least once.
        tracing::warn!(delivery = %d.id, error = %e, "cannot record a notification's try");
        return;
    }
    if state == DeliveryState::Failed {
        log_failure(sh, &d, tried, error.unwrap_or_default()).await;
    }
}

/// A failed delivery of an ended run goes in its log (`notify.failed`);
/// a live run's log is its driver's, so there it shows in the run's
/// notifications only.
async fn log_failure(sh: &Shared, d: &DeliveryRecord, tries: u32, error: String) {
    for _ in 0..3 {
        let Ok(Some(rec)) = sh.store.run(&d.run).await else { return };
        if !rec.state.is_terminal() {
            return;
        }
        let data = json!({"delivery": d.id, "on": d.on, "target": d.target, "tries": tries, "error": error});
        let mut b = Batch::new();
        b.push(Write::Event(NewEvent {
            run: d.run.clone(),
            seq: rec.last_seq.next(),
            at: sh.clock.now_ms(),
            kind: "notify.failed".into(),
            step: None,
            item: None,
            data,
        }));
        match sh.store.commit(b).await {
            Err(StoreError::Conflict(_)) => continue,
            _ => return,
        }
    }
}
