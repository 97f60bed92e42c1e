//! CAN: bounded completion and cancellation teardown (safety).
//!
//! `wait_bounded` observes exact completion until its deadline, then applies
//! the policy's disposition: `NativeCancel` returns only after native teardown
//! has finished; `QuarantineUntilComplete` hands the live work and everything
//! it retains to an owner that releases them after exact completion. An `Err`
//! carries the same obligation. These rows run on every completion with a
//! bounded wait (local dependencies and every claimed operation), once per
//! cancellation mode the backend claims. A mode it does not claim
//! (`supports_cancellation` is false) is not a missing instrument: that part
//! does not apply, and the case passes on its claimed parts, with a note
//! naming the part that did not apply ([`each_mode`](modes::each_mode)). CAN-5 (NativeCancel
//! only) and CAN-6 (quarantine only) are not-supported when their one mode is
//! unclaimed: nothing of them applies.
//!
//! Pending work. The driver keeps work pending: by the hold, by a late peer,
//! or (local subjects of a harness without the hold) by the backend's own lazy
//! work, which is certainly pending only until a known instant
//! ([`crate::matrix::lazy`]). Every check that rests on "the work could not have
//! completed" records whether the work was still surely pending right after
//! `wait_bounded` returned ([`Waited::pending`](outcome::Waited::pending)) or after its observations
//! ([`Seen::pending`](round::Seen::pending)). An outcome that would be a violation, or would leave
//! nothing to check, only because lazy work may have finished is an
//! inconclusive setup finding: the runner retries with more work. A setup
//! step that does not reach its precondition (a stand-in that does not
//! complete, an earlier round that does not drain, an executor stalled by an
//! earlier round) is inconclusive too, never a violation of the case's
//! invariant; only what the row's invariant states is a violation.
//!
//! Choreography. Every round takes the completion out of its [`Pending`](crate::matrix::Pending) (a
//! completed stand-in takes its place), drops every caller-side handle, and
//! keeps an observer, liveness probes and a ledger snapshot from before
//! submission (those the harness provides). Quarantined rounds are released
//! and drained before the next round starts. Rounds cancelled natively on
//! late-peer subjects are kept unreleased until the case ends, so no peer ever
//! joins a cancelled collective while a later round waits for it (a cancelled
//! receive would otherwise leave the peer's message for the next one); the
//! quarantine part of a case therefore always runs first. Work about to be
//! cancelled with a deadline shorter than [`slack::SETTLE`](crate::check::slack::SETTLE) is first given
//! that long to start. Rounds whose work must complete before the call use
//! light work even where lazy work keeps the subject pending.
//!
//! Files: [`modes`] (each claimed cancellation mode in turn), [`outcome`]
//! (what a bounded wait returned, and how messages word it), [`round`] (one
//! pending submission waited on with a bound), [`disposition`] (the
//! teardown and quarantine dispositions CAN-5..8 observe), then one file per
//! invariant group: [`reporting`] (CAN-1..4), [`teardown`] (CAN-5, CAN-6),
//! [`errors`] (CAN-7, CAN-9), [`edges`] (CAN-8).

mod disposition;
mod edges;
mod errors;
mod modes;
mod outcome;
mod reporting;
mod round;
mod teardown;

pub(crate) use modes::unclaimed_mode;

use self::edges::edge_deadlines_are_safe;
use self::errors::{errors_never_drop_live_work, failed_work_is_an_error};
use self::reporting::{
    completion_is_reported_exactly, deadline_is_honoured, reported_mode_is_the_policy_mode,
    supported_modes_are_honoured,
};
use self::round::DISPOSITION;
use self::teardown::{native_cancel_finishes_teardown, quarantine_retains_until_completion};
use crate::case::{Body, Row};
use crate::harness::Harness;
use crate::suites::common::{bounded, holds_storage, needs};

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "CAN-1",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::MatrixPartDone(completion_is_reported_exactly::<H>),
        },
        Row {
            id: "CAN-2",
            applies: bounded,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::MatrixPartDone(deadline_is_honoured::<H>),
        },
        Row {
            id: "CAN-3",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::MatrixPartDone(reported_mode_is_the_policy_mode::<H>),
        },
        Row {
            id: "CAN-4",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::MatrixPartDone(supported_modes_are_honoured::<H>),
        },
        Row {
            id: "CAN-5",
            applies: bounded,
            requires: DISPOSITION,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(native_cancel_finishes_teardown::<H>),
        },
        // Probes decide CAN-6 where the work holds storage (the observer and
        // the ledger, when offered, add its state and quarantine count);
        // where it holds none, only they see anything.
        Row {
            id: "CAN-6",
            applies: |s| bounded(s) && holds_storage(s),
            requires: needs::PROBE,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(quarantine_retains_until_completion::<H>),
        },
        Row {
            id: "CAN-6",
            applies: |s| bounded(s) && !holds_storage(s),
            requires: DISPOSITION,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(quarantine_retains_until_completion::<H>),
        },
        Row {
            id: "CAN-7",
            applies: bounded,
            // Its rounds hold the subject's executor (late-peer subjects too).
            requires: DISPOSITION.and(needs::FAULT).and(needs::HOLD),
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(errors_never_drop_live_work::<H>),
        },
        Row {
            id: "CAN-8",
            applies: bounded,
            // The CAN-5..7 dispositions are observed when DISPOSITION is present.
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(edge_deadlines_are_safe::<H>),
        },
        Row {
            id: "CAN-9",
            applies: bounded,
            // The observer, when offered, says the work failed; without it,
            // the backend's own error report does (see errors.rs).
            requires: needs::FAULT,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(failed_work_is_an_error::<H>),
        },
    ]
}
