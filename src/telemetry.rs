//! Traces: the proxy's spans, named after the OpenTelemetry GenAI semantic
//! conventions, and (cargo feature `otel`) their export over OTLP/HTTP.
//!
//! The spans are plain `tracing` spans at `debug` with target
//! [`TARGET`], kept out of the log lines (a log line stays in its
//! request's span, [`crate::observe::logging::layer`]); `otel.name` and
//! `otel.kind` fields give them their OpenTelemetry names and kinds as
//! `tracing-opentelemetry` reads them:
//!
//! - `chat {model}` (client) per upstream call of a chat route, every
//!   round: repairs, rounds after programs and passthrough alike. It lasts
//!   until the upstream body ends, a stream's included.
//! - `execute_tool run_code` per run of a program (its start and each
//!   resume), with a child `execute_tool {name}` per nested call handed to
//!   the client.
//! - `codemode.denial` events in the round that made a denied call.
//!
//! No span or event carries arguments, results, prompts or credentials.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! let otel = codemode_proxy::telemetry::otel_layer(|k| std::env::var(k).ok())
//!     .expect("valid OTEL_* variables");
//! let (layer, guard) = otel.unzip();
//! tracing_subscriber::registry().with(layer).init();
//! // ... serve; dropping `guard` flushes what is left.
//! drop(guard);
//! ```

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Extensions, Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use serde_json::Value;
use tracing::field::Empty;
use tracing::Span;

use crate::body::{BoxedError, ProxyBody};
use crate::error::ProxyError;

/// The target of every span and event this module makes.
pub const TARGET: &str = "codemode::trace";

/// Where traces go; unset, nothing is exported.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// Where traces go, overriding [`OTEL_EXPORTER_OTLP_ENDPOINT`] (a full URL).
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `http/protobuf` (default) or `http/json`.
pub const OTEL_EXPORTER_OTLP_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// The protocol for traces, overriding [`OTEL_EXPORTER_OTLP_PROTOCOL`].
pub const OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// The `service.name` resource attribute (default `codemode-proxy`).
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// Resource attributes, `key=value,...`; may name `service.name` too.
pub const OTEL_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// `service.name` when no variable names one.
pub const DEFAULT_SERVICE_NAME: &str = "codemode-proxy";

// ---------------------------------------------------------------------------
// Upstream rounds

/// The `chat {model}` span of one upstream call, carried from the request
/// that starts it to the response (and body) that ends it.
#[derive(Clone, Debug)]
pub(crate) struct Round(Span);

impl Round {
    /// The span for an upstream request to `uri` with `body`; disabled (and
    /// nothing read) when no subscriber wants it.
    pub(crate) fn start(uri: &Uri, body: &[u8]) -> Round {
        let provider = provider_of(uri);
        let span = tracing::debug_span!(
            target: TARGET,
            "chat",
            otel.name = Empty,
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = provider,
            gen_ai.request.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            server.address = uri.host().unwrap_or(""),
            http.response.status_code = Empty,
            error.type = Empty,
        );
        if !span.is_disabled() {
            match model_of(body) {
                Some(model) => {
                    span.record("otel.name", format!("chat {model}"));
                    span.record("gen_ai.request.model", model.as_str());
                }
                None => {
                    span.record("otel.name", "chat");
                }
            }
        }
        Round(span)
    }

    /// Puts the round on `req`, for [`Round::take`] in the sender.
    pub(crate) fn attach<B>(self, req: &mut Request<B>) {
        if !self.0.is_disabled() {
            req.extensions_mut().insert(self);
        }
    }

    /// The round a request carries; a disabled span when it carries none.
    pub(crate) fn take<B>(req: &mut Request<B>) -> Round {
        req.extensions_mut()
            .remove::<Round>()
            .unwrap_or_else(|| Round(Span::none()))
    }

    /// The round a response's head carries, taken off it (so the span ends
    /// with its body, not with the client's response).
    pub(crate) fn of_response(extensions: &mut Extensions) -> Round {
        extensions
            .remove::<Round>()
            .unwrap_or_else(|| Round(Span::none()))
    }

    /// The span, for instrumenting the call.
    pub(crate) fn span(&self) -> &Span {
        &self.0
    }

    /// Records how the call went; a response's body keeps the span open
    /// until it ends, and its head carries the round for the handler.
    pub(crate) fn finish(
        self,
        sent: Result<Response<ProxyBody>, ProxyError>,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        if self.0.is_disabled() {
            return sent;
        }
        match sent {
            Err(e) => {
                self.0.record("otel.status_code", "error");
                self.0.record("error.type", e.code());
                Err(e)
            }
            Ok(res) => {
                let status = res.status();
                self.0
                    .record("http.response.status_code", i64::from(status.as_u16()));
                if !status.is_success() {
                    self.0.record("otel.status_code", "error");
                    self.0.record("error.type", status.as_str());
                }
                let (mut parts, body) = res.into_parts();
                let body = crate::body::boxed(SpanBody {
                    inner: body,
                    span: Some(self.0.clone()),
                });
                parts.extensions.insert(self);
                Ok(Response::from_parts(parts, body))
            }
        }
    }

