//! `POST /codemode/dry-run`: what the model would see for a request, on
//! any of the wire APIs, without calling upstream.
//!
//! The dialect is the `dialect` query parameter (an API's name,
//! [`Api::as_str`]) when given; else the provider a header names (an
//! `anthropic-version` header means Messages, `x-goog-api-key` one of
//! Google's APIs, the body telling which); else the body tells (each
//! dialect's `recognises`).

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{HeaderMap, Request, Response};
use serde_json::{json, Value};

use crate::api::Api;
use crate::body::{full, ProxyBody};
use crate::error::ProxyError;
use crate::layer::dialects;
use crate::layer::drivers::stores::RequestStores;
use crate::layer::forward::read_client_body;
use crate::layer::State;
use crate::plan::ToolPlan;
use crate::select::Selection;
use crate::tenant::Tenant;
use crate::turn::Dialect;
use crate::turn::WireRequest;

/// A dry-run's request in `api`, rewritten as its dialect would send it,
/// and its plan (the dispatch arm of `crate::layer::dialects`' table).
async fn rewritten_in(
    api: Api,
    state: &State,
    selection: &Selection,
    tenant: Tenant,
    bytes: &[u8],
) -> Result<(Arc<ToolPlan>, Value), ProxyError> {
    match api {
        Api::Chat => rewritten::<crate::chat::Chat>(state, selection, tenant, bytes).await,
        Api::Responses => {
            rewritten::<crate::responses::Responses>(state, selection, tenant, bytes).await
        }
        Api::Messages => {
            rewritten::<crate::messages::Messages>(state, selection, tenant, bytes).await
        }
        Api::Gemini => rewritten::<crate::gemini::Gemini>(state, selection, tenant, bytes).await,
        Api::Interactions => {
            rewritten::<crate::interactions::Interactions>(state, selection, tenant, bytes).await
        }
    }
}

/// `POST /codemode/dry-run`.
pub(crate) async fn dry_run(
    state: &State,
    path_preset: Option<&str>,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let selection = state.select(req.headers(), path_preset)?;
    let (parts, body) = req.into_parts();
    let bytes = read_client_body(&parts.headers, body, state.config.max_body_bytes).await?;
    let api = pick(parts.uri.query(), &parts.headers, &bytes)?;
    // What this client's own stored denials would add; nobody else's.
    let tenant = Tenant::of(&parts.headers, &selection.scope);
    let (plan, request) = rewritten_in(api, state, &selection, tenant, &bytes).await?;
    let sdk = plan
        .sections
        .iter()
        .find(|s| s.id == crate::sections::SDK_ID)
        .map(|s| s.text.as_str());
    let body = json!({
        "dialect": api.as_str(),
        "scope": selection.scope,
        "preset": selection.preset.name,
        "mode": selection.mode.as_str(),
        "sdk_setting": selection.preset.sdk.as_str(),
        "sdk_rendering": plan.sdk.map(|r| r.as_str()),
        "sections": plan.sections,
        "sdk": sdk,
        "wire_tools": wire_tools(&request),
        "request": request,
    });
    let mut res = Response::new(full(body.to_string()));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(res)
}

/// The request rewritten as dialect `D` would send it, and its plan.
pub(crate) async fn rewritten<D: Dialect>(
    state: &State,
    selection: &Selection,
    tenant: Tenant,
    bytes: &[u8],
) -> Result<(Arc<ToolPlan>, Value), ProxyError> {
    // A dry-run names no route; the API's first is the one it reads as.
    let mut request = D::parse(bytes, D::ROUTES[0].path)?;
    let plan = state.plans.get_or_build_for(
        D::TOOLS,
        D::declared_tools(&request)?.as_deref(),
        &selection.preset,
        selection.mode,
        state.config.runtime,
    )?;
    plan.one_reading(|| request.repeated_key())?;
    let stores = RequestStores::new(state, tenant);
    stores
        .read_ahead(|stores| {
            let _ = request.clone().rewrite(&plan, &stores.splices);
        })
        .await?;
    request.rewrite(&plan, &stores.splices)?;
    let request = serde_json::from_slice(&request.to_bytes())
        .map_err(|e| ProxyError::InvalidRequest(e.to_string()))?;
    Ok((plan, request))
}

