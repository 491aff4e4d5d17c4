//! `weft run FILE|TEMPLATE [--input JSON | --input-file F] [--json] [--detach]`.
//!
//! 1. The definition is validated (every problem with its JSON path: exit
//!    2, nothing stored) and the input checked against `input_schema`
//!    (exit 2). A name that is not a file is a saved template (its latest
//!    version).
//! 2. Every code step's guest is pinned by digest, and the run is created
//!    (`submitted`, durable) before anything executes.
//! 3. `--detach` prints the run's id and exits 0; a `weft worker` executes it.
//! 4. Otherwise, when this process can take the store's scheduler lock it
//!    executes the run itself. When another process (a `weft worker`) owns
//!    the store, the run is left `submitted` for that process — a worker
//!    wakes when the store is written — and this process follows it, woken
//!    by the store's writes (taking over if the owner goes away). An owner
//!    that is itself a foreground `weft run` executes the runs other
//!    foreground runs leave meanwhile, at once (as a worker would), and
//!    when its own run ends gives their attempts in flight up to
//!    [`HANDOVER`] to finish before it leaves them to the next owner.
//!    Either way progress goes to stderr and the result to stdout:
//!    the run's output (or, when it did not complete, its error object), or
//!    with `--json` the whole `runs show --json` object. Exit code 0
//!    completed, 1 failed/rejected/canceled, 3 waiting for input.
//!
//! `$TRACEPARENT`, when set to a W3C trace context, is the run's parent
//! span (docs/observability.md).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;
use weft_engine::{Engine, EngineError, RunId, RunOptions, RunRecord, RunState, view};
use weft_model::Definition;
use weft_runtime::app::Owner;
use weft_runtime::owner::Poller;
use weft_runtime::pipeline::{Prepared, Refused, Source};
use weft_runtime::usecase::{StartRefused, UseCases};

use super::exit_for;
use super::progress::Progress;
use super::{Exit, bad, output};
use weft_runtime::app::{self, App};
use weft_runtime::config::Settings;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A definition file (JSON) or the name of a saved template.
    target: String,
    /// The run's input as JSON text (default `{}`).
    #[arg(long, conflicts_with = "input_file")]
    input: Option<String>,
    /// Read the input JSON from a file (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    input_file: Option<PathBuf>,
    /// Print the whole run object (the `runs show --json` shape) instead of its output.
    #[arg(long)]
    json: bool,
    /// Store the run, print its id and exit; a `weft worker` executes it.
    #[arg(long)]
    detach: bool,
    /// Give step STEP this output instead of running it (mock a step,
    /// inject known data): `--preset fetch='{"id": 7}'`. Repeatable.
    #[arg(long, value_name = "STEP=JSON")]
    preset: Vec<String>,
    /// A concurrency key: runs with the same key execute one at a time, in
    /// the order they were created (the others stay `submitted`).
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// A label of the run, `KEY=VALUE` (`--label origin=cron`): shown with
    /// it, filtered on by `runs list --label`, read as `@run.labels.KEY`.
    /// Repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    label: Vec<String>,
    /// Start at most one run per KEY: run again with the same key and the
    /// same request, and the run it started is followed (no new run); with
    /// another input it is refused (exit 2) naming that run.
    #[arg(long, value_name = "KEY")]
    idempotency_key: Option<String>,
    /// A notification for this run, added to the definition's `notify`
    /// (JSON: `{"on": ["completed"], "webhook": "ops"}`). Repeatable.
    #[arg(long, value_name = "JSON")]
    notify: Vec<String>,
}

/// The `--notify` objects, refusing text that is not JSON.
fn parse_notify(raw: &[String]) -> anyhow::Result<Vec<Value>> {
    raw.iter()
        .map(|n| {
            serde_json::from_str(n).map_err(|e| {
                bad(anyhow::anyhow!(
                    "--notify is not JSON: {e} (write --notify '{{\"on\": [\"completed\"], \"webhook\": \"ops\"}}')"
                ))
            })
        })
        .collect()
}

