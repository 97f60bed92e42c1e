//! The operations of a sequence, and how a sequence prints itself as a Rust
//! literal (so a shrunk failure can be pasted back into a test).

use std::time::Duration;

use eredu_core::CompletionCancellationMode;

/// What an [`Op::Submit`] submits: one of the completion matrix's standard
/// submissions (fresh input tensors whose handles the submission drops at
/// once, outputs kept by the caller until [`Op::DropOutputs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, arbitrary::Arbitrary)]
pub enum Work {
    /// `CommunicationBackend::submit_local_dependencies` of one tensor, kept
    /// pending with the hold instrument (submitted unheld without one).
    LocalDependencies,
    /// `SubmissionBackend::submit` of one tensor, kept pending like local
    /// dependencies.
    Submit,
    /// The standard submission of a claimed operation, in claim order; the
    /// index is taken modulo the number of claimed operations (skipped when
    /// none is claimed). Rank 1, the late peer, joins when the model releases it.
    Operation(u8),
    /// `all_gather_uneven` on axis 0 of `[counts[r], width]` inputs: member
    /// `r`'s extent is `counts[r] % 4` (zero included) and each row holds
    /// `1 + width % 3` values, so extents differ from element counts (GAT-2).
    /// Skipped unless the operation is claimed.
    UnevenGather {
        /// Each member's extent along the gathered axis (modulo 4).
        counts: [u8; 2],
        /// Row width, `1 + width % 3`.
        width: u8,
    },
    /// `variable_all_to_all` on axis 0: member `r` sends `sends[r][p] % 3`
    /// rows of `1 + width % 3` values to member `p` (zero counts included;
    /// all-zero for a member when both of its rows are zero) (A2A-1).
    AllToAll {
        /// Rows sent by member `r` to member `p` (modulo 3).
        sends: [[u8; 2]; 2],
        /// Row width, `1 + width % 3`.
        width: u8,
    },
    /// `broadcast` from member `root % 3`: 0 (the subject itself) or 1 (the
    /// late peer), or 2, out of range, which must fail (BRD-2).
    Broadcast {
        /// Root member index (modulo 3).
        root: u8,
    },
    /// `agree_success` with one vote per member: the result must be their
    /// conjunction (AGR-1).
    Agree {
        /// Member `r` submits `votes[r]`.
        votes: [bool; 2],
    },
    /// `send_receive` of `1 + values % 2` framed values from the late peer to
    /// the subject; the sender frames them as `header` says, and the receive
    /// must fail unless the headers match (P2P-1, P2P-2).
    SendReceive {
        /// Values in the receiver's bundle (`1 + values % 2`).
        values: u8,
        /// How the sender's framing differs from the receiver's.
        header: Header,
    },
}

/// How the sender of an [`Work::SendReceive`] frames its bundle, relative to
/// what the receiver expects. Every variant but `Matching` changes the
/// header bytes only (the tensors keep their shapes), except `Count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, arbitrary::Arbitrary)]
pub enum Header {
    /// The same contract and route: the bundle must arrive exactly.
    Matching,
    /// Another schema name.
    Schema,
    /// Another role name for the first value.
    Role,
    /// Another dtype of the same width (`I32` for `F32`).
    Dtype,
    /// Another declared shape with as many elements (`[2, 2]` for `[4]`).
    Shape,
    /// Another route id in the header (the message still travels the route).
    Route,
    /// One value more in the bundle.
    Count,
}

impl Header {
    /// Every variant, in the order the fuzz decoder numbers them.
    pub const ALL: [Self; 7] = [
        Self::Matching,
        Self::Schema,
        Self::Role,
        Self::Dtype,
        Self::Shape,
        Self::Route,
        Self::Count,
    ];
}

impl Work {
    /// The same work with every parameter reduced to its meaning (`counts`
    /// modulo 4, ...): equal normalised works submit the same thing.
    pub fn normalized(self) -> Self {
        match self {
            Self::UnevenGather { counts, width } => Self::UnevenGather {
                counts: counts.map(|c| c % 4),
                width: width % 3,
            },
            Self::AllToAll { sends, width } => Self::AllToAll {
                sends: sends.map(|row| row.map(|c| c % 3)),
                width: width % 3,
            },
            Self::Broadcast { root } => Self::Broadcast { root: root % 3 },
            Self::SendReceive { values, header } => Self::SendReceive {
                values: values % 2,
                header,
            },
            other => other,
        }
    }

