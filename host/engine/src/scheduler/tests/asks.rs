//! Attempts that ask (an agent step's remote task wants input): the step
//! parks on a signal wait carrying the question, the answer runs the same
//! attempt again as itself with it, across crashes and with nobody
//! driving the run; a run ended while its step asks abandons the question;
//! a `for_each` item cannot ask.

use super::*;
use crate::outside::WaitKind;
use crate::runner::{Answer, Question};
use crate::scheduler::SignalAnswer;

fn city() -> Question {
    Question {
        prompt: Some("which city?".into()),
        schema: Some(json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}})),
        preview: Some(json!({"cities": ["paris", "rome"]})),
        reason: RunState::InputRequired,
        resume: json!({"task": "t1", "question": "q1"}),
    }
}

fn relay() -> Definition {
    def(json!({"name": "relay", "steps": [
        {"name": "a", "agent": "helper", "input": {"x": 1}},
        {"name": "b", "code": {"plugin": "p"}, "input": "@a"}]}))
}

/// Asks until answered, then succeeds with the answer's data.
fn asks_then_echoes(req: &StepRequest) -> Act {
    match &req.answer {
        None => Act::Ask(city()),
        Some(a) => Act::Ok(a.data.clone()),
    }
}

async fn asking(h: &H, id: &RunId) -> RunRecord {
    h.until(id, |r| r.state == RunState::InputRequired && !r.waits.is_empty()).await
}

#[tokio::test]
async fn an_attempt_that_asks_parks_its_step_and_the_answer_runs_it_again_as_itself() {
    let h = harness();
    h.fake.on("a", asks_then_echoes);
    let id = h.engine.submit(&relay(), json!({}), RunOptions::default()).await.unwrap();
    let r = asking(&h, &id).await;
    assert_eq!(step(&r, "a").state, StepState::Waiting);
    let WaitKind::Signal { prompt, schema, preview, reason, resume } = &r.waits[0].kind else {
        panic!("{:?}", r.waits)
    };
    assert_eq!(prompt.as_deref(), Some("which city?"));
    assert_eq!(preview, &city().preview);
    assert_eq!(schema.as_ref().unwrap()["required"], json!(["city"]));
    assert_eq!((*reason, resume.clone()), (RunState::InputRequired, Some(city().resume)));
    let a = &r.attempts[0];
    assert_eq!((a.attempt.get(), a.state), (1, AttemptState::Interrupted), "the attempt waits for its answer");

    let bad = h.engine.signal(&id, "a", json!({"town": "x"})).await.unwrap();
    assert!(matches!(bad, SignalAnswer::Invalid { .. }), "{bad:?}");
    assert_eq!(h.rec(&id).await.state, RunState::InputRequired, "an invalid answer changes nothing");
    let not_asking = h.engine.signal(&id, "b", json!({})).await.unwrap();
    assert!(matches!(not_asking, SignalAnswer::NotWaiting { .. }), "{not_asking:?}");

    let ok = h.engine.signal(&id, "a", json!({"city": "paris"})).await.unwrap();
    assert!(ok.accepted(), "{ok:?}");
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "a").output, Some(json!({"city": "paris"})));
    assert_eq!(h.fake.keys()[..2], [format!("{id}/a/1"), format!("{id}/a/1")], "the same attempt, as itself");
    let again = &h.fake.calls_of("a")[1];
    assert_eq!(again.answer, Some(Answer { resume: city().resume, data: json!({"city": "paris"}) }));
    assert_eq!(r.attempts.iter().filter(|a| a.step == "a").count(), 1, "one attempt row");
    assert!(r.waits.is_empty());
    check_log(&h, &r);
    let kinds: Vec<String> = h.store.all_events(&id).into_iter().map(|e| e.kind).collect();
    let i = kinds.iter().position(|k| k == "run.input-required").expect("input-required logged");
    assert_eq!(kinds[i + 1..].iter().find(|k| k.starts_with("run.")).map(String::as_str), Some("run.working"));
}