/// `STEP=JSON` pairs of `--preset`, refusing malformed ones.
fn parse_presets(raw: &[String]) -> anyhow::Result<Vec<(String, Value)>> {
    raw.iter()
        .map(|p| {
            let (step, json) = p.split_once('=').ok_or_else(|| {
                bad(anyhow::anyhow!("--preset {p:?}: write STEP=JSON, e.g. --preset fetch='{{\"id\": 7}}'"))
            })?;
            let v: Value = serde_json::from_str(json)
                .map_err(|e| bad(anyhow::anyhow!("--preset {step}: the output is not valid JSON: {e}")))?;
            Ok((step.to_string(), v))
        })
        .collect()
}

/// Reads the input JSON from `--input` or `--input-file`, refusing invalid
/// JSON with its line and column.
pub fn read_input(input: Option<&str>, file: Option<&Path>) -> anyhow::Result<Value> {
    let (text, source) = match file {
        Some(p) if p.as_os_str() == "-" => {
            (std::io::read_to_string(std::io::stdin()).context("reading the input from stdin")?, "stdin".to_string())
        }
        Some(p) => (
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the input file {}", p.display()))
                .map_err(bad)?,
            p.display().to_string(),
        ),
        None => (input.unwrap_or("{}").to_string(), "--input".to_string()),
    };
    serde_json::from_str(&text).map_err(|e| {
        bad(anyhow::anyhow!("the input ({source}) is not valid JSON: {e} (line {}, column {})", e.line(), e.column()))
    })
}

/// Whether a `weft run` argument names a file rather than a template.
fn is_file(target: &str) -> bool {
    let p = Path::new(target);
    p.exists() || target.contains('/') || target.contains(std::path::MAIN_SEPARATOR) || target.ends_with(".json")
}

pub fn run(settings: &Settings, args: RunArgs) -> anyhow::Result<Exit> {
    let input = read_input(args.input.as_deref(), args.input_file.as_deref())?;
    let presets = parse_presets(&args.preset)?;
    // A caller's trace (a CI job, a script under a traced parent) by the
    // environment variable's convention; an invalid one is ignored.
    let traceparent = std::env::var("TRACEPARENT").ok();
    let labels = super::labels::parse_labels(&args.label)?;
    let notify = parse_notify(&args.notify)?;
    if args.idempotency_key.as_deref().is_some_and(|k| k.trim().is_empty() || k.chars().count() > 255) {
        return Err(bad(anyhow::anyhow!("--idempotency-key: give a key of 1 to 255 characters")));
    }
    let presets_map: std::collections::BTreeMap<String, Value> = presets.iter().cloned().collect();
    let mut opts = RunOptions { presets, traceparent, labels, ..Default::default() };
    if let Some(k) = &args.key {
        if k.trim().is_empty() {
            return Err(bad(anyhow::anyhow!("--key: the concurrency key is empty")));
        }
        opts.concurrency_key = Some(k.clone());
    }
    // A file is validated before the store is touched.
    let from_file = if is_file(&args.target) {
        let file = Path::new(&args.target);
        Some(
            super::prepare::pipeline(settings)?
                .load_file(file)
                .map_err(|r| super::prepare::refused(r, &args.target, args.json))?,
        )
    } else {
        None
    };
    // What the key's digest says was asked: the same as MCP's and HTTP's
    // for the same definition (or template), input, labels and notifications.
    let digest = args.idempotency_key.as_ref().map(|_| {
        let source = match &from_file {
            Some(l) => serde_json::json!({"definition": l.doc}),
            None => serde_json::json!({"template": args.target, "version": null}),
        };
        let (key, labels) = (args.key.as_deref(), &opts.labels);
        weft_runtime::usecase::start::start_digest(&source, &input, key, &presets_map, None, labels, &notify)
    });
    let app = App::open(settings)?;
    // Engine::start spawns onto the runtime.
    let _rt = app.rt.enter();
    let pipeline = app.pipeline()?;
    let what = &args.target;
    let engine = app.engine()?;
    // A key that started a run before: that run (or a refusal), nothing new.
    let cases = UseCases::new(engine.clone(), app.dyn_store(), pipeline.clone());
    if let (Some(key), Some(digest)) = (&args.idempotency_key, &digest) {
        match app.block_on(cases.started_by(key, digest)) {
            Ok(Some(s)) => return follow_replayed(&app, &engine, &s.id, args.json),
            Ok(None) => opts.start_key = Some((key.clone(), digest.clone())),
            Err(e) => return Err(key_refused(e)),
        }
    }
    let prepared = app
        .block_on(async {
            let mut loaded = match from_file {
                Some(loaded) => loaded,
                None => pipeline.load(Source::Template(what.clone())).await?,
            };
            if !notify.is_empty() {
                // This run's notifications: the document is checked again with them.
                if let Some(d) = loaded.doc.as_object_mut() {
                    let list = d.entry("notify").or_insert_with(|| Value::Array(vec![]));
                    if let Some(l) = list.as_array_mut() {
                        l.extend(notify);
                    }
                }
                loaded.online = false;
            }
            pipeline.prepare(loaded, input, opts).await
        })
        .map_err(|r| match r {
            Refused::Unusable(_) if !is_file(what) => {
                bad(anyhow::anyhow!("no file or template `{what}` (see `weft templates list`)"))
            }
            other => super::prepare::refused(other, what, args.json),
        })?;
    for p in &prepared.warnings {
        eprintln!("warning: {what}: {p}");
    }
    let start_key = prepared.opts.start_key.clone();
    let replay = |e: anyhow::Error| -> anyhow::Result<RunId> {
        // Another start of the same key won the race: its run.
        if let Some((key, digest)) = &start_key
            && let Ok(Some(s)) = app.block_on(cases.started_by(key, digest))
        {
            return Ok(s.id);
        }
        Err(e)
    };
    start_prepared(&app, &engine, prepared, args.detach, args.json, replay)
}

