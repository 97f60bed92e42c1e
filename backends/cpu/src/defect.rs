//! Planted defects ("mutants"): configurations that break exactly one SPEC
//! invariant each, so the kit can prove that every one of its checks fails
//! when the backend is wrong.
//!
//! A device is built with at most one defect ([`crate::CpuDevice::with_defect`]);
//! the default device has none and honours the whole contract.

macro_rules! defects {
    ($( $(#[$doc:meta])* $name:ident => $id:literal, $what:literal; )*) => {
        /// One deliberate violation of one SPEC invariant.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Defect {
            $( $(#[$doc])* $name, )*
        }

        impl Defect {
            /// Every defect, in SPEC order.
            pub const ALL: &'static [Defect] = &[$(Defect::$name,)*];

            /// SPEC ID of the invariant this defect breaks.
            pub const fn invariant(self) -> &'static str {
                match self { $(Defect::$name => $id,)* }
            }

            /// What the defect does, in one sentence.
            pub const fn description(self) -> &'static str {
                match self { $(Defect::$name => $what,)* }
            }

            /// Stable kebab-free name (the variant's name).
            pub const fn name(self) -> &'static str {
                match self { $(Defect::$name => stringify!($name),)* }
            }
        }
    };
}

defects! {
    /// Local-dependency and plain submissions do not retain their input storages.
    LocalWorkDropsInputs => "RET-1", "local work keeps only weak references to its input storages";
    /// Completions do not retain their executor; dropping it abandons queued work.
    ExecutorNotRetained => "RET-2", "completions do not retain the executor, so dropping it abandons queued work";
    /// Communication completions do not retain inputs, group or route.
    CollectiveDropsResources => "RET-3", "communication work keeps only weak references to inputs, group and route";
    /// Collectives other than `broadcast` retain inputs of fewer than
    /// [`PARALLEL_FROM`](crate::PARALLEL_FROM) elements only: a large
    /// input (the rendezvous side of a protocol switch) is held weakly.
    LargeInputNotRetained => "RET-3", "a collective other than broadcast keeps only a weak reference to an input of at least PARALLEL_FROM elements";
    /// [`LargeInputNotRetained`](Defect::LargeInputNotRetained) on 16-bit
    /// inputs only (`f16`, `bf16`: the path that converts them), so only a
    /// check past the boundaries in a 16-bit dtype sees it.
    LargeHalfInputNotRetained => "RET-3", "a collective other than broadcast keeps only a weak reference to a 16-bit input of at least PARALLEL_FROM elements";
    /// Under the `rendezvous` personality, a transfer that waits for its
    /// receiver (at least [`RENDEZVOUS_FROM`](crate::RENDEZVOUS_FROM) bytes)
    /// holds the sender's inputs weakly, and sends zeros where they were
    /// freed (what reading freed memory would send).
    RendezvousInputNotRetained => "RET-3", "under the rendezvous personality, a send that waits for its receiver keeps only a weak reference to its inputs";
    /// Dropping a pending completion releases what it retained.
    DropReleasesPending => "RET-4", "dropping a pending completion releases its retained resources";
    /// The completion does not retain the output storage.
    OutputNotRetained => "RET-5", "communication work keeps only a weak reference to its output storage";
    /// `retain_until_complete` drops the value at once.
    RetainDropsEarly => "RET-6", "retain_until_complete drops the value immediately";
    /// Retained resources are never released after completion.
    LeakRetained => "RET-7", "retained resources are leaked after completion";
    /// Local dependencies retain the executor's last group and fence it on timeout.
    LocalDepsFenceGroup => "RET-8", "local dependencies retain the executor's last group and fence it at a deadline";
    /// `is_complete` blocks until the work completes (up to two seconds).
    BlockingIsComplete => "EXC-1", "is_complete blocks until completion, up to two seconds";
    /// `is_complete` reports success as soon as the work has started.
    EarlyCompletion => "EXC-2", "is_complete reports Ok(true) once the work has started";
    /// A broadcast's root reports `Ok(true)` from `is_complete` while its
    /// own part has not run (queued behind earlier work on its lane, or still
    /// copying): a root needs no peer's part, and may legally complete
    /// before its peers join, but never before its own part is done.
    BroadcastRootEarly => "EXC-2", "a broadcast root's is_complete reports Ok(true) before the root's own part has run";
    /// `is_complete` reports `Ok(false)` once after having reported `Ok(true)`.
    NonMonotonicCompletion => "EXC-3", "is_complete reports Ok(false) once after Ok(true)";
    /// `wait` waits until every executor of the device is idle.
    WaitForDevice => "EXC-4", "wait blocks until all work on the device has finished";
    /// The first `is_complete` after completion still reports `Ok(false)`.
    StaleCompletionQuery => "EXC-5", "the first is_complete after completion reports Ok(false)";
    /// An error is reported once, then success.
    NonStickyError => "EXC-6", "an error is reported once and then replaced by success";
    /// A reported error is forgotten once new work is submitted on the
    /// device (success is reported from then on).
    SubmissionClearsError => "EXC-6", "a reported error is replaced by success once new work is submitted on the device";
    /// Publishing an error releases the retained resources while work is live.
    ErrorReleases => "EXC-7", "an asynchronous error releases retained resources while work is live";
    /// `resources_releasable` says `true` once an error or cancellation request exists.
    ReleasableEarly => "EXC-8", "resources_releasable is true after an error or cancel request, while work is live";
    /// `resources_releasable` itself drops the retained values (runs destructors).
    ReleasableRunsDestructors => "EXC-8", "resources_releasable drops retained values inside the call";
    /// Once a `wait_bounded` passed its deadline, `resources_releasable` on any other handle says `true`.
    ReleasableAfterDeadline => "EXC-8", "resources_releasable is true once a bounded wait passed its deadline, while work is live";
    /// `resources_releasable` never says `true`.
    ReleasableNeverTrue => "EXC-9", "resources_releasable never reports true, even after success";
    /// Local dependencies with no tensors never complete (plain submissions
    /// with no values are not affected).
    EmptyLocalDepsHang => "EXC-10", "submit_local_dependencies with no tensors never completes";
    /// `wait_bounded` reports `Completed` at the deadline for pending work.
    CompletedAtDeadline => "CAN-1", "wait_bounded reports Completed at the deadline while work is pending";
    /// `wait_bounded` gives up after a quarter of the timeout.
    EarlyDeadline => "CAN-2", "wait_bounded reports DeadlineExceeded after a quarter of the timeout";
    /// `wait_bounded` reports the other cancellation mode.
    WrongCancellationMode => "CAN-3", "wait_bounded reports the mode the policy did not select";
    /// NativeCancel is claimed, but a deadline returns `Err` after teardown.
    NativeCancelErrors => "CAN-4", "a NativeCancel deadline returns Err instead of DeadlineExceeded";
    /// Under the `rendezvous` personality, a NativeCancel deadline on a send
    /// that waits for its receiver (at least
    /// [`RENDEZVOUS_FROM`](crate::RENDEZVOUS_FROM) bytes) returns `Err`
    /// after teardown instead of `DeadlineExceeded`.
    RendezvousCancelErrors => "CAN-4", "under the rendezvous personality, a NativeCancel deadline on a send past the protocol switch returns Err instead of DeadlineExceeded";
    /// NativeCancel returns before native teardown has finished: the
    /// request does not wake a blocked body, which notices it at its next
    /// poll (every millisecond), as in a backend whose teardown lags.
    NativeCancelNoTeardown => "CAN-5", "NativeCancel returns before teardown has finished";
    /// Quarantine drops the retained resources while work is live.
    QuarantineDropsLive => "CAN-6", "quarantine releases retained resources while work is live";
    /// An error with live work is returned after dropping its resources.
    ErrorDropsLive => "CAN-7", "wait_bounded returns Err for live work after dropping its resources";
    /// The deadline is computed with an overflowing addition (panics at `Duration::MAX`).
    DeadlineOverflow => "CAN-8", "the deadline is computed with an overflowing Instant addition";
    /// Failed work yields `Completed` from `wait_bounded`.
    FailedIsCompleted => "CAN-9", "wait_bounded reports Completed for failed work";
    /// Forked executors share their parent's lane.
    ForkSharesLane => "SUB-1", "fork_executors returns handles onto the parent's lane";
    /// `submit` evaluates nothing.
    SubmitSkipsEvaluation => "SUB-2", "submit completes without evaluating its values";
    /// `order_after` is a no-op.
    OrderAfterIgnored => "SUB-3", "order_after does not order anything";
    /// A failing submission leaves its work queued.
    SubmitErrorLeavesWork => "SUB-4", "a submission that returns Err has already queued live work";
    /// The sum leaves out the last member's contribution.
    SumSkipsLastMember => "SUM-1", "all_reduce_sum leaves out the last member";
    /// Collectives start only when their completion is first observed.
    LazyLaunch => "SUM-2", "collectives are launched only when first waited on or polled";
    /// The sum leaves a last, partial cache block past the parallel split unsummed.
    SumTailBlockUntouched => "SUM-1", "all_reduce_sum leaves a last partial block past 2^18 elements with member 0's values";
    /// The sum decodes `bf16` inputs as `f16` bits (same size, other layout).
    SumBf16AsF16 => "SUM-1", "all_reduce_sum decodes bf16 inputs as f16 bits";
    /// Even gathers concatenate in reverse member order.
    GatherReversed => "GAT-1", "all_gather_even concatenates in reverse member order";
    /// Even gathers along a middle axis swap the outer and inner strides.
    GatherMiddleAxisSwapped => "GAT-1", "all_gather_even along a middle axis copies with the outer and inner extents swapped";
    /// Even gathers place blocks in the order members arrived.
    GatherByArrival => "GAT-1", "all_gather_even places blocks in arrival order, not member order";
    /// Uneven gathers take `counts` as flat element counts, not axis extents.
    UnevenCountsAsElements => "GAT-2", "all_gather_uneven treats counts as flat element counts";
    /// A member whose counts are all zero does not wait for its peers.
    AllToAllZeroSkips => "A2A-1", "a member with all-zero counts completes without waiting for peers";
    /// The received bundle is delivered in reverse order.
    PointToPointReversed => "P2P-1", "send_receive delivers the bundle in reverse order";
    /// The receiver does not compare headers.
    SkipHeaderCheck => "P2P-2", "send_receive does not compare received headers";
    /// Under the `rendezvous` personality, a receive of at least
    /// [`RENDEZVOUS_FROM`](crate::RENDEZVOUS_FROM) bytes does not compare
    /// headers (the large path checks nothing; the eager one does).
    RendezvousSkipsHeaderCheck => "P2P-2", "under the rendezvous personality, a receive of a bundle past the protocol switch does not compare headers";
    /// Headers travel in a message of their own.
    SeparateHeaderMessage => "P2P-3", "send_receive sends headers and payload as separate messages";
    /// Under the `rendezvous` personality, a send of at least
    /// [`RENDEZVOUS_FROM`](crate::RENDEZVOUS_FROM) bytes puts its headers
    /// in a message of their own (a handshake) ahead of the payload.
    RendezvousSeparateHeader => "P2P-3", "under the rendezvous personality, a send past the protocol switch sends its headers and payload as separate messages";
    /// Broadcast sums every member's input.
    BroadcastSums => "BRD-1", "broadcast sums every member's input instead of copying the root's";
    /// An out-of-range root wraps around instead of failing.
    BroadcastRootWraps => "BRD-2", "broadcast accepts an out-of-range root modulo the group size";
    /// Barriers complete without waiting for anyone.
    BarrierEarly => "BAR-1", "barrier completes without waiting for the other members";
    /// Agreement returns the local status.
    AgreementLocal => "AGR-1", "agree_success resolves to the local status";
    /// `agree_success` blocks on its peers before returning.
    AgreementBlocks => "AGR-2", "agree_success blocks until every member has submitted (up to two seconds)";
}

impl Defect {
    /// The personality whose path the defect lives on, where it lives on one
    /// path only: a device with the defect takes that personality
    /// ([`crate::CpuDevice::with_defect`]), since the defect would be inert
    /// on any other.
    pub const fn personality(self) -> Option<crate::Personality> {
        match self {
            Self::RendezvousInputNotRetained
            | Self::RendezvousCancelErrors
            | Self::RendezvousSkipsHeaderCheck
            | Self::RendezvousSeparateHeader => Some(crate::Personality::Rendezvous),
            _ => None,
        }
    }
}

impl Defect {
    /// Whether the defect's path exists in a world of processes (one rank
    /// per process, [`crate::CpuDevice::spanning`]). The `rendezvous`
    /// personality's sends wait for their receiver only within one process
    /// (a process does not see another's posted receives, so its sends are
    /// eager there): the defects on that wait are inert across processes.
    pub const fn across_processes(self) -> bool {
        !matches!(
            self,
            Self::RendezvousInputNotRetained | Self::RendezvousCancelErrors
        )
    }
}

impl std::fmt::Display for Defect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.invariant())
    }
}
