//! The inspector's JSON API, for the page and for scripts (all `GET`,
//! all behind the admin token):
//!
//! | path | what |
//! |---|---|
//! | `/codemode/api/executions?limit=N` | programs, live and recent, newest first (summaries) |
//! | `/codemode/api/executions/{id}` | one program whole: code, every nested call |
//! | `/codemode/api/denials?limit=N` | recent denials and what became of them |
//! | `/codemode/api/totals` | totals since start, and their history |
//! | `/codemode/api/status` | this replica: store, memory, payloads, scopes |
//! | `/codemode/api/events` | live updates (server-sent events) |

use std::sync::Arc;

use http::Response;
use serde_json::json;

use super::events;
use crate::body::ProxyBody;
use crate::config::StoreKind;
use crate::error::ProxyError;
use crate::layer::admin::endpoints::json_response;
use crate::layer::State;
use crate::observe::inspector::Inspector;

/// Items a list returns unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 200;

/// `rest`: the path after `/codemode/api`.
pub(super) fn route(
    state: &State,
    inspector: &Arc<Inspector>,
    rest: &str,
    query: Option<&str>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let limit = query
        .and_then(|q| crate::layer::query::param(q, "limit"))
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(DEFAULT_LIMIT);
    match rest {
        "/executions" => Ok(json_response(&inspector.executions(limit))),
        "/denials" => Ok(json_response(&inspector.recent_denials(limit))),
        "/totals" => Ok(json_response(&inspector.totals())),
        "/status" => Ok(json_response(&status(state, inspector))),
        "/events" => Ok(events::stream(inspector.clone())),
        _ => match rest.strip_prefix("/executions/") {
            Some(id) => inspector
                .execution(id)
                .map(|e| json_response(&e))
                .ok_or_else(|| ProxyError::NoSuchExecution(id.to_owned())),
            None => Err(ProxyError::NotFound(format!(
                "GET /codemode/api{rest}; the inspector's API serves executions, executions/{{id}}, denials, totals, status and events"
            ))),
        },
    }
}

/// This replica as the page introduces it.
fn status(state: &State, inspector: &Inspector) -> serde_json::Value {
    let config = &state.config;
    let (store, note) = match &config.store {
        StoreKind::Memory => ("memory", None),
        StoreKind::Redis { .. } => (
            "redis",
            Some(
                "Executions are shared through Redis, but each replica shows only what it \
                 served: a program resumed on another replica shows there, not here.",
            ),
        ),
    };
    let mut scopes: Vec<&str> = config.catalog.scopes();
    if !scopes.contains(&crate::preset::DEFAULT_SCOPE) {
        scopes.insert(0, crate::preset::DEFAULT_SCOPE);
    }
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "store": store,
        "replica_note": note,
        "runtime": config.runtime.as_str(),
        "sandbox": config.sandbox.as_str(),
        // Workers killed and replaced since start (by reason on /metrics).
        "sandbox_worker_failures": state
            .runs
            .workers()
            .map_or(0, |w| w.failures().iter().sum::<u64>()),
        "default_mode": config.default_mode.as_str(),
        "client_select": matches!(config.client_select, crate::select::ClientSelect::Allow),
        "scopes": scopes,
        "presets": config.catalog.names(),
        "memory": inspector.memory(),
    })
}
