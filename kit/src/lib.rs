//! commcheck: a conformance kit for backends of the eredu communication contract.
//!
//! A backend vendor implements one [`Harness`] for a small type of theirs and
//! writes one `harness = false` test file; they get one named test per
//! (invariant, subject) pair of INVARIANTS.md, e.g. `CAN-5::all_reduce_sum`, each
//! proven able to fail by a planted defect of the CPU reference backend.
//!
//! ```toml
//! # Cargo.toml of the backend crate, beside a checkout of commcheck
//! [dev-dependencies]
//! commcheck = { path = "../commcheck/kit" }
//!
//! [[test]]
//! name = "commcheck"
//! harness = false
//!
//! # The value checks move megabytes per rank: build the kit optimised in
//! # the dev profile that `cargo test` uses.
//! [profile.dev.package.commcheck]
//! opt-level = 2
//! ```
//!
//! commcheck is not on crates.io yet: depend on a checkout (the path form
//! above) or on its git repository (`commcheck = { git = "<repository>" }`).
//! Once it is published, `commcheck = "0.1"` does the same.
//!
//! The harness below is the least a vendor writes: the CPU reference backend,
//! claiming `sum_reduction` and `barrier`, with no instrument, every world
//! size, and no second handle. Run, it certifies exactly this:
//!
//! - **Level `core`.** Every class-A and class-M case of the claimed subjects
//!   (local dependencies, plain submissions, `fork_executors`, `order_after`,
//!   `all_reduce_sum`, `barrier`) passes on black-box evidence: EXC-1 to
//!   EXC-5, EXC-9, EXC-10, CAN-1 to CAN-4, CAN-8 (with a note that the CAN-5
//!   to CAN-7 dispositions under edge deadlines were not observed), RET-6,
//!   SUB-1 to SUB-3, SUM-1 and SUM-2 (on 1, 2, 3, 4 and 8 ranks) and BAR-1.
//!   Late peers keep the two operations pending, and local work too (it
//!   evaluates a reduction whose late peer has not joined), as well as the
//!   lanes SUB-1 and SUB-3 keep busy: no verdict rests on how long any work
//!   takes.
//! - **Class I.** RET-2 passes in its black-box form (the work completes after
//!   its owned executor was dropped). Every other class-I case is
//!   `not-supported`, naming the instruments it needs: RET-1, RET-3 to RET-5,
//!   RET-7, RET-8, EXC-6 to EXC-8, CAN-5 to CAN-7, CAN-9 and SUB-4. So the
//!   level is never `full`.
//! - **Unclaimed operations.** Every case of the six other operations, and
//!   every ID of their families, is `not-supported`.
//!
//! The [`evidence`] page lists, for every invariant, what its checks can use
//! (black-box, which instrument, which world sizes), the comparison rule of
//! each operation, and the clauses of the contract no check observes.
//!
//! Everything else a harness can provide is one optional method more:
//!
//! - instruments, declared by [`Harness::instruments`]: [`Harness::hold`],
//!   [`Harness::probe`], [`Harness::ledger`], [`Harness::inject_fault`] (work faults),
//!   [`Harness::fail_next_submission`] (submission faults), [`Harness::observer`],
//!   [`Harness::wire_log`];
//! - [`Harness::world_sizes`]: the world sizes built in one process (a backend
//!   with one rank per process declares `WorldSizes::UpTo(1)`; cases on sizes
//!   it does not build are `not-supported`);
//! - [`Harness::second_handle`]: a second handle on the same work, when the
//!   backend's own completion type offers one (e.g. `Clone`); not an
//!   instrument, it lets EXC-8's timeout clause be read without an observer;
//! - [`Harness::dtypes`] with [`Harness::tensor_of`] and [`Harness::read_as`]:
//!   the element types the value checks run in (`f32` alone by default;
//!   `f16` and `bf16` through [`half`]), and [`Harness::boundaries`] /
//!   [`Harness::max_message_bytes`]: where the backend's data path changes
//!   (a transport chunk, a kernel tile) and the largest message it takes,
//!   for the value checks' size sweep (see the [`evidence`] page's
//!   comparison rules, and [`precision`] for the data's own mutant proof).
//!
//! Beyond the named cases, [`model`] checks random operation sequences
//! against a reference model, and [`fuzz`] runs them from fuzzer bytes: a
//! cargo-fuzz target of a vendor's backend is three lines (the backend
//! template's `fuzz/fuzz_targets/sequence.rs`, which compiles the suite's
//! harness, the example below, into the target):
//!
//! ```ignore
//! #![no_main]
//! include!("../../tests/commcheck.rs");
//! libfuzzer_sys::fuzz_target!(|data: &[u8]| commcheck::fuzz::run(&Minimal, data));
//! ```
//!
//! A backend whose crate does not export the types its traits name (a
//! group or route type in a private module) is described through the kit's
//! aliases, which name each one from the harness:
//! [`harness::Group<MyHarness>`](harness::Group), [`harness::Route`],
//! [`harness::Executor`], [`harness::Tensor`], [`harness::TensorContext`],
//! [`harness::CommCompletion`].
//!
//! A backend with one rank per process runs the same cases under `mpirun`
//! (the `mpi` feature): [`processes::main_across`] instead of [`main()`], each
//! process building only its own rank; see [`processes`].
//!
//! ```no_run
//! // tests/commcheck.rs
//! use commcheck::{Claims, Harness, HarnessError, HarnessResult, Identity};
//! use commcheck_cpu::{CpuBackend, CpuDevice, CpuExecutor, CpuGroup, CpuRoute, CpuTensor};
//! use eredu_runtime::CommunicationRouteId;
//!
//! #[derive(Clone)] // the fuzz targets share it (fuzz/ in the template)
//! struct Minimal;
//!
//! struct Rank(CpuDevice, CpuExecutor, CpuGroup);
//!
//! impl Harness for Minimal {
//!     type Backend = CpuBackend;
//!     type World = (CpuDevice, usize);
//!     type Rank = Rank;
//!     type Route = CpuRoute;
//!
//!     fn identity(&self) -> Identity {
//!         Identity::new("minimal", "0.1.0", "host")
//!     }
//!     fn claims(&self) -> Claims<Self> {
//!         Claims::none().sum_reduction().barrier()
//!     }
//!     fn world(&self, ranks: usize) -> HarnessResult<(CpuDevice, usize)> {
//!         Ok((CpuDevice::new(), ranks))
//!     }
//!     fn rank(&self, (device, size): &(CpuDevice, usize), rank: usize) -> HarnessResult<Rank> {
//!         let group = device
//!             .join_group("world", *size, rank)
//!             .map_err(HarnessError::new)?;
//!         Ok(Rank(device.clone(), device.executor(), group))
//!     }
//!     fn executor<'r>(&self, rank: &'r Rank) -> &'r CpuExecutor {
//!         &rank.1
//!     }
//!     fn context<'r>(&self, rank: &'r Rank) -> &'r CpuExecutor {
//!         &rank.1
//!     }
//!     fn group<'r>(&self, rank: &'r Rank) -> &'r CpuGroup {
//!         &rank.2
//!     }
//!     fn route(&self, rank: &Rank, id: u64, from: usize, to: usize) -> HarnessResult<CpuRoute> {
//!         let id = CommunicationRouteId::new(id);
//!         rank.0
//!             .route(id, from, to, rank.2.member())
//!             .map_err(HarnessError::new)
//!     }
//!     fn read(&self, _: &Rank, tensor: &CpuTensor) -> HarnessResult<Vec<f32>> {
//!         tensor
//!             .read_materialised()
//!             .ok_or_else(|| HarnessError("not materialised".into()))
//!     }
//! }
//!
//! // `fn main`, and a test that fails if Cargo.toml lacks `harness = false`.
//! commcheck::main!(Minimal);
//! ```
//!
//! Verdicts are `pass`, `fail`, `not-supported`, `inconclusive` (the kit
//! could not set up what the check needs, e.g. work it could not keep
//! pending: neither a pass nor a failure of the invariant), `timeout`,
//! `crash` and `flaky`. Every case runs under a watchdog on its own rank
//! threads; a hang or a panic in backend code never stops the run. See
//! [`settings`] for the environment variables.
//!
//! What each runner shows:
//! - `cargo test`: one line per case. `pass` is `ok`; `fail`, `timeout`,
//!   `crash`, `flaky` and `inconclusive` are `FAILED` with the message (and
//!   the seed to replay); `not-supported` is `ignored`, with its reason when
//!   it was found while running, bare when found before (libtest-mimic
//!   cannot carry that reason). The run ends with a summary on stderr
//!   ([`runner::closing`]): the level this run reaches and what blocks the
//!   next one, the not-supported cases grouped by reason, the inconclusive
//!   ones by setup reason, and the invariant × subject grid.
//! - `cargo nextest run`: the same verdicts, a process per case; cases
//!   not-supported before running are skipped (its JUnit says "does not
//!   match the run-ignored option"); one found not-supported while running
//!   fails, saying so (nextest cannot show a test that ran as skipped).
//! - `commcheck-report report target/commcheck/<backend>`: the certification
//!   (`report.json`, `junit.xml` with every reason, `summary.md`, and
//!   `report.svg`, the grid coloured by verdict), from the records of
//!   whichever runner ran the cases.
//!
//! The repository's `src/cpu.rs` (`commcheck_reference::cpu::CpuHarness`)
//! is a fully instrumented harness, every optional method implemented; the
//! CPU backend certifies `full` through it.
//!
//! Every case that runs leaves a record in a results directory
//! (`target/commcheck/<backend>/` by default), whichever runner ran it: one
//! `cargo test` process, one `cargo nextest run` process per case, shards,
//! or child processes. `commcheck-report report target/commcheck/<backend>`
//! merges them into one certification, and says when the run was partial
//! (see [`runner::records`]). The repository's `templates/backend` is a
//! backend crate with all of this wired in: nextest with JUnit, a signed
//! report, and a GitHub Actions recipe.

