//! Signals and events for a run nobody drives here (the store's owner is a
//! short-lived `weft signal`, or the run is hibernated elsewhere or not
//! loaded): decided and committed straight in the store, as a driver
//! would. Every write carries the states it expects (the step `waiting`,
//! the run's next event seq), so a driver starting meanwhile and this
//! answer can never both win: the loser's commit conflicts and it asks
//! again.

use crate::state::Transition as _;
use serde_json::{Value, json};

use super::mail::{
    ItemsOpen, Queued, SignalAnswer, Take, Via, answer_once, by_event, check_signal, no_such_step, queue_message,
    queue_refusal, queued, waits_for_event,
};
use super::{EngineError, Shared};
use crate::ids::{AttemptNo, ItemIndex, RunId, Seq};
use crate::outside::WaitKind;
use crate::state::{AttemptState, RunEvent, RunState, StepState};
use crate::store::{Batch, NewEvent, RunRecord, Write};

/// The items of `step`'s `for_each` wait in a stored run: how many it
/// has (its wait record lists them) and which have no answer yet (an
/// answered item has a succeeded attempt).
fn stored_items(rec: &RunRecord, step: &str) -> (Vec<WaitKind>, ItemsOpen) {
    let kinds = match rec.waits.iter().find(|w| w.step == step).map(|w| &w.kind) {
        Some(WaitKind::Items { items }) => items.clone(),
        _ => vec![],
    };
    let done = |k: ItemIndex| {
        rec.attempts.iter().any(|a| a.step == step && a.item == Some(k) && a.state == AttemptState::Succeeded)
    };
    let open = (0..kinds.len() as u32).map(ItemIndex).filter(|k| !done(*k)).collect();
    (kinds.clone(), ItemsOpen { n: kinds.len(), open })
}

/// The writes that resolve a waiting step of a run nobody drives: the step
/// succeeds with `output`, its wait closes, and the run resumes `working`
/// when no other signal wait is left. For a `for_each` wait, `items` take
/// `output` (each as an attempt of its item, as a driver records it), and
/// the step succeeds only once no item is left.
async fn resolve_undriven(
    sh: &Shared,
    rec: &RunRecord,
    step: &str,
    items: &[ItemIndex],
    output: &Value,
    how: Value,
    mut extra: Vec<Write>,
) -> Result<(), EngineError> {
    let run = &rec.id;
    let now = sh.clock.now_ms();
    let mut seq = rec.last_seq;
    let mut ev = |kind: String, item: Option<ItemIndex>, data: Value| {
        seq = Seq(seq.0 + 1);
        Write::Event(NewEvent { run: run.clone(), seq, at: now, kind, step: Some(step.to_string()), item, data })
    };
    let mut b = Batch::new();
    let mut step_output = Some(output.clone());
    if !items.is_empty() {
        let (kinds, open) = stored_items(rec, step);
        for &k in items {
            let mine = rec.attempts.iter().filter(|a| a.step == step && a.item == Some(k));
            let attempt = mine.map(|a| a.attempt.next()).max().unwrap_or(AttemptNo::FIRST);
            let (run, step, item) = (run.clone(), step.to_string(), Some(k));
            b.push(Write::StartAttempt {
                run: run.clone(),
                step: step.clone(),
                item,
                attempt,
                lease_until: now,
                at: now,
                input: None,
            });
            b.push(Write::FinishAttempt {
                run,
                step,
                item,
                attempt,
                state: AttemptState::Succeeded,
                output: Some(output.clone()),
                error: None,
                fuel: None,
                blame: 0,
                at: now,
            });
            let mut data = json!({"item": k, "attempt": attempt});
            if let (Value::Object(d), Value::Object(x)) = (&mut data, how.clone()) {
                d.extend(x);
            }
            b.push(ev("item.succeeded".into(), item, data));
        }
        step_output = open.open.iter().all(|k| items.contains(k)).then(|| {
            let answer = |k: ItemIndex| {
                let stored = rec
                    .attempts
                    .iter()
                    .find(|a| a.step == step && a.item == Some(k) && a.state == AttemptState::Succeeded);
                stored.and_then(|a| a.output.clone()).unwrap_or_else(|| output.clone())
            };
            Value::Array((0..kinds.len() as u32).map(|k| answer(ItemIndex(k))).collect())
        });
    }
    if let Some(output) = step_output {
        b.push(Write::StepState {
            run: run.clone(),
            step: step.to_string(),
            from: StepState::Waiting,
            to: StepState::Succeeded,
            output: Some(output.clone()),
            error: None,
            next_attempt_at: None,
            at: now,
        });
        b.push(Write::CloseWait { run: run.clone(), step: step.to_string() });
        let mut data = json!({"state": "succeeded"});
        if let (Value::Object(d), Value::Object(x)) = (&mut data, how) {
            d.extend(x);
        }
        b.push(ev("step.succeeded".into(), None, data));
        // Its notifications on `resolved:STEP`, as the run stands then.
        let on = crate::model_glue::NotifyOn::Resolved(step.to_string());
        if let Ok(def) = sh.plans.get(rec)
            && def.notify.iter().any(|n| n.on.contains(&on))
        {
            let mut now_rec = rec.clone();
            if let Some(s) = now_rec.steps.iter_mut().find(|s| s.name == step) {
                (s.state, s.output) = (StepState::Succeeded, Some(output.clone()));
            }
            now_rec.waits.retain(|w| w.step != step);
            // As the batch leaves the run: `working` once no signal wait is left.
            let asks = matches!(rec.state, RunState::InputRequired | RunState::AuthRequired);
            if asks && !now_rec.waits.iter().any(|w| w.kind.is_signal()) {
                now_rec.state = RunState::Working;
            }
            let last = b.writes.iter().rev().find_map(|w| match w {
                Write::Event(e) => Some(e.seq),
                _ => None,
            });
            let retry = sh.config.delivery_retry;
            let seq = last.unwrap_or(rec.last_seq);
            b.writes.extend(crate::notices::for_record(&def.notify, &on, &now_rec, seq, now, retry));
        }
        resume_run(rec, step, seq, now, &mut b)?;
    }
    b.writes.append(&mut extra);
    sh.commit(b).await?;
    Ok(())
}

