//! Faults that are not the step's: a runner's panic is an interrupted
//! attempt, not a dead driver; a process that died shares the blame among
//! the attempts it ran; a store that cannot write is waited out. And a
//! run's CPU budget (`limits.run_fuel`), shared by its code steps.

use super::*;
use crate::store::RunStore;
use std::sync::atomic::AtomicU32;

/// A panic in the runner (a host bug) interrupts the attempt: it runs
/// again as itself, and the run finishes instead of hanging `working`.
#[tokio::test]
async fn a_runner_that_panics_once_interrupts_the_attempt_and_the_run_goes_on() {
    let h = harness();
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    h.fake.on("a", move |_| if c.fetch_add(1, Ordering::SeqCst) == 0 { Act::Panic } else { Act::Ok(json!(7)) });
    let r = h.run(json!({"name": "w", "steps": [code("a")]}), json!({})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(r.output, Some(json!({"a": 7})));
    assert_eq!(h.fake.keys(), vec![format!("{}/a/1", r.id), format!("{}/a/1", r.id)], "the same attempt, twice");
    let a = &r.attempts[0];
    assert_eq!((a.attempt.get(), a.state, a.interruptions), (1, AttemptState::Succeeded, 1));
    let evs = h.store.all_events(&r.id);
    let int = evs.iter().find(|e| e.kind == "attempt.interrupted").expect("an interrupted event");
    assert!(int.data["error"]["message"].as_str().unwrap().contains("the runner broke"), "{}", int.data);
}

/// A runner that panics every time is stopped after three interruptions,
/// as `crashed`, whatever the retry policy says.
#[tokio::test]
async fn a_runner_that_always_panics_fails_the_step_as_crashed() {
    let h = harness();
    h.fake.on("a", |_| Act::Panic);
    let d = json!({"name": "w", "steps": [
        {"name": "a", "code": {"plugin": "p"}, "retry": {"max_attempts": 4, "initial_delay_ms": 1}},
        {"name": "b", "code": {"plugin": "p"}, "input": "@a"}]});
    let r = h.run(d, json!({})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "a").error.clone().unwrap();
    assert_eq!(e.kind, ErrorKind::Crashed, "{e:?}");
    assert!(e.message.contains("3 times in a row") && e.message.contains("the runner broke"), "{e:?}");
    assert_eq!(h.fake.calls_of("a").len(), 3);
    assert!(h.fake.calls_of("b").is_empty());
    assert_eq!(step(&r, "a").attempts, 1);
}

/// `max_interruptions` is a setting.
#[tokio::test]
async fn max_interruptions_is_configurable() {
    let cfg = EngineConfig { max_interruptions: 1, ..EngineConfig::default() };
    let h = harness_config(Arc::new(MemStore::new()), Arc::new(Fake::default()), cfg);
    h.fake.on("a", |_| Act::Panic);
    let r = h.run(json!({"name": "w", "steps": [code("a")]}), json!({})).await;
    assert_eq!(step(&r, "a").error.as_ref().unwrap().kind, ErrorKind::Crashed);
    assert_eq!(h.fake.calls_of("a").len(), 1);
}

/// Each code step may use what is left of the run's budget; the fuel used
/// is stored with each attempt and adds up, across a restart too.
#[tokio::test]
async fn a_run_budget_is_shared_by_its_steps_and_survives_a_restart() {
    let store = Arc::new(MemStore::new());
    let fake1 = Arc::new(Fake::default());
    fake1.on("a", |_| Act::Burn(600, json!(1)));
    fake1.on("b", |_| Act::Hang);
    let h1 = harness_with(store.clone(), fake1.clone(), 4);
    let d = json!({"name": "w", "limits": {"run_fuel": 1000}, "steps": [
        code("a"), {"name": "b", "code": {"plugin": "p"}, "input": "@a"},
        {"name": "c", "code": {"plugin": "p"}, "input": "@b"}]});
    let id = h1.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    h1.until_calls("b", 1).await;
    assert_eq!(fake1.calls_of("a")[0].run_fuel_left, Some(1000));
    assert_eq!(fake1.calls_of("b")[0].run_fuel_left, Some(400), "a used 600 of 1000");
    h1.engine.abort_all();
    let r = h1.rec(&id).await;
    assert_eq!(r.attempts.iter().find(|a| a.step == "a").unwrap().fuel, Some(600), "stored with the attempt");

    let fake2 = Arc::new(Fake::default());
    fake2.on("b", |_| Act::Burn(300, json!(2)));
    fake2.on("c", |_| Act::Ok(json!(3)));
    let h2 = harness_with(store.clone(), fake2.clone(), 4);
    h2.clock.set(h1.clock.now_ms() + 5);
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(fake2.calls_of("b")[0].run_fuel_left, Some(400), "the budget survived the restart");
    assert_eq!(fake2.calls_of("c")[0].run_fuel_left, Some(100));
}

/// Without a budget, no step is told of one.
#[tokio::test]
async fn no_budget_no_limit() {
    let h = harness();
    let r = h.run(json!({"name": "w", "steps": [code("a")]}), json!({})).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(h.fake.calls_of("a")[0].run_fuel_left, None);
}

/// A crash is shared by the attempts its process was running: two
/// attempts killed together each take half the blame, so each runs again
/// after five crashes in a row and fails as `crashed` at the sixth (three
/// crashes' worth), where an attempt running alone fails at the third.
#[tokio::test]
async fn attempts_killed_together_share_the_blame() {
    let store = Arc::new(MemStore::new());
    let d = json!({"name": "w", "steps": [code("a")]});
    let mut ids = vec![];
    let mut now = 0;
    for crash in 1..=7 {
        let fake = Arc::new(Fake::default());
        fake.on("a", |_| Act::Hang);
        let h = harness_with(store.clone(), fake.clone(), 4);
        h.clock.set(now);
        if ids.is_empty() {
            for _ in 0..2 {
                ids.push(h.engine.submit(&def(d.clone()), json!({}), RunOptions::default()).await.unwrap());
            }
        } else {
            assert_eq!(h.engine.recover().await.unwrap().len(), 2, "crash {crash}");
        }
        if crash < 7 {
            h.until_calls("a", 2).await;
            h.engine.abort_all();
        } else {
            for id in &ids {
                let r = h.wait(id).await;
                let e = step(&r, "a").error.clone().unwrap();
                assert_eq!(e.kind, ErrorKind::Crashed, "{e:?}");
                assert!(e.message.contains("interrupted 6 times in a row"), "{e:?}");
            }
            assert!(fake.calls_of("a").is_empty(), "not run a sixth time");
        }
        now = h.clock.now_ms() + 5;
    }
    let r = store.run(&ids[0]).await.unwrap().unwrap();
    assert_eq!((r.attempts[0].interruptions, r.attempts[0].blame), (5, 2500));
}

/// A store that cannot write for a while (a full disk) is waited out, past
/// any fixed number of tries: the run goes on once it can write, and its
/// log says the store stalled.
#[tokio::test]
async fn a_store_that_cannot_write_for_a_while_is_waited_out() {
    let h = harness();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("a", move |_| Act::Gate(g.clone(), json!(1)));
    let id = h
        .submit(json!({"name": "w", "steps": [code("a"), {"name": "b", "code": {"plugin": "p"}, "input": "@a"}]}))
        .await;
    h.until_calls("a", 1).await;
    let tries = EngineConfig::default().commit_retries + 3;
    h.store.fail_next_commits(crate::store::StoreError::Io("database or disk is full".into()), tries);
    gate.add_permits(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "b").state, StepState::Succeeded);
    let evs = h.store.all_events(&id);
    let stalled = evs.iter().find(|e| e.kind == "store.stalled").expect("the stall is in the run's log");
    assert_eq!(stalled.data["tries"], json!(tries + 1), "{}", stalled.data);
    assert!(stalled.data["error"].as_str().unwrap().contains("disk is full"), "{}", stalled.data);
    check_log(&h, &r);
}