    /// Records the token counts of a provider's `usage` object (Chat
    /// Completions' `prompt_tokens`/`completion_tokens` or the Responses and
    /// Messages `input_tokens`/`output_tokens`).
    pub(crate) fn usage(&self, usage: Option<&Value>) {
        if self.0.is_disabled() {
            return;
        }
        let Some(usage) = usage else { return };
        // i64: the exporter sends a u64 as a string.
        let count = |keys: [&str; 2]| keys.iter().find_map(|k| usage.get(*k)?.as_i64());
        if let Some(n) = count(["input_tokens", "prompt_tokens"]) {
            self.0.record("gen_ai.usage.input_tokens", n);
        }
        if let Some(n) = count(["output_tokens", "completion_tokens"]) {
            self.0.record("gen_ai.usage.output_tokens", n);
        }
    }

    /// No round (a disabled span).
    pub(crate) fn none() -> Round {
        Round(Span::none())
    }

    /// Enters the round's span until the guard drops (sync code only).
    pub(crate) fn entered(&self) -> tracing::span::EnteredSpan {
        self.0.clone().entered()
    }

    /// Runs `f` inside the round's span (its denials become its events).
    pub(crate) fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.in_scope(f)
    }
}

/// The GenAI provider a chat upstream speaks for: the Messages API is
/// Anthropic's, the others OpenAI's.
fn provider_of(uri: &Uri) -> &'static str {
    if uri.path().trim_end_matches('/').ends_with("/messages") {
        "anthropic"
    } else {
        "openai"
    }
}

/// The `model` of a request body, read without building the rest.
fn model_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        model: Option<String>,
    }
    serde_json::from_slice::<Head>(body).ok()?.model
}

/// An upstream body that keeps its round's span open until it ends.
struct SpanBody {
    inner: ProxyBody,
    span: Option<Span>,
}

impl Body for SpanBody {
    type Data = Bytes;
    type Error = BoxedError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxedError>>> {
        let this = &mut *self;
        let _entered = this.span.as_ref().map(Span::enter);
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        drop(_entered);
        match &polled {
            Poll::Ready(None) => this.span = None,
            Poll::Ready(Some(Err(_))) => {
                if let Some(span) = this.span.take() {
                    span.record("otel.status_code", "error");
                    span.record("error.type", "upstream_stream_broken");
                }
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

// ---------------------------------------------------------------------------
// Programs and denials

/// The `execute_tool run_code` span of one run of a program (its start or
/// a resume); `run_call` is the model's `run_code` call id.
pub(crate) fn program_span(run_call: &str) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "execute_tool",
        otel.name = "execute_tool run_code",
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = crate::mode::RUN_CODE,
        gen_ai.tool.call.id = run_call,
        gen_ai.tool.type = "function",
        error.type = Empty,
    )
}

/// What a run came to, on its span: a program that failed is an error.
pub(crate) fn program_ended(span: &Span, failed: bool) {
    if failed {
        span.record("otel.status_code", "error");
        span.record("error.type", "program_error");
    }
}

/// One `execute_tool {name}` span, child of `parent`, per nested call the
/// program hands to the client: its tool's name and minted id, never its
/// arguments.
pub(crate) fn handed_out<'a>(parent: &Span, calls: impl Iterator<Item = (&'a str, String)>) {
    if parent.is_disabled() {
        return;
    }
    for (name, id) in calls {
        let span = tracing::debug_span!(
            target: TARGET,
            parent: parent,
            "execute_tool",
            otel.name = format!("execute_tool {name}"),
            otel.kind = "internal",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = name,
            gen_ai.tool.call.id = id,
            gen_ai.tool.type = "function",
        );
        drop(span);
    }
}

/// A denied call, as an event of the current span (the round that made it):
/// the tool's name and the denial's code, never the arguments.
pub(crate) fn denied(tool: &str, code: impl std::fmt::Display) {
    tracing::event!(
        target: TARGET,
        tracing::Level::DEBUG,
        gen_ai.tool.name = tool,
        codemode.denial.code = %code,
        "codemode.denial"
    );
}

// ---------------------------------------------------------------------------
// Export (feature `otel`)