/// The run of `step`'s wait, which closes, is `working` again when no
/// other signal wait is left (its events after `seq`).
fn resume_run(rec: &RunRecord, step: &str, seq: Seq, now: i64, b: &mut Batch) -> Result<(), EngineError> {
    let signals_left = rec.waits.iter().any(|w| w.step != step && w.kind.is_signal());
    if matches!(rec.state, RunState::InputRequired | RunState::AuthRequired) && !signals_left {
        let run = &rec.id;
        let to = rec.state.apply(RunEvent::Resume)?;
        b.push(Write::RunState { run: run.clone(), from: rec.state, to, output: None, error: None, at: now });
        let data = json!({"state": to});
        let (kind, seq) = (format!("run.{to}"), Seq(seq.0 + 1));
        b.push(Write::Event(NewEvent { run: run.clone(), seq, at: now, kind, step: None, item: None, data }));
    }
    Ok(())
}

/// The question `step` asked (see the driver's `ask`), if it asks.
fn asked<'r>(rec: &'r RunRecord, step: &str) -> Option<&'r WaitKind> {
    rec.waits
        .iter()
        .find(|w| w.step == step)
        .map(|w| &w.kind)
        .filter(|k| matches!(k, WaitKind::Signal { resume: Some(_), .. }))
}

/// The writes that answer a question `step` asked, as a driver makes
/// them: the attempt that asked runs again at once with the answer,
/// carried as the step's output, when a driver next takes the run.
async fn answer_undriven(
    sh: &Shared,
    rec: &RunRecord,
    step: &str,
    data: &Value,
    extra: Vec<Write>,
) -> Result<(), EngineError> {
    let Some(WaitKind::Signal { resume: Some(resume), .. }) = asked(rec, step) else { unreachable!("it asks") };
    let (run, now) = (&rec.id, sh.clock.now_ms());
    let attempt = rec.attempts.iter().filter(|a| a.step == step && a.item.is_none()).map(|a| a.attempt).max();
    let mut b = Batch::new();
    b.push(Write::StepState {
        run: run.clone(),
        step: step.to_string(),
        from: StepState::Waiting,
        to: StepState::Retrying,
        output: Some(json!({"answer": data, "resume": resume})),
        error: None,
        next_attempt_at: Some(now),
        at: now,
    });
    b.push(Write::CloseWait { run: run.clone(), step: step.to_string() });
    let seq = Seq(rec.last_seq.0 + 1);
    let data = json!({"state": "retrying", "by": "signal", "attempt": attempt, "next_attempt_at": now});
    let kind = "step.retrying".to_string();
    b.push(Write::Event(NewEvent {
        run: run.clone(),
        seq,
        at: now,
        kind,
        step: Some(step.to_string()),
        item: None,
        data,
    }));
    resume_run(rec, step, seq, now, &mut b)?;
    b.writes.extend(extra);
    sh.commit(b).await?;
    Ok(())
}

