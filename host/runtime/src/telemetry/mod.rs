//! What weft tells operators, set up in one place for every command: log
//! lines (text or JSON, filtered like `RUST_LOG`, secrets redacted: see
//! [`crate::logging`]), OpenTelemetry traces exported over OTLP (off unless
//! asked for), and the Prometheus recorder behind `GET /metrics`
//! ([`metrics`]). The engine knows none of it: it emits `tracing` events
//! and `metrics` calls; the exporters live here (docs/observability.md).
//!
//! Traces are on when `[telemetry] traces = true`, when `[telemetry]
//! endpoint` is set, or when `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is; `OTEL_SDK_DISABLED=true` or
//! `OTEL_TRACES_EXPORTER=none` turns them off. The standard `OTEL_*`
//! variables win over the file.

pub mod metrics;
pub mod spans;
mod wasmtime_lines;

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use serde::Deserialize;
use tracing_subscriber::filter::{EnvFilter, FilterExt as _, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, Registry};

pub use spans::{TARGET, attempt_ended, attempt_span, guest_span, step_kind, tool_span, traceparent_here, traces_on};

/// `[telemetry]` of weft.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Export traces (default: only when an OTLP endpoint is configured).
    pub traces: Option<bool>,
    /// The collector: a base URL (`http://localhost:4318` for HTTP,
    /// `http://localhost:4317` for gRPC); `OTEL_EXPORTER_OTLP_ENDPOINT` wins.
    pub endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`; `OTEL_EXPORTER_OTLP_PROTOCOL` wins.
    pub protocol: Option<String>,
    /// The `service.name` of weft's spans (default `weft`); `OTEL_SERVICE_NAME` wins.
    pub service_name: Option<String>,
    /// `text` (default) or `json`; `--log-format` and `WEFT_LOG_FORMAT` win.
    pub log_format: Option<LogFormat>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line, with the fields of the run and step it
    /// happened in (`run_id`, `step`, `attempt`, `trace_id`).
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("unknown log format {other:?}: write `text` or `json`")),
        }
    }
}

/// What could not be set up (the user's to fix: exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "[telemetry] protocol / OTEL_EXPORTER_OTLP_PROTOCOL {0:?} is not supported: write `http/protobuf` or `grpc`"
    )]
    Protocol(String),
    #[error("cannot set up the OTLP trace exporter: {0}")]
    Exporter(String),
}

/// Keeps the exporters alive; flushes the spans not yet sent when dropped.
#[must_use = "dropping it stops the export"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    /// The gRPC exporter's channel lives on this runtime.
    _grpc: Option<tokio::runtime::Runtime>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// Whether traces are exported, by the file and the environment.
fn traces_wanted(cfg: &TelemetryConfig) -> bool {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
    {
        return false;
    }
    let env_endpoint =
        env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    cfg.traces.unwrap_or(env_endpoint || cfg.endpoint.is_some())
}

/// The log filter: `$WEFT_LOG`, else `$RUST_LOG`, else warnings (and, for
/// JSON logs, the run and step spans that give lines their ids).
fn log_filter(format: LogFormat) -> EnvFilter {
    let given = env("WEFT_LOG").or_else(|| env("RUST_LOG"));
    // rmcp warns when a closing upstream outlives its grace period; weft
    // kills it then, so that is not news for the user.
    let default = match format {
        LogFormat::Text => "warn,rmcp=error".to_string(),
        LogFormat::Json => format!("warn,rmcp=error,{}=info,{}=info", TARGET, weft_engine::trace::RUN_TARGET),
    };
    given.and_then(|g| EnvFilter::try_new(g).ok()).unwrap_or_else(|| EnvFilter::new(default))
}

/// Whether this process logs JSON lines (set by [`init`]).
static JSON_LINES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes a line for the person or log collector watching stderr: as is,
/// or, when logs are JSON (`--log-format json`), as a JSON log line
/// (`timestamp`, `level`, `message`, `target`), so every line on stderr is
/// JSON in that mode.
pub fn say(line: &str) {
    if JSON_LINES.load(std::sync::atomic::Ordering::Relaxed) {
        let at = humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string();
        eprintln!("{}", serde_json::json!({"timestamp": at, "level": "INFO", "message": line, "target": "weft"}));
    } else {
        eprintln!("{line}");
    }
}

/// Sets up logs and, when wanted, trace export for this process. `format`
/// is the command line's choice (`--log-format`, `WEFT_LOG_FORMAT`), which
/// wins over `[telemetry] log_format`. Call once, early; keep the result
/// until the process ends.
pub fn init(cfg: &TelemetryConfig, format: Option<LogFormat>) -> Result<Telemetry, TelemetryError> {
    let format = format.or(cfg.log_format).unwrap_or_default();
    JSON_LINES.store(format == LogFormat::Json, std::sync::atomic::Ordering::Relaxed);
    let mut out = Telemetry { provider: None, _grpc: None };
    if traces_wanted(cfg) {
        let (provider, grpc) = provider(cfg)?;
        out.provider = Some(provider);
        out._grpc = grpc;
    }
    let fmt = tracing_subscriber::fmt::layer().with_writer(crate::logging::Redacting);
    let logs = match format {
        LogFormat::Text => fmt.with_filter(log_filter(format).and(wasmtime_lines::WasmtimeLines::default())).boxed(),
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .with_filter(log_filter(format).and(wasmtime_lines::WasmtimeLines::default()))
            .boxed(),
    };
    let (otel, runs) = match &out.provider {
        Some(p) => {
            let tracer = p.tracer("weft");
            // weft's own spans, and warnings and errors inside them as span events.
            let which = Targets::new().with_target(TARGET, LevelFilter::TRACE).with_default(LevelFilter::WARN);
            let otel = tracing_opentelemetry::layer().with_tracer(tracer.clone()).with_filter(which);
            let ends = Targets::new().with_target(weft_engine::trace::RUN_TARGET, LevelFilter::INFO);
            (Some(otel), Some(spans::RunSpans { tracer }.with_filter(ends)))
        }
        None => (None, None),
    };
    let installed = Registry::default().with(logs).with(otel).with(runs).try_init().is_ok();
    if installed && out.provider.is_some() {
        spans::set_traces_on();
    }
    Ok(out)
}

/// The tracer provider: OTLP over HTTP (protobuf) or gRPC, batched.
fn provider(cfg: &TelemetryConfig) -> Result<(SdkTracerProvider, Option<tokio::runtime::Runtime>), TelemetryError> {
    let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .or_else(|| cfg.protocol.clone())
        .unwrap_or_else(|| "http/protobuf".into());
    // The file's endpoint, unless the environment names one (the exporter
    // reads OTEL_EXPORTER_OTLP_* itself).
    let from_env = env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    let endpoint = cfg.endpoint.clone().filter(|_| !from_env);
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let ex = |e: opentelemetry_otlp::ExporterBuildError| TelemetryError::Exporter(e.to_string());
    let (exporter, grpc) = match protocol.as_str() {
        "http/protobuf" | "http" => {
            let mut b = builder.with_http();
            if let Some(e) = endpoint {
                let base = e.trim_end_matches('/');
                let url = if base.ends_with("/v1/traces") { base.to_string() } else { format!("{base}/v1/traces") };
                b = b.with_endpoint(url);
            }
            (b.build().map_err(ex)?, None)
        }
        "grpc" => {
            // tonic's channel needs a runtime of its own (the exporter runs on
            // the SDK's thread, whatever the command's runtime does).
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("weft-otlp")
                .enable_all()
                .build()
                .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
            let _in = rt.enter();
            let mut b = builder.with_tonic();
            if let Some(e) = endpoint {
                b = b.with_endpoint(e);
            }
            let exporter = b.build().map_err(ex)?;
            drop(_in);
            (exporter, Some(rt))
        }
        other => return Err(TelemetryError::Protocol(other.to_string())),
    };
    // Spans leave within a second of ending (the SDK's default is 5 s)
    // unless OTEL_BSP_SCHEDULE_DELAY says otherwise.
    let mut batch = BatchConfigBuilder::default();
    if env("OTEL_BSP_SCHEDULE_DELAY").is_none() {
        batch = batch.with_scheduled_delay(Duration::from_secs(1));
    }
    let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batch.build()).build();
    let mut resource = opentelemetry_sdk::Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(cfg.service_name.clone().unwrap_or_else(|| "weft".into()));
    }
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_id_generator(spans::RunIdGenerator::default())
        .with_resource(resource.build())
        .build();
    Ok((provider, grpc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_formats_parse_and_refuse_clearly() {
        assert_eq!("JSON".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!("text".parse::<LogFormat>(), Ok(LogFormat::Text));
        assert!("yaml".parse::<LogFormat>().unwrap_err().contains("`text` or `json`"));
    }

    #[test]
    fn both_otlp_protocols_build_and_others_are_refused() {
        if env("OTEL_EXPORTER_OTLP_PROTOCOL").is_some() || env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").is_some() {
            eprintln!("SKIPPED: OTEL_EXPORTER_OTLP_PROTOCOL is set in this environment");
            return;
        }
        for p in ["grpc", "http/protobuf"] {
            let cfg = TelemetryConfig {
                protocol: Some(p.into()),
                endpoint: Some("http://127.0.0.1:9".into()),
                ..Default::default()
            };
            let (provider, grpc) = provider(&cfg).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(grpc.is_some(), p == "grpc", "gRPC's channel gets a runtime of its own");
            let _ = provider.shutdown();
        }
        let bad = TelemetryConfig { protocol: Some("carrier-pigeon".into()), ..Default::default() };
        let Err(e) = provider(&bad) else { panic!("refused") };
        let e = e.to_string();
        assert!(e.contains("\"carrier-pigeon\"") && e.contains("`http/protobuf` or `grpc`"), "{e}");
    }

    #[test]
    fn traces_are_off_unless_asked_for() {
        // The test process sets no OTEL_* variable.
        if env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some() {
            eprintln!("SKIPPED: OTEL_EXPORTER_OTLP_ENDPOINT is set in this environment");
            return;
        }
        assert!(!traces_wanted(&TelemetryConfig::default()));
        assert!(traces_wanted(&TelemetryConfig { endpoint: Some("http://x:4318".into()), ..Default::default() }));
        assert!(traces_wanted(&TelemetryConfig { traces: Some(true), ..Default::default() }));
        let off = TelemetryConfig { traces: Some(false), endpoint: Some("http://x".into()), ..Default::default() };
        assert!(!traces_wanted(&off));
    }
}
