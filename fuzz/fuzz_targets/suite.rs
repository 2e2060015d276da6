//! `cargo fuzz run -s none suite`: `harness::suite` in `runner/tests/fuzz_harness/` says
//! what the input is and which properties are checked.
#![no_main]

#[path = "../../runner/tests/fuzz_harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_one("suite", data));
