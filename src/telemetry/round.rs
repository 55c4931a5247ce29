//! The `chat {model}` span of an upstream call, from the request that
//! starts it to the end of the response body.

use std::task::Poll;

use http::{Extensions, Request, Response, Uri};
use serde_json::Value;
use tracing::field::Empty;
use tracing::Span;

use super::TARGET;
use crate::body::{Polled, ProxyBody, Watch, Watched};
use crate::error::ProxyError;

/// The `chat {model}` span of one upstream call, carried from the request
/// that starts it to the response (and body) that ends it.
#[derive(Clone, Debug)]
pub(crate) struct Round(Span);

impl Round {
    /// The span for an upstream request to `uri` with `body`, to the
    /// provider traces name `provider`, which names the model in the path
    /// or the body (`model_in_path`); disabled (and nothing read) when no
    /// subscriber wants it.
    pub(crate) fn start(
        provider: &'static str,
        model_in_path: bool,
        uri: &Uri,
        body: &[u8],
    ) -> Round {
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
            match model_named(model_in_path, uri.path(), body) {
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
                let body = crate::body::boxed(Watched::new(body, RoundSpan(Some(self.0.clone()))));
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

/// The model a request names: in its path where its provider names it
/// there, else (or where the path has none: Google's Interactions API, as
/// the other APIs do) in its body.
fn model_named(model_in_path: bool, path: &str, body: &[u8]) -> Option<String> {
    if model_in_path {
        model_in(path).or_else(|| model_of(body))
    } else {
        model_of(body)
    }
}

/// The model a path names: `.../models/{model}:method`.
fn model_in(path: &str) -> Option<String> {
    let (_, rest) = path.rsplit_once("/models/")?;
    let model = rest.split(':').next()?;
    (!model.is_empty()).then(|| model.to_owned())
}

/// The `model` of a request body, read without building the rest.
fn model_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        model: Option<String>,
    }
    serde_json::from_slice::<Head>(body).ok()?.model
}

/// What keeps an upstream body's round span open until the body ends,
/// and marks it failed if the body breaks off.
struct RoundSpan(Option<Span>);

impl<E> Watch<E> for RoundSpan {
    fn around<R>(&mut self, poll: impl FnOnce(&mut Self) -> R) -> R {
        let span = self.0.clone();
        let _entered = span.as_ref().map(Span::enter);
        poll(self)
    }

    fn seen(&mut self, polled: &Polled<E>, ended: bool) {
        if let Poll::Ready(Some(Err(_))) = polled {
            if let Some(span) = self.0.take() {
                span.record("otel.status_code", "error");
                span.record("error.type", "upstream_stream_broken");
            }
        } else if ended {
            self.0 = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_model_is_read_off_the_path() {
        assert_eq!(
            model_in("/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
            Some("gemini-2.5-pro".to_owned())
        );
        assert_eq!(model_in("/v1/chat/completions"), None);
        assert_eq!(model_in("/v1beta/models/:generateContent"), None);
    }

    #[test]
    fn an_interaction_names_its_model_in_the_body_on_a_path_google_serves() {
        let body = br#"{"model":"gemini-3-pro","input":"hi"}"#;
        assert_eq!(
            model_named(true, "/v1beta/interactions", body).as_deref(),
            Some("gemini-3-pro")
        );
        assert_eq!(
            model_named(true, "/v1beta/models/gemini-2.5-pro:generateContent", body).as_deref(),
            Some("gemini-2.5-pro")
        );
        assert_eq!(
            model_named(false, "/v1/chat/completions", body).as_deref(),
            Some("gemini-3-pro")
        );
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