/// Whether the variables ask for traces to be exported.
pub fn export_wanted(lookup: impl Fn(&str) -> Option<String>) -> bool {
    let set = |k: &str| lookup(k).is_some_and(|v| !v.trim().is_empty());
    set(OTEL_EXPORTER_OTLP_ENDPOINT) || set(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
}

/// The OTLP/HTTP encoding the variables name (default `http/protobuf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `http/protobuf`
    Protobuf,
    /// `http/json`
    Json,
}

/// Reads [`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`], then
/// [`OTEL_EXPORTER_OTLP_PROTOCOL`].
pub fn encoding(lookup: impl Fn(&str) -> Option<String>) -> Result<Encoding, String> {
    let named = [
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
        OTEL_EXPORTER_OTLP_PROTOCOL,
    ]
    .into_iter()
    .find_map(|k| lookup(k).filter(|v| !v.trim().is_empty()).map(|v| (k, v)));
    let Some((var, value)) = named else {
        return Ok(Encoding::Protobuf);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "http/protobuf" => Ok(Encoding::Protobuf),
        "http/json" => Ok(Encoding::Json),
        "grpc" => Err(format!(
            "{var}=grpc: this build exports traces over OTLP/HTTP only; set `http/protobuf` \
             (the default) and point the endpoint at the collector's HTTP port (usually 4318)"
        )),
        other => Err(format!(
            "{var}={other:?} is not a protocol: use `http/protobuf` or `http/json`"
        )),
    }
}

/// The `service.name` to set, when no variable names one.
pub fn default_service_name(lookup: impl Fn(&str) -> Option<String>) -> Option<&'static str> {
    let named = lookup(OTEL_SERVICE_NAME).is_some_and(|v| !v.trim().is_empty())
        || lookup(OTEL_RESOURCE_ATTRIBUTES).is_some_and(|attrs| {
            attrs
                .split(',')
                .any(|kv| kv.split('=').next().map(str::trim) == Some("service.name"))
        });
    (!named).then_some(DEFAULT_SERVICE_NAME)
}

#[cfg(feature = "otel")]
pub use export::{otel_layer, OtelGuard};

#[cfg(not(feature = "otel"))]
pub use no_export::{otel_layer, OtelGuard};

/// A build without the `otel` feature: spans stay `tracing` spans.
#[cfg(not(feature = "otel"))]
mod no_export {
    use tracing::Subscriber;
    use tracing_subscriber::layer::Identity;
    use tracing_subscriber::Layer;

    use super::export_wanted;

    /// Nothing to flush in a build without OTLP export.
    pub struct OtelGuard;

    impl OtelGuard {
        /// Does nothing.
        pub fn shutdown(self) {}
    }

    /// Always `Ok(None)`; an endpoint that is set gets a warning on stderr,
    /// as this build cannot export.
    #[allow(clippy::type_complexity)]
    pub fn otel_layer<S: Subscriber>(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<(impl Layer<S>, OtelGuard)>, String> {
        if export_wanted(lookup) {
            eprintln!(
                "codemode-proxy: OTEL_EXPORTER_OTLP_ENDPOINT is set, but this build has no OTLP \
                 export (cargo feature `otel`); no traces are sent"
            );
        }
        Ok(None::<(Identity, OtelGuard)>)
    }
}

#[cfg(feature = "otel")]
mod export {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use opentelemetry_sdk::Resource;
    use tracing::{Metadata, Subscriber};
    use tracing_subscriber::filter::filter_fn;
    use tracing_subscriber::registry::LookupSpan;
    use tracing_subscriber::Layer;

    use super::{default_service_name, encoding, export_wanted, Encoding, TARGET};

    /// Flushes and stops the exporter when dropped (or at [`OtelGuard::shutdown`]).
    pub struct OtelGuard {
        provider: Option<SdkTracerProvider>,
    }

    impl OtelGuard {
        /// Exports what is queued and stops; errors are reported on stderr.
        pub fn shutdown(mut self) {
            self.stop();
        }

        fn stop(&mut self) {
            if let Some(provider) = self.provider.take() {
                if let Err(e) = provider.shutdown() {
                    eprintln!("codemode-proxy: flushing traces at shutdown failed: {e}");
                }
            }
        }
    }

    impl Drop for OtelGuard {
        fn drop(&mut self) {
            self.stop();
        }
    }

    /// What the exporter sees: this module's spans and events, and the
    /// proxy's (and tower-http's) other spans at `debug` or above, so a
    /// request span is their parent. No other event, so log lines never
    /// become span events; no span of the HTTP stacks, the exporter's own
    /// requests included.
    fn exported(meta: &Metadata<'_>) -> bool {
        let ours = ["codemode", "tower_http"]
            .iter()
            .any(|t| meta.target().starts_with(t));
        meta.target() == TARGET
            || (ours && meta.is_span() && *meta.level() <= tracing::Level::DEBUG)
    }

