//! `cargo fuzz run -s none run_folder`: `harness::run_folder` in `runner/tests/fuzz_harness/` says
//! what the input is and which properties are checked.
#![no_main]

#[path = "../../runner/tests/fuzz_harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_one("run_folder", data));
