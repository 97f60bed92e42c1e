//! Certification of commcheck's bundled reference backends.
//!
//! This package holds no code of its own: its integration tests (under `tests/`)
//! run the conformance suites against the reference backends that its features
//! enable (`cpu` by default).
#![forbid(unsafe_code)]

#[cfg(feature = "cpu")]
pub use commcheck_cpu as cpu;