    /// The SPEC ID a success of this work would violate: work the contract
    /// says must fail (an out-of-range root, a header that differs).
    pub fn must_fail(self) -> Option<&'static str> {
        match self.normalized() {
            Self::Broadcast { root: 2 } => Some("BRD-2"),
            Self::SendReceive { header, .. } if header != Header::Matching => Some("P2P-2"),
            _ => None,
        }
    }

    /// The claimed operation this work needs, for the parameterised kinds.
    pub fn operation(self) -> Option<crate::Operation> {
        use crate::Operation;
        match self {
            Self::LocalDependencies | Self::Submit | Self::Operation(_) => None,
            Self::UnevenGather { .. } => Some(Operation::AllGatherUneven),
            Self::AllToAll { .. } => Some(Operation::VariableAllToAll),
            Self::Broadcast { .. } => Some(Operation::Broadcast),
            Self::Agree { .. } => Some(Operation::AgreeSuccess),
            Self::SendReceive { .. } => Some(Operation::SendReceive),
        }
    }
}

/// Deadline of an [`Op::WaitBounded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, arbitrary::Arbitrary)]
pub enum Timeout {
    /// One nanosecond (CAN-8 edge).
    Nanosecond,
    /// 50 microseconds (sub-millisecond, CAN-8).
    Short,
    /// 500 microseconds: long enough for released work to complete first.
    Long,
    /// `Duration::MAX` (CAN-8 edge); only used on work the model says will
    /// complete, so a correct backend returns.
    Unbounded,
    /// Any deadline from one nanosecond to `Duration::MAX` (zero reads as one
    /// nanosecond). One longer than [`Timeout::BLOCKED_LIMIT`] is only used
    /// on work the model says will complete.
    Exact(Duration),
}

impl Timeout {
    /// The longest deadline the model waits out on work that cannot finish.
    pub const BLOCKED_LIMIT: Duration = Duration::from_millis(5);

    /// The deadline as a duration (never zero).
    pub fn duration(self) -> Duration {
        match self {
            Self::Nanosecond => Duration::from_nanos(1),
            Self::Short => Duration::from_micros(50),
            Self::Long => Duration::from_micros(500),
            Self::Unbounded => Duration::MAX,
            Self::Exact(duration) => duration.max(Duration::from_nanos(1)),
        }
    }

    /// Whether a wait with this deadline may run on work that cannot finish
    /// (it then lasts the whole deadline).
    pub fn bounded(self) -> bool {
        self.duration() <= Self::BLOCKED_LIMIT
    }
}

/// Cancellation mode of an [`Op::WaitBounded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, arbitrary::Arbitrary)]
pub enum Mode {
    /// `CompletionCancellationMode::NativeCancel`.
    NativeCancel,
    /// `CompletionCancellationMode::QuarantineUntilComplete`.
    Quarantine,
}

impl Mode {
    /// The eredu mode.
    pub fn cancellation(self) -> CompletionCancellationMode {
        match self {
            Self::NativeCancel => CompletionCancellationMode::NativeCancel,
            Self::Quarantine => CompletionCancellationMode::QuarantineUntilComplete,
        }
    }
}

