//! The CPU reference backend of the eredu communication contract.
//!
//! [`CpuBackend`] implements `eredu_nn::NeuralBackend`,
//! `SubmissionBackend`, `CommunicationBackend` and all eight operation traits
//! of `eredu_runtime::backend` for real:
//!
//! - an executor ([`CpuExecutor`]) is a worker thread with a FIFO queue; work
//!   that cannot block (its inputs are on the host, a group of one) submitted
//!   to an idle, unheld lane runs inline on the submitting thread, in order;
//! - a communication group ([`CpuGroup`]) is a rendezvous of `n` ranks in
//!   member order, so a member that has not joined keeps a collective pending
//!   for real (the *late peer*); its members are threads of one process, or
//!   one per process of a launch ([`CpuDevice::spanning`] over a [`Fabric`]);
//! - a route ([`CpuRoute`]) is a directed mailbox whose messages carry each
//!   value's in-band header together with its payload, in one native message
//!   (one frame between processes); the receiver compares the received header
//!   bytes with its expected `header()`;
//! - a completion ([`CpuCompletion`]) owns every retained resource until exact
//!   completion or `NativeCancel` teardown; errors are sticky; both
//!   cancellation modes are honoured (NativeCancel cooperatively, with teardown
//!   finished before `wait_bounded` returns; running work, the evaluation of
//!   lazy tensor values included, stops within a matmul row or so; quarantine
//!   by handing the work to the device, which releases it only after exact
//!   completion).
//!
//! # Instruments
//! Everything a conformance kit needs to observe, on public API:
//! - *hold*: [`CpuExecutor::hold`];
//! - *liveness probe*: [`CpuDevice::storage_live`] with [`CpuTensor::storage_id`];
//! - *resource ledger*: [`CpuDevice::ledger`];
//! - *fault injection*: [`CpuExecutor::inject_fault`] (next work item fails,
//!   its error published while the work is still live) and
//!   [`CpuExecutor::fail_next_submission`];
//! - *observer*: [`CpuCompletion::observer`], a second handle on a completion's state
//!   (its [`CompletionObserver::resources_releasable`] answers as the completion's),
//!   and `CpuCompletion::clone`, a second full completion handle on the same work;
//! - *wire log*: [`CpuRoute::wire_log`], every native message of a route.
//!
//! # Defects
//! [`CpuDevice::with_defect`] plants one [`Defect`], each breaking exactly one
//! SPEC invariant:
//!
//! | Defect | Breaks | What it does |
//! |---|---|---|
//! | `LocalWorkDropsInputs` | RET-1 | local work keeps only weak references to its inputs |
//! | `ExecutorNotRetained` | RET-2 | dropping the executor abandons queued work |
//! | `CollectiveDropsResources` | RET-3 | communication work keeps only weak references to inputs, group and route |
//! | `LargeInputNotRetained` | RET-3 | a collective other than `broadcast` keeps only a weak reference to an input of at least `PARALLEL_FROM` elements |
//! | `LargeHalfInputNotRetained` | RET-3 | the same, for 16-bit inputs only |
//! | `RendezvousInputNotRetained` | RET-3 | under the `rendezvous` personality, a send that waits for its receiver keeps only a weak reference to its inputs |
//! | `DropReleasesPending` | RET-4 | dropping a pending completion releases its resources |
//! | `OutputNotRetained` | RET-5 | communication work keeps only a weak reference to its output |
//! | `RetainDropsEarly` | RET-6 | `retain_until_complete` drops the value at once |
//! | `LeakRetained` | RET-7 | retained resources are never released |
//! | `LocalDepsFenceGroup` | RET-8 | local dependencies retain and fence the executor's last group |
//! | `BlockingIsComplete` | EXC-1 | `is_complete` blocks (up to two seconds) |
//! | `EarlyCompletion` | EXC-2 | `is_complete` is true once work has started |
//! | `BroadcastRootEarly` | EXC-2 | a broadcast root's `is_complete` is true before its own part ran |
//! | `NonMonotonicCompletion` | EXC-3 | `is_complete` says false once after true |
//! | `WaitForDevice` | EXC-4 | `wait` waits for all work on the device |
//! | `StaleCompletionQuery` | EXC-5 | the first `is_complete` after completion says false |
//! | `NonStickyError` | EXC-6 | an error is reported once, then success |
//! | `SubmissionClearsError` | EXC-6 | a reported error is replaced by success once new work is submitted on the device |
//! | `ErrorReleases` | EXC-7 | an asynchronous error releases live resources |
//! | `ReleasableEarly` | EXC-8 | `resources_releasable` is true after an error or cancel request, while work is live |
//! | `ReleasableRunsDestructors` | EXC-8 | `resources_releasable` drops retained values inside the call |
//! | `ReleasableAfterDeadline` | EXC-8 | `resources_releasable` (on another handle) is true once a bounded wait passed its deadline, while work is live |
//! | `ReleasableNeverTrue` | EXC-9 | `resources_releasable` never says true |
//! | `EmptyLocalDepsHang` | EXC-10 | empty local dependencies never complete |
//! | `CompletedAtDeadline` | CAN-1 | pending work yields `Completed` at the deadline |
//! | `EarlyDeadline` | CAN-2 | the deadline fires after a quarter of the timeout |
//! | `WrongCancellationMode` | CAN-3 | the other mode is reported |
//! | `NativeCancelErrors` | CAN-4 | a NativeCancel deadline returns `Err` |
//! | `RendezvousCancelErrors` | CAN-4 | under `rendezvous`, a NativeCancel deadline on a send past the protocol switch returns `Err` |
//! | `NativeCancelNoTeardown` | CAN-5 | NativeCancel returns before teardown |
//! | `QuarantineDropsLive` | CAN-6 | quarantine releases live resources |
//! | `ErrorDropsLive` | CAN-7 | `Err` returned after dropping live resources |
//! | `DeadlineOverflow` | CAN-8 | overflowing deadline arithmetic (panics at `Duration::MAX`) |
//! | `FailedIsCompleted` | CAN-9 | failed work yields `Completed` |
//! | `ForkSharesLane` | SUB-1 | forked executors share one lane |
//! | `SubmitSkipsEvaluation` | SUB-2 | `submit` evaluates nothing |
//! | `OrderAfterIgnored` | SUB-3 | `order_after` orders nothing |
//! | `SubmitErrorLeavesWork` | SUB-4 | a failing submission leaves queued work |
//! | `SumSkipsLastMember` | SUM-1 | the sum leaves out the last member |
//! | `LazyLaunch` | SUM-2 | collectives start only when first observed |
//! | `GatherReversed` | GAT-1 | even gathers in reverse member order |
//! | `UnevenCountsAsElements` | GAT-2 | uneven counts taken as flat element counts |
//! | `AllToAllZeroSkips` | A2A-1 | an all-zero member does not wait for peers |
//! | `PointToPointReversed` | P2P-1 | bundles delivered in reverse order |
//! | `SkipHeaderCheck` | P2P-2 | received headers are not compared |
//! | `RendezvousSkipsHeaderCheck` | P2P-2 | under `rendezvous`, a receive past the protocol switch compares no headers |
//! | `SeparateHeaderMessage` | P2P-3 | headers travel in their own message |
//! | `RendezvousSeparateHeader` | P2P-3 | under `rendezvous`, a send past the protocol switch sends headers and payload apart |
//! | `BroadcastSums` | BRD-1 | broadcast sums every member's input |
//! | `BroadcastRootWraps` | BRD-2 | an out-of-range root wraps around |
//! | `BarrierEarly` | BAR-1 | barriers do not wait |
//! | `AgreementLocal` | AGR-1 | agreement returns the local status |
//! | `AgreementBlocks` | AGR-2 | `agree_success` blocks on peers |
//!
//! # Example
//! ```
//! use commcheck_cpu::{CpuBackend, CpuDevice};
//! use eredu_core::Completion;
//! use eredu_runtime::backend::SumReductionBackend;
//!
//! let device = CpuDevice::new();
//! let groups = device.group(2).unwrap();
//! let ranks: Vec<_> = groups
//!     .into_iter()
//!     .enumerate()
//!     .map(|(rank, group)| {
//!         let device = device.clone();
//!         std::thread::spawn(move || {
//!             let executor = device.executor();
//!             let value = device.tensor(&[rank as f32, 1.0], &[2]).unwrap();
//!             let sum = CpuBackend::all_reduce_sum(value, &group, &executor).unwrap();
//!             sum.completion.wait().unwrap();
//!             sum.output.read_materialised().unwrap()
//!         })
//!     })
//!     .collect();
//! for rank in ranks {
//!     assert_eq!(rank.join().unwrap(), vec![1.0, 2.0]);
//! }
//! ```

