//! commcheck-report's `verify`, `load`, `diff` and `Expectations::parse` on
//! arbitrary bytes (`commcheck_report::fuzz::run`): none may panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| commcheck_report::fuzz::run(data));
