//! The CUDA reference backend of commcheck: the eredu communication
//! contract on one NVIDIA GPU, through [cudarc] loaded at run time. It builds
//! and links with no CUDA installed; a machine without a driver or a device
//! gets an error saying which library was searched under which names
//! ([`CudaError`]), never a panic.
//!
//! [`CudaBackend`] implements `eredu_nn::NeuralBackend` (tensor
//! construction, read-back, elementwise arithmetic and 2-D matmul for real;
//! the neural operators fail as not provided), `SubmissionBackend`,
//! `CommunicationBackend` and all eight operation traits of
//! `eredu_runtime::backend`. Its certification (`cargo test --features cuda`
//! at the repository root, on a GPU) reaches level **full**: the report is
//! `reports/cuda/report.json`.
//!
//! # Design
//! Ranks are *stream-ranks*: non-blocking streams of one device, exchanging
//! through device memory and the kernels of `kernels/commcheck.cu`
//! (compiled ahead of time to PTX by NVRTC 13.0 for `compute_75`, embedded,
//! regenerated and compared by a test).
//!
//! - **Element types** ([`Element`]): tensors hold `f32`, `f16` or
//!   `bf16` ([`CudaTensor::from_bytes`], [`CudaTensor::read_bytes`]).
//!   Collectives and routes move any of them bit for bit (the copy kernels
//!   count 16-bit halves, and move 32-bit words where every address, length
//!   and stride allows); the sum widens 16-bit elements to `f32`, adds in
//!   member order and rounds once. Members that disagree on the element
//!   type all fail. Data-path boundaries ([`DeviceInfo::boundaries`]): the
//!   sum's 256-element share alignment, one pass of the largest grid, and
//!   the level-2 cache.
//! - **Executors** ([`CudaExecutor`]) are streams leased from a pool created
//!   with the device, before any stream is held. The pool has one stream per
//!   hardware queue but the memory stream's (`CUDA_DEVICE_MAX_CONNECTIONS`
//!   − 1): a stream waiting on a gate never holds another stream's work.
//! - **Exact completion** ([`CudaCompletion`]) is an event recorded last in
//!   the work's stretch of its stream (`BLOCKING_SYNC | DISABLE_TIMING`):
//!   `is_complete` is `cuEventQuery` (never blocks), `wait` is
//!   `cuEventSynchronize`, `wait_bounded` polls with backoff until the
//!   deadline. Errors are sticky; an error is reported as soon as it is
//!   known, while the work may still be live.
//! - **Retention**: every submission is registered with the device's
//!   *reaper*, a thread that releases what the work retained once its event
//!   completed. No cudarc object is dropped and no CUDA call is made inside a
//!   host function; dropping a completion releases nothing.
//! - **Hold** ([`Hold`], [`HoldGate`]): `cuStreamWaitValue32_v2` on a pinned,
//!   device-mapped host word, opened only by a host store.
//! - **NativeCancel**: every kernel walks its elements in block-uniform
//!   tiles and stops once the work's *cancel word* (mapped host memory) is
//!   set. A work item whose stream had not reached it when the word was set
//!   (its *started* word, written by the stream, still zero) touches nothing
//!   and is released at once; one that had is waited for (its kernels stop at
//!   their next tile). The cancel of one member cancels its whole collective.
//! - **Quarantine** is the reaper: the work stays registered, and is
//!   released once its event completed.
//! - **Collectives** ([`CudaGroup`]): each member's part is enqueued on its
//!   stream at once, between two gates; the host plans every member's part
//!   once all arrived (addresses, copy tables, written into mapped memory),
//!   and the reaper opens the gates when every input is ready and when every
//!   kernel is done. A late member keeps its peers pending for real.
//! - **Routes** ([`CudaRoute`]): the sender frames every value's header and
//!   payload into one device buffer (one native message, in the wire log);
//!   the receiver's kernel compares the header bytes that arrived with its
//!   expected ones before it copies the payload.
//! - **Faults**: the fault instrument fails the next work item with an error
//!   published at submission, while the work is live; kernels report in an
//!   error word (mapped host memory, plain stores). `commcheck_trap`, which
//!   poisons the process's CUDA state, runs in no test.
//! - **Memory** is allocated, copied and freed on a memory stream that is
//!   never held ([`DeviceMemory`]), so that no free or copy waits for a held
//!   stream; pinned host memory is pooled and never freed while the device
//!   lives (freeing it may synchronise the context).
//!
//! # Instruments
//! Hold ([`CudaExecutor::hold`]), liveness probe ([`CudaDevice::storage_live`]
//! with [`CudaTensor::storage_id`]), resource ledger ([`CudaDevice::ledger`]),
//! fault injection ([`CudaExecutor::inject_fault`],
//! [`CudaExecutor::fail_next_submission`]), observer
//! ([`CudaCompletion::observer`], and `Clone` for a second handle) and wire
//! log ([`CudaRoute::wire_log`]).
//!
//! # Defects
//! [`CudaDevice::with_defect`] plants one [`Defect`], each breaking exactly
//! one SPEC invariant (`tests/cuda_mutants.rs` at the repository root shows,
//! on a GPU, that the kit fails that invariant's check):
//!
//! | Defect | Breaks | What it does |
//! |---|---|---|
//! | `LocalWorkDropsInputs` | RET-1 | local work does not retain its inputs |
//! | `CollectiveDropsResources` | RET-3 | communication work does not retain its inputs, group or route |
//! | `DropReleasesPending` | RET-4 | dropping a pending completion releases its resources |
//! | `OutputNotRetained` | RET-5 | communication work does not retain its outputs |
//! | `LeakRetained` | RET-7 | retained resources are never released |
//! | `BlockingIsComplete` | EXC-1 | `is_complete` waits for the work (up to two seconds) |
//! | `EarlyCompletion` | EXC-2 | `is_complete` is true once the stream reached the work |
//! | `WaitForDevice` | EXC-4 | `wait` waits for every pending work item of the device |
//! | `NonStickyError` | EXC-6 | an error is reported once, then success |
//! | `ErrorReleases` | EXC-7 | an error published while the work is live releases its resources |
//! | `ReleasableEarly` | EXC-8 | `resources_releasable` is true after an error or a cancel request, while work is live |
//! | `ReleasableNeverTrue` | EXC-9 | `resources_releasable` never says true |
//! | `CompletedAtDeadline` | CAN-1 | pending work yields `Completed` at the deadline |
//! | `EarlyDeadline` | CAN-2 | the deadline fires after a quarter of the timeout |
//! | `WrongCancellationMode` | CAN-3 | the other cancellation mode is reported |
//! | `NativeCancelErrors` | CAN-4 | a NativeCancel deadline returns `Err` |
//! | `NativeCancelNoTeardown` | CAN-5 | NativeCancel sets the cancel word and returns before teardown |
//! | `QuarantineDropsLive` | CAN-6 | quarantine releases live resources |
//! | `ErrorDropsLive` | CAN-7 | `Err` returned after dropping live resources |
//! | `DeadlineOverflow` | CAN-8 | overflowing deadline arithmetic (panics at `Duration::MAX`) |
//! | `FailedIsCompleted` | CAN-9 | failed work yields `Completed` |
//! | `ForkSharesLane` | SUB-1 | forked executors share the parent's stream |
//! | `OrderAfterIgnored` | SUB-3 | `order_after` orders nothing |
//! | `SumRepeatsFirstMember` | SUM-1 | the sum reads the first member's input in place of the last member's |
//! | `SumSharePastFirstRepeats` | SUM-1 | the same, past the first 256-element share only (a chunking bug) |
//! | `SumBf16AsF16` | SUM-1 | the sum decodes `bf16` inputs as `f16` bits |
//! | `GatherReversed` | GAT-1 | even gathers concatenate in reverse member order |
//! | `GatherMiddleAxisSwapped` | GAT-1 | even gathers along a middle axis swap the outer and inner extents |
//! | `GatherByArrival` | GAT-1 | even gathers place blocks in arrival order, not member order |
//! | `UnevenCountsAsElements` | GAT-2 | uneven counts are taken as flat element counts |
//! | `PointToPointReversed` | P2P-1 | a received bundle's values come back in reverse order |
//! | `SeparateHeaderMessage` | P2P-3 | the wire log shows headers and payloads as two messages |
//! | `BroadcastRootWraps` | BRD-2 | an out-of-range root wraps around |
//! | `BarrierEarly` | BAR-1 | barriers do not wait for their peers |
//! | `AgreementLocal` | AGR-1 | agreement returns the local status |
//! | `AgreementBlocks` | AGR-2 | `agree_success` waits for its peers (up to two seconds) |
//!
//! The CPU backend's other defects have no meaningful CUDA form here: a
//! refused submission that queues work (SUB-4), an executor dropped with its
//! queue (RET-2: a stream's queue outlives its handle), a skipped header
//! comparison (P2P-2: the comparison is the receive kernel itself), a lazy
//! launch (SUM-2), an empty dependency set that never completes (EXC-10),
//! a stale first query (EXC-5), `retain_until_complete` dropping at once
//! (RET-6), local dependencies fencing a group (RET-8), non-monotonic
//! completion (EXC-3), destructors run by `resources_releasable` (EXC-8),
//! a broadcast that sums (BRD-1) and an all-to-all that skips its peers
//! (A2A-1).
//!
//! # Example
//! Two stream-ranks sum their values (`no_run`: it needs a GPU; without one
//! [`CudaDevice::open`] says why, it never panics):
//! ```no_run
//! # fn main() -> Result<(), commcheck_cuda::CudaError> {
//! use commcheck_cuda::{CudaBackend, CudaDevice, CudaExecutor, CudaGroup, CudaTensor};
//! use eredu_core::Completion;
//! use eredu_runtime::backend::SumReductionBackend;
//!
//! let device = CudaDevice::open(0)?;
//! let groups = CudaGroup::create(&device, 2)?;
//! let mut sums = Vec::new();
//! for (rank, group) in groups.iter().enumerate() {
//!     let executor = CudaExecutor::new(&device)?;
//!     let value = CudaTensor::from_host(&device, &[rank as f32, 1.0], &[2])?;
//!     sums.push(CudaBackend::all_reduce_sum(value, group, &executor)?);
//! }
//! for sum in sums {
//!     sum.completion.wait()?;
//!     assert_eq!(sum.output.read()?, vec![1.0, 2.0]);
//! }
//! # Ok(()) }
//! ```

mod availability;
mod backend;
mod defect;
mod device;
mod element;
mod error;
mod executor;
mod ffi;
mod group;
mod neural;
mod nn_tensor;
mod ops;
mod ptx;
mod reaper;
mod route;
mod tensor;
mod work;

pub use availability::{cuda_required, driver, nvrtc, DRIVER_NEEDED, NVRTC_PINNED, REQUIRE_CUDA};
pub use backend::CudaBackend;
pub use defect::Defect;
pub use device::{poll_until, CudaDevice, DeviceInfo, HoldGate, LedgerSnapshot};
pub use element::Element;
pub use error::{CudaError, CudaVersion, SettingError};
pub use executor::{CudaExecutor, Hold};
pub use ffi::{share, DeviceMemory, Event, HostSlot, Launch, RankAddresses, Segment, MAX_RANKS};
pub use group::CudaGroup;
pub use neural::CudaOperator;
pub use ops::CudaAgreement;
pub use ptx::{compile as compile_kernels, ARCH, KERNELS, PTX, PTX_PATH, SOURCE};
pub use route::{CudaRoute, WireMessage};
pub use tensor::CudaTensor;
pub use work::{CompletionObserver, CudaCompletion, Phase};
