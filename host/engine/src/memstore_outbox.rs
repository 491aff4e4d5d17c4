//! The reference semantics of the outbox writes and reads (deliveries and
//! idempotency keys; see [`crate::delivery`]), kept beside the
//! [`crate::memstore::MemStore`]'s runs.

use std::collections::HashMap;

use crate::delivery::{DeliveryFilter, DeliveryRecord, DeliveryState, StartKeyRecord};
use crate::ids::RunId;
use crate::store::{StoreError, Write};

#[derive(Debug, Clone, Default)]
pub(crate) struct Outbox {
    keys: HashMap<String, StartKeyRecord>,
    /// In the order written.
    deliveries: Vec<DeliveryRecord>,
}

impl Outbox {
    /// Whether `w` is one of the writes kept here.
    pub(crate) fn owns(w: &Write) -> bool {
        matches!(
            w,
            Write::PutStartKey(_)
                | Write::PutDelivery(_)
                | Write::DeliveryLease { .. }
                | Write::DeliveryTried { .. }
                | Write::DeliveryResend { .. }
        )
    }

    pub(crate) fn apply(&mut self, w: &Write) -> Result<(), StoreError> {
        let conflict = |m: String| Err(StoreError::Conflict(m));
        match w {
            Write::PutStartKey(k) => {
                if self.keys.contains_key(&k.key) {
                    return conflict(format!("idempotency key {} is taken", k.key));
                }
                self.keys.insert(k.key.clone(), k.clone());
            }
            Write::PutDelivery(d) => {
                if self.deliveries.iter().any(|x| x.id == d.id) {
                    return conflict(format!("delivery {} exists", d.id));
                }
                self.deliveries.push(d.clone());
            }
            Write::DeliveryLease { id, attempts, until, now } => match self.find(id) {
                Some(d)
                    if d.state == DeliveryState::Pending
                        && d.attempts == *attempts
                        && d.lease_until.is_none_or(|l| l < *now) =>
                {
                    d.lease_until = Some(*until)
                }
                _ => return conflict(format!("delivery {id} is not free to send")),
            },
            Write::DeliveryTried { id, attempts, state, next_at, error, at } => match self.find(id) {
                Some(d) if d.state == DeliveryState::Pending && d.attempts == *attempts => {
                    d.attempts += 1;
                    d.state = *state;
                    d.next_at = *next_at;
                    d.error = error.clone();
                    d.lease_until = None;
                    d.updated_at = *at;
                }
                _ => return conflict(format!("delivery {id} is not pending after {attempts} tries")),
            },
            Write::DeliveryResend { id, at } => match self.find(id) {
                Some(d) if d.state == DeliveryState::Failed => {
                    d.state = DeliveryState::Pending;
                    d.attempts = 0;
                    d.error = None;
                    d.next_at = *at;
                    d.lease_until = None;
                    d.updated_at = *at;
                }
                _ => return conflict(format!("delivery {id} did not fail")),
            },
            other => unreachable!("not an outbox write: {other:?}"),
        }
        Ok(())
    }

    fn find(&mut self, id: &str) -> Option<&mut DeliveryRecord> {
        self.deliveries.iter_mut().find(|d| d.id == id)
    }

    pub(crate) fn start_key(&self, key: &str) -> Option<StartKeyRecord> {
        self.keys.get(key).cloned()
    }

    pub(crate) fn start_key_of(&self, run: &RunId) -> Option<StartKeyRecord> {
        self.keys.values().find(|k| k.run == *run).cloned()
    }

    /// A run's notifications and key, as another store exported them.
    pub(crate) fn import(&mut self, deliveries: &[DeliveryRecord], key: Option<&StartKeyRecord>) {
        self.deliveries.extend(deliveries.iter().cloned());
        if let Some(k) = key {
            self.keys.insert(k.key.clone(), k.clone());
        }
    }

    pub(crate) fn due(&self, now: i64, limit: usize) -> Vec<DeliveryRecord> {
        let mut heads: HashMap<&str, &str> = HashMap::new();
        for d in self.deliveries.iter().filter(|d| d.state == DeliveryState::Pending) {
            if let Some(k) = &d.key {
                heads.entry(k).or_insert(&d.id);
            }
        }
        self.deliveries
            .iter()
            .filter(|d| {
                d.state == DeliveryState::Pending
                    && d.next_at <= now
                    && d.lease_until.is_none_or(|l| l < now)
                    && d.key.as_deref().is_none_or(|k| heads.get(k) == Some(&d.id.as_str()))
            })
            .take(limit)
            .cloned()
            .collect()
    }

    pub(crate) fn list(&self, f: &DeliveryFilter) -> Vec<DeliveryRecord> {
        let all = self.deliveries.iter().rev().filter(|d| f.matches(d));
        all.take(f.limit.unwrap_or(usize::MAX)).cloned().collect()
    }

    pub(crate) fn get(&self, id: &str) -> Option<DeliveryRecord> {
        self.deliveries.iter().find(|d| d.id == id).cloned()
    }

    /// Everything of run `id` goes (the run was deleted).
    pub(crate) fn forget(&mut self, id: &RunId) {
        self.keys.retain(|_, k| k.run != *id);
        self.deliveries.retain(|d| d.run != *id);
    }
}
