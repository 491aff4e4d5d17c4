//! weft's spans. The attempt, tool-call and guest spans are `tracing`
//! spans (target [`TARGET`]) that `tracing-opentelemetry` exports when they
//! end; an attempt's span is parented, by id, on its run's span (ids from
//! [`weft_engine::trace::RunTrace`]: the same in every process), so a long
//! run shows up attempt by attempt while it runs. The run's own span is
//! built here, from the event the engine emits when the run ends
//! (`RunSpans`), with the run's derived span id (the `RunIdGenerator`
//! lends it to the SDK), started at the run's creation: the whole run, even
//! when another process drove part of it.
//!
//! With tracing off none of this costs more than a disabled `tracing`
//! callsite: the spans are at `info` of [`TARGET`], which nothing enables.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer};
use tracing::field::{Field, Visit};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use weft_engine::trace::RunTrace;
use weft_engine::{RunId, StepRequest};
use weft_model::Action;

/// The `tracing` target of weft's exported spans.
pub const TARGET: &str = "weft::trace";

static TRACES_ON: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (an OpenTelemetry layer is installed).
pub fn traces_on() -> bool {
    TRACES_ON.load(Ordering::Relaxed)
}

pub(super) fn set_traces_on() {
    TRACES_ON.store(true, Ordering::Relaxed);
}

/// The span of one attempt (`step`), parented on its run's span. Disabled
/// (and free) unless traces are exported or JSON logs are written.
pub fn attempt_span(req: &StepRequest) -> tracing::Span {
    let kind = step_kind(&req.action);
    let span = tracing::info_span!(
        target: TARGET,
        "step",
        otel.name = %format_args!("step {}", req.step),
        run_id = %req.run,
        step = %req.step,
        attempt = req.attempt.get(),
        item = req.item.map(|i| i.0),
        kind,
        trace_id = tracing::field::Empty,
        outcome = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    let rt = RunTrace::of(&req.run, req.trace.as_deref());
    span.record("trace_id", rt.trace_id_hex().as_str());
    if traces_on() {
        let _ = span.set_parent(Context::new().with_remote_span_context(run_span_context(&rt)));
    }
    span
}

/// A step's kind, as spans and metrics label it.
pub fn step_kind(action: &Action) -> &'static str {
    match action {
        Action::Code(_) => "code",
        Action::Tool(_) => "tool",
        Action::Agent(_) => "agent",
        _ => "other",
    }
}

/// Records an attempt's outcome on its span.
pub fn attempt_ended(span: &tracing::Span, outcome: &str, error: Option<&str>) {
    span.record("outcome", outcome);
    if let Some(e) = error {
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_description", e);
    }
}

/// The span of a tool step's call to its upstream (`tool_call`).
pub fn tool_span(req: &StepRequest, server: &str, tool: &str) -> tracing::Span {
    tracing::info_span!(
        target: TARGET,
        "tool_call",
        otel.name = %format_args!("tools/call {server}.{tool}"),
        otel.kind = "client",
        run_id = %req.run,
        server,
        tool,
    )
}

/// The span of one guest invocation (`guest`).
pub fn guest_span(req: &StepRequest, guest: &str) -> tracing::Span {
    tracing::info_span!(
        target: TARGET,
        "guest",
        otel.name = %format_args!("guest {guest}"),
        run_id = %req.run,
        guest,
        fuel = tracing::field::Empty,
    )
}

/// The `traceparent` to hand on from here (upstream `_meta`, a guest's
/// `TRACEPARENT`): the current span's when spans are exported, else the
/// run's stored one, passed through as it came.
pub fn traceparent_here(stored: Option<&str>) -> Option<String> {
    if traces_on() {
        let cx = tracing::Span::current().context();
        let sc = cx.span().span_context().clone();
        if sc.is_valid() {
            return Some(format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()));
        }
    }
    stored.map(str::to_string)
}

fn flags(sampled: bool) -> TraceFlags {
    if sampled { TraceFlags::SAMPLED } else { TraceFlags::default() }
}

/// The run span's context, as a parent (remote: its span is built
/// elsewhere, when the run ends).
fn run_span_context(rt: &RunTrace) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(rt.trace_id),
        SpanId::from_bytes(rt.span_id),
        flags(rt.sampled),
        true,
        TraceState::default(),
    )
}

thread_local! {
    /// Ids the next span started on this thread takes (see [`RunIdGenerator`]).
    static LENT: Cell<Option<(TraceId, SpanId)>> = const { Cell::new(None) };
}

/// The SDK's ids, random, except while [`RunSpans`] starts a run's span:
/// then the run's derived ids.
#[derive(Debug, Default)]
pub(super) struct RunIdGenerator(RandomIdGenerator);

impl IdGenerator for RunIdGenerator {
    fn new_trace_id(&self) -> TraceId {
        LENT.get().map(|(t, _)| t).unwrap_or_else(|| self.0.new_trace_id())
    }
    fn new_span_id(&self) -> SpanId {
        LENT.get().map(|(_, s)| s).unwrap_or_else(|| self.0.new_span_id())
    }
}

/// A layer that turns the engine's run-ended events
/// ([`weft_engine::trace::RUN_TARGET`]) into run spans.
pub(super) struct RunSpans {
    pub tracer: SdkTracer,
}

#[derive(Default)]
struct RunEnded {
    run_id: Option<String>,
    template: Option<String>,
    state: Option<String>,
    traceparent: Option<String>,
    created_at: Option<i64>,
    ended_at: Option<i64>,
}

impl Visit for RunEnded {
    fn record_str(&mut self, f: &Field, v: &str) {
        match f.name() {
            "template" => self.template = Some(v.to_string()),
            "state" => self.state = Some(v.to_string()),
            "traceparent" => self.traceparent = Some(v.to_string()),
            "run_id" => self.run_id = Some(v.to_string()),
            _ => {}
        }
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        match f.name() {
            "created_at" => self.created_at = Some(v),
            "ended_at" => self.ended_at = Some(v),
            _ => {}
        }
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        // `%`-recorded fields arrive here as their Display text.
        let s = format!("{v:?}");
        self.record_str(f, &s);
    }
}

fn at(ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RunSpans {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != weft_engine::trace::RUN_TARGET {
            return;
        }
        let mut v = RunEnded::default();
        event.record(&mut v);
        let Some(id) = v.run_id.as_deref().and_then(|s| s.parse::<RunId>().ok()) else { return };
        let (Some(created), Some(ended)) = (v.created_at, v.ended_at) else { return };
        let rt = RunTrace::of(&id, v.traceparent.as_deref());
        let parent = match rt.parent {
            Some(p) => Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from_bytes(rt.trace_id),
                SpanId::from_bytes(p),
                flags(rt.sampled),
                true,
                TraceState::default(),
            )),
            None => Context::new(),
        };
        let template = v.template.unwrap_or_default();
        let state = v.state.unwrap_or_default();
        let attributes = vec![
            KeyValue::new("run_id", id.to_string()),
            KeyValue::new("template", template.clone()),
            KeyValue::new("state", state.clone()),
        ];
        LENT.set(Some((TraceId::from_bytes(rt.trace_id), SpanId::from_bytes(rt.span_id))));
        let mut span = self
            .tracer
            .span_builder(format!("run {template}"))
            .with_kind(SpanKind::Internal)
            .with_start_time(at(created))
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        LENT.set(None);
        if state != "completed" {
            span.set_status(Status::error(format!("the run ended {state}")));
        }
        span.end_with_timestamp(at(ended));
    }
}
