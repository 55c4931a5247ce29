//! Totals since start and their history: counters a finished request adds
//! to (atomics, no lock), sampled now and then into a bounded series for
//! the inspector's charts.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::observe::counted::{Finished, Route};

/// The columns of a sample, after its time.
pub const COLUMNS: [&str; 11] = [
    "requests_native",
    "requests_code",
    "requests_both",
    "requests_unselected",
    "tokens_in",
    "tokens_out",
    "round_trips_saved",
    "context_bytes_saved",
    "denials_unknown_tool",
    "denials_invalid_args",
    "denials_one_program",
];

/// The denial codes the inspector counts, in [`COLUMNS`]' order.
pub const DENIAL_CODES: [&str; 3] = ["UNKNOWN_TOOL", "INVALID_ARGS", "ONE_PROGRAM"];

/// Samples kept; past it every other one goes and the interval doubles,
/// so the series covers the whole time since start at a coarser step.
const MAX_SAMPLES: usize = 360;
/// The first interval between samples.
const FIRST_INTERVAL_MS: u64 = 10_000;

/// The counters and their sampled history.
#[derive(Debug)]
pub struct Totals {
    counts: [AtomicU64; COLUMNS.len()],
    next_sample_ms: AtomicU64,
    series: Mutex<Series>,
}

#[derive(Debug)]
struct Series {
    interval_ms: u64,
    samples: Vec<(u64, [u64; COLUMNS.len()])>,
}

impl Totals {
    /// Zero, with a first sample at `now_ms`.
    pub fn new(now_ms: u64) -> Totals {
        Totals {
            counts: Default::default(),
            next_sample_ms: AtomicU64::new(now_ms + FIRST_INTERVAL_MS),
            series: Mutex::new(Series {
                interval_ms: FIRST_INTERVAL_MS,
                samples: vec![(now_ms, [0; COLUMNS.len()])],
            }),
        }
    }

    /// Counts a finished request. The proxy's own endpoints (the
    /// inspector's polling among them) are not requests served.
    pub fn finished(&self, f: &Finished, now_ms: u64) {
        if f.route != Route::Admin {
            let column = match f.mode {
                "native" => 0,
                "code" => 1,
                "both" => 2,
                _ => 3,
            };
            self.add(column, 1);
        }
        self.add(4, f.tokens.0);
        self.add(5, f.tokens.1);
        self.add(6, f.round_trips_saved);
        self.add(7, f.context_bytes_saved);
        self.sample_if_due(now_ms);
    }

    /// Counts a denial by its code.
    pub fn denied(&self, code: &str) {
        if let Some(i) = DENIAL_CODES.iter().position(|c| *c == code) {
            self.add(8 + i, 1);
        }
    }

    fn add(&self, column: usize, n: u64) {
        if n > 0 {
            self.counts[column].fetch_add(n, Relaxed);
        }
    }

    fn now(&self) -> [u64; COLUMNS.len()] {
        self.counts.each_ref().map(|c| c.load(Relaxed))
    }

    /// Takes a sample when one is due. Never waits: a sample another
    /// thread is taking is that sample.
    pub fn sample_if_due(&self, now_ms: u64) {
        if now_ms < self.next_sample_ms.load(Relaxed) {
            return;
        }
        let Ok(mut series) = self.series.try_lock() else {
            return;
        };
        if now_ms < self.next_sample_ms.load(Relaxed) {
            return;
        }
        series.samples.push((now_ms, self.now()));
        if series.samples.len() > MAX_SAMPLES {
            let kept: Vec<_> = series.samples.iter().step_by(2).copied().collect();
            series.samples = kept;
            series.interval_ms *= 2;
        }
        self.next_sample_ms
            .store(now_ms + series.interval_ms, Relaxed);
    }

    /// The totals now, by column name.
    pub fn current(&self) -> Value {
        let now = self.now();
        let mut v = serde_json::Map::new();
        for (name, n) in COLUMNS.iter().zip(now) {
            v.insert((*name).to_owned(), json!(n));
        }
        Value::Object(v)
    }

    /// The totals now and their history (`series`: rows of the time in ms
    /// and then [`COLUMNS`]), ending with the totals at `now_ms`.
    pub fn to_json(&self, now_ms: u64) -> Value {
        self.sample_if_due(now_ms);
        let (interval, mut rows) = match self.series.lock() {
            Ok(s) => (
                s.interval_ms,
                s.samples
                    .iter()
                    .map(|(t, c)| row(*t, c))
                    .collect::<Vec<Value>>(),
            ),
            Err(_) => (FIRST_INTERVAL_MS, Vec::new()),
        };
        rows.push(row(now_ms, &self.now()));
        json!({
            "columns": COLUMNS,
            "interval_ms": interval,
            "now": self.current(),
            "series": rows,
        })
    }
}

fn row(t: u64, counts: &[u64; COLUMNS.len()]) -> Value {
    let mut r = vec![json!(t)];
    r.extend(counts.iter().map(|n| json!(n)));
    Value::Array(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(route: Route, mode: &'static str) -> Finished {
        Finished {
            route,
            provider: None,
            mode,
            status: 200,
            seconds: 0.1,
            denials: [0; 2],
            repairs: 0,
            executions: [0; 4],
            abandoned: [0; 5],
            nested_calls: 0,
            tokens: (10, 2),
            round_trips_saved: 1,
            context_bytes_saved: 100,
        }
    }

    #[test]
    fn requests_count_by_mode_and_the_inspectors_own_do_not() {
        let t = Totals::new(0);
        t.finished(&finished(Route::Turn(crate::api::Api::Chat), "code"), 1);
        t.finished(&finished(Route::Admin, "none"), 2);
        t.denied("ONE_PROGRAM");
        let now = t.current();
        assert_eq!(now["requests_code"], 1);
        assert_eq!(now["requests_unselected"], 0);
        assert_eq!(now["tokens_in"], 20);
        assert_eq!(now["denials_one_program"], 1);
    }

    #[test]
    fn the_series_stays_bounded_and_covers_the_whole_time() {
        let t = Totals::new(0);
        for i in 1..=(3 * MAX_SAMPLES as u64) {
            t.sample_if_due(i * 1_000_000);
        }
        let v = t.to_json(u64::MAX / 2);
        let rows = v["series"].as_array().unwrap();
        assert!(rows.len() <= MAX_SAMPLES + 1, "{}", rows.len());
        assert_eq!(rows[0][0], 0, "the first sample stays");
        assert!(v["interval_ms"].as_u64().unwrap() > FIRST_INTERVAL_MS);
    }
}
