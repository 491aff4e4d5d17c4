//! The engine's entry points for outside data: signals, events and
//! cancels from this process ([`Engine::signal`], [`Engine::emit`]) or
//! left in the store's inbox by another ([`Engine::post_signal`],
//! [`Engine::post_event`], handled by the owner in
//! [`Engine::process_inbox`]). Each goes to the run's driver as
//! [`Mail`](super::mail::Mail) when one runs here, else is decided in the
//! store (`mail_undriven`); a run another worker drives gets it relayed.

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::mail::{Delivered, EmitAnswer, Mail, SignalAnswer, Via, answer_once, new_id};
use super::mail_undriven::{event_undriven, signal_undriven};
use super::{Engine, EngineError};
use crate::ids::{ItemIndex, RunId};
use crate::outside::{InboxKind, InboxRecord};
use crate::store::{Batch, StoreError, Write};

impl Engine {
    /// A signal's data under `[limits] max_input_bytes` (refused, nothing
    /// stored, when over).
    fn signal_data_fits(&self, data: &Value) -> Result<(), EngineError> {
        let cap = self.sh.config.size_limits.max_input_bytes;
        super::over(data, cap, "/data", "the signal's data", "max_input_bytes")
    }

    /// Answers the `wait` step `step` of `run` with `data` (validated
    /// against the wait's schema). For the store's owner; another process
    /// uses [`Engine::post_signal`].
    pub async fn signal(&self, run: &RunId, step: &str, data: Value) -> Result<SignalAnswer, EngineError> {
        self.signal_with(run, step, None, data, Via::Call).await
    }

    /// Answers item `item` of the `for_each` wait `step` of `run` (with
    /// `None`, as [`Engine::signal`]).
    pub async fn signal_item(
        &self,
        run: &RunId,
        step: &str,
        item: Option<ItemIndex>,
        data: Value,
    ) -> Result<SignalAnswer, EngineError> {
        self.signal_with(run, step, item, data, Via::Call).await
    }

    pub(super) async fn signal_with(
        &self,
        run: &RunId,
        step: &str,
        item: Option<ItemIndex>,
        data: Value,
        via: Via,
    ) -> Result<SignalAnswer, EngineError> {
        self.signal_data_fits(&data)?;
        let answered = match self
            .to_run(
                run,
                |reply| Mail::Signal { step: step.to_string(), item, data: data.clone(), via: via.clone(), reply },
                || signal_undriven(&self.sh, run, step, item, &data, &via),
            )
            .await
        {
            // Another worker drives the run: it answers (a message taken
            // from the inbox is this worker's only while it owns the run).
            Err(EngineError::Store(StoreError::Fenced(_))) if via == Via::Call => {
                let kind = InboxKind::Signal { run: run.clone(), step: step.to_string(), item };
                let answer = self.relay(kind, data).await?;
                return serde_json::from_value(answer)
                    .map_err(|e| EngineError::Plan(format!("the owner of run {run} answered oddly: {e}")));
            }
            other => other?,
        };
        answered.ok_or_else(|| {
            EngineError::Store(StoreError::Busy(format!("run {run} kept changing while step `{step}` was signaled")))
        })
    }

    /// Emits an event (store owner): every wait for `name` whose `match`
    /// holds takes `data` as its output. With an `id` seen before, nothing
    /// happens and the first emit's deliveries are returned.
    pub async fn emit(&self, name: &str, data: Value, id: Option<String>) -> Result<EmitAnswer, EngineError> {
        super::over(&data, self.sh.config.size_limits.max_input_bytes, "/data", "the event's data", "max_input_bytes")?;
        let msg = self.event_message(name, data, id);
        // Handled by this call alone, and answered before the message can
        // be seen pending. On a store shared by many workers, no other
        // worker takes it: it is taken as it is stored. In this process,
        // `process_inbox` reads the pending messages under the inbox lock,
        // which is held from before the message is stored until it is
        // answered. (Taken after the commit, the owner's poll, which this
        // very commit wakes, could read the message pending and handle it
        // first: this call then found the waits it resolved closed and
        // answered `delivered: []`.)
        let _g = self.sh.inbox.lock().await;
        let take = Write::InboxTake { id: msg.id.clone() };
        match self.sh.commit(Batch { writes: vec![Write::InboxPut(msg.clone()), take] }).await {
            Ok(()) => {}
            Err(StoreError::Conflict(_)) => return self.duplicate(&msg).await,
            Err(e) => return Err(e.into()),
        }
        self.handle_event(&msg).await
    }

