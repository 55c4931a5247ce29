//! The dialects the layer serves, by the API a judged route names: what
//! each one's card says (its routes, error shapes, provider, the bodies it
//! recognises), read by routing, forwarding and errors. Each match is
//! exhaustive, so a new [`Api`] cannot be left out; the two that run a
//! dialect's code are beside what they run (`drivers::entry::serve`,
//! `admin::dry_run::rewritten_in`), so this table imports nothing of the
//! layer and no circle of files goes through it.

use crate::api::{Api, Errors, Provider};
use crate::chat::Chat;
use crate::gemini::Gemini;
use crate::interactions::Interactions;
use crate::messages::Messages;
use crate::responses::Responses;
use crate::route::Routes;
use crate::turn::Dialect;

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

/// Whether a body sent with no API named (a dry-run's) is written in `api`.
pub(crate) fn recognises(api: Api, body: &serde_json::Value) -> bool {
    match api {
        Api::Chat => Chat::recognises(body),
        Api::Responses => Responses::recognises(body),
        Api::Messages => Messages::recognises(body),
        Api::Gemini => Gemini::recognises(body),
        Api::Interactions => Interactions::recognises(body),
    }
}

/// The API a body sent with none named is written in (a dry-run's): the
/// first that recognises it, else the first.
pub(crate) fn sniff(body: &serde_json::Value) -> Api {
    Api::ALL
        .into_iter()
        .find(|&api| recognises(api, body))
        .unwrap_or(Api::ALL[0])
}
