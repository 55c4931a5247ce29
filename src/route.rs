//! Which API routes the proxy judges, and how a request path is matched to
//! one (docs/security.md, "one reading of a request").
//!
//! A provider may serve a route under spellings the proxy would not match
//! byte for byte: a trailing slash, `//`, `.` and `..` segments,
//! percent-encoding, `;params`, another case. [`Routes::classify`] reads a path
//! the way a lenient provider might; a request is intercepted only on the
//! canonical spelling, and any other spelling of a judged route is refused,
//! so nothing reaches the provider unjudged on such a route.
//!
//! The routes are data ([`Route`]), listed by each dialect in its folder: a
//! route the proxy does not intercept yet is listed with no endpoint, so its
//! canonical path passes through while its other spellings are already
//! refused.

use http::Method;

pub use crate::api::{Endpoint, Paths, Route};

use crate::api::Api;
use crate::error::ProxyError;
use crate::select::split_preset_path;

/// A model API the proxy does not judge, whose requests declare tools or
/// whose answers carry a model's calls: refused in a mode that can deny
/// (docs/security.md, "Routes"), passed through in native mode. Under the
/// lock every route off its provider's open list is refused; these say
/// why in the refusal.
#[derive(Debug)]
pub struct SideRoute {
    /// The methods it covers; empty for every method.
    pub methods: &'static [&'static str],
    /// Its path as segments (see [`Paths`]).
    pub pattern: &'static [&'static str],
    /// What it is, as an error message names it.
    pub what: &'static str,
}

/// Every side route, by what its answers can hold.
pub const SIDE_ROUTES: &[SideRoute] = &[
    SideRoute {
        methods: &["POST"],
        pattern: &["v1", "batches"],
        what: "the Batch API (its requests run model turns the proxy never sees)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1", "messages", "batches", "**"],
        what: "the Message Batches API (its requests declare tools, its results hold the model's calls)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1", "realtime", "**"],
        what: "the Realtime API (its sessions declare tools and stream calls the proxy cannot judge)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1", "assistants", "**"],
        what: "the Assistants API (assistants declare tools the proxy never sees)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1", "threads", "**"],
        what: "the Assistants API's threads and runs (runs hand out the model's calls)",
    },
    SideRoute {
        methods: &["GET"],
        pattern: &["v1", "chat", "completions"],
        what: "the list of stored chat completions (they hold the model's calls as it made them)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1", "chat", "completions", "*", "**"],
        what: "a stored chat completion (it holds the model's calls as it made them)",
    },
    SideRoute {
        methods: &["GET"],
        pattern: &["v1", "responses", "*", "**"],
        what: "retrieving a response (a background or stored response holds the model's calls as it made them)",
    },
    SideRoute {
        methods: &["POST"],
        pattern: &["v1", "responses", "*", "cancel"],
        what: "cancelling a response (the answer holds the model's calls as it made them)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1", "conversations", "**"],
        what: "a conversation the provider keeps (its items hold the model's calls as it made them)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1beta|v1alpha|v1", "cachedcontents", "**"],
        what: "Gemini's cached contents (they declare tools the proxy never sees)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1beta|v1alpha", "batches", "**"],
        what: "Gemini's Batch API (its requests run model turns the proxy never sees)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1beta|v1alpha|v1", "interactions", "**"],
        what: "Google's Interactions API (its turns declare tools and hand out calls the proxy never sees)",
    },
    SideRoute {
        methods: &[],
        pattern: &["v1beta|v1alpha|v1", "tunedmodels", "**"],
        what: "Gemini's tuned models (their turns declare tools and hand out calls the proxy never sees)",
    },
];

/// The side route `method` and `segments` (a path as [`normalise`] reads
/// it) fall on.
pub fn side_route(method: &Method, segments: &[String]) -> Option<&'static SideRoute> {
    SIDE_ROUTES
        .iter()
        .find(|r| fits(r.methods, r.pattern, method, segments))
}

impl Paths {
    /// Whether a request of `method` on `segments` (a path as
    /// [`normalise`] reads it) is one of these.
    pub fn fits(&self, method: &Method, segments: &[String]) -> bool {
        fits(self.methods, self.pattern, method, segments)
    }
}

fn fits(methods: &[&str], pattern: &[&str], method: &Method, segments: &[String]) -> bool {
    (methods.is_empty() || methods.contains(&method.as_str())) && matches(pattern, segments)
}

