//! The process's Prometheus recorder: installed once, when something will
//! serve `GET /metrics` (`weft serve --http`, `weft worker --metrics ADDR`);
//! until then every `metrics` call in weft is skipped (the engine's, the
//! stores' and the MCP client's switches stay off), so a process nobody
//! scrapes pays nothing. Histograms are true Prometheus histograms with
//! fixed buckets (docs/observability.md lists every metric).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Buckets of `*_seconds` histograms: 100 µs to a minute.
const SECONDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Buckets of counts (batches per commit).
const COUNTS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0];
/// Buckets of guest fuel (instructions, roughly).
const FUEL: &[f64] = &[1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];
/// Buckets of a guest's linear memory, in bytes (64 KiB pages up to the
/// default cap of 64 MiB and beyond).
const MEMORY: &[f64] = &[65_536.0, 1_048_576.0, 4_194_304.0, 16_777_216.0, 67_108_864.0, 268_435_456.0];

/// Installs the recorder (once per process) and turns weft's metrics on;
/// `None` when another recorder was installed first.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Full("weft_commit_group_batches".into()), COUNTS))
                .and_then(|b| b.set_buckets_for_metric(Matcher::Full("weft_guest_fuel".into()), FUEL))
                .and_then(|b| b.set_buckets_for_metric(Matcher::Full("weft_guest_memory_bytes".into()), MEMORY))
                .ok()?;
            let handle = match builder.install_recorder() {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot install the Prometheus recorder; /metrics stays empty");
                    return None;
                }
            };
            describe();
            weft_engine::trace::set_metrics_on(true);
            weft_mcp_client::record_metrics(true);
            Some(handle)
        })
        .as_ref()
}

/// The metrics now, in the Prometheus text format (empty when no recorder
/// is installed).
pub fn render() -> String {
    match HANDLE.get().and_then(Option::as_ref) {
        Some(h) => {
            h.run_upkeep();
            h.render()
        }
        None => String::new(),
    }
}

/// Sets the gauges of what one process holds now (sampled at each scrape).
pub fn sample_engine(engine: &weft_engine::Engine) {
    if !weft_engine::trace::metrics_on() {
        return;
    }
    let active = engine.active_runs();
    let busy = engine.busy_runs();
    let g = |queue: &'static str, n: usize| metrics::gauge!("weft_queue_runs", "queue" => queue).set(n as f64);
    g("busy", busy);
    g("parked", active.saturating_sub(busy));
    g("hibernated", engine.hibernated_runs());
    metrics::counter!("weft_guest_compilations_total").absolute(weft_sandbox::compilations());
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!("weft_runs_started_total", "Runs that started executing, by template.");
    describe_counter!("weft_runs_finished_total", "Runs that ended, by template and final state.");
    describe_counter!("weft_step_attempts_total", "Step attempts, by kind (code, tool) and outcome.");
    describe_histogram!("weft_step_duration_seconds", Unit::Seconds, "Duration of step attempts, by kind.");
    describe_gauge!(
        "weft_queue_runs",
        "Runs this process holds: busy (running or ready steps), parked (waiting with a driver), hibernated (waiting for a signal, event, child or timer, no driver)."
    );
    describe_histogram!("weft_commit_group_batches", "Batches committed per store transaction (group commit).");
    describe_histogram!("weft_commit_duration_seconds", Unit::Seconds, "Latency of store commits.");
    describe_histogram!("weft_guest_fuel", "Fuel used per guest invocation.");
    describe_counter!(
        "weft_guest_compilations_total",
        "Guests compiled by this process (artifact cache misses; one per guest however many ask at once)."
    );
    describe_histogram!("weft_guest_duration_seconds", Unit::Seconds, "Wall time of guest invocations.");
    describe_histogram!(
        "weft_guest_queued_seconds",
        Unit::Seconds,
        "Time guest invocations waited for a CPU slot and memory (the engine's, not the step's)."
    );
    describe_histogram!("weft_guest_memory_bytes", Unit::Bytes, "Largest linear memory per guest invocation.");
    describe_histogram!(
        "weft_upstream_call_duration_seconds",
        Unit::Seconds,
        "Latency of calls to upstream MCP servers, by server."
    );
    describe_counter!("weft_upstream_call_errors_total", "Failed upstream MCP calls, by server and error kind.");
    describe_counter!("weft_lease_takeovers_total", "Runs this worker took over from a dead worker (PostgreSQL).");
}