/// New work is refused while the store cannot write, with the reason: a
/// run that is not stored yet is not waited for.
#[tokio::test]
async fn new_work_is_refused_while_the_store_cannot_write() {
    let h = harness();
    h.store.fail_next_commits(crate::store::StoreError::Io("database or disk is full".into()), 1000);
    let d = def(json!({"name": "w", "steps": [code("a")]}));
    let e = h.engine.submit(&d, json!({}), RunOptions::default()).await.unwrap_err();
    assert!(e.to_string().contains("disk is full"), "{e}");
    assert!(h.store.list_runs(&Default::default()).await.unwrap().is_empty(), "nothing stored");
}

/// Logs are bounded per run, not only per invocation: many chatty items
/// together stop at `max_run_log_bytes`, with one marker saying so.
#[tokio::test]
async fn a_run_s_logs_are_capped_with_a_marker() {
    let cfg = EngineConfig { max_run_log_bytes: 100_000, ..EngineConfig::default() };
    let h = harness_config(Arc::new(MemStore::new()), Arc::new(Fake::default()), cfg);
    h.fake.on("e", |_| Act::Chatty(100, 1000));
    let items: Vec<u32> = (0..10).collect();
    let d =
        json!({"name": "w", "steps": [{"name": "e", "code": {"plugin": "p"}, "for_each": items, "input": "@item"}]});
    let r = h.run(d, json!({})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    let evs = h.store.all_events(&r.id);
    let logged: usize = evs.iter().filter(|e| e.kind == "log").map(|e| e.data["line"].as_str().unwrap().len()).sum();
    assert!((99_000..=100_000).contains(&logged), "{logged} bytes of 1,000,000 logged");
    let markers: Vec<_> = evs.iter().filter(|e| e.kind == "log.truncated").collect();
    assert_eq!(markers.len(), 1, "one marker");
    assert!(markers[0].data["line"].as_str().unwrap().contains("100000 bytes"), "{}", markers[0].data);
    check_log(&h, &r);
}
