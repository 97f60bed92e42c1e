//! Which SPEC ID a divergence names, and how it is worded: the mapping from
//! what a submission went through (its subject, why it was blocked, what
//! the sequence did to it) to the invariant its misbehaviour violates
//! (value semantics SUM-1, GAT-1, ...; retention RET-1, RET-3..RET-6; EXC-7
//! after an error, CAN-6 after quarantine, CAN-7 after `Err`; SUB-3 for
//! ordering), and what a hang at an operation is blamed on (EXC-1, EXC-4,
//! CAN-2, CAN-8).

use std::time::Duration;

use super::op::Op;
use super::reference::{HandleState, Reason, Record, Status};
use crate::check::Finding;
use crate::matrix::Subject;

/// Deadlines from this one on are CAN-8's edge: a backend that adds them to
/// an `Instant` may overflow.
const OVERFLOW_EDGE: Duration = Duration::from_secs(365 * 24 * 3600);

/// How a divergence ends whose cause the kit cannot place: an injected fault
/// that did not fail the work it was armed for, and may have failed other
/// work (a lazy launch, or the fault instrument's reading of "the next native
/// work item"). No invariant is named, and the fuzz targets do not report it
/// ([`super::Divergence::fault_unplaced`]).
pub(crate) const UNPLACED_FAULT: &str =
    "the kit cannot tell where the injected fault landed, so no invariant is named";

/// How a divergence ends that rests on how long something took: a wait the
/// kit bounds by time (the late peer's side finishing) that expired. On a
/// loaded machine the kit cannot vouch for that time, so no invariant is
/// named and the fuzz targets do not report it
/// ([`super::Divergence::inconclusive`]).
pub(crate) const UNVOUCHED_TIME: &str =
    "the kit cannot vouch for that time on a loaded machine, so no invariant is named";

/// A wait the kit bounded by time expired: inconclusive, not a violation
/// (see [`UNVOUCHED_TIME`]).
pub(super) fn out_of_time(message: String) -> Breach {
    harness_breach(format!("{message}: {UNVOUCHED_TIME}"))
}

/// A divergence found on rank 0, before the step index is attached.
#[derive(Debug)]
pub(crate) struct Breach {
    /// The SPEC ID violated; `None` for a harness failure.
    pub(crate) id: Option<&'static str>,
    pub(crate) message: String,
}

pub(super) fn breach(id: &'static str, message: String) -> Breach {
    Breach {
        id: Some(id),
        message,
    }
}

pub(super) fn harness_breach(message: String) -> Breach {
    Breach { id: None, message }
}

pub(super) fn from_finding(finding: Finding, id: &'static str, what: &str) -> Breach {
    match finding {
        Finding::Violation(message) => breach(id, format!("{what}: {message}")),
        Finding::NotSupported(message)
        | Finding::Harness(message)
        | Finding::Inconclusive(message)
        | Finding::NothingToCheck(message) => harness_breach(format!("{what}: {message}")),
    }
}

/// The invariant an unexpected failure of clean work violates: the
/// operation's own value semantics (SUB-2 for local work).
pub(super) fn value_id(subject: Subject) -> &'static str {
    use crate::operation::Operation::*;
    match subject.operation() {
        None => "SUB-2",
        Some(AllReduceSum) => "SUM-1",
        Some(AllGatherEven) => "GAT-1",
        Some(AllGatherUneven) => "GAT-2",
        Some(VariableAllToAll) => "A2A-1",
        Some(SendReceive) => "P2P-1",
        Some(Broadcast) => "BRD-1",
        Some(Barrier) => "BAR-1",
        Some(AgreeSuccess) => "AGR-1",
    }
}

/// What a blocked submission is waiting for, for messages.
pub(super) fn why(reason: Reason) -> String {
    match reason {
        Reason::Hold => "a hold on its lane was not released".into(),
        Reason::Peer => "its late peer had not joined".into(),
        Reason::Order { producer } => {
            format!("it is ordered after submission {producer}, which could not have completed")
        }
    }
}

/// The invariant broken by work that finished although it was blocked.
pub(super) fn early_id(subject: Subject, reason: Reason) -> Option<&'static str> {
    match reason {
        // A hold that does not hold is the harness's fault, not the backend's.
        Reason::Hold => None,
        Reason::Peer => Some(value_id(subject)),
        Reason::Order { .. } => Some("SUB-3"),
    }
}

/// Which kind of resource was found released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Freed {
    Input,
    Output,
    Retained,
}

/// The invariant broken by releasing `freed` while the work is live, given
/// what the sequence did to the submission (most specific first).
pub(super) fn freed_id(record: &Record, freed: Freed) -> &'static str {
    // An `Err` from `wait_bounded` also hands live work to the policy's
    // disposition (quarantine included): its error path is CAN-7's.
    if record.bounded_error {
        "CAN-7"
    } else if record.quarantined {
        "CAN-6"
    } else if record.handle == HandleState::Dropped {
        "RET-4"
    } else if record.faulted || record.error_seen {
        "EXC-7"
    } else {
        match freed {
            Freed::Retained => "RET-6",
            Freed::Output => "RET-5",
            Freed::Input if record.subject.operation().is_none() => "RET-1",
            Freed::Input => "RET-3",
        }
    }
}

/// What happened to a submission, for messages about its resources.
pub(super) fn history(record: &Record) -> &'static str {
    if record.bounded_error {
        "after wait_bounded returned Err"
    } else if record.quarantined {
        "after wait_bounded handed it to quarantine"
    } else if record.handle == HandleState::Dropped {
        "after its completion was dropped"
    } else if record.faulted {
        "after its injected fault"
    } else {
        "with only the completion retaining it"
    }
}

/// What the evidence cannot tell apart, when [`freed_id`] blamed an injected
/// fault (EXC-7) for a resource no observation ever found retained.
pub(super) fn ambiguity(record: &Record, retained_seen: bool) -> &'static str {
    let fault = !record.bounded_error
        && !record.quarantined
        && record.handle != HandleState::Dropped
        && record.faulted
        && !record.error_seen;
    if fault && !retained_seen {
        "; it was already gone at the first observation, so a backend that never retained it \
         (RET-1, RET-3, RET-5 or RET-6) looks the same from outside"
    } else {
        ""
    }
}

/// The SPEC ID a success of submission `record` would violate: work the
/// contract says must fail, unless it is doomed (a round after a cancelled
/// one may meet that round's stale contribution and complete with it).
pub(super) fn must_fail(record: &Record, status: Status) -> Option<&'static str> {
    record.must_fail.filter(|_| !status.doomed)
}

/// What the watchdog blames if `op` hangs or panics.
pub(super) fn hang_hint(op: Op) -> Option<&'static str> {
    match op {
        Op::Wait { .. } => Some("EXC-4"),
        Op::IsComplete { .. } => Some("EXC-1"),
        Op::EmptyLocal { .. } => Some("EXC-10"),
        Op::SubmitLazy { .. } => Some("SUB-2"),
        // A deadline beyond what `Instant` arithmetic may hold (CAN-8's
        // edge), or an ordinary one that was not kept (CAN-2).
        Op::WaitBounded { timeout, .. } if timeout.duration() >= OVERFLOW_EDGE => Some("CAN-8"),
        Op::WaitBounded { .. } => Some("CAN-2"),
        _ => None,
    }
}
