//! `weft step run` and `weft step inspect`: one code step, outside any
//! workflow. The guest is a file, a plugin name or `sha256:HEX`; the result
//! is printed as JSON on stdout, the guest's logs and progress on stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use weft_sandbox::{Artifact, GuestOutcome, Invocation, Level, LogLine, Observer, StepContext};

use super::{Exit, bad, find_error, output, sandbox_error};
use weft_runtime::config::Settings;
use weft_runtime::guests::{self};

#[derive(Debug, Subcommand)]
pub enum StepCommand {
    /// Run a guest once with an input and print its result.
    Run(RunArgs),
    /// Say what a guest is (component or WASI command) and what it declares.
    Inspect {
        /// A .wasm file, a plugin name, or sha256:HEX.
        guest: String,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A .wasm file, a plugin name, or sha256:HEX.
    guest: String,
    /// The input as JSON text.
    #[arg(long, default_value = "{}", conflicts_with = "input_file")]
    input: String,
    /// Read the input JSON from a file (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    input_file: Option<PathBuf>,
    /// CPU budget in fuel units (default from [limits] `fuel`, else none:
    /// the timeout bounds the step).
    #[arg(long)]
    fuel: Option<u64>,
    /// Wall-clock limit in milliseconds (default 10000).
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Memory cap in MiB (default 64).
    #[arg(long)]
    memory_mb: Option<u64>,
    /// Save artifacts the guest produces into this folder.
    #[arg(long, value_name = "DIR")]
    artifacts_dir: Option<PathBuf>,
}

pub fn run(settings: &Settings, cmd: StepCommand) -> anyhow::Result<Exit> {
    match cmd {
        StepCommand::Run(args) => run_step(settings, args),
        StepCommand::Inspect { guest } => super::plugin::inspect(settings, &guest),
    }
}

/// Prints guest logs and progress on stderr as they happen.
struct Stderr;

impl Observer for Stderr {
    fn log(&self, line: &LogLine) {
        let tag = match line.level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        eprintln!("[guest {tag}] {}", line.message);
    }
    fn progress(&self, message: &str, data: Option<&serde_json::Value>) {
        match data {
            Some(d) => eprintln!("[guest progress] {message} {d}"),
            None => eprintln!("[guest progress] {message}"),
        }
    }
}

/// Reads the input JSON from the flag or file, refusing invalid JSON with
/// its line and column.
fn read_input(args: &RunArgs) -> anyhow::Result<String> {
    let (text, source) = match &args.input_file {
        Some(p) if p.as_os_str() == "-" => {
            (std::io::read_to_string(std::io::stdin()).context("reading the input from stdin")?, "stdin".into())
        }
        Some(p) => (
            std::fs::read_to_string(p)
                .with_context(|| format!("reading the input file {}", p.display()))
                .map_err(bad)?,
            p.display().to_string(),
        ),
        None => (args.input.clone(), "--input".to_string()),
    };
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
        return Err(bad(anyhow::anyhow!(
            "the input ({source}) is not valid JSON: {e} (line {}, column {})",
            e.line(),
            e.column()
        )));
    }
    Ok(text)
}

fn run_step(settings: &Settings, args: RunArgs) -> anyhow::Result<Exit> {
    let input = read_input(&args)?;
    let registry = guests::registry(settings);
    let found = guests::find(&registry, &args.guest).map_err(find_error)?;
    let sandbox = guests::sandbox(settings)?;
    let guest = sandbox.load_pinned(found.digest, found.bytes).map_err(sandbox_error)?;

    let mut limits = settings.code_limits();
    if let Some(f) = args.fuel {
        limits.fuel = Some(f);
    }
    if let Some(t) = args.timeout_ms {
        if t == 0 {
            return Err(bad(anyhow::anyhow!("--timeout-ms must be at least 1")));
        }
        limits.timeout = Duration::from_millis(t);
    }
    if let Some(m) = args.memory_mb {
        if m == 0 {
            return Err(bad(anyhow::anyhow!("--memory-mb must be at least 1")));
        }
        limits.memory_bytes = (m as usize) << 20;
    }
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let inv = Invocation {
        ctx: StepContext {
            run_id: String::new(),
            step: found.name.clone(),
            attempt: 1,
            idempotency_key: format!("adhoc/{}/1", found.name),
            deadline_ms: now_ms + limits.timeout.as_millis() as u64,
            traceparent: None,
        },
        input,
        limits,
        cancel: Default::default(),
        observer: Some(Arc::new(Stderr)),
        priority: 0,
    };
    let result = sandbox.invoke(&guest, &inv);
    save_artifacts(&result.report.artifacts, args.artifacts_dir.as_deref())?;
    match result.outcome {
        Ok(GuestOutcome::Done(value)) => {
            output::json(&value);
            Ok(Exit::Success)
        }
        Ok(GuestOutcome::Reject(reason)) => {
            eprintln!("rejected: {reason}");
            output::json(&output::error_object("rejected", &reason, false));
            Ok(Exit::Failed)
        }
        Err(e) => {
            let code = e.code.as_deref().map(|c| format!(" [{c}]")).unwrap_or_default();
            eprintln!("step failed: {}{code}: {}", e.kind, e.message);
            let mut obj = output::error_object(e.kind.as_str(), &e.message, e.retryable);
            if let Some(c) = e.code {
                obj["code"] = c.into();
            }
            output::json(&obj);
            Ok(Exit::Failed)
        }
    }
}

fn save_artifacts(artifacts: &[Artifact], dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    for a in artifacts {
        match dir {
            Some(dir) => {
                let safe: String = a
                    .name
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
                    .collect();
                let path = dir.join(safe);
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                std::fs::write(&path, &a.data).with_context(|| format!("writing {}", path.display()))?;
                eprintln!("artifact {} ({}, {} bytes) saved to {}", a.name, a.mime, a.data.len(), path.display());
            }
            None => eprintln!(
                "artifact {} ({}, {} bytes); pass --artifacts-dir DIR to save it",
                a.name,
                a.mime,
                a.data.len()
            ),
        }
    }
    Ok(())
}
