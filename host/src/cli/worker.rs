//! `weft worker [--until-idle]`: own the store's scheduler and execute runs.
//!
//! - Takes the scheduler lock (refused, naming the holder's pid, when
//!   another process has it: exit 1).
//! - Resumes every unfinished run (attempts the previous owner left
//!   running are treated as failed and retried per their policy).
//! - Looks for new unfinished runs (`weft run --detach`, or a `weft run`
//!   that found the store owned) every 20 ms: one query on a partial
//!   index of unfinished runs, cheap.
//! - `--until-idle`: exits 0 once no run is being driven and none is
//!   waiting to start (runs waiting for outside input do not count).
//! - SIGINT / SIGTERM: stops taking new runs, gives the runs in flight up
//!   to 3 s to finish, then stops the rest without writing anything (like
//!   a crash, which the store is built to survive: the next owner resumes
//!   them). A second signal stops at once.
//! - A run canceled by another process has its attempts here interrupted
//!   within ~20 ms.
//! - `--metrics ADDR`: serves `GET /metrics` (Prometheus text format) and
//!   `GET /healthz` at `http://ADDR/`; prints `weft worker: metrics at
//!   http://HOST:PORT/metrics` once bound.

use std::time::{Duration, Instant};

use clap::Args;

use tokio_util::sync::CancellationToken;
use weft_runtime::app::{self, App};
use weft_runtime::config::Settings;
use weft_runtime::owner::{self, Owning, Tenure};

use super::Exit;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Exit once every run is finished or waits for outside input.
    #[arg(long)]
    until_idle: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics (ADDR: HOST:PORT, :PORT or PORT).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
}

/// How long runs in flight get to finish after SIGINT/SIGTERM.
const GRACE: Duration = Duration::from_secs(3);

pub fn run(settings: &Settings, args: WorkerArgs) -> anyhow::Result<Exit> {
    let metrics_addr = args.metrics.as_deref().map(|a| super::serve::parse_addr(a, "--metrics")).transpose()?;
    let app = App::open(settings)?;
    let owner = match app.lock_for_good()? {
        Ok(l) => l,
        Err(pid) => {
            anyhow::bail!(
                "the store {} is already owned by {}: only one process executes a store's runs at a time (stop it first, or let it execute your runs)",
                app.store_name,
                app::holder(pid)
            );
        }
    };
    weft_runtime::telemetry::say(&format!(
        "weft worker: {} {} (pid {})",
        super::serve::owns(&app),
        app.store_name,
        std::process::id()
    ));
    let mut tenure = Tenure::new(owner, app.backend.clone());
    let engine = app.engine()?;
    let store = app.store.clone();
    let result = app.block_on(async {
        let recovered = engine.recover().await?;
        if !recovered.is_empty() {
            weft_runtime::telemetry::say(&format!("weft worker: resuming {} unfinished run(s)", recovered.len()));
        }
        // Fires cron schedules (`weft schedule add`); ends with the runtime.
        let schedules = tokio::spawn(engine.clone().run_schedules());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let stop = CancellationToken::new();
        if let Some(addr) = metrics_addr {
            let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
            let served = weft_server::serve_metrics(addr, engine.clone(), stop.clone(), |a| {
                let _ = bound_tx.send(a);
            });
            let task = tokio::spawn(served);
            match bound_rx.await {
                Ok(a) => weft_runtime::telemetry::say(&format!("weft worker: metrics at http://{a}/metrics")),
                Err(_) => {
                    // The listener ended before it was bound: its error says why.
                    let why = match task.await {
                        Ok(Err(e)) => anyhow::Error::from(e),
                        Ok(Ok(())) => anyhow::anyhow!("the metrics listener stopped"),
                        Err(e) => e.into(),
                    };
                    return Err(super::bad(why));
                }
            }
        }
        let retention = if args.until_idle { None } else { app::retention(settings) };
        let how = Owning { until_idle: args.until_idle, outlive_errors: false, retention };
        let owned = owner::own_store(&engine, store.as_ref(), recovered, how, &stop, &mut tenure);
        let stop = tokio::select! {
            r = owned => {
                r?;
                schedules.abort();
                tenure.leave().await;
                return Ok(());
            }
            _ = tokio::signal::ctrl_c() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        };
        let active = engine.busy_runs();
        if active > 0 {
            weft_runtime::telemetry::say(&format!(
                "weft worker: {stop}: waiting up to {} s for {active} run(s) in flight",
                GRACE.as_secs()
            ));
            let until = Instant::now() + GRACE;
            while engine.busy_runs() > 0 && Instant::now() < until {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    _ = tokio::signal::ctrl_c() => break,
                    _ = term.recv() => break,
                }
            }
            let left = engine.busy_runs();
            if left > 0 {
                weft_runtime::telemetry::say(&format!(
                    "weft worker: stopped; {left} unfinished run(s) resume when a worker starts again"
                ));
            }
        }
        // Parked runs (waiting for a signal or an event) write nothing when
        // their drivers stop; the next owner parks them again.
        engine.abort_all();
        schedules.abort();
        tenure.leave().await;
        weft_runtime::telemetry::say(&format!("weft worker: stopped ({stop})"));
        Ok::<_, anyhow::Error>(())
    });
    app.shutdown_upstreams();
    result?;
    Ok(Exit::Success)
}
