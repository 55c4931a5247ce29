//! The JSON driver: a judged request whose client wants one whole answer,
//! for every dialect. Each round's answer is judged, the turn decided by
//! [`crate::turn::decide`], and the decision's effect applied as the
//! stream body applies it ([`crate::turn::effect`]): a repair asks again, a
//! program runs, a mixed turn's denials are stored, a give-up writes the
//! note.

use std::sync::Arc;

use http::header::CONTENT_ENCODING;
use http::Response;
use serde_json::{Map, Value};

use super::embedded::{run_program, ProgramRun};
use super::round::{check_identity, respond, response_parts, tag, Target};
use crate::body::ProxyBody;
use crate::error::ProxyError;
use crate::layer::forward::{read_upstream_body, respond_with, send};
use crate::layer::{State, Upstream};
use crate::plan::ToolPlan;
use crate::runtime::Step;
use crate::select::Selection;
use crate::splice::TenantSplices;
use crate::turn::WireRequest;
use crate::turn::{self, Decision, Dialect, Rounds};

/// The checked path: every round's calls are judged and the turn decided.
pub(crate) async fn intercepted<D: Dialect>(
    state: &State,
    inner: Upstream,
    target: &Target,
    mut request: D::Request,
    plan: &ToolPlan,
    selection: &Selection,
    splices: &TenantSplices,
) -> Result<Response<ProxyBody>, ProxyError> {
    let timeout = state.config.upstream_timeout;
    let mut rounds = Rounds::new(state.config.max_repairs);
    // The turns of programs that ended in this request: what the model
    // wrote beside them opens the client's answer, as a stream shows it.
    let mut earlier: Vec<Value> = Vec::new();
    loop {
        let res = send(inner.clone(), target.request(request.to_bytes()), timeout).await?;
        let (mut parts, body) = res.into_parts();
        let round = crate::telemetry::Round::of_response(&mut parts.extensions);
        let body = read_upstream_body(body, timeout, state.config.max_upstream_body_bytes).await?;
        if !parts.status.is_success() {
            // Upstream errors reach the client unchanged, whatever the round.
            return Ok(tag(
                respond_with(parts, body),
                selection,
                Some(rounds.repairs),
            ));
        }
        check_identity(&parts.headers)?;
        // Nothing to add and nothing of this answer's own to judge: no tree
        // is built, the client gets the provider's bytes.
        let first = rounds.before() == 0 && earlier.is_empty() && !request.streams();
        if let Some(quiet) = first.then(|| D::quiet_answer(&body)).flatten() {
            round.usage(quiet.usage.as_ref());
            let decision = round.in_scope(|| rounds.decide(&[], false));
            debug_assert_eq!(decision, Decision::Final);
            drop(round);
            return Ok(tag(
                as_it_came(parts, body),
                selection,
                Some(rounds.repairs),
            ));
        }
        let (mut answer, repeated) = parse_answer::<D>(&body)?;
        let usage = answer.get(D::USAGE).cloned();
        round.usage(usage.as_ref());
        // Denials are events of the round that made them; the round ends here.
        let judged = round.in_scope(|| {
            let (turn, edits) = judge_answer::<D>(&answer, plan)?;
            let decision = rounds.decide(&turn.calls, false);
            Ok::<_, ProxyError>((turn, edits, decision))
        });
        drop(round);
        let (turn, edits, decision) = judged?;
        // One reading only: an answer repeating a key is written anew from
        // the one the judge read.
        let unchanged = edits.is_empty() && !repeated;
        edits.apply(&mut answer);
        match decision {
            // The judge asked for no edit, and nothing is to add: the
            // client gets the provider's bytes, never re-serialised.
            Decision::Final if unchanged && first => {
                return Ok(tag(
                    as_it_came(parts, body),
                    selection,
                    Some(rounds.repairs),
                ));
            }
            Decision::Final => {}
            Decision::Splice => {
                if let Some((keys, splice)) = turn::splice::<D>(&turn.calls) {
                    splices.put(&request.anchor(), &keys, Arc::new(splice));
                    splices.settle().await?;
                }
            }
            Decision::Repair => {
                rounds.close(usage.as_ref());
                rounds.repaired();
                tracing::info!(target: "codemode::repair", round = rounds.repairs, scope = %selection.scope, "re-asking the model after denials");
                D::push(&mut request, &turn::repair_history::<D>(&turn));
                continue;
            }
            Decision::Program => {
                let replay = turn.replay.clone();
                let program = turn::held_program::<D>(turn);
                let ProgramRun { exec, step } =
                    run_program::<D>(state, splices.tenant(), plan, program).await?;
                match step {
                    Step::Waiting(range) => {
                        let total = rounds.total(usage.as_ref());
                        let base = Value::Object(answer);
                        let mut out = D::client_turn(&exec, range, plan, &base, total, true);
                        if let Some(out) = out.as_object_mut() {
                            D::open_with(out, &earlier);
                        }
                        let res = respond::<D>(response_parts(parts), &request, &out);
                        return Ok(tag(res, selection, Some(rounds.repairs)));
                    }
                    Step::Ended => {
                        rounds.close(usage.as_ref());
                        rounds.program_ended();
                        earlier.push(replay);
                        D::push(&mut request, &D::program_pair(&exec));
                        continue;
                    }
                }
            }
            Decision::GiveUp => D::give_up(&mut answer, &turn::give_up_note(&turn.calls)),
        }
        if rounds.before() > 0 {
            if let Some(total) = rounds.total(usage.as_ref()) {
                answer.insert(D::USAGE.into(), total);
            }
        }
        D::open_with(&mut answer, &earlier);
        let res = respond::<D>(response_parts(parts), &request, &Value::Object(answer));
        return Ok(tag(res, selection, Some(rounds.repairs)));
    }
}

/// The provider's answer as it came (its body already read whole and
/// without encoding).
fn as_it_came(parts: http::response::Parts, body: bytes::Bytes) -> Response<ProxyBody> {
    let mut parts = response_parts(parts);
    parts.headers.remove(CONTENT_ENCODING);
    respond_with(parts, body)
}

/// A provider's 2xx body: a JSON object, or a clean 502 that says what it
/// was instead (no client reads an answer out of `[]` or `1`); and whether
/// an object in it repeats a key (it then has more than one reading, and
/// never goes out as its own bytes).
pub(crate) fn parse_answer<D: Dialect>(
    body: &[u8],
) -> Result<(Map<String, Value>, bool), ProxyError> {
    match crate::wire::parse_noting_repeats(body) {
        Ok((Value::Object(answer), repeated)) => Ok((answer, repeated)),
        Ok((other, _)) => Err(ProxyError::UpstreamInvalid(format!(
            "the {} is not a JSON object but {}",
            D::ANSWER,
            turn::shape::kind(&other)
        ))),
        Err(e) => Err(ProxyError::UpstreamInvalid(format!(
            "the {} is not JSON: {e}",
            D::ANSWER
        ))),
    }
}

/// Judges a provider's answer: its turn and the edits the client's copy
/// needs; a 502 for an answer with a shape the judge cannot read where a
/// call could stand (`crate::turn::shape`), which never reaches the client.
pub(crate) fn judge_answer<D: Dialect>(
    answer: &Map<String, Value>,
    plan: &ToolPlan,
) -> Result<(turn::ModelTurn, turn::Edits), ProxyError> {
    D::judge_answer(answer, plan).map_err(|unreadable| {
        tracing::warn!(target: "codemode::denial", %unreadable, "an upstream answer the judge cannot read was refused");
        unreadable.refusal(&format!("the {}", D::ANSWER))
    })
}
