//! Certification of commcheck's bundled reference backends.
//!
//! The harnesses that connect each bundled backend to the kit live here;
//! `tests/certify.rs` runs the whole suite against them (`cargo test` at the
//! repository root), and the kit's mutant proofs use them with planted defects.

#[cfg(feature = "cpu")]
pub mod cpu;
