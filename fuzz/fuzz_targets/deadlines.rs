//! Bounded waits from 1 ns to `Duration::MAX` in both dispositions, racing
//! the work's completion (`commcheck::fuzz::run_deadlines`).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| commcheck::fuzz::run_deadlines(common::harness(), data));