#[tokio::test]
async fn an_answer_survives_a_crash_before_its_attempt_ends() {
    let store = Arc::new(MemStore::new());
    let fake1 = Arc::new(Fake::default());
    fake1.on("a", |req| if req.answer.is_none() { Act::Ask(city()) } else { Act::Hang });
    let h1 = harness_with(store.clone(), fake1.clone(), 4);
    let id = h1.engine.submit(&relay(), json!({}), RunOptions::default()).await.unwrap();
    asking(&h1, &id).await;
    assert!(h1.engine.signal(&id, "a", json!({"city": "rome"})).await.unwrap().accepted());
    h1.until_calls("a", 2).await;
    h1.engine.abort_all(); // the crash, while the answered attempt runs

    let fake2 = Arc::new(Fake::default());
    fake2.on("a", asks_then_echoes);
    let h2 = harness_with(store.clone(), fake2.clone(), 4);
    h2.clock.set(h1.clock.now_ms() + 60 * 60_000);
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "a").output, Some(json!({"city": "rome"})), "the answer came back after the crash");
    assert_eq!(fake2.keys()[0], format!("{id}/a/1"));
}

#[tokio::test]
async fn a_question_survives_a_crash_and_an_answer_with_nobody_driving_is_kept() {
    let store = Arc::new(MemStore::new());
    let fake1 = Arc::new(Fake::default());
    fake1.on("a", asks_then_echoes);
    let h1 = harness_with(store.clone(), fake1.clone(), 4);
    let id = h1.engine.submit(&relay(), json!({}), RunOptions::default()).await.unwrap();
    asking(&h1, &id).await;
    h1.engine.abort_all();

    let fake2 = Arc::new(Fake::default());
    fake2.on("a", asks_then_echoes);
    let h2 = harness_with(store.clone(), fake2.clone(), 4);
    let bad = h2.engine.signal(&id, "a", json!({})).await.unwrap();
    assert!(matches!(bad, SignalAnswer::Invalid { .. }), "checked against the stored question: {bad:?}");
    assert!(h2.engine.signal(&id, "a", json!({"city": "oslo"})).await.unwrap().accepted());
    let r = h2.rec(&id).await;
    assert_eq!(step(&r, "a").state, StepState::Retrying, "its attempt runs again when an owner drives the run");
    assert_eq!((r.state, r.waits.len()), (RunState::Working, 0));
    assert!(fake2.calls_of("a").is_empty());
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "a").output, Some(json!({"city": "oslo"})));
    assert_eq!(fake2.calls_of("a")[0].idempotency_key, format!("{id}/a/1"));
    check_log(&h2, &r);
}

#[tokio::test]
async fn a_run_ended_while_its_step_asks_abandons_the_question() {
    let h = harness();
    h.fake.on("a", asks_then_echoes);
    let id = h.engine.submit(&relay(), json!({}), RunOptions::default()).await.unwrap();
    asking(&h, &id).await;
    h.engine.cancel(&id).await.unwrap();
    let t0 = std::time::Instant::now();
    while h.fake.abandoned.lock().unwrap().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(5), "the question was never abandoned");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(*h.fake.abandoned.lock().unwrap(), vec![city().resume]);

    // With nobody driving the run, the canceler tells the runner.
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h1.fake.on("a", asks_then_echoes);
    let id = h1.engine.submit(&relay(), json!({}), RunOptions::default()).await.unwrap();
    asking(&h1, &id).await;
    h1.engine.abort_all();
    let h2 = harness_with(store, Arc::new(Fake::default()), 4);
    h2.engine.cancel(&id).await.unwrap();
    assert_eq!(*h2.fake.abandoned.lock().unwrap(), vec![city().resume]);
}

#[tokio::test]
async fn a_for_each_item_cannot_ask() {
    let h = harness();
    h.fake.on("a", asks_then_echoes);
    let d = json!({"name": "w", "steps": [{"name": "a", "agent": "helper", "for_each": [1, 2], "input": "@item"}]});
    let r = h.run(d, json!({})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "a").error.clone().unwrap();
    assert!(e.message.contains("only a step without `for_each` can wait for an answer"), "{e:?}");
    assert!(r.waits.is_empty());
}
