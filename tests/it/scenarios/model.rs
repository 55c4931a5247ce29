//! The dialect-neutral side of the table: what the model says in a round,
//! what the client ends up holding, what the provider was sent, and what a
//! scenario expects of them.

use serde_json::Value;

/// The five wire dialects a scenario runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Chat,
    Responses,
    Messages,
    Gemini,
    /// Google's Interactions API (`/v1/interactions`, steps schema), its
    /// client stateless (`store: false`, the whole history each time).
    Interactions,
    /// The same API with a stateful client: `store` on (the default), a
    /// continuation names the interaction it answers
    /// (`previous_interaction_id`) and sends only its results.
    InteractionsStored,
}

impl Dialect {
    /// Whether this is the Interactions API, whatever its client keeps.
    pub fn interactions(self) -> bool {
        matches!(self, Dialect::Interactions | Dialect::InteractionsStored)
    }

    /// The proxy route and query of a request (and the provider's path:
    /// under its `/v1`, or under its host for Gemini and Interactions).
    /// Gemini names the model and whether it streams in the path, not the
    /// body; Interactions, as the SDKs call it by default, under `/v1`.
    pub fn path(self, stream: bool) -> &'static str {
        match self {
            Dialect::Chat => "/v1/chat/completions",
            Dialect::Responses => "/v1/responses",
            Dialect::Messages => "/v1/messages",
            Dialect::Gemini if stream => "/v1beta/models/gemini-test:streamGenerateContent?alt=sse",
            Dialect::Gemini => "/v1beta/models/gemini-test:generateContent",
            Dialect::Interactions | Dialect::InteractionsStored => "/v1/interactions",
        }
    }

    /// Whether a request the provider got on `path` (no query) is one of
    /// the dialect's model requests.
    pub fn is_route(self, path: &str) -> bool {
        [false, true]
            .iter()
            .any(|s| self.path(*s).split('?').next() == Some(path))
    }

    /// Headers a client of this dialect sends.
    pub fn headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Dialect::Messages => &[
                ("anthropic-version", "2023-06-01"),
                ("x-api-key", "sk-ant-test"),
            ],
            Dialect::Gemini | Dialect::Interactions | Dialect::InteractionsStored => {
                &[("x-goog-api-key", "gemini-test-key")]
            }
            _ => &[("authorization", "Bearer sk-test")],
        }
    }

    /// Whether the proxy's own errors take Anthropic's shape here.
    pub fn anthropic(self) -> bool {
        self == Dialect::Messages
    }

    /// Whether a withheld call's answer is flagged as an error on the wire
    /// (Anthropic's `is_error`, Gemini's `response.error`, the
    /// Interactions API's `is_error`).
    pub fn flags_denials(self) -> bool {
        matches!(self, Dialect::Messages | Dialect::Gemini) || self.interactions()
    }
}

/// One call the model makes: a name and its arguments as raw text.
#[derive(Clone, Debug)]
pub struct Call {
    pub name: String,
    pub args: String,
}

pub fn call(name: &str, args: &str) -> Call {
    Call {
        name: name.into(),
        args: args.into(),
    }
}

/// The model's turn in one round.
#[derive(Clone, Debug, Default)]
pub struct Turn {
    pub text: Option<String>,
    pub calls: Vec<Call>,
    /// Input and output tokens of this round.
    pub usage: (u64, u64),
}

pub fn turn(text: Option<&str>, calls: Vec<Call>, usage: (u64, u64)) -> Turn {
    Turn {
        text: text.map(str::to_owned),
        calls,
        usage,
    }
}

/// What the provider answers one request with.
#[derive(Clone, Debug)]
pub enum Reply {
    /// The model's turn, as the dialect's JSON or event stream (whichever
    /// the request asked for).
    Turn(Turn),
    /// An error status with a body in the dialect's error shape.
    Status {
        status: u16,
        retry_after: Option<&'static str>,
    },
    /// A 200 with this body, whatever was asked for.
    Body {
        content_type: &'static str,
        body: &'static str,
    },
    /// The head and part of the answer, then the connection closes (a JSON
    /// body shorter than its content-length; a stream without its end).
    CutShort,
    /// The head and part of the answer, then silence.
    Stall,
}