/// Whether `segments` fit `pattern` (see [`Paths`]).
fn matches(pattern: &[&str], segments: &[String]) -> bool {
    match (pattern.split_first(), segments.split_first()) {
        (Some((&"**", _)), _) => true,
        (None, None) => true,
        (Some((&p, pattern)), Some((s, segments))) if p.split('|').any(|p| fits_one(p, s)) => {
            matches(pattern, segments)
        }
        _ => false,
    }
}

/// Whether normalised segment `s` is pattern segment `p`: `*`, `{name}`
/// (one without a `:`, which starts a Gemini method), `*:name` (a name,
/// then `:name`), or the same text in any case.
fn fits_one(p: &str, s: &str) -> bool {
    if p == "{name}" {
        return !s.contains(':');
    }
    match p.strip_prefix('*') {
        Some("") => true,
        Some(method) => {
            s.len() > method.len()
                && s.is_char_boundary(s.len() - method.len())
                && s[s.len() - method.len()..].eq_ignore_ascii_case(method)
        }
        None => p.eq_ignore_ascii_case(s),
    }
}

/// Whether a request passed through may be sent with the operator's key
/// (`CODEMODE_UPSTREAM_API_KEY`, `CODEMODE_ANTHROPIC_API_KEY`): only
/// reading the model list, which agents do at start and which reveals no
/// one's data. Every other pass-through route (files, batches, fine-tuning,
/// stored completions, deletes, embeddings...) is unjudged, so it goes
/// with the caller's own credential (docs/security.md, "Whose key pays").
pub fn spends_operator_key(method: &Method, segments: &[String]) -> bool {
    let listing = matches!(
        segments.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ["v1" | "v1beta" | "v1alpha", "models"] | ["v1" | "v1beta" | "v1alpha", "models", _]
    );
    listing && (method == Method::GET || method == Method::HEAD)
}

/// Every judged route, each dialect's as its folder lists them (the layer
/// collects them once).
#[derive(Debug)]
pub struct Routes {
    all: Vec<&'static Route>,
}

impl Routes {
    /// The routes of every dialect in `tables`.
    pub fn new(tables: impl IntoIterator<Item = &'static [Route]>) -> Routes {
        Routes {
            all: tables.into_iter().flatten().collect(),
        }
    }

    /// The judged route `path` is the canonical spelling of.
    fn canonical(&self, path: &str) -> Option<&'static Route> {
        self.all.iter().copied().find(|r| canonical(r.path, path))
    }

    /// Whether `path` lies under the root of an API a route is on (`/v1`,
    /// ...): a request the proxy forwards to a provider.
    pub fn under_api_root(&self, path: &str) -> bool {
        let root = path.split('/').nth(1).unwrap_or("");
        path.starts_with('/')
            && !root.is_empty()
            && self
                .all
                .iter()
                .any(|r| r.path.split('/').nth(1) == Some(root))
    }

    /// Whether `path` is the canonical path of a judged route, where the
    /// methods passed through (`GET`, `HEAD`, `OPTIONS`) carry no body.
    pub fn is_judged_path(&self, path: &str) -> bool {
        self.canonical(path).is_some()
    }

    /// The API of the judged route `path` names or lies under (an error's
    /// shape is its clients'), with any prefix before it.
    pub fn api_under(&self, path: &str) -> Option<Api> {
        // Asked of every request (its errors' shape): a route without a
        // model's name is found as text, without splitting the path.
        let path = path.trim_end_matches('/');
        self.all.iter().find_map(|r| {
            let under = if r.path.contains(MODEL) {
                // Every window of the path's segments, without allocating:
                // this runs on every request the proxy serves.
                let want = r.path.split('/').skip(1);
                let n = want.clone().count();
                let total = path.split('/').count();
                (0..=total.saturating_sub(n)).any(|at| {
                    path.split('/')
                        .skip(at)
                        .zip(want.clone())
                        .take_while(|(s, p)| segment(p, s, false))
                        .count()
                        == n
                })
            } else {
                path.ends_with(r.path)
                    || path
                        .find(r.path)
                        .is_some_and(|at| path[at + r.path.len()..].starts_with('/'))
            };
            r.endpoint.filter(|_| under).map(|e| e.api)
        })
    }

    /// Classifies a request: intercept it, refuse it (a non-canonical
    /// spelling of a judged route is a 400; another method on an
    /// intercepted route a 405), or handle it as any other path.
    pub fn classify<'a>(&self, method: &Method, path: &'a str) -> Result<Routed<'a>, ProxyError> {
        let (preset, rest) = match split_preset_path(path) {
            Some((name, rest)) => (Some(name), rest),
            None => (None, path),
        };
        let exact = self
            .canonical(rest)
            .filter(|_| preset.is_none_or(clean_segment));
        if let Some(route) = exact {
            return match route.endpoint {
                Some(endpoint) if method == Method::POST => Ok(Routed::Intercept {
                    endpoint,
                    path: rest,
                    preset,
                }),
                Some(_) if !route.passes.contains(&method.as_str()) => {
                    Err(ProxyError::RouteMethod {
                        method: method.to_string(),
                        path: rest.to_owned(),
                    })
                }
                _ => Ok(Routed::Other),
            };
        }
        // The proxy forwards what follows its own `/preset/NAME` split; a
        // provider sees that. Both readings are checked.
        let whole = normalise(path);
        let mut readings = vec![whole.as_slice()];
        if whole.first().is_some_and(|s| s == "preset") && whole.len() >= 2 {
            readings.push(&whole[2..]);
        }
        let forwarded = preset.map(|_| normalise(rest));
        readings.extend(forwarded.as_deref());
        let hit = self
            .all
            .iter()
            .find(|r| readings.iter().any(|segments| spells(r, segments)));
        match hit {
            Some(route) => Err(ProxyError::NonCanonicalPath {
                path: shorten(path),
                canonical: match preset {
                    Some(_) => format!("{0} (or /preset/NAME{0})", route.path),
                    None => route.path.to_owned(),
                },
            }),
            None => Ok(Routed::Other),
        }
    }

    /// The allowed methods of the judged route at canonical `path`, for
    /// `Allow`.
    pub fn allowed_methods(&self, path: &str) -> Option<String> {
        let route = self.canonical(path)?;
        let mut methods = vec!["POST"];
        methods.extend(route.passes);
        Some(methods.join(", "))
    }
}

