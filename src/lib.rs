//! Certification of commcheck's bundled reference backends.
//!
//! The harnesses that connect each bundled backend to the kit live here;
//! `tests/certify.rs` runs the whole suite against them (`cargo test` at the
//! repository root), and the kit's mutant proofs use them with planted defects.
//! `commcheck-report`'s `cpu` feature runs `cpu::CpuHarness` for
//! `commcheck-report certify cpu`, so this crate is published with it (its
//! library only: the tests stay in the repository).

#[cfg(feature = "cpu")]
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