    fn event_message(&self, name: &str, data: Value, id: Option<String>) -> InboxRecord {
        let id = id.unwrap_or_else(|| new_id(&self.sh, "e_"));
        InboxRecord {
            id: new_id(&self.sh, "m_"),
            kind: InboxKind::Event { event: name.to_string(), id },
            data,
            at: self.sh.clock.now_ms(),
            answer: None,
        }
    }

    async fn duplicate(&self, msg: &InboxRecord) -> Result<EmitAnswer, EngineError> {
        let InboxKind::Event { id, .. } = &msg.kind else { unreachable!("an event") };
        let first = self.sh.store.inbox_get(id, true).await?;
        let delivered = first
            .and_then(|m| m.answer)
            .and_then(|a| serde_json::from_value::<EmitAnswer>(a).ok())
            .map(|a| a.delivered)
            .unwrap_or_default();
        Ok(EmitAnswer { id: id.clone(), delivered, duplicate: true })
    }

    /// Leaves a signal in the store's inbox for the owner (any process);
    /// returns the message id to await with [`Engine::inbox_answer`].
    pub async fn post_signal(
        &self,
        run: &RunId,
        step: &str,
        item: Option<ItemIndex>,
        data: Value,
    ) -> Result<String, EngineError> {
        self.signal_data_fits(&data)?;
        let msg = InboxRecord {
            id: new_id(&self.sh, "m_"),
            kind: InboxKind::Signal { run: run.clone(), step: step.to_string(), item },
            data,
            at: self.sh.clock.now_ms(),
            answer: None,
        };
        self.sh.commit(Batch { writes: vec![Write::InboxPut(msg.clone())] }).await?;
        Ok(msg.id)
    }

    /// Leaves an event in the store's inbox for the owner (any process).
    /// `Err(answer)` when its id was emitted before.
    pub async fn post_event(
        &self,
        name: &str,
        data: Value,
        id: Option<String>,
    ) -> Result<Result<String, EmitAnswer>, EngineError> {
        super::over(&data, self.sh.config.size_limits.max_input_bytes, "/data", "the event's data", "max_input_bytes")?;
        let msg = self.event_message(name, data, id);
        match self.sh.commit(Batch { writes: vec![Write::InboxPut(msg.clone())] }).await {
            Ok(()) => Ok(Ok(msg.id)),
            Err(StoreError::Conflict(_)) => Ok(Err(self.duplicate(&msg).await?)),
            Err(e) => Err(e.into()),
        }
    }

    /// The answer to an inbox message, once the owner handled it.
    pub async fn inbox_answer(&self, id: &str) -> Result<Option<Value>, EngineError> {
        Ok(self.sh.store.inbox_get(id, false).await?.and_then(|m| m.answer))
    }

    /// Handles every pending inbox message (the store's owner calls this
    /// when it polls); returns how many it handled.
    pub async fn process_inbox(&self) -> Result<usize, EngineError> {
        let _g = self.sh.inbox.lock().await;
        let pending = self.sh.store.inbox_pending().await?;
        let n = pending.len();
        for m in pending {
            match &m.kind {
                InboxKind::Signal { run, step, item } => {
                    let answer = self.signal_with(run, step, *item, m.data.clone(), Via::Inbox(m.id.clone())).await?;
                    if !answer.accepted() {
                        // Drivers and the undriven path record refusals too;
                        // this covers a run that no longer exists.
                        answer_once(&self.sh, &m.id, &answer).await?;
                    }
                }
                InboxKind::Event { .. } => {
                    self.handle_event(&m).await?;
                }
                InboxKind::Cancel { run } => {
                    let answer = match self.cancel(run).await {
                        Ok(r) => json!({"state": r.state}),
                        Err(EngineError::NotFound(_)) => json!({"error": format!("no run {run}")}),
                        Err(EngineError::Store(e)) => return Err(e.into()),
                        Err(e) => json!({"error": e.to_string()}),
                    };
                    answer_once(&self.sh, &m.id, &answer).await?;
                }
                InboxKind::Deliver { run, step, event, event_id } => {
                    let took = self.deliver_event(run, step, event, &m.data, event_id.as_deref()).await?;
                    answer_once(&self.sh, &m.id, &took).await?;
                }
                InboxKind::Redefine { run } => {
                    let answer = self.redefine_relayed(run, &m.data).await;
                    answer_once(&self.sh, &m.id, &answer).await?;
                }
            }
        }
        Ok(n)
    }

