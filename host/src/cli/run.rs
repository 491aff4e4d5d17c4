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
//!    looks for new submitted runs every ~20 ms — and this process follows
//!    it by reading the store every ~50 ms (taking over if the owner goes
//!    away). Either way progress goes to stderr and the result to stdout:
//!    the run's output (or, when it did not complete, its error object), or
//!    with `--json` the whole `runs show --json` object. Exit code 0
//!    completed, 1 failed/rejected/canceled, 3 waiting for input.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;
use weft_engine::outside::WaitKind;
use weft_engine::{Engine, EngineError, RunId, RunOptions, RunRecord, RunState, Store, view};
use weft_model::{Definition, NoSchemas, Problem};
use weft_store_sqlite::SchedulerLock;

use super::progress::Progress;
use super::runs::exit_for;
use super::{Exit, bad, output};
use crate::app::{self, App};
use crate::config::Settings;
use crate::guests;

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

/// Prints problems located in the run input and returns the exit-2 error.
fn input_problems(problems: &[Problem]) -> anyhow::Error {
    for p in problems {
        let at = if p.path.is_empty() { "input".to_string() } else { format!("input{}", p.path) };
        eprintln!("{at}: {}", p.message);
    }
    for h in problems.iter().filter_map(|p| p.hint.as_deref()) {
        eprintln!("  to fix: {h}");
    }
    let n = problems.len();
    bad(anyhow::anyhow!("the input was refused ({n} problem{}); no run was created", if n == 1 { "" } else { "s" }))
}

/// A definition file, validated: its raw document and base folder.
pub(super) fn load_file(settings: &Settings, file: &Path, json: bool) -> anyhow::Result<(Value, Definition, PathBuf)> {
    let def = match super::validate::load(settings, file)? {
        Ok(def) => def,
        Err(invalid) => return Err(super::validate::report(file, &invalid, json)),
    };
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display())).map_err(bad)?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| bad(anyhow::anyhow!("{}: {e}", file.display())))?;
    let base = file.parent().map(Path::to_path_buf).filter(|b| !b.as_os_str().is_empty()).unwrap_or_else(|| ".".into());
    Ok((doc, def, base))
}

