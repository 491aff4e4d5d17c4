//! Real OTLP trace receivers for the tests: over HTTP, an axum server that
//! accepts `POST /v1/traces` with a protobuf `ExportTraceServiceRequest`;
//! over gRPC, tonic's server with the `TraceService` that
//! `opentelemetry-proto` (the OpenTelemetry project's own message and
//! service types) generates. Both keep every span they were sent, with its
//! service's name, for the tests to assert on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value::Value as Any};
use prost::Message as _;

/// One span as received.
#[derive(Debug, Clone)]
pub struct Got {
    /// Its resource's `service.name`.
    pub service: String,
    pub name: String,
    /// Hex, as in a `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent: String,
    pub attrs: BTreeMap<String, String>,
    /// 2 for an error (`STATUS_CODE_ERROR`).
    pub status: i32,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Got {
    pub fn attr(&self, key: &str) -> &str {
        self.attrs.get(key).map(String::as_str).unwrap_or("")
    }
}

type Spans = Arc<Mutex<Vec<Got>>>;

/// The receiver, serving until dropped.
pub struct Receiver {
    /// `http://127.0.0.1:PORT` (exporters append `/v1/traces`).
    pub url: String,
    spans: Spans,
    _rt: tokio::runtime::Runtime,
}

fn text(kv: &[KeyValue]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|a| {
            let v = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Any::StringValue(s)) => s.clone(),
                Some(Any::IntValue(i)) => i.to_string(),
                Some(Any::BoolValue(b)) => b.to_string(),
                Some(Any::DoubleValue(d)) => d.to_string(),
                Some(other) => format!("{other:?}"),
                None => String::new(),
            };
            (a.key.clone(), v)
        })
        .collect()
}

async fn traces(State(spans): State<Spans>, body: Bytes) -> impl IntoResponse {
    let Ok(req) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    keep(&spans, req);
    (StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
}

/// The gRPC service.
struct Grpc(Spans);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        keep(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn keep(spans: &Spans, req: ExportTraceServiceRequest) {
    let mut got = spans.lock().unwrap();
    for rs in req.resource_spans {
        let service = rs.resource.as_ref().map(|r| text(&r.attributes)).unwrap_or_default();
        let service = service.get("service.name").cloned().unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                got.push(Got {
                    service: service.clone(),
                    name: s.name.clone(),
                    trace_id: hex::encode(&s.trace_id),
                    span_id: hex::encode(&s.span_id),
                    parent: hex::encode(&s.parent_span_id),
                    attrs: text(&s.attributes),
                    status: s.status.as_ref().map(|st| st.code).unwrap_or(0),
                    start_ns: s.start_time_unix_nano,
                    end_ns: s.end_time_unix_nano,
                });
            }
        }
    }
}

impl Receiver {
    pub fn start() -> Receiver {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let spans: Spans = Arc::default();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().route("/v1/traces", axum::routing::post(traces)).with_state(spans.clone());
        rt.spawn(async move { axum::serve(listener, app).await });
        Receiver { url, spans, _rt: rt }
    }

    /// The same over gRPC (`url` is then the gRPC endpoint).
    pub fn start_grpc() -> Receiver {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let spans: Spans = Arc::default();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let service = TraceServiceServer::new(Grpc(spans.clone()));
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        rt.spawn(tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming));
        Receiver { url, spans, _rt: rt }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }

    /// The spans once `done` holds of them (panics, showing them, after `limit`).
    pub fn wait_for(&self, limit: Duration, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let until = Instant::now() + limit;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(Instant::now() < until, "the spans expected did not arrive; received:\n{spans:#?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The one span named `name` of `service`.
pub fn one<'a>(spans: &'a [Got], service: &str, name: &str) -> &'a Got {
    let all: Vec<&Got> = spans.iter().filter(|s| s.service == service && s.name == name).collect();
    assert_eq!(all.len(), 1, "one span `{name}` of {service}, received:\n{spans:#?}");
    all[0]
}
