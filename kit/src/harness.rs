//! The vendor's side: one [`Harness`] type per backend.

use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use crate::claims::Claims;
use crate::dtype::{Dtype, HostValues};

/// The backend a harness certifies.
pub type Backend<H> = <H as Harness>::Backend;
/// The backend's tensor type.
pub type Tensor<H> = <Backend<H> as eredu_nn::NeuralBackend>::Tensor;
/// The backend's tensor context.
pub type TensorContext<H> = <Tensor<H> as eredu_nn::Tensor>::Context;
/// The backend's executor type.
pub type Executor<H> = <Backend<H> as SubmissionBackend>::Executor;
/// The backend's owned executor type.
pub type OwnedExecutor<H> = <Backend<H> as SubmissionBackend>::OwnedExecutor;
/// Completion of plain submissions.
pub type PlainCompletion<H> = <Backend<H> as SubmissionBackend>::Completion;
/// Completion of communication work.
pub type CommCompletion<H> = <Backend<H> as CommunicationBackend>::CommunicationCompletion;
/// The backend's communication group.
pub type Group<H> = <Backend<H> as CommunicationBackend>::CommunicationGroup;
/// An owned group handle (see [`Harness::ordered_group`]).
pub type OwnedGroup<H> = Box<dyn std::borrow::Borrow<Group<H>>>;
/// The backend's communication route.
pub type Route<H> = <Backend<H> as CommunicationBackend>::CommunicationRoute;

/// Identity of the backend under test, recorded in every result file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// Backend name, e.g. `commcheck-cpu`.
    pub name: String,
    /// Backend version.
    pub version: String,
    /// Device description, e.g. `host CPU (threads as ranks)`.
    pub device: String,
}

/// Which instruments a harness provides. Invariants of class I that need a
/// missing instrument are reported `not-supported`, never `pass`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Instruments {
    /// [`Harness::hold`]: work on an executor stays pending until released.
    pub hold: bool,
    /// [`Harness::probe`]: is a tensor's native storage still allocated?
    pub probe: bool,
    /// [`Harness::ledger`]: live native resources by kind.
    pub ledger: bool,
    /// [`Harness::inject_fault`]: work faults (the next native work item
    /// fails after its submission succeeded).
    pub fault: bool,
    /// [`Harness::fail_next_submission`]: submission faults (the next
    /// submission call returns `Err`). A backend that can fail work but not
    /// refuse a submission on demand declares `fault` only; SUB-4, the one
    /// check that needs a refused submission, is then not-supported.
    #[serde(default)]
    pub submission_fault: bool,
    /// [`Harness::observer`]: a second handle on a completion's state.
    pub observer: bool,
    /// [`Harness::wire_log`]: native messages sent on a route.
    pub wire_log: bool,
}

impl Instruments {
    /// No instruments.
    pub const NONE: Self = Self {
        hold: false,
        probe: false,
        ledger: false,
        fault: false,
        submission_fault: false,
        observer: false,
        wire_log: false,
    };

    /// Every instrument.
    pub const ALL: Self = Self {
        hold: true,
        probe: true,
        ledger: true,
        fault: true,
        submission_fault: true,
        observer: true,
        wire_log: true,
    };

    /// Whether every instrument in `needed` is present.
    pub fn covers(self, needed: Self) -> bool {
        self.missing(needed).is_empty()
    }

    /// Names of the instruments of `needed` that are absent.
    pub fn missing(self, needed: Self) -> Vec<&'static str> {
        [
            (needed.hold && !self.hold, "hold"),
            (needed.probe && !self.probe, "liveness probe"),
            (needed.ledger && !self.ledger, "resource ledger"),
            (needed.fault && !self.fault, "fault injection"),
            (
                needed.submission_fault && !self.submission_fault,
                "submission fault injection",
            ),
            (needed.observer && !self.observer, "observer"),
            (needed.wire_log && !self.wire_log, "wire log"),
        ]
        .into_iter()
        .filter_map(|(absent, name)| absent.then_some(name))
        .collect()
    }

    /// The union of two sets.
    pub const fn and(self, other: Self) -> Self {
        Self {
            hold: self.hold || other.hold,
            probe: self.probe || other.probe,
            ledger: self.ledger || other.ledger,
            fault: self.fault || other.fault,
            submission_fault: self.submission_fault || other.submission_fault,
            observer: self.observer || other.observer,
            wire_log: self.wire_log || other.wire_log,
        }
    }
}

/// A failure of the harness itself (not of the backend under test).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("harness: {0}")]
pub struct HarnessError(pub String);

