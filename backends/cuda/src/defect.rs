//! Planted defects: each breaks exactly one SPEC invariant, so the kit's
//! mutant test can show, on a GPU, that its check of that invariant fails
//! on this backend too (`CudaDevice::with_defect`). The CPU backend plants
//! the same ones where the mechanism allows; the CUDA backend leaves out
//! those its mechanisms make meaningless here (a refused submission that
//! queues work, an abandoned executor, a skipped header check, a lazy
//! launch, a blocking empty dependency set, a stale query, a sum that adds
//! every member, an all-to-all that does not wait: see the crate docs).

use std::fmt;

macro_rules! defects {
    ($($name:ident => $id:literal, $what:literal;)*) => {
        /// A planted defect of the CUDA backend.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Defect {
            $(
                #[doc = $what]
                $name,
            )*
        }

        impl Defect {
            /// Every defect, in SPEC order.
            pub const ALL: &'static [Defect] = &[$(Defect::$name),*];

            /// The SPEC ID of the invariant it breaks.
            pub const fn invariant(self) -> &'static str {
                match self {
                    $(Defect::$name => $id,)*
                }
            }

            /// Its name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Defect::$name => stringify!($name),)*
                }
            }

            /// What it does.
            pub const fn describe(self) -> &'static str {
                match self {
                    $(Defect::$name => $what,)*
                }
            }
        }
    };
}

defects! {
    LocalWorkDropsInputs => "RET-1", "local work does not retain its inputs";
    CollectiveDropsResources => "RET-3", "communication work does not retain its inputs, group or route";
    DropReleasesPending => "RET-4", "dropping a pending completion releases its resources";
    OutputNotRetained => "RET-5", "communication work does not retain its outputs";
    LeakRetained => "RET-7", "retained resources are never released";
    BlockingIsComplete => "EXC-1", "`is_complete` waits for the work (up to two seconds)";
    EarlyCompletion => "EXC-2", "`is_complete` is true once the stream reached the work";
    WaitForDevice => "EXC-4", "`wait` waits for every pending work item of the device";
    NonStickyError => "EXC-6", "an error is reported once, then success";
    ErrorReleases => "EXC-7", "an error published while the work is live releases its resources";
    ReleasableEarly => "EXC-8", "`resources_releasable` is true after an error or a cancel request, while work is live";
    ReleasableNeverTrue => "EXC-9", "`resources_releasable` never says true";
    CompletedAtDeadline => "CAN-1", "pending work yields `Completed` at the deadline";
    EarlyDeadline => "CAN-2", "the deadline fires after a quarter of the timeout";
    WrongCancellationMode => "CAN-3", "the other cancellation mode is reported";
    NativeCancelErrors => "CAN-4", "a NativeCancel deadline returns `Err`";
    NativeCancelNoTeardown => "CAN-5", "NativeCancel sets the cancel word and returns before teardown";
    QuarantineDropsLive => "CAN-6", "quarantine releases live resources";
    ErrorDropsLive => "CAN-7", "`Err` returned after dropping live resources";
    DeadlineOverflow => "CAN-8", "overflowing deadline arithmetic (panics at `Duration::MAX`)";
    FailedIsCompleted => "CAN-9", "failed work yields `Completed`";
    ForkSharesLane => "SUB-1", "forked executors share the parent's stream";
    OrderAfterIgnored => "SUB-3", "`order_after` orders nothing";
    SumRepeatsFirstMember => "SUM-1", "the sum reads the first member's input in place of the last member's";
    SumSharePastFirstRepeats => "SUM-1", "past the first 256-element share, the sum reads the first member's input in place of the last member's";
    SumBf16AsF16 => "SUM-1", "the sum decodes bf16 inputs as f16 bits";
    GatherReversed => "GAT-1", "even gathers concatenate in reverse member order";
    GatherMiddleAxisSwapped => "GAT-1", "even gathers along a middle axis copy with the outer and inner extents swapped";
    GatherByArrival => "GAT-1", "even gathers place blocks in arrival order, not member order";
    UnevenCountsAsElements => "GAT-2", "uneven counts are taken as flat element counts";
    PointToPointReversed => "P2P-1", "a received bundle's values come back in reverse order";
    SeparateHeaderMessage => "P2P-3", "the wire log shows headers and payloads as two messages";
    BroadcastRootWraps => "BRD-2", "an out-of-range root wraps around";
    BarrierEarly => "BAR-1", "barriers do not wait for their peers";
    AgreementLocal => "AGR-1", "agreement returns the local status";
    AgreementBlocks => "AGR-2", "`agree_success` waits for its peers (up to two seconds)";
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
