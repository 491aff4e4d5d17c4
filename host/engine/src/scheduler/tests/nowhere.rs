//! Refs that lead nowhere fail their step with kind `validation`, naming
//! the ref and what the value holds, instead of passing `null` on; `?`
//! opts into `null`; `exists` may test a missing field; each attempt keeps
//! its resolved input.

use super::*;

fn sum_then(next: Value) -> Value {
    json!({"name": "w", "steps": [{"name": "sum", "code": {"plugin": "p"}}, next]})
}

#[tokio::test]
async fn a_field_the_output_does_not_have_fails_the_step_naming_it() {
    let h = harness();
    h.fake.on("sum", |_| Act::Ok(json!("The sum of 5 and 6 is 11.")));
    let r = h
        .run(sum_then(json!({"name": "say", "code": {"plugin": "p"}, "input": {"m": "result: @sum.text"}})), json!({}))
        .await;
    assert_eq!(r.state, RunState::Failed);
    let say = step(&r, "say");
    assert_eq!(say.state, StepState::Failed);
    let e = say.error.as_ref().unwrap();
    assert_eq!(e.kind, ErrorKind::Validation);
    assert!(!e.retryable);
    assert!(e.message.contains("`@sum.text` resolves to nothing") && e.message.contains("a string"), "{}", e.message);
    assert!(e.message.contains("The sum of 5 and 6 is 11."), "what the output holds: {}", e.message);
    assert!(h.fake.calls_of("say").is_empty(), "nothing ran with a null");
    let a = r.attempts.iter().find(|a| a.step == "say").unwrap();
    assert_eq!((a.state, a.input.clone()), (AttemptState::Failed, None));
}

#[tokio::test]
async fn an_optional_ref_gives_null_and_every_attempt_keeps_its_input() {
    let h = harness();
    h.fake.on("sum", |_| Act::Ok(json!({"total": 11})));
    let r = h
        .run(
            sum_then(json!({"name": "say", "code": {"plugin": "p"},
                "input": {"t": "@sum.total", "text": "@sum.text?", "m": "total @sum.total?"}})),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    let want = json!({"t": 11, "text": null, "m": "total 11?"});
    assert_eq!(h.fake.calls_of("say")[0].input, want, "in a longer string `?` is text");
    let a = r.attempts.iter().find(|a| a.step == "say").unwrap();
    assert_eq!(a.input, Some(want));
}

#[tokio::test]
async fn when_fails_on_a_missing_field_unless_exists_or_optional() {
    let h = harness();
    h.fake.on("sum", |_| Act::Ok(json!({"total": 11})));
    let r = h
        .run(sum_then(json!({"name": "big", "when": {"ref": "@sum.totl", "gt": 10}, "return": true})), json!({}))
        .await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "big").error.clone().unwrap();
    assert_eq!(e.kind, ErrorKind::Validation);
    assert!(e.message.contains("`@sum.totl`") && e.message.contains("`@sum.total`"), "{}", e.message);

    for when in [json!({"ref": "@sum.totl", "exists": false}), json!({"ref": "@sum.totl?", "eq": null})] {
        let h = harness();
        h.fake.on("sum", |_| Act::Ok(json!({"total": 11})));
        let r = h.run(sum_then(json!({"name": "none", "when": when, "return": "absent"})), json!({})).await;
        assert_eq!((r.state, r.output.clone()), (RunState::Completed, Some(json!("absent"))), "{when}");
    }
}

#[tokio::test]
async fn the_runs_output_and_a_return_value_must_resolve() {
    let h = harness();
    let r = h.run(json!({"name": "w", "output": {"x": "@input.nope"}, "steps": [code("a")]}), json!({"yes": 1})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = r.error.unwrap();
    assert!(e.message.contains("the run's `output`") && e.message.contains("`@input.nope`"), "{}", e.message);
    assert!(e.message.contains("the run's input is an object with field yes"), "{}", e.message);

    let h = harness();
    let r = h
        .run(json!({"name": "w", "steps": [{"name": "r", "return": {"x": "@input.list.3"}}]}), json!({"list": [1]}))
        .await;
    assert_eq!(r.state, RunState::Failed);
    assert!(step(&r, "r").error.as_ref().unwrap().message.contains("no item 3 (it has 1)"), "{:?}", step(&r, "r"));
}

#[tokio::test]
async fn for_each_items_must_resolve_and_null_is_no_items() {
    let h = harness();
    let each = |r: &str| json!({"name": "w", "steps": [{"name": "each", "code": {"plugin": "p"}, "for_each": r, "input": "@item"}]});
    let r = h.run(each("@input.items"), json!({})).await;
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(step(&r, "each").error.as_ref().unwrap().kind, ErrorKind::Validation);
    let r = h.run(each("@input.items?"), json!({})).await;
    assert_eq!((r.state, step(&r, "each").output.clone()), (RunState::Completed, Some(json!([]))));
    // An item's field that is not there fails that item, and the step.
    let h = harness();
    let d = json!({"name": "w", "steps": [{"name": "each", "code": {"plugin": "p"}, "for_each": "@input.items",
        "input": {"to": "@item.to"}}]});
    let r = h.run(d, json!({"items": [{"to": "a"}, {"from": "b"}]})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "each").error.clone().unwrap();
    assert!(e.message.starts_with("item 1: `@item.to` resolves to nothing"), "{}", e.message);
}
