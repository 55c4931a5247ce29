//! The proxy's own endpoints: liveness, readiness, the preset list, dry-run.

use http::header::{self, HeaderValue};
use http::{Request, Response};
use serde_json::{json, Value};

use super::forward::read_client_body;
use super::State;
use crate::body::{full, ProxyBody};
use crate::chat::ChatRequest;
use crate::error::ProxyError;
use crate::select::select;

fn json_response(value: &Value) -> Response<ProxyBody> {
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
                "sections": p.sections.iter().map(|s| &s.id).collect::<Vec<_>>(),
                "allow": p.allow,
                "deny": p.deny,
            })
        })
        .collect();
    json_response(&json!({"presets": presets}))
}

/// `POST /codemode/dry-run`: what the model would see, without calling upstream.
pub(crate) async fn dry_run(
    state: &State,
    path_preset: Option<&str>,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let selection = select(
        req.headers(),
        path_preset,
        &state.config.catalog,
        state.config.client_select,
    )?;
    let (parts, body) = req.into_parts();
    let bytes = read_client_body(&parts.headers, body, state.config.max_body_bytes).await?;
    let mut chat = ChatRequest::parse(&bytes)?;
    let plan = state.plans.get_or_build(
        chat.field("tools"),
        &selection.preset,
        selection.mode,
        state.config.runtime,
    )?;
    // What this client's own stored denials would add; nobody else's.
    let tenant = crate::tenant::Tenant::of(&parts.headers, &selection.scope);
    let stores = super::stores::RequestStores::new(state, tenant);
    stores
        .read_ahead(|stores| {
            let _ = chat.clone().rewrite(&plan, &stores.splices);
        })
        .await?;
    chat.rewrite(&plan, &stores.splices)?;
    let request: Value = serde_json::from_slice(&chat.to_bytes())
        .map_err(|e| ProxyError::InvalidRequest(e.to_string()))?;
    Ok(json_response(&json!({
        "scope": selection.scope,
        "preset": selection.preset.name,
        "mode": selection.mode.as_str(),
        "sections": plan.sections,
        "request": request,
    })))
}
