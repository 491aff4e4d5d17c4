//! `weft signal RUN STEP --data JSON` and `weft emit EVENT --data JSON
//! [--id ID]`: outside input for `wait` steps, from a shell.
//!
//! Both work whether or not a worker runs (docs/waits.md). The answer is
//! always decided by the one process that owns the store, so two answers
//! to the same wait can never both win:
//!
//! - When the store is free, this process takes the scheduler lock for the
//!   moment it takes to decide and commit the answer (and any answers other
//!   `weft signal`s queued meanwhile), then lets go. The run continues when
//!   a worker next owns the store.
//! - When a worker (or `weft serve`, or a foreground `weft run`) owns it,
//!   the signal or event is left in the store's inbox, the owner handles it
//!   on its next poll (within milliseconds), and this process prints the
//!   answer the owner recorded. Should the owner go away meanwhile, this
//!   process takes the lock and handles the inbox itself.
//!
//! Exit codes: 0 accepted (or an event, delivered or not); 2 invalid data
//! (the schema's errors are printed with their paths), an unknown run or
//! step; 1 the step was already resolved or does not wait for a signal.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;
use weft_engine::{EmitAnswer, Engine, SignalAnswer};

use super::runs::parse_id;
use super::{Exit, bad, output};
use weft_runtime::app::{self, App};
use weft_runtime::config::Settings;

/// How long to wait for the store's owner to answer before giving up.
const OWNER_ANSWER: Duration = Duration::from_secs(30);

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
    let run = parse_id(&args.run)?;
    let data = read_data(args.data.as_deref(), args.data_file.as_deref())?;
    let app = App::open(settings)?;
    let _rt = app.rt.enter();
    let engine = app.engine()?;
    let answer: SignalAnswer = match app.try_lock_briefly()? {
        // Many workers: the run's owner answers (the engine relays to it),
        // or this process does when nobody drives the run.
        Err(_) if app.is_shared() => app.block_on(engine.signal(&run, &args.step, data)).map_err(refused)?,
        Ok(_lock) => {
            let a = app.block_on(engine.signal(&run, &args.step, data)).map_err(refused)?;
            // Answer what others queued while this process held the lock.
            app.block_on(engine.process_inbox())?;
            a
        }
        Err(pid) => {
            let id = app.block_on(engine.post_signal(&run, &args.step, data)).map_err(refused)?;
            let v = owner_answer(&app, &engine, &id, pid)?;
            serde_json::from_value(v).context("the owner's answer to the signal is not readable")?
        }
    };
    output::json(&serde_json::to_value(&answer)?);
    Ok(match &answer {
        SignalAnswer::Accepted { .. } => {
            eprintln!("run {run}: step `{}` accepted the signal", args.step);
            Exit::Success
        }
        SignalAnswer::Invalid { errors } => {
            for e in errors {
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
        SignalAnswer::NotFound { message } => return Err(bad(anyhow::anyhow!("{message}"))),
        SignalAnswer::AlreadyResolved { state } => {
            eprintln!("run {run}: step `{}` is already resolved ({state}); the first valid signal won", args.step);
            Exit::Failed
        }
        SignalAnswer::NotWaiting { message } => {
            eprintln!("run {run}: {message}");
            Exit::Failed
        }
    })
}

/// The engine's error; data it refused (over a cap) is bad input: exit 2,
/// each problem said with how to fix it, nothing stored.
fn refused(e: weft_engine::EngineError) -> anyhow::Error {
    match e {
        weft_engine::EngineError::Invalid(problems) => {
            for p in &problems.0 {
                let hint = p.hint.as_deref().map(|h| format!("\n  to fix: {h}")).unwrap_or_default();
                eprintln!("data{}: {}{hint}", p.path.trim_start_matches("/data"), p.message);
            }
            bad(anyhow::anyhow!("the data was refused; nothing was stored"))
        }
        other => other.into(),
    }
}

pub fn emit(settings: &Settings, args: EmitArgs) -> anyhow::Result<Exit> {
    if args.event.trim().is_empty() {
        return Err(bad(anyhow::anyhow!("the event name is empty")));
    }
    let data = read_data(args.data.as_deref(), args.data_file.as_deref())?;
    let app = App::open(settings)?;
    let _rt = app.rt.enter();
    let engine = app.engine()?;
    let answer: EmitAnswer = match app.try_lock_briefly()? {
        // Many workers: delivered here to the waits of runs nobody drives,
        // handed to the owners of the others.
        Err(_) if app.is_shared() => app.block_on(engine.emit(&args.event, data, args.id)).map_err(refused)?,
        Ok(_lock) => {
            let a = app.block_on(engine.emit(&args.event, data, args.id)).map_err(refused)?;
            app.block_on(engine.process_inbox())?;
            a
        }
        Err(pid) => match app.block_on(engine.post_event(&args.event, data, args.id)).map_err(refused)? {
            Err(duplicate) => duplicate,
            Ok(id) => {
                let v = owner_answer(&app, &engine, &id, pid)?;
                serde_json::from_value(v).context("the owner's answer to the event is not readable")?
            }
        },
    };
    output::json(&serde_json::to_value(&answer)?);
    if answer.duplicate {
        eprintln!("event {} was emitted before: nothing was resolved again", answer.id);
    } else {
        let n = answer.delivered.len();
        eprintln!("event {} resolved {n} wait{}", answer.id, if n == 1 { "" } else { "s" });
    }
    Ok(Exit::Success)
}

/// Waits for the store's owner to record its answer to inbox message `id`;
/// takes over (lock, then handle the inbox here) if the owner went away.
fn owner_answer(app: &App, engine: &Engine, id: &str, pid: Option<u32>) -> anyhow::Result<Value> {
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
                if app.is_shared() {
                    anyhow::bail!(
                        "no worker of {} handled message {id} within {} s (is `weft worker` running against it?); it stays queued for the next worker",
                        app.store_name,
                        OWNER_ANSWER.as_secs()
                    );
                }
                anyhow::bail!(
                    "{} owns the store but has not handled message {id} within {} s; it stays queued and is handled when the owner polls again",
                    app::holder(pid),
                    OWNER_ANSWER.as_secs()
                );
            }
            match &mut watch {
                Some(_) => {
                    tokio::select! {
                        _ = weft_runtime::owner::changed(&mut watch) => {}
                        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    }
                }
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
}