/// Creates the prepared run, then (unless `detach`) executes it here when
/// this process may own the store, or follows the owner executing it;
/// prints it as `weft run` does. `replay` finds the run a repeated
/// idempotency key started, when its creation conflicts.
pub(super) fn start_prepared(
    app: &App,
    engine: &Engine,
    prepared: Prepared,
    detach: bool,
    json: bool,
    replay: impl Fn(anyhow::Error) -> anyhow::Result<RunId>,
) -> anyhow::Result<Exit> {
    let _rt = app.rt.enter();
    let Prepared { plan: pinned, input, opts, .. } = prepared;
    if detach {
        let id = create(app, engine, &pinned, input, opts).or_else(replay)?;
        if json {
            let rec = app.block_on(app.store.run(&id))?.context("the run just created is missing")?;
            output::json(&view::run_json(&rec));
        } else {
            outln!("{id}");
        }
        eprintln!("run {id} submitted; `weft worker` executes it, `weft runs show {id}` shows it");
        return Ok(Exit::Success);
    }
    let lock = app.try_lock()?;
    let (id, owned) = match lock {
        Ok(lock) => {
            // Created and started in one commit.
            let id = app.block_on(engine.submit(&pinned, input, opts)).map_err(create_error).or_else(replay)?;
            // A run of the same key started meanwhile by another process.
            engine.start(&id);
            (id, Some(lock))
        }
        Err(pid) => {
            let id = create(app, engine, &pinned, input, opts).or_else(replay)?;
            eprintln!(
                "the store {} is owned by {}, which executes run {id}; following it here (and taking over if that process ends first)",
                app.store_name,
                app::holder(pid)
            );
            (id, None)
        }
    };
    let mut owned = owned;
    // Notifications go out while this process owns the store.
    let outbox = owned.as_ref().and_then(|_| engine.start_outbox());
    let rec = follow(app, engine, &id, &mut owned, Progress::new(false));
    let outbox = outbox.or_else(|| owned.as_ref().and_then(|_| engine.start_outbox()));
    if owned.is_some() {
        hand_over(app, engine);
        if outbox.is_some() {
            send_before_exit(app, &id);
        }
    }
    if let Some(o) = owned {
        // A worker on a shared store: the runs it still drives go back.
        app.block_on(o.leave());
    }
    app.shutdown_upstreams();
    Ok(print_result(&rec?, json))
}

