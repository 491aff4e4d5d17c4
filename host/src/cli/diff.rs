//! `weft runs diff RUN [WITH] [--json]`: a run beside another, step by
//! step (the engine's `compare`, what MCP `run_compare` and `GET
//! /api/v1/runs/{id}/compare` answer): the first step where they depart,
//! then each step that differs with the places that differ, values side by
//! side. Without WITH, the run is compared with its template's recording.

use serde_json::Value;
use weft_engine::compare::{Change, Comparison, ValueDiff, counterpart};

use super::output::short;
use super::stored_run::load_run;
use super::{Exit, bad, output};
use weft_runtime::app::App;

pub fn diff(app: &App, run: &str, with: Option<&str>, json: bool) -> anyhow::Result<Exit> {
    let a = load_run(app, run)?;
    let b = match with {
        Some(w) => load_run(app, w)?,
        None => {
            let other = app.block_on(counterpart(app.store.as_ref(), &a))?.ok_or_else(|| {
                bad(anyhow::anyhow!(
                    "run {} has no recording or other run of template `{}` to compare with; name one: weft runs diff {} RUN",
                    a.id,
                    a.template,
                    a.id
                ))
            })?;
            load_run(app, other.as_str())?
        }
    };
    let c = Comparison::of(&a, &b);
    if json {
        output::json(&serde_json::to_value(&c).expect("a comparison serializes"));
    } else {
        print_human(&c);
    }
    Ok(Exit::Success)
}

fn side(v: &Option<Value>) -> String {
    v.as_ref().map(|v| short(v, 80)).unwrap_or_else(|| "(absent)".into())
}

fn changes(what: &str, d: &ValueDiff) {
    if d.same {
        return;
    }
    outln!("    {what}:");
    for Change { path, run, with } in &d.changes {
        let at = if path.is_empty() { "(whole)" } else { path.as_str() };
        outln!("      {at}: {}  ≠  {}", side(run), side(with));
    }
}

fn print_human(c: &Comparison) {
    outln!("run  {}  {}", c.run, c.templates[0]);
    outln!("with {}  {}", c.with, c.templates[1]);
    outln!("{}", c.summary);
    changes("run input", &c.input);
    for s in c.steps.iter().filter(|s| !s.same) {
        let state =
            if s.state[0] == s.state[1] { s.state[0].clone() } else { format!("{} ≠ {}", s.state[0], s.state[1]) };
        let first = c.first_divergence.as_ref().is_some_and(|d| d.step == s.step);
        outln!("  {}  {state}{}", s.step, if first { "  ← first divergence" } else { "" });
        match &s.input {
            Some(d) => changes("input", d),
            None => outln!("    input: not compared (one run has none: skipped, preset or not started)"),
        }
        changes("output", &s.output);
    }
    let same = c.steps.iter().filter(|s| s.same).count();
    if same > 0 {
        outln!("  ({same} step{} the same)", if same == 1 { "" } else { "s" });
    }
    changes("run output", &c.output);
}
