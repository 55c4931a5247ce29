//! One validating read of each request body, by serde_json (what the proxy
//! uses) and by two parsers built on a SIMD structural index, with UTF-8
//! validation alone as the floor. Best of 15 rounds of 50 reads, in µs.

use std::hint::black_box;
use std::time::Instant;

use serde::de::IgnoredAny;

fn best(mut read: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..15 {
        let start = Instant::now();
        for _ in 0..50 {
            read();
        }
        best = best.min(start.elapsed().as_secs_f64() / 50.0);
    }
    best * 1e6
}

fn main() {
    println!("| request | size | UTF-8 only | serde_json | serde_json, top level raw | sonic-rs | sonic-rs, top level raw | simd-json tape |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for path in std::env::args().skip(1) {
        let body = std::fs::read(&path).expect("a readable file");
        let utf8 = best(|| {
            black_box(std::str::from_utf8(&body).is_ok());
        });
        let serde = best(|| {
            black_box(serde_json::from_slice::<IgnoredAny>(&body).expect("JSON"));
        });
        let serde_top = best(|| {
            let top: Vec<(&str, &serde_json::value::RawValue)> =
                serde_json::from_slice::<std::collections::BTreeMap<_, _>>(&body)
                    .expect("an object")
                    .into_iter()
                    .collect();
            black_box(top.len());
        });
        let sonic = best(|| {
            black_box(sonic_rs::from_slice::<IgnoredAny>(&body).expect("JSON"));
        });
        let sonic_top = best(|| {
            let mut n = 0;
            for field in sonic_rs::to_object_iter(body.as_slice()) {
                n += field.expect("a field").1.as_raw_str().len();
            }
            black_box(n);
        });
        // simd-json parses in place: each read starts from a fresh copy
        // (the copy is in its figure, a few µs at these sizes).
        let mut scratch = body.clone();
        let simd = best(|| {
            scratch.copy_from_slice(&body);
            black_box(simd_json::to_tape(&mut scratch).expect("JSON").0.len());
        });
        let name = path.rsplit('/').next().unwrap_or(&path);
        println!(
            "| {name} | {:.1} KB | {utf8:.1} | {serde:.1} | {serde_top:.1} | {sonic:.1} ({:.2}x) | {sonic_top:.1} | {simd:.1} ({:.2}x) |",
            body.len() as f64 / 1000.0,
            sonic / serde,
            simd / serde
        );
    }
}
