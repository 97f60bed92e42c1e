//! Models of a bounded wait whose deadline fires while the work
//! completes: NativeCancel teardown (CAN-1, CAN-3, CAN-5, RET-7) and the
//! quarantine hand-off (CAN-1, CAN-3, CAN-6, RET-7).

use commcheck_cpu::Phase;
use eredu_core::{BoundedCompletionOutcome, CompletionCancellationMode};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

use crate::explore::*;
use crate::harness::*;
use crate::mirrors::*;

/// The deadline vs completion race under NativeCancel (CAN-1, CAN-3, CAN-5,
/// RET-7): the worker finishes while a `wait_bounded` whose deadline fires
/// tears the work down. The first disposition wins: `Completed` only for
/// work that succeeded; `DeadlineExceeded` reports the policy's mode, after
/// a teardown that finished (terminal, released, no native work left) and
/// that nothing undoes later; the value is released exactly once.
pub(crate) const FINISH_RACES_CANCEL: Model = Model {
    name: "finish_races_cancel",
    bound: 5,
    liveness: "CAN-2",
    run: |variant| {
        let drops = shared(AtomicUsize::new(0));
        let live = shared(AtomicBool::new(false));
        let succeeded = shared(AtomicBool::new(false));
        let core = shared(variant.core(vec![resource(&drops, &live, "CAN-5")]));
        let worker = {
            let core = core.clone();
            let live = live.clone();
            let drops = drops.clone();
            let succeeded = succeeded.clone();
            spawn(move || {
                execute(&core, &live, |cancelled| {
                    touch(&drops, "CAN-5");
                    succeeded.store(!cancelled, SeqCst);
                    !cancelled
                });
            })
        };
        let quarantine = Leak::new(Quarantine::new(Vec::new()));
        let mode = CompletionCancellationMode::NativeCancel;
        let (outcome, after) = wait_bounded_expired(&core, mode, &quarantine);
        match &outcome {
            Ok(BoundedCompletionOutcome::Completed) => assert!(
                succeeded.load(SeqCst),
                "CAN-1 violated: Completed for work that did not succeed ({after:?})"
            ),
            Ok(BoundedCompletionOutcome::DeadlineExceeded { cancellation }) => {
                assert_eq!(*cancellation, mode, "CAN-3 violated: the reported mode");
                assert!(
                    after.cancel_requested && !after.quarantined,
                    "CAN-3 violated: the disposition taken is not NativeCancel ({after:?})"
                );
                assert!(
                    after.phase.is_terminal() && after.released && !live.load(SeqCst),
                    "CAN-5 violated: NativeCancel returned before teardown finished ({after:?})"
                );
            }
            Err(error) => {
                panic!("CAN-4 violated: a NativeCancel deadline returned Err({error})")
            }
        }
        worker.join().unwrap();
        let last = core.observe();
        if matches!(
            outcome,
            Ok(BoundedCompletionOutcome::DeadlineExceeded { .. })
        ) {
            assert_eq!(
                last.phase, after.phase,
                "CAN-5 violated: torn-down work changed state after NativeCancel returned"
            );
        }
        assert!(matches!(last.phase, Phase::Completed | Phase::Cancelled));
        assert!(last.released);
        let released = drops.load(SeqCst);
        assert_eq!(released, 1, "RET-7 violated: released {released} times");
    },
};

/// Quarantine hand-off vs completion (CAN-1, CAN-3, CAN-6, RET-7): the
/// worker finishes while a `wait_bounded` whose deadline fires hands the
/// work to the quarantine owner. A quarantined work item is neither torn
/// down nor released while live, runs to completion, releases its value
/// once, and leaves the quarantine when the owner next looks.
pub(crate) const QUARANTINE: Model = Model {
    name: "quarantine_races_completion",
    bound: 5,
    liveness: "CAN-2",
    run: |variant| {
        let drops = shared(AtomicUsize::new(0));
        let live = shared(AtomicBool::new(false));
        let succeeded = shared(AtomicBool::new(false));
        let core = shared(variant.core(vec![resource(&drops, &live, "CAN-6")]));
        let worker = {
            let core = core.clone();
            let live = live.clone();
            let drops = drops.clone();
            let succeeded = succeeded.clone();
            spawn(move || {
                execute(&core, &live, |cancelled| {
                    touch(&drops, "CAN-6");
                    succeeded.store(!cancelled, SeqCst);
                    !cancelled
                });
            })
        };
        let quarantine = Leak::new(Quarantine::new(Vec::new()));
        let mode = CompletionCancellationMode::QuarantineUntilComplete;
        let (outcome, after) = wait_bounded_expired(&core, mode, &quarantine);
        match &outcome {
            Ok(BoundedCompletionOutcome::Completed) => assert!(
                succeeded.load(SeqCst),
                "CAN-1 violated: Completed for work that did not succeed ({after:?})"
            ),
            Ok(BoundedCompletionOutcome::DeadlineExceeded { cancellation }) => {
                assert_eq!(*cancellation, mode, "CAN-3 violated: the reported mode");
                assert!(
                    after.quarantined && !after.cancel_requested,
                    "CAN-3 violated: the disposition taken is not quarantine alone ({after:?})"
                );
            }
            Err(error) => {
                panic!("CAN-4 violated: a quarantine deadline returned Err({error})")
            }
        }
        worker.join().unwrap();
        let last = core.observe();
        if matches!(
            outcome,
            Ok(BoundedCompletionOutcome::DeadlineExceeded { .. })
        ) {
            assert_eq!(
                last.phase,
                Phase::Completed,
                "CAN-3 violated: quarantined work did not run to completion"
            );
        }
        // The owner drops terminal work when it next looks (`CpuDevice::ledger`).
        let mut owned = quarantine.lock().unwrap();
        owned.retain(|core| !core.observe().phase.is_terminal());
        assert!(
            owned.is_empty(),
            "RET-7 violated: completed work stays quarantined"
        );
        drop(owned);
        drop(core);
        let released = drops.load(SeqCst);
        assert_eq!(released, 1, "RET-7 violated: released {released} times");
    },
};
