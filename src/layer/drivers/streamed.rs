//! The stream driver's start, for every dialect: the first round's headers
//! go out at once, the body is judged event by event by the dialect's
//! judge inside [`super::stream_body::InterceptBody`], and later rounds (a
//! repair, the round after a program) come from [`Reasker`].

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use serde_json::{json, Value};

use super::embedded::{run_program, ProgramRun};
use super::round::{check_event_stream, next_round, tag, Target};
use super::stream_body::{intercept_stream, Next, RepairFuture, RepairTarget, StreamLimits};
use crate::body::ProxyBody;
use crate::error::ProxyError;
use crate::layer::forward::{relay, relay_head, send};
use crate::layer::{State, Upstream};
use crate::plan::ToolPlan;
use crate::runtime::Step;
use crate::select::Selection;
use crate::splice::TenantSplices;
use crate::sse::DEFAULT_MAX_EVENT_BYTES;
use crate::tenant::Tenant;
use crate::turn::WireRequest;
use crate::turn::{Dialect, HeldProgram};

/// The checked streaming path.
pub(crate) async fn streamed<D: Dialect>(
    state: &Arc<State>,
    inner: Upstream,
    target: Target,
    request: D::Request,
    plan: Arc<ToolPlan>,
    selection: &Selection,
    splices: TenantSplices,
) -> Result<Response<ProxyBody>, ProxyError> {
    let timeout = state.config.upstream_timeout;
    let res = send(inner.clone(), target.request(request.to_bytes()), timeout).await?;
    if !res.status().is_success() {
        return Ok(tag(relay(res, D::ERRORS), selection, None));
    }
    check_event_stream(&res)?;
    let judge = D::judge(plan.clone(), state.config.max_repairs);
    let reasker = Reasker::<D> {
        state: state.clone(),
        plan,
        inner,
        target: Arc::new(target),
        request: Arc::new(Mutex::new(request)),
        tenant: *splices.tenant(),
    };
    let res = intercept_stream(
        relay_head(res),
        judge,
        Box::new(reasker),
        splices,
        StreamLimits {
            max_event: DEFAULT_MAX_EVENT_BYTES,
            max_state: state.config.max_stream_state_bytes,
            keepalive: state.config.stream_keepalive,
        },
    );
    Ok(tag(res, selection, None))
}

/// Later rounds of a stream: the conversation grows by each round's turn
/// and its answers.
struct Reasker<D: Dialect> {
    state: Arc<State>,
    plan: Arc<ToolPlan>,
    inner: Upstream,
    target: Arc<Target>,
    request: Arc<Mutex<D::Request>>,
    tenant: Tenant,
}

/// The request for the conversation grown by `items`.
fn grown<D: Dialect>(
    request: &Mutex<D::Request>,
    target: &Target,
    items: &[Value],
) -> Request<ProxyBody> {
    let mut request = request.lock().unwrap_or_else(|p| p.into_inner());
    D::push(&mut request, items);
    target.request(request.to_bytes())
}

impl<D: Dialect> RepairTarget for Reasker<D> {
    fn reask(&mut self, items: Vec<Value>) -> RepairFuture {
        let req = grown::<D>(&self.request, &self.target, &items);
        Box::pin(next_round(
            self.inner.clone(),
            req,
            self.state.config.upstream_timeout,
            self.state.config.max_upstream_body_bytes,
        ))
    }

    fn anchor(&self) -> crate::conversation::Anchor {
        self.request
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .anchor()
    }

    fn run_program(&mut self, program: HeldProgram) -> RepairFuture {
        let state = self.state.clone();
        let plan = self.plan.clone();
        let inner = self.inner.clone();
        let target = self.target.clone();
        let request = self.request.clone();
        let tenant = self.tenant;
        Box::pin(async move {
            let ProgramRun { exec, step } =
                run_program::<D>(&state, &tenant, &plan, program).await?;
            match step {
                Step::Waiting(range) => {
                    let model = {
                        let r = request.lock().unwrap_or_else(|p| p.into_inner());
                        D::model(&r)
                    };
                    // The model's own content went out as it streamed.
                    let base = json!({ "model": model });
                    let turn = D::client_turn(&exec, range, &plan, &base, None, false);
                    Ok(Next::HandOff(turn))
                }
                Step::Ended => {
                    let req = grown::<D>(&request, &target, &D::program_pair(&exec));
                    let max_body = state.config.max_upstream_body_bytes;
                    next_round(inner, req, state.config.upstream_timeout, max_body).await
                }
            }
        })
    }
}
