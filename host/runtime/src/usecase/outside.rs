//! Signal, emit and cancel from a process that may not own the store:
//! `weft signal`, `weft emit` and `weft runs cancel` work whether or not a
//! worker runs (docs/waits.md). The answer is always decided by the one
//! process that owns the store, so two answers to the same wait can never
//! both win:
//!
//! - When the store is free, this process takes the scheduler lock for the
//!   moment it takes to decide and commit the answer (and any answers other
//!   processes queued meanwhile), then lets go. The run continues when a
//!   worker next owns the store.
//! - When a worker (or `weft serve`, or a foreground `weft run`) owns it,
//!   the signal or event is left in the store's inbox, the owner handles it
//!   on its next poll (within milliseconds), and this process returns the
//!   answer the owner recorded. Should the owner go away meanwhile, this
//!   process takes the lock and handles the inbox itself.
//! - On PostgreSQL (many workers) the engine relays a signal to the run's
//!   owner, or decides it here when nobody drives the run.

use std::time::{Duration, Instant};

use serde_json::Value;
use weft_engine::{EmitAnswer, Engine, ItemIndex, SignalAnswer};

use super::answer::{CancelRefused, Canceled, EmitRefused, SignalRefused, Signaled, WaitRefused, event_name};
use super::parse_run_id;
use crate::RuntimeError;
use crate::app::{self, App};

/// How long to wait for the store's owner to answer before giving up.
pub const OWNER_ANSWER: Duration = Duration::from_secs(30);

/// Answers `step` of run `run` (its item `item`, for a `for_each` wait)
/// with `data`, from outside the owner.
pub fn signal(
    app: &App,
    engine: &Engine,
    run: &str,
    step: &str,
    item: Option<u32>,
    data: Value,
) -> Result<Signaled, SignalRefused> {
    let id = parse_run_id(run)?;
    let at = item.map(ItemIndex);
    let failed = |e: RuntimeError| SignalRefused::Failed(e);
    let engine_err = SignalRefused::of;
    let answer: SignalAnswer = match app.try_lock_briefly().map_err(failed)? {
        // Many workers: the run's owner answers (the engine relays to it),
        // or this process does when nobody drives the run.
        Err(_) if app.is_shared() => {
            app.block_on(engine.signal_item(&id, step, at, data.clone())).map_err(engine_err)?
        }
        Ok(_lock) => {
            let a = app.block_on(engine.signal_item(&id, step, at, data.clone())).map_err(engine_err)?;
            // Answer what others queued while this process held the lock.
            app.block_on(engine.process_inbox()).map_err(engine_err)?;
            a
        }
        Err(pid) => {
            let msg = app.block_on(engine.post_signal(&id, step, at, data.clone())).map_err(engine_err)?;
            let v = owner_answer(app, engine, &msg, pid).map_err(failed)?;
            serde_json::from_value(v).map_err(|e| {
                failed(RuntimeError::Invalid(format!("the owner's answer to the signal is not readable: {e}")))
            })?
        }
    };
    let taken = WaitRefused::judge(answer, data).map_err(SignalRefused::Wait)?;
    let now = match app.block_on(app.store.run(&id)) {
        Ok(Some(r)) => r,
        Ok(None) => return Err(SignalRefused::Run(super::LookupRefused::NotFound(id))),
        Err(e) => return Err(SignalRefused::Run(super::LookupRefused::Failed(e))),
    };
    Ok(Signaled::after(now.clone(), Some(&now), step, item, taken))
}

/// Emits event `name` with `data` (and `id`), from outside the owner.
pub fn emit(
    app: &App,
    engine: &Engine,
    name: &str,
    data: Value,
    id: Option<String>,
) -> Result<EmitAnswer, EmitRefused> {
    let name = event_name(name, id.as_deref())?;
    let failed = |e: RuntimeError| EmitRefused::Failed(e);
    let engine_err = EmitRefused::of;
    match app.try_lock_briefly().map_err(failed)? {
        // Many workers: delivered here to the waits of runs nobody drives,
        // handed to the owners of the others.
        Err(_) if app.is_shared() => app.block_on(engine.emit(&name, data, id)).map_err(engine_err),
        Ok(_lock) => {
            let a = app.block_on(engine.emit(&name, data, id)).map_err(engine_err)?;
            app.block_on(engine.process_inbox()).map_err(engine_err)?;
            Ok(a)
        }
        Err(pid) => match app.block_on(engine.post_event(&name, data, id)).map_err(engine_err)? {
            Err(duplicate) => Ok(duplicate),
            Ok(msg) => {
                let v = owner_answer(app, engine, &msg, pid).map_err(failed)?;
                serde_json::from_value(v).map_err(|e| {
                    failed(RuntimeError::Invalid(format!("the owner's answer to the event is not readable: {e}")))
                })
            }
        },
    }
}

/// Cancels run `run`, from outside the owner: the lock is held when it is
/// free, so no worker starts the run meanwhile.
pub fn cancel(app: &App, engine: &Engine, run: &str) -> Result<Canceled, CancelRefused> {
    let id = parse_run_id(run)?;
    let rec = match app.block_on(app.store.run(&id)) {
        Ok(Some(r)) => r,
        Ok(None) => return Err(super::LookupRefused::NotFound(id).into()),
        Err(e) => return Err(super::LookupRefused::Failed(e).into()),
    };
    if rec.state.is_terminal() {
        return Ok(Canceled { run: rec, already_finished: true });
    }
    let _lock = app.try_lock_briefly().map_err(CancelRefused::Failed)?.ok();
    let run = app.block_on(engine.cancel(&rec.id)).map_err(|e| CancelRefused::Failed(e.into()))?;
    Ok(Canceled { run, already_finished: false })
}

/// Waits for the store's owner to record its answer to inbox message `id`;
/// takes over (lock, then handle the inbox here) if the owner went away.
fn owner_answer(app: &App, engine: &Engine, id: &str, pid: Option<u32>) -> Result<Value, RuntimeError> {
    let start = Instant::now();
    let mut last_try = Instant::now();
    app.block_on(async {
        // The owner's answer is a write: the store's watch tells (LISTEN on
        // PostgreSQL, the file system on SQLite); a short sleep otherwise.
        let mut watch = app.store.watch();
        loop {
            if let Some(a) = engine.inbox_answer(id).await? {
                return Ok(a);
            }
            if !app.is_shared() && last_try.elapsed() > Duration::from_millis(200) {
                last_try = Instant::now();
                if let Ok(_lock) = app.try_lock_briefly()? {
                    engine.process_inbox().await?;
                    continue;
                }
            }
            if start.elapsed() > OWNER_ANSWER {
                return Err(RuntimeError::Unanswered(if app.is_shared() {
                    format!(
                        "no worker of {} handled message {id} within {} s (is `weft worker` running against it?); it stays queued for the next worker",
                        app.store_name,
                        OWNER_ANSWER.as_secs()
                    )
                } else {
                    format!(
                        "{} owns the store but has not handled message {id} within {} s; it stays queued and is handled when the owner polls again",
                        app::holder(pid),
                        OWNER_ANSWER.as_secs()
                    )
                }));
            }
            match &mut watch {
                Some(_) => {
                    tokio::select! {
                        _ = crate::owner::changed(&mut watch) => {}
                        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    }
                }
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
}