/// What to do with a request, by method and path.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed<'a> {
    /// The canonical spelling of an intercepted route, with the preset named
    /// by a `/preset/NAME` prefix.
    Intercept {
        /// The handler.
        endpoint: Endpoint,
        /// The request's path after any preset prefix: a route's canonical
        /// spelling, its upstream path too.
        path: &'a str,
        /// The preset of the path prefix.
        preset: Option<&'a str>,
    },
    /// Not a judged route, or one passed through: handled as any other path.
    Other,
}

/// Whether `path` is `pattern` byte for byte, its `{model}` a model's name.
fn canonical(pattern: &str, path: &str) -> bool {
    let mut want = pattern.split('/');
    let mut got = path.split('/');
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some(p), Some(s)) if segment(p, s, false) => {}
            _ => return false,
        }
    }
}

/// Whether path segment `s` is pattern segment `p`: equal, or around a
/// `{model}` the same with a model's name in its place. `lenient` compares
/// a normalised segment (folded case, any name or none).
fn segment(p: &str, s: &str, lenient: bool) -> bool {
    let Some((before, after)) = p.split_once(MODEL) else {
        return if lenient { fold(p) == s } else { p == s };
    };
    let (before, after): (std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>) = if lenient {
        (fold(before).into(), fold(after).into())
    } else {
        (before.into(), after.into())
    };
    let Some(name) = s
        .strip_prefix(before.as_ref())
        .and_then(|r| r.strip_suffix(after.as_ref()))
    else {
        return false;
    };
    // Leniently, no name at all is a spelling too: a provider may fill in
    // a default.
    lenient
        || (!name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')))
}

/// What stands for a model's name in a route's path.
const MODEL: &str = "{model}";

/// Whether normalised `segments` name `route`.
fn spells(route: &Route, segments: &[String]) -> bool {
    let want: Vec<&str> = route.path.split('/').filter(|s| !s.is_empty()).collect();
    let fits = |got: &[String], want: &[&str]| {
        got.len() == want.len() && got.iter().zip(want).all(|(s, p)| segment(p, s, true))
    };
    if fits(segments, &want) {
        return true;
    }
    // Without the version segment the provider's base path already carries.
    let tail = &want[1..];
    route.any_prefix
        && segments.len() >= tail.len()
        && fits(&segments[segments.len() - tail.len()..], tail)
}

/// A path segment a preset name may be spelled with, unambiguously.
fn clean_segment(name: &str) -> bool {
    !matches!(name, "." | "..")
        && !name
            .bytes()
            .any(|b| matches!(b, b'%' | b';' | b'\\') || b.is_ascii_whitespace() || b < 0x20)
}

/// The segments of `path` as a lenient server might read them: percent
/// decoding (repeated, for servers that decode twice), `\` as `/`, anything
/// after a decoded `?` or `#` dropped, `;params` dropped, empty and `.`
/// segments dropped, `..` applied, surrounding spaces and trailing dots
/// trimmed (as Windows servers do), and case folded.
pub fn normalise(path: &str) -> Vec<String> {
    let mut bytes = path.as_bytes().to_vec();
    for _ in 0..4 {
        match percent_decode(&bytes) {
            Some(decoded) => bytes = decoded,
            None => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = text.split(['?', '#']).next().unwrap_or("");
    let mut out: Vec<String> = Vec::new();
    for raw in text.split(['/', '\\']) {
        let segment = raw.split(';').next().unwrap_or("").trim();
        match segment {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => {
                let s = s.trim_end_matches(['.', ' ']);
                if !s.is_empty() {
                    out.push(fold(s));
                }
            }
        }
    }
    out
}

/// Lower case, including the non-ASCII letters that fold to ASCII ones
/// (`ſ` to `s`, the Kelvin sign to `k`), as Unicode-aware matchers do.
fn fold(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'ſ' => 's',
            '\u{212a}' => 'k',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// `bytes` with `%XX` sequences decoded; `None` when there are none.
fn percent_decode(bytes: &[u8]) -> Option<Vec<u8>> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                changed = true;
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    changed.then_some(out)
}

/// The client's path for a message, cut to a readable length.
pub(crate) fn shorten(path: &str) -> String {
    const SHOWN: usize = 200;
    match path.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}...", &path[..end]),
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(method: &str, path: &str) -> Result<Routed<'static>, &'static str> {
        let method: Method = method.parse().unwrap();
        let path: &'static str = Box::leak(path.to_owned().into_boxed_str());
        table().classify(&method, path).map_err(|e| e.code())
    }

    /// The routes the layer serves.
    fn table() -> Routes {
        Routes::new([
            crate::chat::provider::ROUTES,
            crate::responses::provider::ROUTES,
            crate::messages::provider::ROUTES,
        ])
    }

    /// A route whose path names a model, as Gemini's do.
    const MODEL_ROUTES: &[Route] = &[Route {
        path: "/v1beta/models/{model}:generateContent",
        endpoint: Some(Endpoint::turn(Api::Chat)),
        passes: &["HEAD", "OPTIONS"],
        any_prefix: true,
    }];

    #[test]
    fn a_route_naming_a_model_is_intercepted_on_its_canonical_spelling_only() {
        let routes = Routes::new([MODEL_ROUTES]);
        let at = |method: &str, path: &'static str| {
            routes
                .classify(&method.parse().unwrap(), path)
                .map_err(|e| e.code())
        };
        for path in [
            "/v1beta/models/gemini-2.5-flash:generateContent",
            "/v1beta/models/gemini_3.pro-preview:generateContent",
        ] {
            assert_eq!(
                at("POST", path),
                Ok(Routed::Intercept {
                    endpoint: Endpoint::turn(Api::Chat),
                    path,
                    preset: None
                })
            );
            assert_eq!(at("PUT", path), Err("method_not_allowed"));
            assert_eq!(at("HEAD", path), Ok(Routed::Other));
            assert!(routes.is_judged_path(path));
        }
        for path in [
            "/v1beta/models/:generateContent",
            "/v1beta/models/gemini%2D2:generateContent",
            "/v1beta/models/gemini%3AgenerateContent",
            "/v1beta/models/Gemini:GenerateContent",
            "/v1beta/models/gemini:generateContent/",
            "/v1beta//models/gemini:generateContent",
            "/v1/projects/p/locations/l/publishers/google/models/gemini:generateContent",
        ] {
            assert_eq!(at("POST", path), Err("non_canonical_path"), "{path}");
        }
        for path in [
            "/v1beta/models/gemini:streamGenerateContent",
            "/v1beta/models/gemini",
            "/v1beta/models/a/b:generateContent",
            "/v1beta/models",
        ] {
            assert_eq!(at("POST", path), Ok(Routed::Other), "{path}");
        }
        assert_eq!(
            routes
                .allowed_methods("/v1beta/models/g:generateContent")
                .as_deref(),
            Some("POST, HEAD, OPTIONS")
        );
        assert_eq!(
            routes.api_under("/proxy/v1beta/models/g:generateContent"),
            Some(Api::Chat)
        );
        assert_eq!(routes.api_under("/v1beta/models/g:countTokens"), None);
    }

    #[test]
    fn canonical_chat_posts_are_intercepted_with_their_preset() {
        assert_eq!(
            code("POST", "/v1/chat/completions"),
            Ok(Routed::Intercept {
                endpoint: Endpoint::turn(Api::Chat),
                path: "/v1/chat/completions",
                preset: None
            })
        );
        assert_eq!(
            code("POST", "/preset/code/v1/chat/completions"),
            Ok(Routed::Intercept {
                endpoint: Endpoint::turn(Api::Chat),
                path: "/v1/chat/completions",
                preset: Some("code")
            })
        );
    }

    #[test]
    fn other_spellings_of_judged_routes_are_refused() {
        let variants = [
            "/v1/chat/completions/",
            "/v1//chat/completions",
            "/v1/chat//completions",
            "/v1/chat/%63ompletions",
            "/v1/chat/%2563ompletions",
            "/v1/./chat/completions",
            "/v1/x/../chat/completions",
            "/v1/chat/completions;x=1",
            "/v1;x/chat/completions",
            "/V1/Chat/Completions",
            "/v1/chat/completions.",
            "/v1/chat%2Fcompletions",
            "/v1\\chat\\completions",
            "/v1/chat/completion%C5%BF",
            "/v1/openai/deployments/gpt/chat/completions",
            "/chat/completions",
            "/v1/responses/",
            "/v1/Responses",
            "/v1/messages/",
            "/v1/messages/count_tokens/",
            "/v1/MESSAGES",
        ];
        for v in variants {
            for path in [v.to_owned(), format!("/preset/code{v}")] {
                for method in ["POST", "GET", "PUT"] {
                    assert_eq!(
                        code(method, &path),
                        Err("non_canonical_path"),
                        "{method} {path}"
                    );
                }
            }
        }
        for path in [
            "/preset/code//v1/chat/completions",
            "/preset/co%64e/v1/chat/completions",
            "/preset/a%2Fb/v1/chat/completions",
            "/preset/code;x/v1/chat/completions",
            "/preset/./v1/chat/completions",
            "/PRESET/code/v1/chat/completions",
        ] {
            assert_eq!(code("POST", path), Err("non_canonical_path"), "{path}");
        }
    }

    #[test]
    fn other_methods_on_an_intercepted_route_are_405_except_reads() {
        for path in ["/v1/chat/completions", "/preset/code/v1/chat/completions"] {
            for method in ["PUT", "PATCH", "DELETE", "TRACE", "PROPFIND"] {
                assert_eq!(code(method, path), Err("method_not_allowed"), "{method}");
            }
            for method in ["GET", "HEAD", "OPTIONS"] {
                assert_eq!(code(method, path), Ok(Routed::Other), "{method}");
            }
        }
        assert_eq!(
            table().allowed_methods("/v1/chat/completions").as_deref(),
            Some("POST, GET, HEAD, OPTIONS")
        );
    }

    #[test]
    fn canonical_future_routes_and_other_paths_pass() {
        assert_eq!(
            code("POST", "/v1/responses"),
            Ok(Routed::Intercept {
                endpoint: Endpoint::turn(Api::Responses),
                path: "/v1/responses",
                preset: None
            })
        );
        for (path, endpoint) in [
            ("/v1/messages", Endpoint::turn(Api::Messages)),
            ("/v1/messages/count_tokens", Endpoint::count(Api::Messages)),
        ] {
            assert_eq!(
                code("POST", path),
                Ok(Routed::Intercept {
                    endpoint,
                    path,
                    preset: None
                })
            );
        }
        for (method, path) in [
            ("GET", "/v1/responses/resp_1"),
            ("GET", "/v1/models"),
            ("GET", "/v1/models/meta-llama%2FLlama-3"),
            ("GET", "/v1/chat/completions/chatcmpl-1"),
            ("GET", "/v1/chat/completions/chatcmpl-1/messages"),
            ("POST", "/v1/threads/t1/messages"),
            ("POST", "/v1/completions"),
            ("GET", "/healthz"),
            ("POST", "/codemode/dry-run"),
        ] {
            assert_eq!(code(method, path), Ok(Routed::Other), "{method} {path}");
        }
    }

    #[test]
    fn side_routes_are_found_by_method_and_any_spelling() {
        let on = |method: &str, path: &str| {
            side_route(&method.parse().unwrap(), &normalise(path))
                .map(|r| r.what.split(' ').nth(1).unwrap())
        };
        for (method, path) in [
            ("POST", "/v1/batches"),
            ("POST", "/v1/messages/batches"),
            ("GET", "/v1/messages/batches/msgbatch_1/results"),
            ("POST", "/v1/realtime/client_secrets"),
            ("POST", "/v1/realtime/sessions"),
            ("POST", "/v1/realtime/calls"),
            ("GET", "/v1/realtime"),
            ("POST", "/v1/assistants"),
            ("POST", "/v1/threads/t_1/runs"),
            ("POST", "/v1/threads/runs"),
            ("GET", "/v1/chat/completions"),
            ("GET", "/v1/chat/completions/chatcmpl-1"),
            ("GET", "/v1/chat/completions/chatcmpl-1/messages"),
            ("GET", "/v1/responses/resp_1"),
            ("POST", "/v1/responses/resp_1/cancel"),
            ("GET", "/v1/conversations/conv_1/items"),
            ("GET", "/v1//Threads/t_1/runs/"),
            ("POST", "/v1/%62atches"),
            ("GET", "/v1/responses/resp_1/input_items"),
            ("POST", "/v1/conversations"),
            // Written in camelCase, matched on the folded path.
            ("GET", "/v1beta/cachedContents/c_1"),
            ("PATCH", "/v1beta/cachedContents/c_1"),
            ("DELETE", "/v1beta/cachedcontents/c_1"),
            ("POST", "/v1/interactions"),
            ("POST", "/v1beta/interactions"),
            ("PUT", "/v1beta/tunedModels/t:generateContent"),
        ] {
            assert!(on(method, path).is_some(), "{method} {path}");
        }
        for (method, path) in [
            ("GET", "/v1/batches/batch_1"),
            ("GET", "/v1/models"),
            ("POST", "/v1/files"),
            ("DELETE", "/v1/responses/resp_1"),
            ("HEAD", "/v1/chat/completions"),
            ("POST", "/v1/embeddings"),
            ("POST", "/batches"),
        ] {
            assert_eq!(on(method, path), None, "{method} {path}");
        }
    }

    #[test]
    fn a_pattern_segment_takes_any_case_alternatives_and_a_method_suffix() {
        let open = Paths {
            methods: &["POST"],
            pattern: &["v1beta|v1", "models", "*:embedContent"],
        };
        let post = Method::POST;
        for path in [
            "/v1beta/models/text-embedding-004:embedContent",
            "/v1/models/e:EMBEDCONTENT",
        ] {
            assert!(open.fits(&post, &normalise(path)), "{path}");
        }
        for path in [
            "/v1beta/models/:embedContent",
            "/v1beta/models/e:embedContents",
            "/v1alpha/models/e:embedContent",
            "/v1beta/models/e:embedContent/x",
            "/v1beta/models",
        ] {
            assert!(!open.fits(&post, &normalise(path)), "{path}");
        }
        assert!(!open.fits(&Method::GET, &normalise("/v1/models/e:embedContent")));
    }

    #[test]
    fn an_error_takes_the_shape_of_the_route_its_path_lies_under() {
        let routes = table();
        for (path, api) in [
            ("/v1/chat/completions", Some(Api::Chat)),
            ("/gw/v1/chat/completions/", Some(Api::Chat)),
            ("/v1/messages/count_tokens", Some(Api::Messages)),
            ("/v1/messages/batches/b_1", Some(Api::Messages)),
            ("/v1/responses/resp_1", Some(Api::Responses)),
            ("/v1/chat/completionsx", None),
            ("/v1/models", None),
        ] {
            assert_eq!(routes.api_under(path), api, "{path}");
        }
    }

    #[test]
    fn the_roots_of_the_routes_are_the_apis_forwarded() {
        let routes = table();
        for path in ["/v1", "/v1/", "/v1/models", "/v1/files/f-1"] {
            assert!(routes.under_api_root(path), "{path}");
        }
        for path in [
            "/",
            "",
            "/v1x/models",
            "/v2/models",
            "/codemode/presets",
            "v1/models",
        ] {
            assert!(!routes.under_api_root(path), "{path}");
        }
        assert!(Routes::new([MODEL_ROUTES]).under_api_root("/v1beta/models"));
    }

    #[test]
    fn normalising_reads_a_path_leniently() {
        assert_eq!(
            normalise("/a//b/./c/../D;x/%45%2f%46?q#f/"),
            vec!["a", "b", "d", "e", "f"]
        );
        assert_eq!(normalise("/../.."), Vec::<String>::new());
        assert_eq!(normalise("/%zz/%4"), vec!["%zz", "%4"]);
    }
}
