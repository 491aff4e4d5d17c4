//! `weft runs list|show|events|cancel`: inspect and cancel stored runs
//! (`delete` and `prune`: see `prune.rs`).
//! These commands only read the store (or, for `cancel`, write the
//! cancellation), so they work whether or not a worker owns it.

use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use weft_engine::clock::rfc3339;
use weft_engine::store::{RunFilter, RunSummary};
use weft_engine::view::{WaitOn, WaitView};
use weft_engine::{RunRecord, RunState, Seq, view};

use super::output::short;
use super::progress::{describe, human_ms};
use super::stored_run::load_run;
use super::{Exit, bad, output};
use weft_runtime::app::App;
use weft_runtime::config::Settings;

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List(ListArgs),
    /// One run: its steps, states, attempts, outputs and errors.
    Show {
        /// The run's id (r_...).
        run: String,
        /// Print the run as one JSON object (stable for scripts).
        #[arg(long)]
        json: bool,
    },
    /// The run's event log, in order.
    Events {
        /// The run's id (r_...).
        run: String,
        /// Keep printing new events until the run finishes.
        #[arg(long)]
        follow: bool,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a run: running attempts are interrupted, unfinished steps
    /// and the run end `canceled`.
    Cancel {
        /// The run's id (r_...).
        run: String,
    },
    /// Retry an ended run: a new run of the same definition that keeps
    /// the outputs of the steps that succeeded and runs the others
    /// (labelled `weft/retry-of=RUN`).
    Retry(super::retry::RetryArgs),
    /// Compare a run with another, step by step: where their inputs and
    /// outputs differ, and the first step where they depart. Without a
    /// second run: the recording of the run's template (else the run of
    /// that template before it).
    Diff {
        /// The run to look at (r_...).
        run: String,
        /// The run to compare it with (r_...).
        with: Option<String>,
        /// Print the comparison as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The files a run's steps produced: list them, or write them to a folder.
    Artifacts {
        /// The run's id (r_...).
        run: String,
        /// Write each artifact into this folder (created if missing), as
        /// its name.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Delete finished runs with everything stored of them.
    Delete {
        /// The runs' ids (r_...).
        runs: Vec<String>,
        /// Print `{"deleted": [...]}`.
        #[arg(long)]
        json: bool,
    },
    /// Delete the finished runs that ended before a span of time ago
    /// (`retention` in weft.toml does it by itself: 30 days by default).
    Prune(super::prune::PruneArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only runs in this state (submitted, working, input-required,
    /// auth-required, completed, failed, canceled, rejected, recording:
    /// an MCP session's open recording).
    #[arg(long, value_name = "STATE")]
    status: Option<String>,
    /// Only runs of this template.
    #[arg(long, value_name = "NAME")]
    template: Option<String>,
    /// At most this many runs.
    #[arg(long)]
    limit: Option<usize>,
    /// Only runs with this label, `KEY=VALUE` (repeatable: every one must match).
    #[arg(long, value_name = "KEY=VALUE")]
    label: Vec<String>,
    /// Print a JSON array.
    #[arg(long)]
    json: bool,
}

pub fn run(settings: &Settings, cmd: RunsCommand) -> anyhow::Result<Exit> {
    let app = App::open(settings)?;
    match cmd {
        RunsCommand::List(a) => list(&app, a),
        RunsCommand::Show { run, json } => {
            let rec = load_run(&app, &run)?;
            let filter = weft_engine::delivery::DeliveryFilter { run: Some(rec.id.clone()), ..Default::default() };
            let mut sent: Vec<_> = app.block_on(app.store.deliveries(&filter))?;
            sent.reverse();
            let sent: Vec<_> = sent.iter().map(weft_runtime::usecase::NotificationView::of).collect();
            if json {
                let mut v = view::RunView::of(&rec);
                v.notifications = sent.iter().filter_map(|n| serde_json::to_value(n).ok()).collect();
                output::json(&v);
            } else {
                print_human(&rec);
                if !sent.is_empty() {
                    outln!("notifications:");
                    for n in &sent {
                        outln!("  {}", super::notifications::line(n));
                    }
                }
            }
            Ok(Exit::Success)
        }
        RunsCommand::Events { run, follow, json } => events(&app, &run, follow, json),
        RunsCommand::Cancel { run } => cancel(&app, &run),
        RunsCommand::Retry(a) => {
            drop(app);
            super::retry::retry(settings, a)
        }
        RunsCommand::Delete { runs, json } => super::prune::delete(&app, &runs, json),
        RunsCommand::Prune(a) => super::prune::prune(&app, a),
        RunsCommand::Diff { run, with, json } => super::diff::diff(&app, &run, with.as_deref(), json),
        RunsCommand::Artifacts { run, out, json } => {
            let rec = load_run(&app, &run)?;
            super::artifacts::artifacts(&app, &rec, out.as_deref(), json)
        }
    }
}

fn list(app: &App, a: ListArgs) -> anyhow::Result<Exit> {
    let state = match a.status.as_deref() {
        None => None,
        Some(s) => Some(s.parse::<RunState>().map_err(|_| {
            let all: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
            bad(anyhow::anyhow!("unknown run state `{s}` (one of: {})", all.join(", ")))
        })?),
    };
    let labels = super::labels::parse_labels(&a.label)?;
    let filter = RunFilter { state, template: a.template, limit: a.limit, labels, ..Default::default() };
    let runs = app.block_on(app.store.list_runs(&filter))?;
    if a.json {
        output::json(&runs.iter().map(summary_json).collect::<Vec<_>>());
        return Ok(Exit::Success);
    }
    if runs.is_empty() {
        eprintln!("no runs");
        return Ok(Exit::Success);
    }
    let tw = runs.iter().map(|r| r.template.len() + version(r.version).len()).max().unwrap_or(0).max(8);
    outln!("{:<28}  {:<tw$}  {:<14}  {:<24}  TOOK", "ID", "TEMPLATE", "STATE", "CREATED");
    for r in &runs {
        let took = if r.state.is_terminal() { human_ms(r.updated_at - r.created_at) } else { "-".into() };
        outln!(
            "{:<28}  {:<tw$}  {:<14}  {:<24}  {took}",
            r.id.to_string(),
            format!("{}{}", r.template, version(r.version)),
            r.state.as_str(),
            rfc3339(r.created_at),
        );
    }
    Ok(Exit::Success)
}

fn version(v: Option<u32>) -> String {
    v.map(|v| format!(" v{v}")).unwrap_or_default()
}

fn summary_json(r: &RunSummary) -> Value {
    json!({
        "id": r.id, "template": r.template, "version": r.version, "state": r.state,
        "parent": r.parent, "created_at": rfc3339(r.created_at), "updated_at": rfc3339(r.updated_at),
        "labels": r.labels,
    })
}

/// The human form of `runs show`.
pub fn print_human(r: &RunRecord) {
    outln!("run {}  {}{}  {}", r.id, r.template, version(r.version), r.state);
    outln!("  created  {}", rfc3339(r.created_at));
    outln!("  updated  {}  ({})", rfc3339(r.updated_at), human_ms(r.updated_at - r.created_at));
    if let Some(p) = &r.parent {
        outln!("  parent   {p} (depth {})", r.depth);
    }
    if !r.labels.is_empty() {
        let shown: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        outln!("  labels   {}", shown.join(" "));
    }
    outln!("  input    {}", short(&r.input, 200));
    if let Some(o) = &r.output {
        outln!("  output   {}", short(o, 200));
    }
    if let Some(e) = &r.error {
        outln!("  error    {e}");
    }
    outln!("steps:");
    let w = r.steps.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for s in &r.steps {
        outln!("  {:<w$}  {}", s.name, describe(s));
        let attempts: Vec<_> = r.attempts.iter().filter(|a| a.step == s.name).collect();
        let several = attempts.len() > 1 || attempts.iter().any(|a| a.item.is_some() || a.interruptions > 0);
        if let Some(i) = attempts.last().and_then(|a| a.input.as_ref()).filter(|_| !several) {
            outln!("  {:<w$}    input:  {}", "", short(i, 160));
        }
        if let Some(o) = &s.output {
            outln!("  {:<w$}    output: {}", "", short(o, 160));
        }
        if several {
            for a in attempts {
                let item = a.item.map(|i| format!(" item {i}")).unwrap_or_default();
                let took = a.ended_at.map(|e| format!(" ({})", human_ms(e - a.started_at))).unwrap_or_default();
                let err = a.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
                let again = match a.interruptions {
                    0 => String::new(),
                    1 => " (interrupted once, ran again)".to_string(),
                    n => format!(" (interrupted {n} times, ran again)"),
                };
                outln!("  {:<w$}    attempt {}{item}: {}{took}{again}{err}", "", a.attempt, a.state.as_str());
                if let Some(i) = &a.input {
                    outln!("  {:<w$}      input: {}", "", short(i, 160));
                }
            }
        }
    }
    print_waits(r);
    if !r.artifacts.is_empty() {
        outln!("artifacts:");
        for a in &r.artifacts {
            outln!("  {}  {}, {} bytes, from {} (attempt {})", a.name, a.mime, a.size, a.step, a.attempt);
        }
        outln!("  (weft runs artifacts {} --out DIR writes them)", r.id);
    }
}

/// The `waits:` section of `runs show`: what each parked step waits for and
/// how to answer it.
fn print_waits(r: &RunRecord) {
    let waits = WaitView::all(r);
    if waits.is_empty() {
        return;
    }
    outln!("waits:");
    for w in &waits {
        let until = w.until.as_ref().map(|u| format!(", until {u}")).unwrap_or_default();
        let since = w.since.clone().unwrap_or_default();
        let (who, item_arg) = match w.item {
            Some(k) => (format!("{} item {k}", w.step), format!(" --item {k}")),
            None => (w.step.clone(), String::new()),
        };
        match w.kind {
            WaitOn::Signal => {
                let reason = w.reason.map(|r| r.to_string()).unwrap_or_default();
                outln!("  {who}  a signal ({reason}) since {since}{until}");
                if let Some(p) = &w.prompt {
                    outln!("    prompt: {p}");
                }
                if let Some(v) = &w.preview {
                    outln!("    preview: {}", short(v, 300));
                }
                if let Some(s) = &w.schema {
                    outln!("    schema: {}", short(s, 300));
                }
                outln!("    answer: weft signal {} {}{item_arg} --data JSON", r.id, w.step);
            }
            WaitOn::Event => {
                let event = w.event.clone().unwrap_or_default();
                let m = match &w.matches {
                    Some(m) => format!(" matching {}", short(&Value::Object(m.clone()), 200)),
                    None => String::new(),
                };
                outln!("  {who}  the event `{event}`{m} since {since}{until}");
                outln!("    answer: weft emit {event} --data JSON");
            }
            WaitOn::Child => {
                let run = w.child.clone().unwrap_or_default();
                outln!("  {who}  the child run {run} (weft runs show {run})")
            }
            WaitOn::Sleep => outln!("  {who}  a timer{until}"),
        }
    }
}

fn events(app: &App, id: &str, follow: bool, json: bool) -> anyhow::Result<Exit> {
    let rec = load_run(app, id)?;
    let mut after = Seq::ZERO;
    app.block_on(async {
        // (Made on the runtime: the watch registers with its reactor.)
        let mut watch = if follow { app.store.watch() } else { None };
        loop {
            let evs = app.store.events_after(&rec.id, after, 1000).await?;
            for e in &evs {
                after = e.seq;
                if json {
                    output::json(&view::event_json(e));
                } else {
                    let step = match (&e.step, e.item) {
                        (Some(s), Some(i)) => format!(" {s}[{i}]"),
                        (Some(s), None) => format!(" {s}"),
                        _ => String::new(),
                    };
                    let data = if e.data.is_null() { String::new() } else { format!(" {}", short(&e.data, 300)) };
                    outln!("{:>4}  {}  {}{step}{data}", e.seq.0, rfc3339(e.at), e.kind);
                }
            }
            // Every event is listed: page on while pages are full.
            if evs.len() == 1000 {
                continue;
            }
            if !follow {
                return Ok::<_, anyhow::Error>(());
            }
            let state = app.store.run(&rec.id).await?.map(|r| r.state);
            if state.is_none_or(|s| s.is_terminal()) {
                // One last read: the final events may have landed meanwhile.
                let evs = app.store.events_after(&rec.id, after, 1000).await?;
                if evs.is_empty() {
                    return Ok(());
                }
                continue;
            }
            // Woken by the store's writes (any process's); a slow look
            // for what the watch does not tell.
            tokio::select! {
                _ = weft_runtime::owner::changed(&mut watch) => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
    })?;
    Ok(Exit::Success)
}

fn cancel(app: &App, id: &str) -> anyhow::Result<Exit> {
    let rec = load_run(app, id)?;
    if rec.state.is_terminal() {
        eprintln!("run {} is already {}", rec.id, rec.state);
        return Ok(Exit::Success);
    }
    let engine = app.engine()?;
    let c = weft_runtime::usecase::outside::cancel(app, &engine, rec.id.as_str())?;
    match c.already_finished {
        true => eprintln!("run {} is already {}", c.run.id, c.run.state),
        false => eprintln!("run {} {}", c.run.id, c.run.state),
    }
    Ok(Exit::Success)
}
