//! Point-to-point frames with mutated route, roles, dtypes, shapes and
//! payload, built through eredu's public framing (`commcheck::fuzz::run_boundary`).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| commcheck::fuzz::run_boundary(common::harness(), data));
