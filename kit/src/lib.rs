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
//! The harness below connects the CPU reference backend with no
//! instruments at all: every class-I invariant is then `not-supported`, while
//! every black-box and multi-rank check runs. Each instrument is one more
//! method (`hold`, `probe`, `ledger`, `inject_fault`, `observer`, `wire_log`).
//!
//! ```no_run
//! // tests/commcheck.rs
//! use commcheck::{Claims, Harness, HarnessError, Identity};
//! use commcheck_cpu::{CpuBackend, CpuDevice, CpuExecutor, CpuGroup, CpuRoute, CpuTensor};
//! use eredu_runtime::CommunicationRouteId;
//!
//! struct Minimal;
//!
//! struct Rank {
//!     device: CpuDevice,
//!     executor: CpuExecutor,
//!     group: CpuGroup,
//! }
//!
//! impl Harness for Minimal {
//!     type Backend = CpuBackend;
//!     type World = (CpuDevice, usize);
//!     type Rank = Rank;
//!     type Route = CpuRoute;
//!
//!     fn identity(&self) -> Identity {
//!         Identity { name: "minimal".into(), version: "0.1.0".into(), device: "host".into() }
//!     }
//!     fn claims(&self) -> Claims<Self> {
//!         Claims::none().sum_reduction().barrier()
//!     }
//!     fn world(&self, ranks: usize) -> Result<(CpuDevice, usize), HarnessError> {
//!         Ok((CpuDevice::new(), ranks))
//!     }
//!     fn rank(&self, (device, size): &(CpuDevice, usize), rank: usize) -> Result<Rank, HarnessError> {
//!         let group = device.join_group("world", *size, rank).map_err(HarnessError::new)?;
//!         Ok(Rank { device: device.clone(), executor: device.executor(), group })
//!     }
//!     fn executor<'r>(&self, rank: &'r Rank) -> &'r CpuExecutor {
//!         &rank.executor
//!     }
//!     fn context<'r>(&self, rank: &'r Rank) -> &'r CpuExecutor {
//!         &rank.executor
//!     }
//!     fn group<'r>(&self, rank: &'r Rank) -> &'r CpuGroup {
//!         &rank.group
//!     }
//!     fn route(&self, rank: &Rank, id: u64, from: usize, to: usize) -> Result<CpuRoute, HarnessError> {
//!         let me = rank.group.member();
//!         rank.device.route(CommunicationRouteId::new(id), from, to, me).map_err(HarnessError::new)
//!     }
//!     fn tensor(&self, rank: &Rank, values: &[f32], shape: &[usize]) -> Result<CpuTensor, HarnessError> {
//!         let shape: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
//!         rank.device.tensor(values, &shape).map_err(HarnessError::new)
//!     }
//!     fn read(&self, _: &Rank, tensor: &CpuTensor) -> Result<Vec<f32>, HarnessError> {
//!         tensor.read_materialised().ok_or_else(|| HarnessError("not materialised".into()))
//!     }
//! }
//!
//! fn main() {
//!     commcheck::main(Minimal)
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
mod catalogue;
pub mod check;
pub mod claims;
pub mod harness;
pub mod lazy;
mod matrix;
pub mod model;
mod operation;
pub mod runner;
pub mod spec;
mod suites;
pub mod world;

pub use case::Case;
pub use catalogue::catalogue;
pub use check::{Check, Finding};
pub use claims::Claims;
pub use harness::{
    CompletionRef, Harness, HarnessError, HoldGuard, Identity, Instruments, Ledger, Observer,
    Probe, WireRecord, WorkState, WorldSizes,
};
pub use matrix::Subject;
pub use operation::Operation;
pub use runner::results::{Attributed, Calibration, CaseResult, Evidence, RunResults, Verdict};
pub use runner::{main, run_cases, run_cases_with, run_with};
pub use world::RankCtx;
