//! A warning for a `return` step that depends on nothing: it runs as soon
//! as the run starts, and its run ends then, canceling the other steps (a
//! wait still open, say). Almost always a forgotten `after` or ref; a
//! guard clause has a `when`, and is left alone.

use crate::definition::{Action, Definition};
use crate::problem::Problem;

/// One warning per `return` step with no `after`, no `when` and no ref to
/// a step, in a definition of more than one step.
pub fn early_returns(def: &Definition) -> Vec<Problem> {
    if def.steps.len() < 2 {
        return vec![];
    }
    def.steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.action, Action::Return))
        .filter(|(_, s)| s.after.is_empty() && s.when.is_none() && s.refs().iter().all(|r| r.reference.step().is_none()))
        .map(|(i, s)| {
            let others: Vec<String> =
                def.steps.iter().filter(|o| o.name != s.name).take(3).map(|o| format!("\"{}\"", o.name)).collect();
            Problem::new(
                format!("/steps/{i}"),
                format!(
                    "step `{}` returns as soon as the run starts: it depends on no step, so the run ends then and its other steps are canceled",
                    s.name
                ),
            )
            .hint(format!("add `\"after\": [{}]` for the steps it must wait for, or refer to their output (`@step`)", others.join(", ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn warned(v: serde_json::Value) -> Vec<String> {
        let def = crate::from_value(&v, &crate::NoSchemas).unwrap();
        super::early_returns(&def).into_iter().map(|p| format!("{}: {}", p.path, p.message)).collect()
    }

    #[test]
    fn a_return_that_waits_for_nothing_is_said() {
        let w = warned(json!({"name": "x", "steps": [
            {"name": "ask", "wait": {"prompt": "ok?"}},
            {"name": "done", "return": {"v": "@input.v"}}]}));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("/steps/1: step `done` returns as soon as the run starts"), "{w:?}");
        // After a step, reading one, a guard clause, or alone: nothing to say.
        for ok in [
            json!({"name": "x", "steps": [{"name": "ask", "wait": {}}, {"name": "done", "after": ["ask"], "return": 1}]}),
            json!({"name": "x", "steps": [{"name": "ask", "wait": {}}, {"name": "done", "return": "@ask"}]}),
            json!({"name": "x", "steps": [{"name": "ask", "wait": {}},
                {"name": "skip", "when": {"ref": "@input.skip"}, "return": 0}]}),
            json!({"name": "x", "steps": [{"name": "done", "return": 1}]}),
        ] {
            assert!(warned(ok.clone()).is_empty(), "{ok}");
        }
    }
}