impl Reply {
    /// Whether only the raw-socket provider can send it.
    pub fn needs_raw_socket(&self) -> bool {
        matches!(self, Reply::CutShort | Reply::Stall)
    }
}

/// A call as the client received it.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewCall {
    /// The id the client answers it under (`call_id` on Responses).
    pub id: String,
    pub name: String,
    /// Parsed arguments (the raw text as a string when it is not JSON).
    pub args: Value,
}

/// An error the client received: an HTTP error, or a stream's error event.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorView {
    /// True for an event inside a 200 stream.
    pub in_stream: bool,
    pub status: u16,
    /// OpenAI's `error.code`, Gemini's `error.details[0].reason` (the
    /// proxy's code; Anthropic's shape has none).
    pub code: Option<String>,
    /// OpenAI's `error.type`, Anthropic's `error.type`, or Gemini's
    /// `error.status` (a `google.rpc.Code` name).
    pub kind: Option<String>,
    pub message: String,
    /// The whole body, or the event's data.
    pub body: String,
    /// Whether the error has the dialect's shape.
    pub shaped: bool,
    /// The response's `retry-after` header.
    pub retry_after: Option<String>,
}

/// What the client ended up with, whatever the wire.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientView {
    pub status: u16,
    /// The start of the body as it came, for assertion messages.
    pub raw: String,
    pub text: String,
    pub calls: Vec<ViewCall>,
    pub usage: Option<(u64, u64)>,
    pub error: Option<ErrorView>,
    /// The answer's own id where a client answers under it (Interactions:
    /// the interaction a stateful client would continue); `None` elsewhere.
    pub answer_id: Option<String>,
}

/// The part of a view a JSON and a streamed run must agree on: text,
/// calls by name and arguments, usage.
#[derive(Debug, PartialEq)]
pub struct Comparable<'a> {
    pub text: &'a str,
    pub calls: Vec<(&'a str, &'a Value)>,
    pub usage: Option<(u64, u64)>,
}

impl ClientView {
    pub fn comparable(&self) -> Comparable<'_> {
        Comparable {
            text: &self.text,
            calls: self
                .calls
                .iter()
                .map(|c| (c.name.as_str(), &c.args))
                .collect(),
            usage: self.usage,
        }
    }
}

/// A tool result the provider was sent.
#[derive(Clone, Debug)]
pub struct ToolResult {
    pub id: String,
    pub text: String,
    /// Anthropic's `is_error`, or a Gemini `response.error` (false
    /// elsewhere).
    pub is_error: bool,
}

/// A request the provider got, reduced to what scenarios check.
#[derive(Clone, Debug)]
pub struct ProviderView {
    pub dialect: Dialect,
    /// Tool names on the wire.
    pub tools: Vec<String>,
    /// Calls in the history: (id, name).
    pub calls: Vec<(String, String)>,
    pub results: Vec<ToolResult>,
    /// The body as sent, for assertion messages.
    pub body: Value,
}

impl ProviderView {
    /// The results answering calls named `name`, in order.
    pub fn results_of(&self, name: &str) -> Vec<&ToolResult> {
        self.calls
            .iter()
            .filter(|(_, n)| n == name)
            .filter_map(|(id, _)| self.results.iter().find(|r| &r.id == id))
            .collect()
    }

    /// The one result answering a call named `name`; panics when there is
    /// none, with the request in the message.
    pub fn result_of(&self, name: &str) -> &ToolResult {
        let all = self.results_of(name);
        assert!(
            !all.is_empty(),
            "the provider was sent no result for a `{name}` call: {}",
            self.body
        );
        all[all.len() - 1]
    }