/// One step of a sequence run on rank 0 of a world of two ranks (or up to
/// four: [`check_sequence_sized`](super::check_sequence_sized)).
///
/// `sub` indexes the submissions made so far, in submission order, modulo
/// their number; `lane` indexes the rank's executors (lane 0 is the rank's
/// own executor, forks follow), modulo their number. An operation the model
/// says cannot run in the current state (no submission yet, a completion
/// already consumed, a wait that would not return, ...) is skipped and
/// counted in [`super::Stats::skipped`]; every other one acts on the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, arbitrary::Arbitrary)]
pub enum Op {
    /// Submits `work` on `lane`; with `fault`, injects a fault into the
    /// lane's next work item first (only when every earlier item on the lane
    /// is known to have finished, so the fault lands on this submission).
    Submit {
        /// What to submit.
        work: Work,
        /// On which executor.
        lane: u8,
        /// Inject a fault first (fault instrument).
        fault: bool,
    },
    /// Lets submission `sub` complete: releases its hold, or lets the late
    /// peer join its round.
    Release {
        /// Which submission.
        sub: u8,
    },
    /// [`Op::Release`], except that the late peer joins `delay` × 10 µs
    /// later (held work is released at once): a bounded wait made next races
    /// the completion.
    LateRelease {
        /// Which submission.
        sub: u8,
        /// The peer's delay, in units of 10 µs.
        delay: u8,
    },
    /// `Completion::is_complete`.
    IsComplete {
        /// Which submission.
        sub: u8,
    },
    /// `Completion::wait`, only when the model says the work will finish.
    Wait {
        /// Which submission.
        sub: u8,
    },
    /// `BoundedCompletion::wait_bounded` (consumes the completion).
    WaitBounded {
        /// Which submission.
        sub: u8,
        /// Deadline.
        timeout: Timeout,
        /// Disposition at the deadline.
        mode: Mode,
    },
    /// Drops the caller's output tensors (inputs are dropped at submission).
    DropOutputs {
        /// Which submission.
        sub: u8,
    },
    /// Drops the completion, in whatever state its work is.
    DropCompletion {
        /// Which submission.
        sub: u8,
    },
    /// `SubmissionBackend::fork_executors(executor, count % 3)`: new lanes.
    Fork {
        /// How many (modulo 3).
        count: u8,
    },
    /// `SubmissionBackend::order_after(completion of sub, lane)` (plain
    /// submissions only).
    OrderAfter {
        /// The producer submission.
        sub: u8,
        /// The lane whose later work is ordered, counted from the lane after
        /// the producer's (modulo the other lanes; the producer's own lane
        /// when it is the only one).
        lane: u8,
    },
    /// `SubmissionBackend::retain_until_complete` of a drop flag (plain
    /// submissions only).
    Retain {
        /// Which submission.
        sub: u8,
    },
    /// Drops a forked lane's owned executor (`lane` modulo the forks still
    /// held), with whatever work is queued on it: that work must still
    /// complete once released (RET-2). Later operations on the lane are
    /// skipped. Input format 2 and later.
    DropLane {
        /// Which fork.
        lane: u8,
    },
    /// `submit_local_dependencies` with no tensors on an idle `lane`: it
    /// must complete promptly (EXC-10). Skipped while earlier work on the
    /// lane is unfinished or a fault is armed on it. Input format 2 and later.
    EmptyLocal {
        /// Which lane.
        lane: u8,
    },
    /// `submit` of lazy (unmaterialised) values built from a materialised
    /// one on an idle `lane`: once complete, every given value reads back
    /// materialised and exact (SUB-2). Skipped without a lazy operation in
    /// the tensor context. Input format 2 and later.
    SubmitLazy {
        /// Which lane.
        lane: u8,
    },
    /// A refused submission on an idle `lane` (the submission-fault
    /// instrument armed, the lane held where the hold instrument exists):
    /// it must return `Err` and leave no live work behind, its inputs freed
    /// once dropped (SUB-4). `local` picks `submit_local_dependencies`, else
    /// `submit`. Input format 2 and later.
    Refused {
        /// Which submission API.
        local: bool,
        /// Which lane.
        lane: u8,
    },
    /// Plain work submitted (held) on a fork, forked first when none is
    /// held, then that fork's executor dropped: [`Op::DropLane`]'s RET-2
    /// shape in one operation. Input format 2 and later.
    DropQueued {
        /// Which held fork.
        lane: u8,
    },
    /// A held producer on `lane`, `order_after` it on the next lane (forked
    /// when there is one), a consumer there, and the consumer's release:
    /// the consumer must not complete before its producer (SUB-3's shape in
    /// one operation). Input format 2 and later.
    OrderedPair {
        /// The producer's lane.
        lane: u8,
    },
}

