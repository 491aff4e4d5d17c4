//! `weft runs retry`: a new run of an ended run's own definition that keeps
//! the outputs of the steps that succeeded and runs the others (optionally
//! from a step, optionally with other input), through the use-case layer's
//! `retry_plan`; then it is started (or submitted with `--detach`) and
//! followed as `weft run` does.

use clap::Args;
use weft_engine::RunOptions;
use weft_runtime::app::App;
use weft_runtime::config::Settings;
use weft_runtime::pipeline::Source;
use weft_runtime::usecase::UseCases;
use weft_runtime::usecase::retry::{RetryRefused, RetryRequest};

use super::{Exit, bad};

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The ended run to retry (r_...).
    run: String,
    /// Run this step and every step after it again (default: only what
    /// did not succeed).
    #[arg(long, value_name = "STEP")]
    from: Option<String>,
    /// The new run's input as JSON text (default: the ended run's); only
    /// the steps whose inputs change run again.
    #[arg(long, conflicts_with = "input_file")]
    input: Option<String>,
    /// Read the new run's input from a JSON file.
    #[arg(long, value_name = "FILE")]
    input_file: Option<std::path::PathBuf>,
    /// Submit it and print its id; `weft worker` executes it.
    #[arg(long)]
    detach: bool,
    /// Print the new run as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn retry(settings: &Settings, args: RetryArgs) -> anyhow::Result<Exit> {
    let input = match (&args.input, &args.input_file) {
        (None, None) => None,
        (i, f) => Some(super::run::read_input(i.as_deref(), f.as_deref())?),
    };
    let app = App::open(settings)?;
    let _rt = app.rt.enter();
    let pipeline = app.pipeline()?;
    let engine = app.engine()?;
    let cases = UseCases::new(engine.clone(), app.dyn_store(), pipeline.clone());
    let req = RetryRequest { from: args.from.clone(), input };
    let plan = app.block_on(cases.retry_plan(&args.run, &req)).map_err(|e| match e {
        RetryRefused::Run(e) => bad(anyhow::Error::new(e)),
        RetryRefused::Plan(why) => anyhow::anyhow!("run {}: {why}", args.run),
        other => bad(anyhow::anyhow!("{other}")),
    })?;
    eprintln!("retrying run {} (weft/retry-of): keeps {}; runs {}", args.run, list(&plan.kept), list(&plan.again));
    let opts = RunOptions {
        presets: plan.presets.into_iter().collect(),
        labels: plan.labels,
        concurrency_key: plan.key,
        ..Default::default()
    };
    let what = format!("run {}", args.run);
    let prepared = app
        .block_on(async {
            let loaded = pipeline.load(Source::Saved(plan.source)).await?;
            pipeline.prepare(loaded, plan.input, opts).await
        })
        .map_err(|r| super::prepare::refused(r, &what, args.json))?;
    super::run::start_prepared(&app, &engine, prepared, args.detach, args.json, Err)
}

fn list(steps: &[String]) -> String {
    if steps.is_empty() { "nothing".to_string() } else { steps.join(", ") }
}
