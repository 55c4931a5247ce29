#![no_main]
// Placeholder until the target is written; see fuzz/README.md.
libfuzzer_sys::fuzz_target!(|_data: &[u8]| {});