/// Prints the work as a Rust expression (`Work::Agree { votes: [true, false] }`).
impl std::fmt::Display for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SendReceive { values, header } => write!(
                f,
                "Work::SendReceive {{ values: {values}, header: Header::{header:?} }}"
            ),
            other => write!(f, "Work::{other:?}"),
        }
    }
}

/// Prints the deadline as a Rust expression.
impl std::fmt::Display for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exact(d) => write!(
                f,
                "Timeout::Exact(Duration::new({}, {}))",
                d.as_secs(),
                d.subsec_nanos()
            ),
            other => write!(f, "Timeout::{other:?}"),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mode::{self:?}")
    }
}

/// Prints the operation as a Rust expression (`Op::Wait { sub: 0 }`).
impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Submit { work, lane, fault } => {
                write!(
                    f,
                    "Op::Submit {{ work: {work}, lane: {lane}, fault: {fault} }}"
                )
            }
            Self::Release { sub } => write!(f, "Op::Release {{ sub: {sub} }}"),
            Self::LateRelease { sub, delay } => {
                write!(f, "Op::LateRelease {{ sub: {sub}, delay: {delay} }}")
            }
            Self::IsComplete { sub } => write!(f, "Op::IsComplete {{ sub: {sub} }}"),
            Self::Wait { sub } => write!(f, "Op::Wait {{ sub: {sub} }}"),
            Self::WaitBounded { sub, timeout, mode } => write!(
                f,
                "Op::WaitBounded {{ sub: {sub}, timeout: {timeout}, mode: {mode} }}"
            ),
            Self::DropOutputs { sub } => write!(f, "Op::DropOutputs {{ sub: {sub} }}"),
            Self::DropCompletion { sub } => write!(f, "Op::DropCompletion {{ sub: {sub} }}"),
            Self::Fork { count } => write!(f, "Op::Fork {{ count: {count} }}"),
            Self::OrderAfter { sub, lane } => {
                write!(f, "Op::OrderAfter {{ sub: {sub}, lane: {lane} }}")
            }
            Self::Retain { sub } => write!(f, "Op::Retain {{ sub: {sub} }}"),
            Self::DropLane { lane } => write!(f, "Op::DropLane {{ lane: {lane} }}"),
            Self::EmptyLocal { lane } => write!(f, "Op::EmptyLocal {{ lane: {lane} }}"),
            Self::SubmitLazy { lane } => write!(f, "Op::SubmitLazy {{ lane: {lane} }}"),
            Self::Refused { local, lane } => {
                write!(f, "Op::Refused {{ local: {local}, lane: {lane} }}")
            }
            Self::DropQueued { lane } => write!(f, "Op::DropQueued {{ lane: {lane} }}"),
            Self::OrderedPair { lane } => write!(f, "Op::OrderedPair {{ lane: {lane} }}"),
        }
    }
}

/// A sequence of operations. `Display` prints it as a `vec![...]` literal
/// that compiles with `use commcheck::model::*; use std::time::Duration;`; `arbitrary` decodes one
/// from fuzzer bytes (derived, or [`Sequence::from_bytes`] with a length cap).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, arbitrary::Arbitrary)]
pub struct Sequence(pub Vec<Op>);

impl Sequence {
    /// Decodes up to `max_len` operations from fuzzer bytes with `arbitrary`
    /// (what a cargo-fuzz target does); never fails, running out of bytes
    /// simply ends the sequence.
    pub fn from_bytes(data: &[u8], max_len: usize) -> Self {
        let mut input = arbitrary::Unstructured::new(data);
        let mut ops = Vec::new();
        while ops.len() < max_len && !input.is_empty() {
            match <Op as arbitrary::Arbitrary>::arbitrary(&mut input) {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        Self(ops)
    }
}

impl std::ops::Deref for Sequence {
    type Target = [Op];

    fn deref(&self) -> &[Op] {
        &self.0
    }
}

impl From<Vec<Op>> for Sequence {
    fn from(ops: Vec<Op>) -> Self {
        Self(ops)
    }
}

impl std::fmt::Display for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("vec![]");
        }
        f.write_str("vec![\n")?;
        for op in &self.0 {
            writeln!(f, "    {op},")?;
        }
        f.write_str("]")
    }
}
