//! The wire APIs the proxy speaks. The rule (classification, the turn
//! decision, programs) is one; each API is a dialect around it that reads
//! and writes its own shapes: tools, calls, denials, nested calls, events.

/// The API a request speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/messages` (Anthropic).
    Messages,
}

impl Api {
    /// A short name for logs and cache keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
        }
    }
}
