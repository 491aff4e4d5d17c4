//! The run as the store holds it, kept by its driver: each committed batch
//! is applied to it with the reference semantics of a write
//! (`memstore::apply_write`), so that `Engine::wait` answers a finished
//! run from memory instead of reading it back (a read transaction per run,
//! about a tenth of W3's time). Off for runs with many attempts (keeping
//! their record would cost more than reading it once), and as soon as a
//! write does not apply: the store is then the answer, as without it.

use crate::ids::{RunId, Seq};
use crate::store::{Batch, RunRecord, Write};

/// Attempts above which a run's record is not kept.
const MAX_ATTEMPTS: usize = 64;

pub(super) struct Mirror {
    /// The run kept; `None` when off.
    run: Option<RunId>,
    /// `None` before the batch that creates the run.
    slot: Option<RunRecord>,
    /// The seqs of the batch's events being applied (checked for duplicates).
    scratch: Vec<Seq>,
}

impl Mirror {
    /// Of a stored run as read (`rec`), or of one that the driver's first
    /// batch creates (`creating`).
    pub fn of(rec: &RunRecord, creating: bool) -> Mirror {
        if !creating && rec.attempts.len() > MAX_ATTEMPTS {
            return Mirror::off();
        }
        let slot = (!creating).then(|| rec.clone());
        Mirror { run: Some(rec.id.clone()), slot, scratch: vec![] }
    }

    pub fn off() -> Mirror {
        Mirror { run: None, slot: None, scratch: vec![] }
    }

    /// `batch` is durable.
    pub fn committed(&mut self, batch: &Batch) {
        let Some(run) = &self.run else { return };
        for w in batch.writes.iter().filter(|w| w.run_id() == Some(run)) {
            if crate::memstore::apply_write(&mut self.slot, &mut self.scratch, w).is_err() {
                *self = Mirror::off();
                return;
            }
        }
        self.scratch.clear();
        if self.slot.as_ref().is_some_and(|r| r.attempts.len() > MAX_ATTEMPTS) {
            *self = Mirror::off();
        }
    }

    /// The record of the run, if kept and ended.
    pub fn ended(self) -> Option<RunRecord> {
        self.slot.filter(|r| self.run.is_some() && r.state.is_terminal())
    }
}

/// The record of a run the batch creates, as the store will hold it once
/// the batch commits; `None` for any other batch, such as one that also
/// presets steps.
pub(in crate::scheduler) fn fresh_record(batch: &Batch) -> Option<RunRecord> {
    let mut created = None;
    let mut last_seq = Seq(0);
    for w in &batch.writes {
        match w {
            Write::CreateRun { run, steps } => created = Some((run, steps)),
            Write::Event(e) => last_seq = last_seq.max(e.seq),
            Write::PutStartKey(_) => {}
            _ => return None,
        }
    }
    let (run, steps) = created?;
    Some(RunRecord { last_seq, ..RunRecord::submitted(run, steps) })
}
