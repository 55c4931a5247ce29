//! The dialects the layer serves, by the API a judged route names: the one
//! place in the layer that lists them (an exhaustive match, so a new
//! [`Api`] cannot be left out).

use std::sync::Arc;

use http::{Request, Response};

use super::drivers::entry::{judged, Route};
use super::{State, Upstream};
use crate::api::{Api, Errors, Provider};
use crate::body::ProxyBody;
use crate::chat::Chat;
use crate::error::ProxyError;
use crate::gemini::Gemini;
use crate::interactions::Interactions;
use crate::messages::Messages;
use crate::responses::Responses;
use crate::route::Routes;
use crate::select::Selection;
use crate::turn::Dialect;

/// A request on a judged route of `api`, handled by its dialect.
pub(crate) async fn serve(
    api: Api,
    state: &Arc<State>,
    inner: Upstream,
    selection: Selection,
    route: Route,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    match api {
        Api::Chat => judged::<Chat>(state, inner, selection, route, req).await,
        Api::Responses => judged::<Responses>(state, inner, selection, route, req).await,
        Api::Messages => judged::<Messages>(state, inner, selection, route, req).await,
        Api::Gemini => judged::<Gemini>(state, inner, selection, route, req).await,
        Api::Interactions => judged::<Interactions>(state, inner, selection, route, req).await,
    }
}

/// Every dialect's routes, collected once.
pub(crate) fn routes() -> &'static Routes {
    static ROUTES: std::sync::OnceLock<Routes> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| {
        Routes::new(Api::ALL.map(|api| match api {
            Api::Chat => Chat::ROUTES,
            Api::Responses => Responses::ROUTES,
            Api::Messages => Messages::ROUTES,
            Api::Gemini => Gemini::ROUTES,
            Api::Interactions => Interactions::ROUTES,
        }))
    })
}

/// The shapes `api`'s clients read a failure in.
pub(crate) fn errors(api: Api) -> &'static Errors {
    match api {
        Api::Chat => Chat::ERRORS,
        Api::Responses => Responses::ERRORS,
        Api::Messages => Messages::ERRORS,
        Api::Gemini => Gemini::ERRORS,
        Api::Interactions => Interactions::ERRORS,
    }
}

/// The provider that serves `api`.
pub(crate) fn provider(api: Api) -> &'static Provider {
    match api {
        Api::Chat => Chat::PROVIDER,
        Api::Responses => Responses::PROVIDER,
        Api::Messages => Messages::PROVIDER,
        Api::Gemini => Gemini::PROVIDER,
        Api::Interactions => Interactions::PROVIDER,
    }
}

/// The API whose provider a request's head or query names (Anthropic's
/// `anthropic-version`, Google's key), for a request no judged route serves, the shape
/// of its errors and a dry-run's dialect.
pub(crate) fn claiming(headers: &http::HeaderMap, query: Option<&str>) -> Option<Api> {
    Api::ALL
        .into_iter()
        .find(|&api| (provider(api).claims)(headers, query))
}

/// The API a body sent with none named is written in (a dry-run's): the
/// first that recognises it, else the first.
pub(crate) fn sniff(body: &serde_json::Value) -> Api {
    let recognises = |api: Api| match api {
        Api::Chat => Chat::recognises(body),
        Api::Responses => Responses::recognises(body),
        Api::Messages => Messages::recognises(body),
        Api::Gemini => Gemini::recognises(body),
        Api::Interactions => Interactions::recognises(body),
    };
    Api::ALL
        .into_iter()
        .find(|&api| recognises(api))
        .unwrap_or(Api::ALL[0])
}

/// A dry-run's request in `api`, rewritten as its dialect would send it,
/// and its plan.
pub(crate) async fn dry_run(
    api: Api,
    state: &State,
    selection: &Selection,
    tenant: crate::tenant::Tenant,
    bytes: &[u8],
) -> Result<(Arc<crate::plan::ToolPlan>, serde_json::Value), ProxyError> {
    use super::admin::dry_run::rewritten;
    match api {
        Api::Chat => rewritten::<Chat>(state, selection, tenant, bytes).await,
        Api::Responses => rewritten::<Responses>(state, selection, tenant, bytes).await,
        Api::Messages => rewritten::<Messages>(state, selection, tenant, bytes).await,
        Api::Gemini => rewritten::<Gemini>(state, selection, tenant, bytes).await,
        Api::Interactions => rewritten::<Interactions>(state, selection, tenant, bytes).await,
    }
}
