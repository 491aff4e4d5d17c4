//! `weft signal RUN STEP --data JSON` and `weft emit EVENT --data JSON
//! [--id ID]`: outside input for `wait` steps, from a shell.
//!
//! Both work whether or not a worker runs (docs/waits.md): the use-case
//! layer's `outside` module decides how the answer reaches the process
//! that owns the store; this file reads the arguments and prints the
//! answer.
//!
//! Exit codes: 0 accepted (or an event, delivered or not); 2 invalid data
//! (the schema's errors are printed with their paths), an unknown run or
//! step; 1 the step was already resolved or does not wait for a signal.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;
use weft_runtime::app::App;
use weft_runtime::config::Settings;
use weft_runtime::usecase::answer::{EmitRefused, SignalRefused, WaitRefused};
use weft_runtime::usecase::outside;

use super::stored_run::parse_id;
use super::{Exit, bad, output};

#[derive(Debug, Args)]
pub struct SignalArgs {
    /// The run's id (r_...).
    run: String,
    /// The `wait` step to answer.
    step: String,
    /// The answer as JSON (checked against the wait's schema).
    #[arg(long, conflicts_with = "data_file")]
    data: Option<String>,
    /// Read the answer JSON from a file (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    data_file: Option<PathBuf>,
    /// For a `for_each` wait: the item to answer (from 0; `weft runs show`
    /// lists the items still waiting).
    #[arg(long, value_name = "N")]
    item: Option<u32>,
}

#[derive(Debug, Args)]
pub struct EmitArgs {
    /// The event's name (what `wait: {"event": ...}` steps wait for).
    event: String,
    /// The event's data as JSON (`match` fields are compared with it).
    #[arg(long, conflicts_with = "data_file")]
    data: Option<String>,
    /// Read the data JSON from a file (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    data_file: Option<PathBuf>,
    /// The event's id: an id emitted before resolves nothing again.
    #[arg(long)]
    id: Option<String>,
}

/// Reads `--data` / `--data-file` (one of them is required), refusing
/// invalid JSON with its line and column.
fn read_data(data: Option<&str>, file: Option<&std::path::Path>) -> anyhow::Result<Value> {
    let (text, source) = match (data, file) {
        (Some(d), _) => (d.to_string(), "--data".to_string()),
        (None, Some(p)) if p.as_os_str() == "-" => {
            (std::io::read_to_string(std::io::stdin()).context("reading the data from stdin")?, "stdin".to_string())
        }
        (None, Some(p)) => (
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the data file {}", p.display()))
                .map_err(bad)?,
            p.display().to_string(),
        ),
        (None, None) => return Err(bad(anyhow::anyhow!("give the data with --data JSON or --data-file FILE"))),
    };
    serde_json::from_str(&text).map_err(|e| {
        bad(anyhow::anyhow!("the data ({source}) is not valid JSON: {e} (line {}, column {})", e.line(), e.column()))
    })
}

pub fn signal(settings: &Settings, args: SignalArgs) -> anyhow::Result<Exit> {
    parse_id(&args.run)?;
    let data = read_data(args.data.as_deref(), args.data_file.as_deref())?;
    let app = App::open(settings)?;
    let _rt = app.rt.enter();
    let engine = app.engine()?;
    let refused = match outside::signal(&app, &engine, &args.run, &args.step, args.item, data) {
        Ok(s) if s.queued.is_some() => {
            let message = s.queued.unwrap_or_default();
            let mut out = serde_json::json!({"status": "queued", "message": message, "output": s.output});
            if let Some(k) = s.item {
                out["item"] = k.into();
            }
            eprintln!("run {}: {message}", s.run);
            output::json(&out);
            return Ok(Exit::Success);
        }
        Ok(s) => {
            let mut out = serde_json::json!({"status": "accepted", "output": s.output});
            match s.item {
                Some(k) => {
                    out["item"] = k.into();
                    out["waiting_items"] = serde_json::json!(s.waiting_items);
                    let left = match s.waiting_items.len() {
                        0 => "no item waits any more".to_string(),
                        n => format!("{n} item(s) still wait"),
                    };
                    eprintln!("run {}: step `{}` accepted the signal for item {k}; {left}", s.run, args.step);
                }
                None => match &s.forwarded {
                    Some(m) => {
                        out["message"] = m.clone().into();
                        eprintln!("run {}: step `{}` accepted the answer; {m}", s.run, args.step);
                    }
                    None => eprintln!("run {}: step `{}` accepted the signal", s.run, args.step),
                },
            }
            output::json(&out);
            return Ok(Exit::Success);
        }
        Err(SignalRefused::Wait(w)) => w,
        Err(SignalRefused::Run(e)) => return Err(bad(anyhow::Error::new(e))),
        Err(SignalRefused::TooLarge(problems)) => return Err(too_large(&problems)),
        Err(SignalRefused::Failed(e)) => return Err(e.into()),
    };
    output::json(&serde_json::to_value(&refused)?);
    let run = args.run.trim();
    Ok(match refused {
        WaitRefused::Invalid { errors } => {
            for e in &errors {
                let at = if e.path.is_empty() { "data".to_string() } else { format!("data{}", e.path) };
                eprintln!("{at}: {}", e.message);
            }
            return Err(bad(anyhow::anyhow!(
                "the data does not match the schema of step `{}` ({} problem{}); the step still waits",
                args.step,
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            )));
        }
        WaitRefused::NotFound { message } => return Err(bad(anyhow::anyhow!("{message}"))),
        WaitRefused::AlreadyResolved { state } => {
            eprintln!("run {run}: step `{}` is already resolved ({state}); the first valid signal won", args.step);
            Exit::Failed
        }
        WaitRefused::NotWaiting { message } => {
            eprintln!("run {run}: {message}");
            Exit::Failed
        }
    })
}

/// Data over its cap is bad input: exit 2, each problem said with how to
/// fix it, nothing stored.
fn too_large(problems: &[weft_model::Problem]) -> anyhow::Error {
    for p in problems {
        let hint = p.hint.as_deref().map(|h| format!("\n  to fix: {h}")).unwrap_or_default();
        eprintln!("data{}: {}{hint}", p.path.trim_start_matches("/data"), p.message);
    }
    bad(anyhow::anyhow!("the data was refused; nothing was stored"))
}

pub fn emit(settings: &Settings, args: EmitArgs) -> anyhow::Result<Exit> {
    if args.event.trim().is_empty() {
        return Err(bad(anyhow::anyhow!("the event name is empty")));
    }
    let data = read_data(args.data.as_deref(), args.data_file.as_deref())?;
    let app = App::open(settings)?;
    let _rt = app.rt.enter();
    let engine = app.engine()?;
    let answer = outside::emit(&app, &engine, &args.event, data, args.id).map_err(|e| match e {
        EmitRefused::EmptyName => bad(anyhow::anyhow!("the event name is empty")),
        EmitRefused::EmptyId => bad(anyhow::anyhow!("the event id (--id) is empty; give one, or leave --id out")),
        EmitRefused::TooLarge(problems) => too_large(&problems),
        EmitRefused::Failed(e) => e.into(),
    })?;
    output::json(&serde_json::to_value(&answer)?);
    if answer.duplicate {
        eprintln!("event {} was emitted before: nothing was resolved again", answer.id);
    } else {
        let n = answer.delivered.len();
        eprintln!("event {} resolved {n} wait{}", answer.id, if n == 1 { "" } else { "s" });
    }
    Ok(Exit::Success)
}
