//! `weft runs delete RUN...` and `weft runs prune --older-than SPAN`:
//! finished runs deleted with everything stored of them (steps, attempts,
//! events, waits, artifacts). Unfinished runs are never deleted: cancel
//! them first. `--dry-run` counts what would go (a template's runs can be
//! counted before deleting).

use clap::Args;
use weft_engine::clock::system_now_ms;
use weft_engine::store::RunFilter;
use weft_engine::{RunId, RunState};
use weft_runtime::app::App;

use super::stored_run::parse_id;
use super::{Exit, bad, output};

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Delete the finished runs that ended longer ago than this (`7d`,
    /// `12h`, `30m`).
    #[arg(long, value_name = "SPAN")]
    older_than: String,
    /// Only runs that ended in this state (completed, failed, canceled,
    /// rejected).
    #[arg(long, value_name = "STATE")]
    state: Option<String>,
    /// Only runs of this template.
    #[arg(long, value_name = "NAME")]
    template: Option<String>,
    /// Count what would be deleted; delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print `{"deleted": N}` (or `{"would_delete": N}`).
    #[arg(long)]
    json: bool,
}

pub fn delete(app: &App, runs: &[String], json: bool) -> anyhow::Result<Exit> {
    if runs.is_empty() {
        return Err(bad(anyhow::anyhow!("name the runs to delete: `weft runs delete RUN...`")));
    }
    let ids: Vec<RunId> = runs.iter().map(|r| parse_id(r)).collect::<anyhow::Result<_>>()?;
    let deleted = app.block_on(app.store.delete_runs(&ids))?;
    let mut exit = Exit::Success;
    for id in &ids {
        if deleted.contains(id) {
            continue;
        }
        exit = Exit::Failed;
        match app.block_on(app.store.run(id))? {
            Some(r) => {
                eprintln!("run {id} is {}: only a finished run is deleted (`weft runs cancel {id}` first)", r.state)
            }
            None => eprintln!("no run `{id}` (see `weft runs list`)"),
        }
    }
    if json {
        output::json(&serde_json::json!({"deleted": deleted}));
    } else {
        for id in &deleted {
            eprintln!("deleted run {id}");
        }
    }
    Ok(exit)
}

pub fn prune(app: &App, a: PruneArgs) -> anyhow::Result<Exit> {
    let span = humantime::parse_duration(a.older_than.trim()).map_err(|e| {
        bad(anyhow::anyhow!("--older-than {:?} is not a span of time ({e}): write e.g. 7d, 12h or 30m", a.older_than))
    })?;
    let state = match a.state.as_deref() {
        None => None,
        Some(s) => {
            let st = s.parse::<RunState>().ok().filter(|s| s.is_terminal()).ok_or_else(|| {
                let all: Vec<&str> = RunState::ALL.iter().filter(|s| s.is_terminal()).map(|s| s.as_str()).collect();
                bad(anyhow::anyhow!("--state {s:?}: only finished runs are pruned (one of: {})", all.join(", ")))
            })?;
            Some(st)
        }
    };
    let before = system_now_ms().saturating_sub(span.as_millis().min(i64::MAX as u128) as i64);
    let filter = RunFilter { state, template: a.template.clone(), ..Default::default() };
    let n = app.block_on(weft_runtime::retention::prune(app.store.as_ref(), before, &filter, a.dry_run))?;
    let what = match (&a.template, state) {
        (Some(t), Some(s)) => format!("{s} runs of `{t}`"),
        (Some(t), None) => format!("finished runs of `{t}`"),
        (None, Some(s)) => format!("{s} runs"),
        (None, None) => "finished runs".to_string(),
    };
    if a.json {
        let key = if a.dry_run { "would_delete" } else { "deleted" };
        output::json(&serde_json::json!({ key: n }));
    } else if a.dry_run {
        eprintln!("{n} {what} ended more than {} ago; nothing was deleted (--dry-run)", a.older_than.trim());
    } else {
        eprintln!("deleted {n} {what} that ended more than {} ago", a.older_than.trim());
    }
    Ok(Exit::Success)
}
