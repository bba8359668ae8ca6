//! OpenTelemetry traces: off by default, on when an OTLP endpoint is configured ([`start`]).
//!
//! The code opens `tracing` spans only through [`span!`], which answers
//! [`Span::none`] while tracing is off: then no span is built, no context is read or stored and no
//! header is written, and the cost is one relaxed load. While it is on, the spans go to the
//! OpenTelemetry SDK through `tracing-opentelemetry` and out over OTLP/HTTP in batches.
//!
//! W3C trace context (`traceparent`, `tracestate`) crosses the process in three ways:
//! - **in**: every HTTP front continues the context a request carries ([`continue_from`], called
//!   by the access log's middleware for A2A's three bindings, MCP, the admin and member APIs);
//! - **out**: pushes, webhooks and remote A2A calls carry the context of the span they are sent in
//!   ([`inject`], called by the outbound client for every request it makes);
//! - **at rest**: a thread keeps the context of the request that opened it and a delivery the
//!   context of the operation that queued it ([`TraceContext`], stored as its two header values),
//!   so that the MCP agent's claim and reply, the outbox's attempts and the remote follower's
//!   calls, made later in other requests or workers, join the trace of the request they serve
//!   ([`adopt`]).
//!
//! A leaf: it depends on the OpenTelemetry crates, `tracing` and `http` only, so that the store,
//! the outbound client, the service and every front may use it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of every span [`span!`] opens (the layer that exports them listens to
/// `liaison` at INFO, whatever `RUST_LOG` says of the log lines).
pub const TARGET: &str = "liaison::trace";

/// The W3C header names.
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

static ON: AtomicBool = AtomicBool::new(false);

/// Whether traces are exported by this process.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Opens an INFO span under [`TARGET`] named by `otel.name` (its first argument), with the fields
/// given after it, or [`tracing::Span::none`] while tracing is off.
macro_rules! span {
    ($name:expr $(, $($fields:tt)*)?) => {
        if $crate::telemetry::on() {
            tracing::info_span!(target: "liaison::trace", "liaison", otel.name = $name $(, $($fields)*)?)
        } else {
            tracing::Span::none()
        }
    };
}
pub(crate) use span;

/// The span of the HTTP request being served, in its extensions (while tracing is on), for work
/// the request hands to other tasks (rmcp runs an MCP tool call in a task of its session).
#[derive(Clone, Debug)]
pub struct RequestSpan(pub Span);

/// Where and how traces are exported (`[telemetry]`, with the standard `OTEL_*` variables).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The OTLP/HTTP base URL (`/v1/traces` is added), as `OTEL_EXPORTER_OTLP_ENDPOINT`; wins
    /// over the `OTEL_*` endpoint variables.
    pub otlp_endpoint: Option<String>,
}

/// The exporter while the process runs; [`Exporter::shutdown`] sends what is buffered.
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Sends the spans still buffered and stops exporting (at the end of `serve`).
    pub fn shutdown(self) {
        let _ = self.provider.shutdown();
        ON.store(false, Ordering::Relaxed);
    }
}

/// Where spans go: `[telemetry] otlp_endpoint`, else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as
/// written), else `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces`); none of them: tracing stays
/// off. `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep it off whatever is set.
pub fn endpoint(settings: &Settings, env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
    {
        return None;
    }
    let base = |url: &str| format!("{}/v1/traces", url.trim().trim_end_matches('/'));
    if let Some(url) = settings
        .otlp_endpoint
        .as_deref()
        .filter(|u| !u.trim().is_empty())
    {
        return Some(base(url));
    }
    if let Some(url) = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return Some(url.trim().to_owned());
    }
    set("OTEL_EXPORTER_OTLP_ENDPOINT").map(|url| base(&url))
}

/// Builds the exporter and the layer that feeds it, and turns tracing on; `None` when no endpoint
/// is configured. The service's name is `OTEL_SERVICE_NAME` or `liaison`; `OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_TRACES_SAMPLER`(`_ARG`), `OTEL_BSP_*` and `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` /
/// `_TIMEOUT` apply as the OpenTelemetry specification says.
pub fn start<S>(
    settings: &Settings,
) -> anyhow::Result<Option<(Exporter, impl tracing_subscriber::Layer<S> + use<S>)>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use tracing_subscriber::Layer as _;

    let Some(url) = endpoint(settings, |name| std::env::var(name).ok()) else {
        return Ok(None);
    };
    url.parse::<http::Uri>()
        .ok()
        .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
        .ok_or_else(|| {
            anyhow::anyhow!("the OTLP endpoint {url:?} is not an http:// or https:// URL")
        })?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("liaison");
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("liaison");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_threads(false)
        .with_location(false)
        .with_level(false)
        .with_tracked_inactivity(false)
        .with_filter(
            tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::INFO),
        );
    ON.store(true, Ordering::Relaxed);
    Ok(Some((Exporter { provider }, layer)))
}