/// The dialect of a dry-run: the `dialect` parameter, else the API a
/// header names (`anthropic-version`: Messages), else the body's shape.
fn pick(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Result<Api, ProxyError> {
    if let Some(named) = query.and_then(|q| crate::layer::query::param(q, "dialect")) {
        return Api::ALL
            .into_iter()
            .find(|a| a.as_str() == named)
            .ok_or_else(|| {
                let names: Vec<&str> = Api::ALL.iter().map(|a| a.as_str()).collect();
                ProxyError::InvalidRequest(format!(
                    "dialect `{named}` is not one of {}; name one, or leave the parameter out \
                     and the proxy tells the dialect from the body",
                    names.join(", ")
                ))
            });
    }
    // A body that is not JSON is refused by the dialect's own reading.
    let body = serde_json::from_slice(body).unwrap_or(Value::Null);
    if let Some(claimed) = dialects::claiming(headers, None) {
        // A provider may serve more than one API (Google: the Gemini API
        // and the Interactions API, one key header): the body tells which.
        let provider = dialects::provider(claimed);
        let theirs = Api::ALL.into_iter().find(|&api| {
            std::ptr::eq(dialects::provider(api), provider) && dialects::recognises(api, &body)
        });
        return Ok(theirs.unwrap_or(claimed));
    }
    Ok(dialects::sniff(&body))
}

/// The tools on the wire, by name and type, in any dialect's shape (a
/// Gemini `Tool` lists its function declarations, each named, and names
/// the provider's own tools by their field).
fn wire_tools(request: &Value) -> Vec<Value> {
    let Some(tools) = request["tools"].as_array() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tools {
        if let Some(group) = t
            .as_object()
            .filter(|t| t.get("type").is_none() && t.get("name").is_none())
        {
            for (key, value) in group {
                match value.as_array() {
                    Some(decls)
                        if key == "functionDeclarations" || key == "function_declarations" =>
                    {
                        out.extend(
                            decls
                                .iter()
                                .map(|d| json!({"name": d["name"], "type": "function"})),
                        );
                    }
                    _ => out.push(json!({"name": key, "type": key})),
                }
            }
            continue;
        }
        let name = t["function"]["name"]
            .as_str()
            .or_else(|| t["name"].as_str())
            .or_else(|| t["type"].as_str())
            .unwrap_or("");
        let kind = t["type"].as_str().unwrap_or("custom");
        out.push(json!({"name": name, "type": kind}));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::layer::dialects::sniff;

    #[test]
    fn the_body_tells_the_dialect() {
        let chat = json!({"model": "m", "messages": [], "tools": [{"type": "function", "function": {"name": "read"}}]});
        let responses = json!({"model": "m", "input": "hi"});
        let messages = json!({"model": "m", "max_tokens": 1, "messages": [], "system": "x"});
        let messages_tools =
            json!({"model": "m", "messages": [], "tools": [{"name": "Read", "input_schema": {}}]});
        assert_eq!(sniff(&chat), Api::Chat);
        assert_eq!(sniff(&responses), Api::Responses);
        assert_eq!(sniff(&messages), Api::Messages);
        assert_eq!(sniff(&messages_tools), Api::Messages);
        let interactions = json!({"model": "m", "input": "hi", "system_instruction": "x"});
        let continued = json!({"model": "m", "input": [], "previous_interaction_id": "v1_a"});
        assert_eq!(sniff(&interactions), Api::Interactions);
        assert_eq!(sniff(&continued), Api::Interactions);
    }

    #[test]
    fn the_parameter_wins_and_a_wrong_one_says_what_to_send() {
        let h = HeaderMap::new();
        let chat = br#"{"messages": []}"#;
        assert_eq!(
            pick(Some("dialect=messages"), &h, chat).unwrap(),
            Api::Messages
        );
        assert_eq!(pick(Some("dialect=gemini"), &h, chat).unwrap(), Api::Gemini);
        let e = pick(Some("dialect=palm"), &h, chat).unwrap_err();
        assert!(e.to_string().contains("chat, responses, messages, gemini"));
        let gemini = br#"{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}"#;
        assert_eq!(pick(None, &h, gemini).unwrap(), Api::Gemini);
        let mut google = HeaderMap::new();
        google.insert("x-goog-api-key", HeaderValue::from_static("k"));
        assert_eq!(pick(None, &google, chat).unwrap(), Api::Gemini);
        assert_eq!(pick(None, &google, gemini).unwrap(), Api::Gemini);
        // Google's SDKs send their key header to both of Google's APIs.
        let interactions = br#"{"model": "m", "input": "hi", "system_instruction": "x"}"#;
        assert_eq!(
            pick(None, &google, interactions).unwrap(),
            Api::Interactions
        );
        let mut anthropic = HeaderMap::new();
        anthropic.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        assert_eq!(pick(None, &anthropic, chat).unwrap(), Api::Messages);
    }
}
