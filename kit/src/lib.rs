//! commcheck: a conformance kit for backends of the eredu communication contract.
//!
//! A backend vendor implements one [`Harness`] for a small type of theirs and
//! writes one `harness = false` test file; they get one named test per
//! (invariant, subject) pair of SPEC.md, e.g. `CAN-5::all_reduce_sum`, each
//! proven able to fail by a planted defect of the CPU reference backend.
//!
//! ```toml
//! # Cargo.toml of the backend crate
//! [dev-dependencies]
//! commcheck = "0.1"
//!
//! [[test]]
//! name = "commcheck"
//! harness = false
//! ```
//!
//! ```no_run
//! // tests/commcheck.rs
//! # struct MyHarness;
//! # fn my_harness() -> commcheck_cpu_doc::Harness { unimplemented!() }
//! # mod commcheck_cpu_doc { pub type Harness = (); }
//! fn main() {
//!     # let harness: commcheck::NoHarness = unimplemented!();
//!     commcheck::main(harness)
//! }
//! ```
//!
//! Verdicts are `pass`, `fail`, `not-supported` (shown as ignored, with its
//! reason), `timeout`, `crash` and `flaky`. Every case runs under a watchdog
//! on its own rank threads; a hang or a panic in backend code never stops the
//! run. See [`runner`] for the environment variables.

/// Version of this kit; certification reports record it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod case;
pub mod check;
pub mod claims;
pub mod harness;
mod matrix;
pub mod runner;
pub mod spec;
mod suites;
pub mod world;

pub use case::{catalogue, Case};
pub use check::{Check, Finding};
pub use claims::{Claims, Operation};
pub use harness::{
    CompletionRef, Harness, HarnessError, HoldGuard, Identity, Instruments, Ledger, Observer,
    Probe, WireRecord, WorkState,
};
pub use matrix::Subject;
pub use runner::results::{CaseResult, RunResults, Verdict};
pub use runner::{main, run_cases, run_cases_with, run_with};
pub use world::RankCtx;
