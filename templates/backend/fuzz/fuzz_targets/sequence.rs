#![no_main]
include!("../../tests/commcheck.rs"); // `Minimal`, the suite's harness
libfuzzer_sys::fuzz_target!(|data: &[u8]| commcheck::fuzz::run(&Minimal, data));