impl HarnessError {
    /// Wraps any displayable error.
    pub fn new(error: impl std::fmt::Display) -> Self {
        Self(error.to_string())
    }
}

/// A held executor; releasing (or dropping) it lets the held work run.
#[must_use = "dropping a hold releases it"]
pub struct HoldGuard(Option<Box<dyn FnOnce()>>);

impl HoldGuard {
    /// Wraps the action that releases the hold.
    pub fn new(release: impl FnOnce() + 'static) -> Self {
        Self(Some(Box::new(release)))
    }

    /// Releases the hold now.
    pub fn release(mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

impl std::fmt::Debug for HoldGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "HoldGuard(held)"
        } else {
            "HoldGuard(released)"
        })
    }
}

/// A liveness probe on one tensor's native storage. It must not keep the
/// storage alive itself.
pub struct Probe(Box<dyn Fn() -> bool>);

impl Probe {
    /// Wraps the query "is the storage still allocated?".
    pub fn new(is_live: impl Fn() -> bool + 'static) -> Self {
        Self(Box::new(is_live))
    }

    /// Whether the storage is still allocated.
    pub fn is_live(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Probe(live: {})", self.is_live())
    }
}

/// Live native resources, by kind, at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ledger {
    /// Tensor storages.
    pub storages: usize,
    /// Executors / streams.
    pub executors: usize,
    /// Communication-group handles.
    pub groups: usize,
    /// Route endpoints.
    pub routes: usize,
    /// Submitted work not yet terminal.
    pub pending_work: usize,
    /// Completions held by the backend's quarantine owner, work still live.
    pub quarantined: usize,
}

/// What an [`Observer`] reports about a completion's native work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WorkState {
    /// Native work may still touch retained resources.
    Live,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
    /// Torn down by native cancellation.
    Cancelled,
}

impl WorkState {
    /// Whether native work has stopped for good.
    pub fn is_terminal(self) -> bool {
        self != Self::Live
    }
}

/// A second handle on a completion's state, usable after `wait_bounded`
/// consumed the completion. It must retain nothing.
pub struct Observer {
    state: Box<dyn Fn() -> WorkState>,
    releasable: Option<Box<dyn Fn() -> bool>>,
}

impl Observer {
    /// Wraps the state query.
    pub fn new(state: impl Fn() -> WorkState + 'static) -> Self {
        Self {
            state: Box::new(state),
            releasable: None,
        }
    }

    /// Adds what `resources_releasable()` answers on this work, read through
    /// the observer (EXC-8's timeout clause is checked with it after
    /// `wait_bounded` consumed the completion).
    pub fn with_releasable(mut self, releasable: impl Fn() -> bool + 'static) -> Self {
        self.releasable = Some(Box::new(releasable));
        self
    }

    /// Current state of the native work.
    pub fn state(&self) -> WorkState {
        (self.state)()
    }

    /// `resources_releasable()` on the observed work, when the observer offers it.
    pub fn resources_releasable(&self) -> Option<bool> {
        self.releasable.as_ref().map(|releasable| releasable())
    }
}

/// The world sizes a harness builds in one process ([`Harness::world_sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorldSizes {
    /// Any number of ranks.
    Any,
    /// 1 to `n` ranks.
    UpTo(usize),
}

impl WorldSizes {
    /// Whether a world of `ranks` ranks is built.
    pub fn contains(self, ranks: usize) -> bool {
        match self {
            Self::Any => ranks > 0,
            Self::UpTo(n) => (1..=n).contains(&ranks),
        }
    }
}

impl std::fmt::Display for WorldSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Any => f.write_str("any size"),
            Self::UpTo(1) => f.write_str("size 1 only"),
            Self::UpTo(n) => write!(f, "sizes 1 to {n}"),
        }
    }
}

/// One native message recorded by a route's wire log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireRecord {
    /// In-band header bytes the message carried, one entry per value.
    pub headers: Vec<Vec<u8>>,
    /// Payload bytes the message carried.
    pub payload_bytes: usize,
}