pub mod build;
pub mod case;
mod catalogue;
pub mod check;
pub mod dtype;
#[doc = include_str!("../EVIDENCE.md")]
pub mod evidence {}
pub mod fuzz;
pub mod harness;
mod matrix;
pub mod model;
mod operation;
pub mod precision;
pub mod processes;
pub mod results;
pub mod runner;
pub mod settings;
pub mod spec;
mod subject;
pub(crate) mod suites;
pub mod world;

pub use build::VERSION;
pub use case::Case;
pub use catalogue::catalogue;
pub use check::{Check, Finding};
pub use dtype::{Dtype, HostValues};
/// The 16-bit float types of [`HostValues`] (re-exported, so a harness uses the same version).
pub use half;
pub use harness::{
    Claims, CompletionRef, Harness, HarnessError, HarnessResult, HoldGuard, Identity, Instruments,
    Ledger, Observer, Probe, UnknownInstrument, WireRecord, WorkState, WorldSizes,
};
pub use matrix::lazy;
pub use operation::Operation;
pub use results::{
    Attributed, Calibration, CaseResult, DataCoverage, Evidence, RankPlace, RunResults, Sweep,
    Verdict,
};
pub use runner::{main, run_cases, run_cases_with, run_with};
pub use subject::Subject;
pub use world::RankCtx;
