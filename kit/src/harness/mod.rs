//! The vendor's side: one [`Harness`] type per backend.

use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, CommunicationBackend, EvenGatherBackend,
    FailureAgreementBackend, PointToPointBackend, SubmissionBackend, SumReductionBackend,
    UnevenGatherBackend, VariableAllToAllBackend,
};

use crate::dtype::{Dtype, HostValues};
use crate::operation::Operation;

mod instruments;

pub use instruments::{
    HoldGuard, Instruments, Ledger, Observer, Probe, UnknownInstrument, WireRecord, WorkState,
};

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

/// A failure of the harness itself (not of the backend under test).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("harness: {0}")]
pub struct HarnessError(pub String);

impl Identity {
    /// An identity from its three parts.
    ///
    /// ```
    /// let identity = commcheck::Identity::new("my-backend", "0.3.1", "one GPU");
    /// assert_eq!(identity.device, "one GPU");
    /// ```
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        device: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            device: device.into(),
        }
    }
}

/// What a harness method returns: its value, or the harness's own error.
pub type HarnessResult<T> = Result<T, HarnessError>;

impl HarnessError {
    /// Wraps any displayable error.
    pub fn new(error: impl std::fmt::Display) -> Self {
        Self(error.to_string())
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
///
/// Cancellation modes are not the harness's to claim: the kit asks the
/// backend's completion type, `BoundedCompletion::supports_cancellation`,
/// as a scheduler does, and checks every mode it answers `true` for on
/// every subject whose work has that type (CAN-4). eredu makes the answer
/// one per type and mode, so a backend that can cancel some operations
/// natively but not others (collectives, not local work) answers `false`
/// for `NativeCancel` (its work is then checked under quarantine), or
/// returns a distinct completion type from the operations that can.
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

    /// The rank's tensor context: what eredu's tensor operations take to
    /// build and evaluate tensors (a stream, a command queue, an executor).
    /// A context the rank does not own needs no room in the rank's state: a
    /// zero-sized context, or any constant one, is returned as a reference to
    /// a constant (`&MyContext`, promoted to `'static`).
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
    /// `source` to world rank `destination`.
    ///
    /// - Both ranks of a route ask for it with the same `(id, source,
    ///   destination)`: the source rank for its sending endpoint, the
    ///   destination rank for its receiving one; no other rank asks.
    /// - Within one world, the same `(id, source, destination)` names the
    ///   same route however often it is asked for: the kit may ask again for
    ///   each submission of a case (the completion matrix's `send_receive`
    ///   does), and may drop an endpoint while work submitted on it is live
    ///   (which must keep its route, RET-5). Each answer may be a new handle,
    ///   but messages sent through any of them are one ordered stream.
    /// - Routes of different ids are independent, also between the same pair
    ///   of ranks. Every id the kit asks for is below 512, so a harness that
    ///   must realise its routes ahead of time (in a manifest, when the world
    ///   is built) can realise that many per ordered pair of ranks.
    /// - A new world starts with no routes: ids are reused across worlds.
    /// - Routes are asked for in worlds of two or more ranks only: a harness
    ///   that builds one-rank worlds alone (`WorldSizes::UpTo(1)`) is never
    ///   asked, and may answer with an error.
    fn route(
        &self,
        rank: &Self::Rank,
        id: u64,
        source: usize,
        destination: usize,
    ) -> Result<Self::Route, HarnessError>;

    /// Makes a materialised `f32` tensor on the rank. Default: eredu's own
    /// constructor, `Tensor::from_f32_slice` on [`Harness::context`]; a
    /// backend whose `from_f32_slice` leaves the tensor lazy (not
    /// materialised) overrides this.
    fn tensor(
        &self,
        rank: &Self::Rank,
        values: &[f32],
        shape: &[usize],
    ) -> Result<Tensor<Self>, HarnessError> {
        let dims = shape
            .iter()
            .map(|&extent| {
                i32::try_from(extent).map_err(|_| {
                    HarnessError(format!(
                        "shape {shape:?}: extent {extent} does not fit eredu's i32 dimensions"
                    ))
                })
            })
            .collect::<Result<Vec<i32>, _>>()?;
        <Tensor<Self> as eredu_nn::Tensor>::from_f32_slice(values, &dims, self.context(rank))
            .map_err(HarnessError::new)
    }

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

/// The operations a backend claims: [`Harness::claims`].
///
/// Each claim method carries the trait bound of its operation, so claiming an
/// operation the backend does not implement is a compile error, and an
/// unclaimed operation is reported `not-supported`, never `pass`. A claim
/// records a witness of its bound, from which the kit builds, in its own
/// layers, what it drives the operation with (the completion matrix's
/// driver, the sequence model's parameterised submissions, the rows of the
/// operation's own invariant family): this type names none of them.
///
/// ```
/// # use commcheck::{Claims, Harness};
/// # fn claims<H: Harness>() -> Claims<H>
/// # where
/// #     commcheck::harness::Backend<H>: eredu_runtime::backend::SumReductionBackend
/// #         + eredu_runtime::backend::BarrierBackend,
/// # {
/// Claims::none().sum_reduction().barrier()
/// # }
/// ```
pub struct Claims<H: Harness> {
    claimed: Vec<(Operation, Witness<H>)>,
}

/// Calls the [`ClaimVisitor`] method of one claimed operation, where the
/// operation's trait bound holds.
type Witness<H> = fn(&mut dyn ClaimVisitor<H>);

/// What the kit builds for a claimed operation, built where the operation's
/// trait bound holds: each layer of the kit that drives operations
/// implements it (the completion matrix's drivers, the sequence model's
/// variants, the catalogue's rows) and visits [`Claims`].
pub(crate) trait ClaimVisitor<H: Harness> {
    /// `all_reduce_sum` is claimed.
    fn sum_reduction(&mut self)
    where
        Backend<H>: SumReductionBackend;
    /// `all_gather_even` is claimed.
    fn even_gather(&mut self)
    where
        Backend<H>: EvenGatherBackend;
    /// `all_gather_uneven` is claimed.
    fn uneven_gather(&mut self)
    where
        Backend<H>: UnevenGatherBackend;
    /// `variable_all_to_all` is claimed.
    fn variable_all_to_all(&mut self)
    where
        Backend<H>: VariableAllToAllBackend;
    /// `send_receive` is claimed.
    fn point_to_point(&mut self)
    where
        Backend<H>: PointToPointBackend;
    /// `broadcast` is claimed.
    fn broadcast(&mut self)
    where
        Backend<H>: BroadcastBackend;
    /// `barrier` is claimed.
    fn barrier(&mut self)
    where
        Backend<H>: BarrierBackend;
    /// `agree_success` is claimed.
    fn failure_agreement(&mut self)
    where
        Backend<H>: FailureAgreementBackend;
}

impl<H: Harness> std::fmt::Debug for Claims<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.operations()).finish()
    }
}