pub(super) async fn signal_undriven(
    sh: &Shared,
    run: &RunId,
    step: &str,
    item: Option<ItemIndex>,
    data: &Value,
    via: &Via,
) -> Result<SignalAnswer, EngineError> {
    let Some(rec) = sh.store.run(run).await? else {
        return Ok(SignalAnswer::NotFound { message: format!("no run {run}") });
    };
    let def = sh.plans.get(&rec).map_err(|p| EngineError::Plan(p.to_string()))?;
    let found = def.steps.iter().zip(&rec.steps).find(|(s, _)| s.name == step);
    let decided = match found {
        None => Err(no_such_step(run, step, def.steps.iter().map(|s| s.name.as_str()))),
        Some((_, r)) if r.state.is_terminal() => Err(SignalAnswer::AlreadyResolved { state: r.state }),
        // A step the ended run never reached.
        Some(_) if rec.state.is_terminal() => {
            Err(SignalAnswer::NotWaiting { message: format!("run {run} is {}", rec.state) })
        }
        Some((s, r)) => check_signal(s, r.state, item, &stored_items(&rec, step).1, data, asked(&rec, step)),
    };
    let answer = match decided {
        Ok(Take::Now) if asked(&rec, step).is_some() => {
            let answer = SignalAnswer::Accepted { output: data.clone() };
            let extra = via.answer_write(&answer).into_iter().collect();
            answer_undriven(sh, &rec, step, data, extra).await?;
            return Ok(answer);
        }
        Ok(Take::Now) => {
            let answer = SignalAnswer::Accepted { output: data.clone() };
            let extra = via.answer_write(&answer).into_iter().collect();
            let items: Vec<ItemIndex> = item.into_iter().collect();
            resolve_undriven(sh, &rec, step, &items, data, json!({"by": "signal"}), extra).await?;
            return Ok(answer);
        }
        // Taken from the queue, but its step does not wait yet after all:
        // it stays queued.
        Ok(Take::Queue) if let Via::Queue(id) = via => return Ok(queued(step, id)),
        Ok(Take::Queue) => {
            let queued: Vec<Queued> = sh.store.inbox_queued(run).await?.iter().filter_map(Queued::of).collect();
            if let Some(refused) = queue_refusal(&queued, step, item, sh.config.max_queued_signals) {
                if let Via::Inbox(id) = via {
                    answer_once(sh, id, &refused).await?;
                }
                return Ok(refused);
            }
            let (put, id, answer) = queue_message(sh, run, step, item, data, via);
            let seq = Seq(rec.last_seq.0 + 1);
            let ev = NewEvent {
                run: run.clone(),
                seq,
                at: sh.clock.now_ms(),
                kind: "signal.queued".into(),
                step: Some(step.to_string()),
                item,
                data: json!({"message": id}),
            };
            sh.commit(Batch { writes: vec![put, Write::Event(ev)] }).await?;
            return Ok(answer);
        }
        Err(a) => a,
    };
    match via {
        Via::Inbox(id) => answer_once(sh, id, &answer).await?,
        Via::Queue(_) => sh.commit(Batch { writes: via.answer_write(&answer).into_iter().collect() }).await?,
        Via::Call => {}
    }
    Ok(answer)
}

pub(super) async fn event_undriven(
    sh: &Shared,
    run: &RunId,
    step: &str,
    name: &str,
    data: &Value,
    id: Option<&str>,
) -> Result<bool, EngineError> {
    let Some(rec) = sh.store.run(run).await? else { return Ok(false) };
    let def = sh.plans.get(&rec).map_err(|p| EngineError::Plan(p.to_string()))?;
    let Some((s, _)) =
        def.steps.iter().zip(&rec.steps).find(|(s, r)| s.name == step && waits_for_event(s, r.state, name))
    else {
        return Ok(false);
    };
    // A `for_each` wait: every item still waiting whose `match` holds.
    let items: Vec<ItemIndex> = match s.for_each {
        None => vec![],
        Some(_) => {
            let (kinds, open) = stored_items(&rec, step);
            let takers: Vec<ItemIndex> =
                open.open.into_iter().filter(|k| kinds[k.0 as usize].takes_event(name, data)).collect();
            if takers.is_empty() {
                return Ok(false);
            }
            takers
        }
    };
    resolve_undriven(sh, &rec, step, &items, data, by_event(name, id), vec![]).await?;
    Ok(true)
}
