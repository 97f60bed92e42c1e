//! Operation sequences against the CPU reference backend, checked by the
//! model (`commcheck::fuzz::run`). A vendor's target is the same with their
//! harness: `fuzz_target!(|data: &[u8]| commcheck::fuzz::run(&MyHarness::new(), data));`
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| commcheck::fuzz::run(common::harness(), data));
