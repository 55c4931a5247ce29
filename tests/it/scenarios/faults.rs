//! The table, part two: a provider that fails, in the first round and in
//! a repair round (the model's first turn calls `read` directly, so a
//! second round follows): an error status, a 2xx that is no object, no
//! JSON or cut short, a stream that stalls. Whatever it does, the client
//! gets a clean error in its dialect's shape: before a stream starts an
//! error response, after it a final error event, never a dropped
//! connection.

use crate::scenarios::harness::{Runtime, Scenario};
use crate::scenarios::model::{call, turn, ErrExpect, Expect, Reply};

const INVALID: &[&str] = &["upstream_invalid_response"];

/// The provider answers `bad` in the first round, or (`after_repair`) in
/// the round that follows a denied turn.
fn faulty(after_repair: bool, bad: Reply, expect: Expect) -> Scenario {
    let mut replies = Vec::new();
    if after_repair {
        let denied = call("read", r#"{"path":"a.txt"}"#);
        replies.push(Reply::Turn(turn(None, vec![denied], (100, 10))));
    }
    replies.push(bad);
    let rounds = replies.len();
    Scenario::new("code", Runtime::Embedded)
        .var("CODEMODE_UPSTREAM_IDLE_SECS", "1")
        .replies(replies)
        .expect(expect)
        .provider(move |p| {
            assert_eq!(p.len(), rounds, "no round after the failure");
            if rounds == 2 {
                p[1].assert_denied("read", "UNKNOWN_TOOL");
            }
        })
}

fn status(status: u16, retry_after: Option<&'static str>) -> Reply {
    Reply::Status {
        status,
        retry_after,
    }
}

fn a_provider_429_in_the_first_round_is_relayed_unchanged() -> Scenario {
    let relayed = || ErrExpect::Relayed {
        status: 429,
        retry_after: Some("7"),
    };
    faulty(
        false,
        status(429, Some("7")),
        Expect::error(relayed(), relayed()),
    )
}

/// A repair round the provider refuses: JSON relays its answer; a stream
/// (already started) ends with `upstream_repair_rejected` naming it.
fn repair_refused(
    code: u16,
    retry_after: Option<&'static str>,
    mentions: &'static str,
) -> Scenario {
    faulty(
        true,
        status(code, retry_after),
        Expect::error(
            ErrExpect::Relayed {
                status: code,
                retry_after,
            },
            ErrExpect::Event {
                code: "upstream_repair_rejected",
                mentions,
            },
        ),
    )
}

fn a_provider_500_in_a_repair_round_reaches_the_client() -> Scenario {
    repair_refused(500, None, "500")
}

fn a_provider_429_in_a_repair_round_reaches_the_client() -> Scenario {
    repair_refused(429, Some("3"), "429")
}

/// A 200 whose body cannot be checked: a 502 `upstream_invalid_response`
/// before a stream starts, an error event with that code after.
fn unreadable(after_repair: bool, content_type: &'static str, body: &'static str) -> Scenario {
    let http = || ErrExpect::Http {
        statuses: &[502],
        codes: INVALID,
    };
    let sse = if after_repair {
        ErrExpect::Event {
            code: "upstream_invalid_response",
            mentions: "",
        }
    } else {
        http()
    };
    faulty(
        after_repair,
        Reply::Body { content_type, body },
        Expect::error(http(), sse),
    )
}

fn first_round_array_body_is_a_clean_502() -> Scenario {
    unreadable(false, "application/json", "[]")
}

fn repair_round_array_body_is_a_clean_error() -> Scenario {
    unreadable(true, "application/json", "[]")
}

fn first_round_number_body_is_a_clean_502() -> Scenario {
    unreadable(false, "application/json", "1")
}

fn repair_round_number_body_is_a_clean_error() -> Scenario {
    unreadable(true, "application/json", "1")
}

fn first_round_non_json_body_is_a_clean_502() -> Scenario {
    unreadable(false, "text/html", "<html>bad gateway</html>")
}

fn repair_round_non_json_body_is_a_clean_error() -> Scenario {
    unreadable(true, "text/html", "<html>bad gateway</html>")
}

/// A body cut short: JSON shorter than its content-length is a 502
/// (`upstream_unreachable` in docs/errors.md: "its body broke off"); a
/// stream that breaks off ends with `upstream_stream_broken`.
fn cut_short(after_repair: bool) -> Scenario {
    faulty(
        after_repair,
        Reply::CutShort,
        Expect::error(
            ErrExpect::Http {
                statuses: &[502],
                codes: &["upstream_unreachable"],
            },
            ErrExpect::Event {
                code: "upstream_stream_broken",
                mentions: "",
            },
        ),
    )
}

fn first_round_cut_short_body_is_a_clean_error() -> Scenario {
    cut_short(false)
}

fn repair_round_cut_short_body_is_a_clean_error() -> Scenario {
    cut_short(true)
}

/// A provider silent past CODEMODE_UPSTREAM_IDLE_SECS: a stream ends with
/// `upstream_stream_idle`; a JSON body is a 504 `upstream_timeout`.
fn stall(after_repair: bool) -> Scenario {
    faulty(
        after_repair,
        Reply::Stall,
        Expect::error(
            ErrExpect::Http {
                statuses: &[504],
                codes: &["upstream_timeout"],
            },
            ErrExpect::Event {
                code: "upstream_stream_idle",
                mentions: "CODEMODE_UPSTREAM_IDLE_SECS",
            },
        ),
    )
}

fn first_round_stall_ends_with_an_idle_error() -> Scenario {
    stall(false)
}

fn repair_round_stall_ends_with_an_idle_error() -> Scenario {
    stall(true)
}

crate::scenarios!(
    a_provider_429_in_the_first_round_is_relayed_unchanged,
    a_provider_500_in_a_repair_round_reaches_the_client,
    a_provider_429_in_a_repair_round_reaches_the_client,
    first_round_array_body_is_a_clean_502,
    repair_round_array_body_is_a_clean_error,
    first_round_number_body_is_a_clean_502,
    repair_round_number_body_is_a_clean_error,
    first_round_non_json_body_is_a_clean_502,
    repair_round_non_json_body_is_a_clean_error,
    first_round_cut_short_body_is_a_clean_error,
    repair_round_cut_short_body_is_a_clean_error,
    first_round_stall_ends_with_an_idle_error,
    repair_round_stall_ends_with_an_idle_error,
);