impl<H: Harness> Default for Claims<H> {
    fn default() -> Self {
        Self::none()
    }
}

impl<H: Harness> Claims<H> {
    /// No operation claimed: only local dependencies and plain submissions are certified.
    pub fn none() -> Self {
        Self {
            claimed: Vec::new(),
        }
    }

    fn with(mut self, operation: Operation, witness: Witness<H>) -> Self {
        self.claimed.retain(|(claimed, _)| *claimed != operation);
        self.claimed.push((operation, witness));
        self
    }

    /// Shows every claimed operation to `visitor`, in claim order.
    pub(crate) fn visit(&self, visitor: &mut dyn ClaimVisitor<H>) {
        for (_, witness) in &self.claimed {
            witness(visitor);
        }
    }

    /// Claims `SumReductionBackend`.
    pub fn sum_reduction(self) -> Self
    where
        Backend<H>: SumReductionBackend,
    {
        self.with(Operation::AllReduceSum, |v| v.sum_reduction())
    }

    /// Claims `EvenGatherBackend`.
    pub fn even_gather(self) -> Self
    where
        Backend<H>: EvenGatherBackend,
    {
        self.with(Operation::AllGatherEven, |v| v.even_gather())
    }

    /// Claims `UnevenGatherBackend`.
    pub fn uneven_gather(self) -> Self
    where
        Backend<H>: UnevenGatherBackend,
    {
        self.with(Operation::AllGatherUneven, |v| v.uneven_gather())
    }

    /// Claims `VariableAllToAllBackend`.
    pub fn variable_all_to_all(self) -> Self
    where
        Backend<H>: VariableAllToAllBackend,
    {
        self.with(Operation::VariableAllToAll, |v| v.variable_all_to_all())
    }

    /// Claims `PointToPointBackend`.
    pub fn point_to_point(self) -> Self
    where
        Backend<H>: PointToPointBackend,
    {
        self.with(Operation::SendReceive, |v| v.point_to_point())
    }

    /// Claims `BroadcastBackend`.
    pub fn broadcast(self) -> Self
    where
        Backend<H>: BroadcastBackend,
    {
        self.with(Operation::Broadcast, |v| v.broadcast())
    }

    /// Claims `BarrierBackend`.
    pub fn barrier(self) -> Self
    where
        Backend<H>: BarrierBackend,
    {
        self.with(Operation::Barrier, |v| v.barrier())
    }

    /// Claims `FailureAgreementBackend`.
    pub fn failure_agreement(self) -> Self
    where
        Backend<H>: FailureAgreementBackend,
    {
        self.with(Operation::AgreeSuccess, |v| v.failure_agreement())
    }

    /// Claims all eight operation traits.
    pub fn all(self) -> Self
    where
        Backend<H>: SumReductionBackend
            + EvenGatherBackend
            + UnevenGatherBackend
            + VariableAllToAllBackend
            + PointToPointBackend
            + BroadcastBackend
            + BarrierBackend
            + FailureAgreementBackend,
    {
        self.sum_reduction()
            .even_gather()
            .uneven_gather()
            .variable_all_to_all()
            .point_to_point()
            .broadcast()
            .barrier()
            .failure_agreement()
    }

    /// The claimed operations.
    pub fn operations(&self) -> Vec<Operation> {
        let mut operations: Vec<_> = self
            .claimed
            .iter()
            .map(|(operation, _)| *operation)
            .collect();
        operations.sort();
        operations
    }

    /// Whether `operation` is claimed.
    pub fn claims(&self, operation: Operation) -> bool {
        self.claimed
            .iter()
            .any(|(claimed, _)| *claimed == operation)
    }
}