/// Asks the upstreams of the definition's tool steps for their tools before
/// the run is created: an unknown tool or an input that breaks the tool's
/// input schema refuses the run (exit 2); an unreachable server is only a
/// warning (the run's attempts will retry per policy).
fn check_tools_online(settings: &Settings, app: &App, doc: &Value, what: &str) -> anyhow::Result<()> {
    if crate::online::tool_steps(doc).is_empty() {
        return Ok(());
    }
    let online = app.block_on(crate::online::check(&app.upstreams, doc));
    for p in &online.unreachable {
        eprintln!("warning: {what}: {p}");
    }
    let mut problems = online.problems.clone();
    if !online.schemas.is_empty() {
        let sandbox = guests::sandbox(settings)?;
        let registry = guests::registry(settings);
        let lookup =
            crate::lookup::RegistryLookup::new(&sandbox, &registry, ".").with_tool_schemas(online.schemas.clone());
        if let Err(ps) = weft_model::from_value(doc, &lookup) {
            problems.extend(ps);
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    for p in &problems {
        eprintln!("{what}: {p}");
    }
    Err(bad(anyhow::anyhow!("{what}: the tool steps do not match what their MCP servers offer")))
}

/// Problems of pinning, reported like validation problems (exit 2).
fn pin_problems(what: &str, problems: &[Problem]) -> anyhow::Error {
    for p in problems {
        eprintln!("{what}: {p}");
    }
    bad(anyhow::anyhow!("{what}: cannot pin the code of every step"))
}

pub fn run(settings: &Settings, args: RunArgs) -> anyhow::Result<Exit> {
    let input = read_input(args.input.as_deref(), args.input_file.as_deref())?;
    let presets = parse_presets(&args.preset)?;
    // A file is validated before the store is touched.
    let from_file =
        if is_file(&args.target) { Some(load_file(settings, Path::new(&args.target), args.json)?) } else { None };
    let app = App::open(settings)?;
    // Engine::start spawns onto the runtime.
    let _rt = app.rt.enter();
    let registry = guests::registry(settings);
    let (mut doc, def, base, mut opts) = match from_file {
        Some((doc, def, base)) => (doc, def, base, RunOptions::default()),
        None => {
            let name = &args.target;
            let t = app
                .block_on(app.store.template(name, None))?
                .ok_or_else(|| bad(anyhow::anyhow!("no file or template `{name}` (see `weft templates list`)")))?;
            let sandbox = guests::sandbox(settings)?;
            let lookup = crate::lookup::RegistryLookup::new(&sandbox, &registry, ".");
            let def = weft_model::from_value(&t.definition, &lookup).map_err(|ps| {
                for p in &ps {
                    eprintln!("template {name} v{}: {p}", t.version);
                }
                bad(anyhow::anyhow!(
                    "template `{name}` version {} does not validate against the installed plugins",
                    t.version
                ))
            })?;
            let opts = RunOptions { template: Some(t.name.clone()), version: Some(t.version), ..Default::default() };
            (t.definition, def, PathBuf::from("."), opts)
        }
    };
    if let Err(problems) = weft_model::validate_input(&def, &input) {
        return Err(input_problems(&problems));
    }
    opts.presets = presets;
    if let Some(k) = &args.key {
        if k.trim().is_empty() {
            return Err(bad(anyhow::anyhow!("--key: the concurrency key is empty")));
        }
        opts.concurrency_key = Some(k.clone());
    }
    check_tools_online(settings, &app, &doc, &args.target)?;
    app::pin_code(&mut doc, &registry, &base, false).map_err(|p| pin_problems(&args.target, &p))?;
    let pinned = weft_model::from_value(&doc, &NoSchemas).map_err(|p| pin_problems(&args.target, &p))?;

    let engine = app.engine()?;
    if args.detach {
        let id = create(&app, &engine, &pinned, input, opts)?;
        if args.json {
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
            let id = app.block_on(engine.submit(&pinned, input, opts)).map_err(create_error)?;
            (id, Some(lock))
        }
        Err(pid) => {
            let id = create(&app, &engine, &pinned, input, opts)?;
            eprintln!(
                "the store {} is owned by {}; it executes run {id} (following it here)",
                app.db_path.display(),
                app::holder(pid)
            );
            (id, None)
        }
    };
    let rec = follow(&app, &engine, &id, owned, Progress::new(false));
    app.shutdown_upstreams();
    Ok(print_result(&rec?, args.json))
}

fn create(app: &App, engine: &Engine, def: &Definition, input: Value, opts: RunOptions) -> anyhow::Result<RunId> {
    app.block_on(engine.create_run(def, input, opts)).map_err(create_error)
}

fn create_error(e: EngineError) -> anyhow::Error {
    match e {
        EngineError::Invalid(p) => input_problems(&p.0),
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
    mut lock: Option<SchedulerLock>,
    mut progress: Progress,
) -> anyhow::Result<RunRecord> {
    app.block_on(async {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_try = Instant::now();
        // Executing here: the driver's end wakes the loop at once (a short
        // run must not wait for the next tick).
        let mut ended = lock.is_some().then(|| Box::pin(engine.wait(id)));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
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
            if lock.is_some() {
                // This process owns the store: signals and events other
                // processes leave in the inbox are answered here.
                if let Err(e) = engine.process_inbox().await {
                    tracing::warn!(error = %e, "cannot handle the inbox");
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
                    lock = Some(l);
                    ended = Some(Box::pin(engine.wait(id)));
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
                let steps: Vec<&str> = rec
                    .waits
                    .iter()
                    .filter(|w| matches!(w.kind, WaitKind::Signal { .. }))
                    .map(|w| w.step.as_str())
                    .collect();
                let step = if steps.len() == 1 { steps[0] } else { "STEP" };
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
