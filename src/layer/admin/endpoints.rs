//! The proxy's own status endpoints: liveness, readiness, metrics, the
//! preset list.

use http::header::{self, HeaderValue};
use http::Response;
use serde_json::{json, Value};

use crate::body::{full, ProxyBody};
use crate::error::ProxyError;
use crate::layer::State;

pub(crate) fn json_response(value: &Value) -> Response<ProxyBody> {
    let mut res = Response::new(full(value.to_string()));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// `GET /healthz`.
pub(crate) fn healthz() -> Response<ProxyBody> {
    json_response(&json!({"status": "ok"}))
}

/// `GET /readyz`: 200 when the execution store answers, else the store's
/// 503 (with `retry-after`), naming it.
pub(crate) async fn readyz(state: &State) -> Result<Response<ProxyBody>, ProxyError> {
    state.executions.ready().await?;
    Ok(json_response(&json!({"status": "ready"})))
}

/// `GET /metrics`: the Prometheus series (see `crate::observe::metrics`).
pub(crate) fn metrics(state: &State) -> Response<ProxyBody> {
    state
        .metrics
        .occupancy(&crate::observe::metrics::Occupancy {
            programs_running: state.runs.running(),
            programs_waiting: state.runs.waiting(),
            stores: [
                Some(state.plans.weighed_bytes()),
                state.executions.local().map(|s| s.weighed_bytes()),
                state.splices.local().map(|s| s.weighed_bytes()),
            ],
            dropped_waiting: state
                .executions
                .local()
                .map_or([0, 0], |s| s.dropped_waiting()),
            worker_failures: state.runs.workers().map_or([0; 5], |w| w.failures()),
        });
    let mut res = Response::new(full(state.metrics.encode()));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(crate::observe::metrics::CONTENT_TYPE),
    );
    res
}

/// `GET /codemode/presets`: presets in picker order with their effective mode.
pub(crate) fn presets(state: &State) -> Response<ProxyBody> {
    let presets: Vec<Value> = state
        .config
        .catalog
        .presets()
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "mode": p.mode.as_str(),
                "extends": p.extends,
                "mode_inherited": p.mode_row.is_none(),
                "sdk": p.sdk.as_str(),
                "sections": p.sections.iter().map(|s| &s.id).collect::<Vec<_>>(),
                "allow": p.allow,
                "deny": p.deny,
            })
        })
        .collect();
    json_response(&json!({"presets": presets}))
}
