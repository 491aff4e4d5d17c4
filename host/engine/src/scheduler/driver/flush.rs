//! Committing a driver's batch: retried with backoff for as long as the
//! store's fault lasts (a full disk, a busy or failing device), the stall
//! said in the run's log once it passes; a run not stored yet is refused
//! instead (its submitter is told why).

use super::*;

impl Driver {
    pub(super) async fn flush(&mut self) -> Result<(), EngineError> {
        self.notify_deferred();
        if self.batch.is_empty() {
            return Ok(());
        }
        // Shared with the store, not copied: kept to try again and for the mirror.
        let original = Arc::new(std::mem::take(&mut self.batch));
        let mut batch = original.clone();
        // A fault that can pass (a full disk, a busy or failing device) is
        // waited out, however long it lasts: the run goes on once the store
        // can write again, instead of stopping with its attempts `running`.
        // The batch that finally commits says so in the run's log (a
        // `store.stalled` event: how long, how many tries, the first error).
        let mut tries: u32 = 0;
        let mut stalled: Option<(std::time::Instant, String, Seq)> = None;
        let r = loop {
            match self.sh.commit_shared(batch.clone()).await {
                Ok(()) => {
                    self.committed = true;
                    self.mirror.committed(&batch);
                    break Ok(());
                }
                // A run not stored yet is new work: refused (its submitter
                // is told why) rather than waited for.
                Err(e) if e.is_retryable() && (self.created.is_none() || tries < self.sh.config.commit_retries) => {
                    tries += 1;
                    if tries == 1 || tries > self.sh.config.commit_retries {
                        tracing::warn!(run = %self.id, error = %e, tries,
                            "the store cannot write the run's transitions; trying again until it can");
                    }
                    let seq = match &stalled {
                        Some((_, _, seq)) => *seq,
                        None => {
                            self.seq = self.seq.next();
                            stalled = Some((std::time::Instant::now(), e.to_string(), self.seq));
                            self.seq
                        }
                    };
                    let backoff = (10u64 << tries.min(7)).min(1000);
                    tokio::time::sleep(std::time::Duration::from_millis(backoff)).await;
                    let (since, error) = stalled
                        .as_ref()
                        .map(|(t, e, _)| (*t, e.clone()))
                        .unwrap_or_else(|| (std::time::Instant::now(), String::new()));
                    let data =
                        json!({"tries": tries + 1, "waited_ms": since.elapsed().as_millis() as u64, "error": error});
                    let mut b = (*original).clone();
                    let (run, at) = (self.id.clone(), self.now());
                    let kind = "store.stalled".to_string();
                    b.push(Write::Event(NewEvent { run, seq, at, kind, step: None, item: None, data }));
                    batch = Arc::new(b);
                }
                Err(e) => break Err(e),
            }
        };
        if let Some(done) = self.created.take() {
            let _ = done.send(r.clone());
        }
        Ok(r?)
    }
}