fn propagator() -> &'static TraceContextPropagator {
    static P: OnceLock<TraceContextPropagator> = OnceLock::new();
    P.get_or_init(TraceContextPropagator::new)
}

/// A W3C trace context as its two header values: what a thread or a delivery keeps of the
/// operation that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The context of the current span, when tracing is on and the span is being recorded.
    pub fn current() -> Option<TraceContext> {
        if !on() {
            return None;
        }
        let cx = Span::current().context();
        if !cx.span().span_context().is_valid() {
            return None;
        }
        let mut carrier = Carrier::default();
        propagator().inject_context(&cx, &mut carrier);
        Some(TraceContext {
            traceparent: carrier.traceparent?,
            tracestate: carrier.tracestate.filter(|s| !s.is_empty()),
        })
    }

    fn context(&self) -> opentelemetry::Context {
        propagator().extract(&Carrier {
            traceparent: Some(self.traceparent.clone()),
            tracestate: self.tracestate.clone(),
        })
    }
}

/// Makes `span` (just opened, before anything ran in it) continue the trace of the incoming
/// request's `traceparent` and `tracestate`, when they are valid; an invalid or absent one leaves
/// it a new trace's root, as the W3C recommendation says.
pub fn continue_from(span: &Span, headers: &HeaderMap) {
    if span.is_none() {
        return;
    }
    let cx = propagator().extract(&Headers(headers));
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// Makes `span` (just opened) a child of the stored context `at`, and links it to the span that
/// was current, so that work done later for a trace (a claim and a reply in another request, a
/// delivery's attempt) joins it while the request it runs in stays findable.
pub fn adopt(span: &Span, at: Option<&TraceContext>) {
    let Some(at) = at else { return };
    if span.is_none() {
        return;
    }
    let here = Span::current().context().span().span_context().clone();
    let cx = at.context();
    if cx.span().span_context().is_valid() && span.set_parent(cx).is_ok() && here.is_valid() {
        span.add_link(here);
    }
}

/// Writes the current span's `traceparent` (and `tracestate`) into an outgoing request's
/// `headers`, when tracing is on.
pub fn inject(headers: &mut HeaderMap) {
    if !on() {
        return;
    }
    let cx = Span::current().context();
    if cx.span().span_context().is_valid() {
        propagator().inject_context(&cx, &mut HeadersMut(headers));
    }
}

/// The trace id of `span` (32 hex digits), recorded on a root span as `trace_id` so that the
/// log lines inside it carry it.
pub fn record_trace_id(span: &Span) {
    if span.is_none() {
        return;
    }
    let id = span.context().span().span_context().trace_id();
    span.record("trace_id", tracing::field::display(id));
}

/// Marks `span` as failed with `message` (its OpenTelemetry status).
pub fn failed(span: &Span, message: impl std::fmt::Display) {
    if !span.is_none() {
        span.set_status(opentelemetry::trace::Status::error(message.to_string()));
    }
}

/// Sets an attribute on `span`, when it is recorded.
pub fn attribute(span: &Span, key: &'static str, value: impl Into<opentelemetry::Value>) {
    if !span.is_none() {
        span.set_attribute(key, value);
    }
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// The two header values, as the propagator reads and writes them.
#[derive(Default)]
struct Carrier {
    traceparent: Option<String>,
    tracestate: Option<String>,
}

impl Extractor for Carrier {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.traceparent.as_deref(),
            TRACESTATE => self.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

impl Injector for Carrier {
    fn set(&mut self, key: &str, value: String) {
        match key {
            TRACEPARENT => self.traceparent = Some(value),
            TRACESTATE => self.tracestate = Some(value),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_comes_from_the_setting_then_the_standard_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let none = Settings::default();
        let set = Settings {
            otlp_endpoint: Some("http://collector:4318/".into()),
        };
        assert_eq!(endpoint(&none, env(&[])), None);
        assert_eq!(
            endpoint(&set, env(&[])).as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(
            endpoint(
                &none,
                env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])
            )
            .as_deref(),
            Some("http://c:4318/v1/traces")
        );
        assert_eq!(
            endpoint(
                &none,
                env(&[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/x")
                ])
            )
            .as_deref(),
            Some("http://t:9/x")
        );
        assert_eq!(
            endpoint(&set, env(&[("OTEL_SDK_DISABLED", "TRUE")])),
            None,
            "the SDK's off switch wins"
        );
        assert_eq!(
            endpoint(&set, env(&[("OTEL_TRACES_EXPORTER", "none")])),
            None
        );
        assert_eq!(
            endpoint(&none, env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])),
            None
        );
    }

    #[test]
    fn while_off_no_span_is_opened_and_no_header_written() {
        assert!(!on());
        let span = span!("test.op", trace_id = tracing::field::Empty);
        assert!(span.is_none());
        let mut headers = HeaderMap::new();
        inject(&mut headers);
        assert!(headers.is_empty());
        assert_eq!(TraceContext::current(), None);
    }
}
