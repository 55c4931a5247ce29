//! A judged request's entry, for every dialect: read the body, choose the
//! plan, show the model its programs, resume a program the client returns
//! results for, rewrite, and hand the request to the JSON or the stream
//! driver.

use std::sync::Arc;

use http::{Request, Response};
use serde_json::{json, Value};

use super::embedded::{not_handed_out, resume_with, Resumed};
use super::round::{respond, tag, Target};
use super::stores::RequestStores;
use super::{json as json_turns, streamed};
use crate::body::ProxyBody;
use crate::error::ProxyError;
use crate::layer::forward::{provider_headers, read_client_body, reads_usage_of, relay, send};
use crate::layer::{State, Upstream};
use crate::mode::Mode;
use crate::plan::ToolPlan;
use crate::runtime::history::Refused;
use crate::select::Selection;
use crate::tenant::Tenant;
use crate::turn::Dialect;
use crate::turn::WireRequest;

/// A judged route: where it goes upstream, and what it does there.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    /// The proxy path (`/v1/chat/completions`, ...), the upstream path too.
    pub(crate) path: String,
    /// `count_tokens`: rewritten as its model request would be, not judged.
    pub(crate) counting: bool,
}

/// A request on a judged route of `api`, handled by its dialect (the
/// dispatch arm of `crate::layer::dialects`' table).
pub(crate) async fn serve(
    api: crate::api::Api,
    state: &Arc<State>,
    inner: Upstream,
    selection: Selection,
    route: Route,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    use crate::api::Api;
    match api {
        Api::Chat => judged::<crate::chat::Chat>(state, inner, selection, route, req).await,
        Api::Responses => {
            judged::<crate::responses::Responses>(state, inner, selection, route, req).await
        }
        Api::Messages => {
            judged::<crate::messages::Messages>(state, inner, selection, route, req).await
        }
        Api::Gemini => judged::<crate::gemini::Gemini>(state, inner, selection, route, req).await,
        Api::Interactions => {
            judged::<crate::interactions::Interactions>(state, inner, selection, route, req).await
        }
    }
}

