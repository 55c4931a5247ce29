//! Export over OTLP/HTTP (cargo feature `otel`), configured by the
//! standard `OTEL_*` variables.

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

    use super::{default_service_name, encoding, export_wanted, Encoding};
    use crate::telemetry::TARGET;

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

    /// The OTLP trace layer, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
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
}