/// An idempotency key's refusal, as the CLI says it (exit 2).
fn key_refused(e: StartRefused) -> anyhow::Error {
    match e {
        StartRefused::KeyConflict { key, run, differs } => bad(anyhow::anyhow!(
            "--idempotency-key `{key}` already started run {run} with another request (its {} differ); nothing was started (`weft runs show {run}` shows it)",
            differs.join(", ")
        )),
        StartRefused::Failed(e) => e.into(),
        other => bad(anyhow::anyhow!("{other}")),
    }
}

/// The run a repeated idempotency key started: followed as if just started.
fn follow_replayed(app: &App, engine: &Engine, id: &RunId, json: bool) -> anyhow::Result<Exit> {
    eprintln!("this idempotency key started run {id} before: following it (no new run)");
    let _rt = app.rt.enter();
    let mut owned = app.try_lock()?.ok();
    if owned.is_some() {
        engine.start(id);
    }
    let rec = follow(app, engine, id, &mut owned, Progress::new(false));
    if owned.is_some() {
        hand_over(app, engine);
    }
    if let Some(o) = owned {
        app.block_on(o.leave());
    }
    app.shutdown_upstreams();
    Ok(print_result(&rec?, json))
}

/// The run's notifications get their first try before the process exits
/// (at most a try's timeout); those still to be retried are said, for the
/// store's next owner to send.
fn send_before_exit(app: &App, id: &RunId) {
    let filter = weft_engine::delivery::DeliveryFilter { run: Some(id.clone()), ..Default::default() };
    let left = app.block_on(async {
        let until = tokio::time::Instant::now() + app.settings.file.notifications.timeout() + Duration::from_secs(1);
        loop {
            let now = weft_engine::clock::system_now_ms();
            let pending: Vec<_> = match app.store.deliveries(&filter).await {
                Ok(all) => {
                    all.into_iter().filter(|d| d.state == weft_engine::delivery::DeliveryState::Pending).collect()
                }
                Err(_) => return vec![],
            };
            if pending.iter().all(|d| d.next_at > now) || tokio::time::Instant::now() >= until {
                return pending;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    for d in left {
        let why = d.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default();
        eprintln!(
            "notification {} ({} on {}) is not delivered yet{why}; the store's owner (`weft worker`, `weft serve`) sends it",
            d.id, d.target, d.on
        );
    }
}

/// How long the runs another foreground `weft run` left, which this owner
/// executes, get to finish their attempts in flight once this process's
/// own run ended (the next owner retries what is still running).
pub const HANDOVER: Duration = Duration::from_secs(3);

/// The owner's own run ended: the other runs it drives get [`HANDOVER`]
/// to reach a commit; those still running are stopped like a crash (their
/// followers take the store over within half a second).
fn hand_over(app: &App, engine: &Engine) {
    app.block_on(async {
        let until = tokio::time::Instant::now() + HANDOVER;
        while engine.busy_runs() > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    engine.abort_all();
}

fn create(app: &App, engine: &Engine, def: &Definition, input: Value, opts: RunOptions) -> anyhow::Result<RunId> {
    app.block_on(engine.create_run(def, input, opts)).map_err(create_error)
}

fn create_error(e: EngineError) -> anyhow::Error {
    match e {
        EngineError::Invalid(p) => super::prepare::input_problems(&p.0),
        other => other.into(),
    }
}

/// Follows a run to its end (or until it waits for input), showing
/// progress. With `lock`, this process executes the run; without, it
/// tries to take the lock now and then and executes the run itself if the
/// owner went away.
pub fn follow(
    app: &App,
    engine: &Engine,
    id: &RunId,
    lock: &mut Option<Owner>,
    mut progress: Progress,
) -> anyhow::Result<RunRecord> {
    app.block_on(async {
        let mut last_try = Instant::now();
        // Executing here: the driver's end wakes the loop at once, and each
        // commit of the run (pushed by the engine) updates the progress.
        // Another process's writes (its progress on a run it drives, signals
        // it leaves for this owner) wake the store's watch. A slow look
        // remains for what neither tells (an owner that died).
        let mut ended = lock.is_some().then(|| Box::pin(engine.wait(id)));
        // While this process owns the store, it executes the runs other
        // processes (foreground `weft run`s following theirs) submit.
        let mut poller = lock.is_some().then(|| Poller::new(vec![id.clone()]));
        let mut changes = engine.subscribe();
        let mut watch = app.store.watch();
        // Progress is read at most every 20 ms, however often commits come.
        let mut last = tokio::time::Instant::now();
        loop {
            let changed = async {
                tokio::time::sleep_until(last + Duration::from_millis(20)).await;
                tokio::select! {
                    _ = changes.of_run(id) => {}
                    _ = weft_runtime::owner::changed(&mut watch) => {}
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = changed => {}
                _ = async { ended.as_mut().expect("guarded").await }, if ended.is_some() => {
                    ended = None;
                }
                _ = tokio::signal::ctrl_c() => {
                    if lock.is_some() {
                        // Like a crash: nothing more is written; the lease
                        // of a running attempt lets the next owner retry it.
                        engine.abort_all();
                    }
                    eprintln!("\ninterrupted: run {id} is left unfinished; `weft worker` resumes it");
                    anyhow::bail!("interrupted");
                }
            }
            last = tokio::time::Instant::now();
            if let Some(p) = poller.as_mut() {
                // This process owns the store: signals and events other
                // processes leave in the inbox are answered here, and the
                // runs they submit are started.
                if let Err(e) = p.poll(engine, &*app.store).await {
                    tracing::warn!(error = %e, "cannot look for submitted runs");
                }
            }
            let rec = app.store.run(id).await?.with_context(|| format!("run {id} disappeared from the store"))?;
            progress.update(&rec);
            let done = rec.state.is_terminal() || matches!(rec.state, RunState::InputRequired | RunState::AuthRequired);
            if done {
                let rec = if lock.is_some() && rec.state.is_terminal() { engine.wait(id).await? } else { rec };
                progress.finish(&rec);
                return Ok(rec);
            }
            if lock.is_none() && last_try.elapsed() > Duration::from_millis(500) {
                last_try = Instant::now();
                if let Ok(l) = app.try_lock()? {
                    eprintln!("the store's owner went away: executing run {id} here");
                    engine.start(id);
                    *lock = Some(l);
                    ended = Some(Box::pin(engine.wait(id)));
                    poller = Some(Poller::new(vec![id.clone()]));
                }
            }
        }
    })
}

/// Prints the result of a finished (or waiting) run; returns its exit code.
pub fn print_result(rec: &RunRecord, json: bool) -> Exit {
    if json {
        output::json(&view::run_json(rec));
    } else {
        match rec.state {
            RunState::Completed => output::json(&rec.output.clone().unwrap_or(Value::Null)),
            RunState::InputRequired | RunState::AuthRequired => {
                let waits: Vec<view::WaitView> =
                    view::WaitView::all(rec).into_iter().filter(|w| w.kind == view::WaitOn::Signal).collect();
                let named = |w: &view::WaitView| match w.item {
                    Some(k) => (format!("{} item {k}", w.step), format!("{} --item {k}", w.step)),
                    None => (w.step.clone(), w.step.clone()),
                };
                let steps: Vec<String> = waits.iter().map(|w| named(w).0).collect();
                let step = if waits.len() == 1 { named(&waits[0]).1 } else { "STEP".to_string() };
                eprintln!(
                    "run {} waits for input ({}{}); answer it with `weft signal {} {step} --data JSON` (`weft runs show {}` shows the prompt and schema)",
                    rec.id,
                    rec.state,
                    if steps.is_empty() { String::new() } else { format!(": {}", steps.join(", ")) },
                    rec.id,
                    rec.id
                );
            }
            _ => {
                let err = rec.error.as_ref().map(|e| e.to_value()).unwrap_or_else(|| {
                    output::error_object(rec.state.as_str(), &format!("the run is {}", rec.state), false)
                });
                output::json(&err);
            }
        }
    }
    exit_for(rec.state)
}
