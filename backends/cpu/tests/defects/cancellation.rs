//! Scenarios of the bounded-wait and cancellation defects (CAN-1 to
//! CAN-9): deadlines, the reported mode, NativeCancel teardown and quarantine.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use commcheck_cpu::{CpuBackend, CpuDevice, Phase};
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, Completion};
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use crate::common::*;
use crate::support::*;

pub(crate) fn completed_at_deadline(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let outcome = c.wait_bounded(policy(Duration::from_millis(20), QUARANTINE));
    drop(hold);
    outcome == COMPLETED
}

pub(crate) fn early_deadline(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let timeout = Duration::from_millis(200);
    let started = Instant::now();
    let outcome = c.wait_bounded(policy(timeout, QUARANTINE));
    let elapsed = started.elapsed();
    drop(hold);
    assert!(outcome.is_ok(), "{outcome:?}");
    elapsed < timeout
}

pub(crate) fn wrong_cancellation_mode(d: &CpuDevice) -> bool {
    let e = d.executor();
    [NATIVE, QUARANTINE].into_iter().any(|mode| {
        let hold = e.hold();
        let c = CpuBackend::submit(&e, []).unwrap();
        let outcome = c.wait_bounded(policy(Duration::from_millis(5), mode));
        drop(hold);
        outcome != Ok(BoundedCompletionOutcome::DeadlineExceeded { cancellation: mode })
    })
}

pub(crate) fn native_cancel_errors(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let outcome = c.wait_bounded(policy(Duration::from_millis(5), NATIVE));
    drop(hold);
    outcome.is_err()
}

/// A send past the `rendezvous` personality's switch (the device takes it
/// with the defect) whose receiver never posts: a NativeCancel deadline.
pub(crate) fn rendezvous_cancel_errors(d: &CpuDevice) -> bool {
    let (send, _) = large_send(d);
    let outcome = send
        .completion
        .wait_bounded(policy(Duration::from_millis(5), NATIVE));
    outcome.is_err()
}

pub(crate) fn native_cancel_no_teardown(d: &CpuDevice) -> bool {
    // Under the defect, the worker notices the request only once the hold
    // ends, so held work is still live when the call returns; a correct
    // device never returns before teardown. (Only the phase is checked here;
    // `native_cancel_releases_everything_before_returning` checks the
    // release of the retained resources.)
    let e = d.executor();
    let hold = e.hold();
    let sub = CpuBackend::submit(&e, []).unwrap();
    let observer = sub.observer();
    assert!(eventually(|| observer.observe().phase == Phase::Running));
    let outcome = sub.wait_bounded(policy(Duration::from_millis(1), NATIVE));
    let torn_down = observer.is_terminal();
    drop(hold);
    assert!(observer.wait_terminal(BOUND));
    assert!(outcome.is_ok(), "{outcome:?}");
    !torn_down
}

pub(crate) fn quarantine_drops_live(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(t);
    let observer = sub.completion.observer();
    let outcome = sub
        .completion
        .wait_bounded(policy(Duration::from_millis(5), QUARANTINE));
    let freed = !d.storage_live(id);
    drop(hold);
    assert!(observer.wait_terminal(BOUND));
    assert!(outcome.is_ok(), "{outcome:?}");
    freed
}

pub(crate) fn error_drops_live(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    e.inject_fault();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(t);
    let observer = sub.completion.observer();
    // The fault is published while the work is held: `Err` with live work.
    let outcome = sub.completion.wait_bounded(policy(BOUND, QUARANTINE));
    let freed_while_live = !d.storage_live(id) && !observer.is_terminal();
    drop(hold);
    assert!(observer.wait_terminal(BOUND));
    assert!(outcome.is_err(), "{outcome:?}");
    freed_while_live
}

pub(crate) fn deadline_overflow(d: &CpuDevice) -> bool {
    let e = d.executor();
    let c = CpuBackend::submit(&e, []).unwrap();
    c.wait().unwrap();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        c.wait_bounded(policy(Duration::MAX, NATIVE))
    }));
    !matches!(outcome, Ok(Ok(BoundedCompletionOutcome::Completed)))
}

pub(crate) fn failed_is_completed(d: &CpuDevice) -> bool {
    let e = d.executor();
    e.inject_fault();
    let c = CpuBackend::submit(&e, []).unwrap();
    assert!(c.observer().wait_terminal(BOUND));
    c.wait_bounded(policy(BOUND, NATIVE)) == COMPLETED
}
