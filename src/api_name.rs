//! The wire APIs the proxy speaks, by name: a leaf every module may read
//! (the metrics' `route` label names a judged route by its API) without
//! reading what an API's provider is (`crate::api`).

/// The API a request speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/messages` (Anthropic).
    Messages,
    /// `POST /v1beta/models/{model}:generateContent` (Google's Gemini API).
    Gemini,
    /// `POST /v1/interactions` (Google's Interactions API).
    Interactions,
}

impl Api {
    /// Every API, in the order messages list them.
    pub const ALL: [Api; 5] = [
        Api::Chat,
        Api::Responses,
        Api::Messages,
        Api::Gemini,
        Api::Interactions,
    ];

    /// A short name for logs and cache keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Gemini => "gemini",
            Api::Interactions => "interactions",
        }
    }
}