    /// Delivers a stored event message and records its answer.
    async fn handle_event(&self, msg: &InboxRecord) -> Result<EmitAnswer, EngineError> {
        let InboxKind::Event { event, id } = &msg.kind else { unreachable!("an event") };
        let mut delivered = vec![];
        for w in self.sh.store.event_waits(event).await? {
            if !w.takes_event(event, &msg.data) {
                continue;
            }
            if self.deliver_event(&w.run, &w.step, event, &msg.data, Some(id)).await? {
                delivered.push(Delivered { run: w.run.clone(), step: w.step.clone() });
            }
        }
        let answer = EmitAnswer { id: id.clone(), delivered, duplicate: false };
        answer_once(&self.sh, &msg.id, &answer).await?;
        Ok(answer)
    }

    /// Hands event `name` (`data`, its id `id`) to the wait of `step` in
    /// `run`: whether the wait took it.
    pub(super) async fn deliver_event(
        &self,
        run: &RunId,
        step: &str,
        name: &str,
        data: &Value,
        id: Option<&str>,
    ) -> Result<bool, EngineError> {
        let mail = |reply| Mail::Event {
            step: step.to_string(),
            name: name.to_string(),
            data: data.clone(),
            id: id.map(str::to_string),
            reply,
        };
        match self.to_run(run, mail, || event_undriven(&self.sh, run, step, name, data, id)).await {
            Ok(took) => Ok(took.unwrap_or(false)),
            // Another worker drives the run: handed to it (it waits for the
            // event: the wait was open when the event was matched).
            Err(EngineError::Store(StoreError::Fenced(_))) => {
                let kind = InboxKind::Deliver {
                    run: run.clone(),
                    step: step.to_string(),
                    event: name.to_string(),
                    event_id: id.map(str::to_string),
                };
                self.post(kind, data.clone()).await?;
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// Leaves a message for the worker that drives its run.
    async fn post(&self, kind: InboxKind, data: Value) -> Result<String, EngineError> {
        let msg = InboxRecord { id: new_id(&self.sh, "m_"), kind, data, at: self.sh.clock.now_ms(), answer: None };
        self.sh.commit(Batch { writes: vec![Write::InboxPut(msg.clone())] }).await?;
        Ok(msg.id)
    }

    /// Leaves a message for the worker that drives its run and waits for
    /// its answer (woken by the store's watch; without one, it looks every
    /// 20 ms), at most [`super::EngineConfig::relay_timeout_ms`].
    pub(super) async fn relay(&self, kind: InboxKind, data: Value) -> Result<Value, EngineError> {
        let what = format!("{} for run {}", kind.name(), kind.run().map(|r| r.as_str()).unwrap_or("-"));
        let mut watch = self.sh.store.watch();
        let id = self.post(kind, data).await?;
        let until = tokio::time::Instant::now() + std::time::Duration::from_millis(self.sh.config.relay_timeout_ms);
        loop {
            if let Some(a) = self.inbox_answer(&id).await? {
                return Ok(a);
            }
            let tick = tokio::time::sleep(std::time::Duration::from_millis(if watch.is_some() { 1000 } else { 20 }));
            tokio::select! {
                ok = async { match &mut watch { Some(w) => w.changed().await, None => std::future::pending().await } } => {
                    if !ok {
                        watch = None;
                    }
                }
                _ = tick => {}
                _ = tokio::time::sleep_until(until) => {
                    return Err(EngineError::Store(StoreError::Busy(format!(
                        "the worker driving the run did not answer the {what} within {} ms",
                        self.sh.config.relay_timeout_ms
                    ))));
                }
            }
        }
    }

    /// Hands something to run `run`: to its driver when one runs here (as
    /// the mail `mail` builds), else straight to the store (`undriven`),
    /// trying again while the run changes meanwhile (a driver starting or
    /// stopping, a store conflict), up to 20 times: `None` then.
    pub(super) async fn to_run<T, F>(
        &self,
        run: &RunId,
        mail: impl Fn(oneshot::Sender<T>) -> Mail,
        undriven: impl Fn() -> F,
    ) -> Result<Option<T>, EngineError>
    where
        F: std::future::Future<Output = Result<T, EngineError>>,
    {
        for _ in 0..20 {
            if let Some(tx) = self.mailbox(run) {
                let (reply, rx) = oneshot::channel();
                let sent = tx.send(mail(reply)).is_ok();
                // Not held while the answer is awaited: a message sent just
                // as the driver hibernated (its receiver dropped, its queue
                // drained) is freed, with its reply, only when the last
                // sender goes; holding this one would wait for ever.
                drop(tx);
                if sent && let Ok(a) = rx.await {
                    return Ok(Some(a));
                }
                // The driver stopped meanwhile: ask again.
                tokio::task::yield_now().await;
                continue;
            }
            match undriven().await {
                Err(EngineError::Store(StoreError::Conflict(_))) => {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                other => return other.map(Some),
            }
        }
        Ok(None)
    }
}