/// A reference to either kind of completion a backend returns.
pub enum CompletionRef<'a, H: Harness> {
    /// From `SubmissionBackend::submit`.
    Plain(&'a PlainCompletion<H>),
    /// From `submit_local_dependencies` or a communication operation.
    Communication(&'a CommCompletion<H>),
}

/// The single point of contact between commcheck and a backend.
///
/// A world of `n` ranks is built for every case: [`Harness::world`] makes the
/// shared part (it must be `Send + Sync`), then every rank's thread calls
/// [`Harness::rank`] to build its own state there. Ranks' state, executors,
/// groups and completions never cross threads, so backends whose handles are
/// neither `Send` nor `Sync` are supported. In a world whose ranks are the
/// processes of a launch (`mpirun -n N`, see [`crate::processes`]), a world
/// of `k` ranks runs on processes `0..k`: each calls `world(k)`, then `rank`
/// once, for its own rank, and [`Harness::world_sizes`] names the sizes
/// built across the processes.
///
/// Everything optional has a default: an instrument that is not provided
/// makes the invariants that need it `not-supported`.
pub trait Harness: Send + Sync + Sized + 'static {
    /// The backend under test.
    type Backend: CommunicationBackend;
    /// Shared state of one world (a device, a launcher connection, ...).
    type World: Send + Sync + 'static;
    /// One rank's state, built and used on that rank's thread only.
    type Rank: 'static;
    /// An owned route endpoint, see [`Harness::route`].
    type Route: std::borrow::Borrow<Route<Self>>;

    /// Identity for reports.
    fn identity(&self) -> Identity;

    /// The operation traits this backend implements (see [`Claims`]).
    fn claims(&self) -> Claims<Self>;

    /// Instruments this harness provides. Declaring one whose method then
    /// answers `None` is a harness error (`fail`, naming the harness).
    fn instruments(&self) -> Instruments {
        Instruments::NONE
    }

    /// The world sizes [`Harness::world`] builds in one process (across the
    /// processes, for a run under a launcher: the kit also keeps them to the
    /// launch's size). A case whose every size is outside them is
    /// `not-supported`, naming the sizes; a backend with one group per
    /// process (one rank per process) declares `WorldSizes::UpTo(1)` for its
    /// single-process runs.
    fn world_sizes(&self) -> WorldSizes {
        WorldSizes::Any
    }

    /// A second handle on the same work, when the backend's own API offers
    /// one (e.g. a `Clone` completion type): `Some(completion.clone())`. It is
    /// not an instrument; the kit reads `resources_releasable()` on it after
    /// `wait_bounded` consumed the first handle (EXC-8's timeout clause).
    fn second_handle(&self, _completion: &CommCompletion<Self>) -> Option<CommCompletion<Self>> {
        None
    }

    /// Builds the shared part of a world of `ranks` ranks.
    fn world(&self, ranks: usize) -> Result<Self::World, HarnessError>;

    /// Why the backend cannot run on this machine at all (no device, no
    /// driver), if so: every case is then `not-supported` with this reason,
    /// before anything runs. The default is `None`. A harness whose users
    /// require the device (a CI job on GPU machines) returns `None` and lets
    /// [`Harness::world`] fail instead, so that every case fails.
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// Builds rank `rank`'s state, on that rank's thread. Every rank's
    /// communication group spans the whole world in rank order.
    fn rank(&self, world: &Self::World, rank: usize) -> Result<Self::Rank, HarnessError>;

    /// This rank's handle on a group of the world's ranks listed in
    /// `members` order (member `i` of the group is world rank `members[i]`;
    /// every rank of the world is listed once), named by `key` (the same on
    /// every rank, new for every group). The value checks run steps on
    /// groups in reversed and interleaved order, where member order and
    /// world rank order differ. `None` (the default): the backend's group API
    /// builds no such group, and those steps are skipped with a note. The
    /// group is boxed (as `Box::new(group)`, or any owner that borrows as
    /// one), since a backend's group type need not be sized.
    fn ordered_group(
        &self,
        _rank: &Self::Rank,
        _key: u64,
        _members: &[usize],
    ) -> Option<Result<OwnedGroup<Self>, HarnessError>> {
        None
    }

    /// The rank's executor.
    fn executor<'r>(&self, rank: &'r Self::Rank) -> &'r Executor<Self>;

    /// The rank's tensor context.
    fn context<'r>(&self, rank: &'r Self::Rank) -> &'r TensorContext<Self>;

    /// The tensor context whose work runs on `executor`, for a backend that
    /// places work by the context its tensors were built on rather than by
    /// the executor they are submitted to (MLX: a stream is both). The kit
    /// builds the lazy work it submits on an executor there, so that a lane
    /// it keeps busy (EXC-4, SUB-1, SUB-3, RET-2) is that executor's.
    /// `None` (the default): lazy work is built on [`Harness::context`].
    fn context_on<'r>(
        &self,
        _rank: &'r Self::Rank,
        _executor: &'r Executor<Self>,
    ) -> Option<&'r TensorContext<Self>> {
        None
    }

    /// The rank's handle on the world's communication group.
    fn group<'r>(&self, rank: &'r Self::Rank) -> &'r Group<Self>;

    /// This rank's endpoint of the directed route `id` from world rank
    /// `source` to world rank `destination`. Every id the kit asks for is
    /// below 512, so a harness that must realise its routes ahead of time
    /// (in a manifest, when the world is built) can realise that many per
    /// ordered pair of ranks.
    fn route(
        &self,
        rank: &Self::Rank,
        id: u64,
        source: usize,
        destination: usize,
    ) -> Result<Self::Route, HarnessError>;

    /// Makes a materialised `f32` tensor on the rank.
    fn tensor(
        &self,
        rank: &Self::Rank,
        values: &[f32],
        shape: &[usize],
    ) -> Result<Tensor<Self>, HarnessError>;

    /// Reads a tensor's host values back **without evaluating it**: a value
    /// that is not materialised is an error. (SUB-2 relies on this.)
    fn read(&self, rank: &Self::Rank, tensor: &Tensor<Self>) -> Result<Vec<f32>, HarnessError>;

    /// The element types [`Harness::tensor_of`] builds, in the set eredu's
    /// runtime moves (`F32`, `F16`, `Bf16`). Every value check runs once per
    /// dtype listed. Default: `F32` alone.
    fn dtypes(&self) -> Vec<Dtype> {
        vec![Dtype::F32]
    }

    /// Makes a materialised tensor of `values`' dtype. The kit asks only for
    /// the dtypes [`Harness::dtypes`] lists, and reads every tensor it built
    /// back with [`Harness::read_as`] before any backend call: a tensor that
    /// does not read back as built is the harness's error. Default: `F32`
    /// through [`Harness::tensor`], any other dtype an error.
    fn tensor_of(
        &self,
        rank: &Self::Rank,
        values: &HostValues,
        shape: &[usize],
    ) -> Result<Tensor<Self>, HarnessError> {
        match values {
            HostValues::F32(values) => self.tensor(rank, values, shape),
            other => Err(HarnessError(format!(
                "this harness builds f32 tensors only, not {}",
                other.dtype()
            ))),
        }
    }

    /// Reads a tensor's host values back as `dtype`, **without evaluating
    /// it** (as [`Harness::read`]). Default: `F32` through
    /// [`Harness::read`], any other dtype an error.
    fn read_as(
        &self,
        rank: &Self::Rank,
        tensor: &Tensor<Self>,
        dtype: Dtype,
    ) -> Result<HostValues, HarnessError> {
        match dtype {
            Dtype::F32 => self.read(rank, tensor).map(HostValues::F32),
            other => Err(HarnessError(format!(
                "this harness reads f32 tensors only, not {other}"
            ))),
        }
    }

    /// Sizes, in bytes per rank of a message of `dtype`, where the
    /// backend's data path changes: a transport's chunk, a kernel's tile, a
    /// parallel split. The value checks' size sweep goes one element below
    /// and above each, and past the largest (to at least 4 MiB per rank).
    /// Default: none named.
    fn boundaries(&self, _dtype: Dtype) -> Vec<usize> {
        Vec::new()
    }

    /// The largest message, in bytes per rank, the harness accepts. Sizes of
    /// the sweep above it are skipped, and the case says so. Default: no limit.
    fn max_message_bytes(&self) -> Option<usize> {
        None
    }

    /// Hold instrument: work submitted on `executor` stays pending until the
    /// guard is released.
    fn hold(&self, _rank: &Self::Rank, _executor: &Executor<Self>) -> Option<HoldGuard> {
        None
    }

    /// Liveness probe on `tensor`'s native storage.
    fn probe(&self, _rank: &Self::Rank, _tensor: &Tensor<Self>) -> Option<Probe> {
        None
    }

    /// Resource ledger, as seen from `rank`.
    fn ledger(&self, _rank: &Self::Rank) -> Option<Ledger> {
        None
    }

    /// Fault injection: the next native work item on `executor` fails.
    /// Returns `false` when unsupported.
    fn inject_fault(&self, _rank: &Self::Rank, _executor: &Executor<Self>) -> bool {
        false
    }

    /// Fault injection at submission: the next submission call on `executor`
    /// returns `Err`. Returns `false` when unsupported.
    fn fail_next_submission(&self, _rank: &Self::Rank, _executor: &Executor<Self>) -> bool {
        false
    }

    /// Observer on a completion's state.
    fn observer(&self, _completion: CompletionRef<'_, Self>) -> Option<Observer> {
        None
    }

    /// Every native message sent on `route` so far.
    fn wire_log(&self, _route: &Self::Route) -> Option<Vec<WireRecord>> {
        None
    }
}