    /// The OTLP trace layer, when [`super::OTEL_EXPORTER_OTLP_ENDPOINT`] (or
    /// the traces endpoint) is set: a batch exporter over OTLP/HTTP that the
    /// standard `OTEL_*` variables configure (headers, timeout, batch delay,
    /// resource). `Ok(None)` when no endpoint is set; `Err` names the
    /// variable that is wrong.
    ///
    /// Call it before any async runtime starts (the exporter's HTTP client
    /// runs on its own threads), and keep the guard until shutdown.
    #[allow(clippy::type_complexity)]
    pub fn otel_layer<S>(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<(impl Layer<S>, OtelGuard)>, String>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if !export_wanted(&lookup) {
            return Ok(None);
        }
        let protocol = match encoding(&lookup)? {
            Encoding::Protobuf => Protocol::HttpBinary,
            Encoding::Json => Protocol::HttpJson,
        };
        // reqwest is built without a crypto provider: ring, as hyper-rustls
        // uses. Already installed (a host program did) is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(protocol)
            .build()
            .map_err(|e| format!("cannot build the OTLP trace exporter: {e}"))?;
        let mut resource = Resource::builder();
        if let Some(name) = default_service_name(&lookup) {
            resource = resource.with_service_name(name);
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("codemode-proxy");
        let filter = filter_fn(exported);
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_filter(filter);
        Ok(Some((
            layer,
            OtelGuard {
                provider: Some(provider),
            },
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn export_is_wanted_only_with_an_endpoint() {
        assert!(!export_wanted(vars(&[])));
        assert!(!export_wanted(vars(&[(OTEL_EXPORTER_OTLP_ENDPOINT, " ")])));
        assert!(export_wanted(vars(&[(
            OTEL_EXPORTER_OTLP_ENDPOINT,
            "http://collector:4318"
        )])));
        assert!(export_wanted(vars(&[(
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
            "http://collector:4318/v1/traces"
        )])));
    }

    #[test]
    fn encoding_defaults_to_protobuf_and_the_traces_variable_wins() {
        assert_eq!(encoding(vars(&[])), Ok(Encoding::Protobuf));
        assert_eq!(
            encoding(vars(&[(OTEL_EXPORTER_OTLP_PROTOCOL, "http/json")])),
            Ok(Encoding::Json)
        );
        assert_eq!(
            encoding(vars(&[
                (OTEL_EXPORTER_OTLP_PROTOCOL, "http/json"),
                (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "http/protobuf"),
            ])),
            Ok(Encoding::Protobuf)
        );
    }

    #[test]
    fn grpc_and_unknown_protocols_are_refused_naming_the_variable() {
        let grpc = encoding(vars(&[(OTEL_EXPORTER_OTLP_PROTOCOL, "grpc")])).unwrap_err();
        assert!(grpc.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"), "{grpc}");
        assert!(grpc.contains("http/protobuf"), "{grpc}");
        let other = encoding(vars(&[(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "udp")])).unwrap_err();
        assert!(
            other.contains("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
            "{other}"
        );
    }

    #[test]
    fn service_name_defaults_unless_a_variable_names_one() {
        assert_eq!(default_service_name(vars(&[])), Some(DEFAULT_SERVICE_NAME));
        assert_eq!(
            default_service_name(vars(&[(OTEL_SERVICE_NAME, "agents-proxy")])),
            None
        );
        assert_eq!(
            default_service_name(vars(&[(
                OTEL_RESOURCE_ATTRIBUTES,
                "deployment.environment=prod, service.name=x"
            )])),
            None
        );
        assert_eq!(
            default_service_name(vars(&[(
                OTEL_RESOURCE_ATTRIBUTES,
                "deployment.environment=prod"
            )])),
            Some(DEFAULT_SERVICE_NAME)
        );
    }

    #[test]
    fn the_provider_follows_the_upstream_api() {
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        assert_eq!(
            provider_of(&uri("https://api.anthropic.com/v1/messages")),
            "anthropic"
        );
        assert_eq!(provider_of(&uri("http://h/v1/chat/completions")), "openai");
        assert_eq!(provider_of(&uri("http://h/openai/v1/responses")), "openai");
    }

    #[test]
    fn the_model_is_read_off_the_body() {
        assert_eq!(
            model_of(br#"{"messages":[{"role":"user","content":"x"}],"model":"gpt-4o"}"#),
            Some("gpt-4o".to_owned())
        );
        assert_eq!(model_of(b"{}"), None);
        assert_eq!(model_of(b"not json"), None);
    }
}