/// A request on a judged route of dialect `D`.
pub(crate) async fn judged<D: Dialect>(
    state: &Arc<State>,
    inner: Upstream,
    selection: Selection,
    route: Route,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let (parts, body) = req.into_parts();
    crate::layer::callers::check_json(&parts.headers)?;
    crate::layer::destination::check_credential(D::PROVIDER, &parts.headers, parts.uri.query())?;
    crate::layer::destination::check_no_override(&parts.method, &parts.headers)?;
    let bytes = read_client_body(&parts.headers, body, state.config.max_body_bytes).await?;
    let uri = D::PROVIDER.uri(&state.config, &route.path, parts.uri.query(), true)?;
    reads_usage_of(D::usage_shape());
    let preset = &selection.preset;
    let timeout = state.config.upstream_timeout;

    // Native with nothing to add or hide: the bytes go through unparsed.
    if selection.mode == Mode::Native && !preset.restricts_tools() && preset.sections.is_empty() {
        let target = Target {
            uri,
            headers: provider_headers(state, D::PROVIDER, &parts.headers, false, true),
            provider: D::PROVIDER,
        };
        let res = send(inner, target.request(bytes), timeout).await?;
        return Ok(tag(relay(res, D::ERRORS), &selection, None));
    }

    // The proxy reads the bytes the provider would act on; it does not
    // decode them, and never sends them on labelled as something they are
    // not.
    if let Some(coding) = parts
        .headers
        .get(http::header::CONTENT_ENCODING)
        .filter(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"))
    {
        let coding = String::from_utf8_lossy(coding.as_bytes())
            .chars()
            .take(40)
            .collect();
        return Err(ProxyError::UnsupportedEncoding(coding));
    }
    let mut request = D::parse(&bytes, &route.path)?;
    if crate::observe::ledger::inspecting() {
        if let Value::String(model) = D::model(&request) {
            crate::observe::ledger::set_model(&model);
        }
    }
    // Executions and stored denials belong to the client's credential and scope.
    let query_key = D::PROVIDER
        .key_param
        .and_then(|p| crate::api::param_value(parts.uri.query(), p));
    let tenant = Tenant::with_query_key(&parts.headers, query_key, &selection.scope);
    let stores = RequestStores::new(state, tenant);
    let plan = state.plans.get_or_build_for(
        D::TOOLS,
        D::declared_tools(&request)?.as_deref(),
        preset,
        selection.mode,
        state.config.runtime,
    )?;
    // Read as the provider reads it, below the top level too.
    plan.one_reading(|| request.repeated_key())?;
    if let Some(ledger) = crate::observe::ledger::current() {
        if let Some(c) = plan.client_code {
            ledger.set_client_code(c.client);
        }
        if let Some(rendering) = plan.sdk {
            ledger.set_sdk(rendering.as_str());
        }
    }
    let limits = &state.config.limits;
    let programs = plan.runs_code && !route.counting;
    let read = |stores: &RequestStores, request: &mut D::Request| {
        if plan.runs_code {
            D::read_history(request, &stores.executions, &stores.tenant, limits)?;
        }
        request.rewrite(&plan, &stores.splices)
    };
    stores
        .read_ahead(|stores| {
            let mut copy = request.clone();
            if plan.runs_code {
                let _ = D::rename_echoes(&mut copy, &stores.executions, &stores.tenant);
            }
            if programs {
                let _ = D::trailing_results(&copy, &stores.executions, &stores.tenant);
            }
            let _ = read(stores, &mut copy);
        })
        .await?;
    if plan.runs_code {
        // Refused where results come back to a program, as the results
        // themselves would be; elsewhere the history stays as it came.
        let renamed = D::rename_echoes(&mut request, &stores.executions, &stores.tenant);
        if let (Err(what), true) = (renamed, programs) {
            return Err(ProxyError::InvalidRequest(what));
        }
    }
    if programs {
        if let Some(res) = resume::<D>(state, &stores, &request, &plan).await? {
            return Ok(tag(res, &selection, None));
        }
    }
    read(&stores, &mut request)?;
    stores.flush().await?;
    let splices = stores.splices;
    let target = Target {
        uri,
        headers: provider_headers(state, D::PROVIDER, &parts.headers, true, true),
        provider: D::PROVIDER,
    };
    if route.counting || (!plan.can_deny() && !plan.runs_code) {
        let res = send(inner, target.request(request.to_bytes()), timeout).await?;
        return Ok(tag(relay(res, D::ERRORS), &selection, None));
    }
    request.check()?;
    if request.streams() {
        return streamed::streamed::<D>(state, inner, target, request, plan, &selection, splices)
            .await;
    }
    json_turns::intercepted::<D>(state, inner, &target, request, &plan, &selection, &splices).await
}

/// Results the client returns for a program: resume it. `Some` is the
/// client's next answer (the program's next calls).
///
/// Only the tenant's executions are found: results naming another tenant's
/// execution get the same 400 as an id the proxy never minted. An id minted
/// for this tenant whose record is gone (evicted, a restart) is not an
/// error: the rewritten history tells the model, which runs it again.
async fn resume<D: Dialect>(
    state: &State,
    stores: &RequestStores,
    request: &D::Request,
    plan: &ToolPlan,
) -> Result<Option<Response<ProxyBody>>, ProxyError> {
    let trailing =
        D::trailing_results(request, &stores.executions, &stores.tenant).map_err(|refused| {
            match refused {
                Refused::NotHandedOut(ids) => not_handed_out(&ids),
                Refused::Unclear(what) => ProxyError::InvalidRequest(what),
            }
        })?;
    let Some(trailing) = trailing else {
        return Ok(None);
    };
    match resume_with(state, stores, plan, trailing).await? {
        Resumed::Hand(exec, range) => {
            let base = json!({ "model": D::model(request) });
            let turn = D::client_turn(&exec, range, plan, &base, None, true);
            let parts = Response::new(()).into_parts().0;
            Ok(Some(respond::<D>(parts, request, &turn)))
        }
        Resumed::AskModel => Ok(None),
    }
}
