//! The command line: argument parsing, dispatch, and exit codes.
//!
//! Exit codes (docs/cli.md): 0 success, 1 the step or run failed (or was
//! rejected or canceled), 2 bad usage or invalid input, 3 the run is waiting
//! for input. Errors that are the user's to fix are wrapped in [`BadInput`]
//! and exit with 2; anything else exits with 1.

/// `println!` that ignores a closed stdout (`weft runs list | head`):
/// output to a reader that went away is dropped instead of panicking.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod artifacts;
mod bench;
mod diff;
mod graph;
mod guest;
mod labels;
mod notifications;
mod output;
mod plugin;
mod prepare;
mod progress;
mod prune;
mod retry;
mod run;
mod runs;
mod schedule;
mod serve;
mod signal;
mod step;
mod store;
mod stored_run;
mod templates;
mod tools;
mod validate;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use weft_runtime::config::Settings;

/// weft: durable workflows of sandboxed WebAssembly code steps and MCP tool calls.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about, propagate_version = true)]
pub struct Cli {
    /// Configuration file (default: $WEFT_CONFIG, else ./weft.toml if present).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (default: $WEFT_DATA_DIR, else the config's data_dir, else .weft).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Log lines as `text` or `json` (default: $WEFT_LOG_FORMAT, else [telemetry] log_format, else text);
    /// filtered by $WEFT_LOG or $RUST_LOG.
    #[arg(long, global = true, value_name = "FORMAT", env = "WEFT_LOG_FORMAT")]
    log_format: Option<weft_runtime::telemetry::LogFormat>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run or inspect a single code step (a guest) outside any workflow.
    #[command(subcommand)]
    Step(step::StepCommand),
    /// Write a code step in Rust, TypeScript, JavaScript, Python or C: new, build, test.
    #[command(subcommand)]
    Guest(guest::GuestCommand),
    /// Register, list and inspect code plugins.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Check a workflow definition and list every problem with its JSON path.
    Validate(validate::ValidateArgs),
    /// Draw a workflow definition's graph (Mermaid or Graphviz DOT).
    Graph(graph::GraphArgs),
    /// Run a workflow (a definition file or a saved template) and print its output.
    Run(run::RunArgs),
    /// List, inspect and cancel runs.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// Save, list, show and delete versioned workflow templates.
    #[command(subcommand)]
    Templates(templates::TemplatesCommand),
    /// Own the store and execute its runs (resumes unfinished ones).
    Worker(worker::WorkerArgs),
    /// Serve MCP (stdio or streamable HTTP): manage and run workflows from an MCP client.
    Serve(serve::ServeArgs),
    /// Run the CLI workloads of docs/performance.md (w5 tool steps, w8 cold start).
    Bench(bench::BenchArgs),
    /// See what the configured upstream MCP servers offer.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Cron schedules that start runs of a template (fired by the store's owner).
    #[command(subcommand)]
    Schedule(schedule::ScheduleCommand),
    /// Notifications of runs (a definition's `notify`): list them, send a failed one again.
    #[command(subcommand)]
    Notifications(notifications::NotificationsCommand),
    /// Answer a run's `wait` step with data (validated against the wait's schema).
    Signal(signal::SignalArgs),
    /// Deliver an event to every `wait` step whose `match` holds.
    Emit(signal::EmitArgs),
    /// Move a store's history to another store (SQLite to PostgreSQL).
    #[command(subcommand)]
    Store(store::StoreCommand),
}

/// An error the user can fix: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BadInput(#[from] pub anyhow::Error);

/// Marks `e` as the user's to fix (exit code 2).
pub fn bad(e: impl Into<anyhow::Error>) -> anyhow::Error {
    BadInput(e.into()).into()
}

/// What a command ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0.
    Success,
    /// 1: the step or run failed, was rejected or canceled.
    Failed,
    /// 3: the run waits for input.
    Waiting,
}

/// The exit code a run's state stands for.
pub fn exit_for(state: weft_engine::RunState) -> Exit {
    match state {
        weft_engine::RunState::Completed => Exit::Success,
        weft_engine::RunState::InputRequired | weft_engine::RunState::AuthRequired => Exit::Waiting,
        _ => Exit::Failed,
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(match e {
            Exit::Success => 0,
            Exit::Failed => 1,
            Exit::Waiting => 3,
        })
    }
}

/// Parses the process's arguments and runs the command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(exit) => exit.into(),
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            let users = e.downcast_ref::<BadInput>().is_some()
                || e.downcast_ref::<weft_runtime::RuntimeError>().is_some_and(|r| r.is_invalid());
            if users { ExitCode::from(2) } else { ExitCode::from(1) }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<Exit> {
    // Making and building a guest needs no configuration or store.
    let command = match cli.command {
        Command::Guest(c) => return guest::run(c),
        other => other,
    };
    let settings = Settings::load(cli.config.as_deref(), cli.data_dir.as_deref()).map_err(bad)?;
    // Logs, and traces when asked for (docs/observability.md); spans not
    // yet sent leave when it is dropped, as the command ends.
    let _telemetry = weft_runtime::telemetry::init(&settings.file.telemetry, cli.log_format).map_err(bad)?;
    for s in settings.servers.iter() {
        weft_runtime::logging::add_secrets(s.secrets.clone());
    }
    match command {
        Command::Guest(_) => unreachable!("handled above"),
        Command::Step(c) => step::run(&settings, c),
        Command::Plugin(c) => plugin::run(&settings, c),
        Command::Validate(a) => validate::run(&settings, a),
        Command::Graph(a) => graph::run(&settings, a),
        Command::Run(a) => run::run(&settings, a),
        Command::Runs(c) => runs::run(&settings, c),
        Command::Templates(c) => templates::run(&settings, c),
        Command::Worker(a) => worker::run(&settings, a),
        Command::Serve(a) => serve::run(&settings, a),
        Command::Tools(c) => tools::run(&settings, c),
        Command::Bench(a) => bench::run(a),
        Command::Schedule(c) => schedule::run(&settings, c),
        Command::Notifications(c) => notifications::run(&settings, c),
        Command::Signal(a) => signal::signal(&settings, a),
        Command::Emit(a) => signal::emit(&settings, a),
        Command::Store(c) => store::run(&settings, c),
    }
}

/// `a: b: c` from an error and its causes, without repeating a cause whose
/// text is already included.
fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if out.contains(&s) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&s);
    }
    out
}

/// A guest that cannot be found is bad input unless the disk failed.
pub fn find_error(e: weft_runtime::guests::FindError) -> anyhow::Error {
    match e {
        weft_runtime::guests::FindError::Sandbox(s) => sandbox_error(s),
        other => bad(other),
    }
}

/// Bad guests (malformed, wrong world, unknown plugin) are bad input.
pub fn sandbox_error(e: weft_sandbox::SandboxError) -> anyhow::Error {
    if e.is_bad_input() { bad(e) } else { e.into() }
}