mod cancel;
mod completion;
mod core;
mod defect;
mod device;
mod error;
mod executor;
mod fabric;
mod frame;
mod group;
mod lane;
mod layout;
mod ledger;
mod neural;
mod ops;
pub mod personality;
mod progress;
mod route;
mod sync;
mod tensor;
mod work;

pub use crate::completion::{CompletionObserver, CpuCompletion};
pub use crate::core::{Observation, Phase};
pub use crate::defect::Defect;
pub use crate::device::CpuDevice;
pub use crate::error::CpuError;
pub use crate::executor::CpuExecutor;
pub use crate::fabric::Fabric;
pub use crate::group::CpuGroup;
pub use crate::lane::Hold;
pub use crate::ledger::{LedgerSnapshot, StorageId};
pub use crate::ops::collectives::{PARALLEL_FROM, SUM_BLOCK};
pub use crate::ops::CpuAgreement;
pub use crate::personality::{Personality, RENDEZVOUS_FROM};
pub use crate::progress::RENDEZVOUS_CHUNK;
pub use crate::route::{CpuRoute, WireMessage};
pub use crate::tensor::{CpuTensor, Element};

/// The completion state machine, exposed only to the loom suite
/// (`--cfg commcheck_loom`, see `loom-tests/`).
#[cfg(commcheck_loom)]
#[doc(hidden)]
pub mod loom_core {
    pub use crate::core::{CancelRequest, Core, Mutant, Retained};
}

/// What the shuttle suite needs beyond the public API (`--cfg
/// commcheck_shuttle` only, see `shuttle-tests/`): the virtual clock every
/// deadline of the backend is measured against.
#[cfg(commcheck_shuttle)]
#[doc(hidden)]
pub mod shuttle_support {
    pub use crate::sync::controlled::Instant;
}

/// The CPU reference backend. All state lives in devices, executors, groups
/// and routes; the backend type only names the trait implementations.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuBackend;