    /// Asserts that the `name` call was answered with a denial starting
    /// `code`, in the dialect's shape for a denial.
    pub fn assert_denied(&self, name: &str, code: &str) -> &ToolResult {
        let r = self.result_of(name);
        assert!(
            r.text.starts_with(&format!("{code}:")),
            "the `{name}` call is answered with {code}: {:?}",
            r.text
        );
        if self.dialect.flags_denials() {
            assert!(
                r.is_error,
                "a {:?} denial is flagged as an error: {}",
                self.dialect, self.body
            );
        }
        r
    }
}

/// The text a client must hold.
#[derive(Clone, Debug)]
pub enum Text {
    Exact(&'static str),
    Prefix(&'static str),
}

/// The error a client must get.
#[derive(Clone, Debug)]
pub enum ErrExpect {
    /// The provider's error status, body and `retry-after`, unchanged.
    Relayed {
        status: u16,
        retry_after: Option<&'static str>,
    },
    /// The proxy's own error response (before any stream started), in the
    /// dialect's shape; one of `codes` where the shape has a code.
    Http {
        statuses: &'static [u16],
        codes: &'static [&'static str],
    },
    /// A 200 stream that ends with an error event in the dialect's stream
    /// shape: `code` where the shape has one, and a message that mentions
    /// `mentions` (any message when empty).
    Event {
        code: &'static str,
        mentions: &'static str,
    },
}

/// What one client request must come to.
#[derive(Clone, Debug)]
pub struct Expect {
    pub text: Text,
    /// Names and arguments of the calls the client gets.
    pub calls: Vec<(&'static str, Value)>,
    /// Every call id the client gets is one the proxy minted, not the
    /// scripted provider's ([`is_scripted`]); so is the answer's own id
    /// (an interaction handing a program's calls over), which is otherwise
    /// the provider's.
    pub minted_ids: bool,
    pub usage: Option<(u64, u64)>,
    pub error_json: Option<ErrExpect>,
    pub error_sse: Option<ErrExpect>,
}

impl Expect {
    /// A plain answer: this text, no calls, this usage.
    pub fn text(text: &'static str, usage: (u64, u64)) -> Expect {
        Expect {
            text: Text::Exact(text),
            calls: vec![],
            minted_ids: false,
            usage: Some(usage),
            error_json: None,
            error_sse: None,
        }
    }

    /// An error in both wires, with no text, calls or usage.
    pub fn error(json: ErrExpect, sse: ErrExpect) -> Expect {
        Expect {
            text: Text::Exact(""),
            calls: vec![],
            minted_ids: false,
            usage: None,
            error_json: Some(json),
            error_sse: Some(sse),
        }
    }

    pub fn with_calls(mut self, calls: Vec<(&'static str, Value)>) -> Expect {
        self.calls = calls;
        self
    }

    pub fn with_minted_ids(mut self) -> Expect {
        self.minted_ids = true;
        self
    }
}

/// An id the scripted provider gives something of round `round`, number
/// `i`: `prefix` and 24 letters and digits (`S<round>x<i>`, zero-padded),
/// in the shape the providers' own ids have.
pub fn scripted_id(prefix: &str, round: usize, i: usize) -> String {
    format!("{prefix}{:0>24}", format!("S{round}x{i}"))
}

/// The same in hex, 50 digits (OpenAI's Responses ids).
pub fn scripted_hex_id(prefix: &str, round: usize, i: usize) -> String {
    format!("{prefix}{:050x}", round * 1000 + i)
}

/// Whether `id` is one [`scripted_id`] made.
pub fn is_scripted(id: &str) -> bool {
    let body = id.rsplit('_').next().unwrap_or(id);
    let marked = body.trim_start_matches('0');
    body.len() == 24
        && marked
            .strip_prefix('S')
            .and_then(|r| r.split_once('x'))
            .is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
            })
}
