//! What the scripted models of the provider APIs (`*_model.rs`) share: the
//! script they answer from, in order; what they got; how many answers they
//! gave; the fake provider they are mounted on. Each API gives what its
//! model keeps besides, the paths it serves and how it answers a request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One provider API's part of a scripted model.
pub trait ScriptedApi: Default + Send + 'static {
    /// What the model records of each request it gets.
    type Seen: Clone + Send + 'static;
    /// The paths it serves, as a regex.
    const PATHS: &'static str;
    /// Its answer to `req`, recorded in `st`.
    fn answer(st: &mut State<Self>, req: &Request) -> ResponseTemplate;
}

pub struct State<A: ScriptedApi> {
    /// The answers still to give (each a list of the API's items).
    pub script: VecDeque<Vec<Value>>,
    pub seen: Vec<A::Seen>,
    /// The answers given.
    pub n: usize,
    /// What the API's model keeps besides.
    pub kept: A,
}

/// The scripted model; clones share it.
pub struct ScriptedModel<A: ScriptedApi>(Arc<Mutex<State<A>>>);

impl<A: ScriptedApi> Clone for ScriptedModel<A> {
    fn clone(&self) -> Self {
        ScriptedModel(self.0.clone())
    }
}

impl<A: ScriptedApi> ScriptedModel<A> {
    /// A model that answers with these lists of items, in order.
    pub fn new(script: impl IntoIterator<Item = Vec<Value>>) -> Self {
        ScriptedModel(Arc::new(Mutex::new(State {
            script: script.into_iter().collect(),
            seen: Vec::new(),
            n: 0,
            kept: A::default(),
        })))
    }

    /// Every request it got.
    pub fn seen(&self) -> Vec<A::Seen> {
        self.0.lock().unwrap().seen.clone()
    }

    /// Mounts it on a new fake provider.
    pub async fn serve(&self) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path_regex(A::PATHS))
            .respond_with(self.clone())
            .mount(&server)
            .await;
        server
    }
}

impl<A: ScriptedApi> Respond for ScriptedModel<A> {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        A::answer(&mut self.0.lock().unwrap(), req)
    }
}

/// The path a request was sent to, with its query if it has one.
pub fn path_and_query(req: &Request) -> String {
    match req.url.query() {
        Some(q) => format!("{}?{q}", req.url.path()),
        None => req.url.path().to_owned(),
    }
}
