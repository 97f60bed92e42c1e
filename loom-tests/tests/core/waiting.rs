//! Models of waits and observations racing the worker: blocked waiters
//! are woken (EXC-4, EXC-5, CAN-5), observers never see live work complete
//! or releasable (EXC-2, EXC-3, EXC-8), published errors stay (EXC-6,
//! EXC-7).

use std::time::Instant;

use commcheck_cpu::loom_core::CancelRequest;
use commcheck_cpu::{CpuError, Phase};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

use crate::explore::*;
use crate::harness::*;
use crate::mirrors::*;

/// Wait vs completion (EXC-4, EXC-5; CAN-5 for the release wait): two
/// threads block on different conditions, `wait()` (terminal or error, no
/// deadline) and a wait for the release (what a NativeCancel teardown waits
/// for) with a deadline (the branch `wait_bounded` blocks in), while the
/// worker moves the work through start, finish and release. Both wake,
/// whatever the interleaving (no lost wake-up), and neither returns early.
pub(crate) const WAITERS: Model = Model {
    name: "waiters_are_woken_by_every_change",
    bound: 4,
    liveness: "EXC-4",
    run: |variant| {
        let core = shared(variant.core(Vec::new()));
        let finished = shared(AtomicBool::new(false));
        let waiters: Vec<_> = [false, true]
            .into_iter()
            .map(|for_release| {
                let core = core.clone();
                let finished = finished.clone();
                spawn(move || {
                    if for_release {
                        // A bounded wait: loom's `wait_timeout` never times
                        // out, so this covers the deadline branch's waiter
                        // registration.
                        let deadline = Instant::now() + std::time::Duration::from_secs(3600);
                        let seen = core.wait_for(Some(deadline), |seen| seen.released);
                        assert!(
                            seen.phase.is_terminal(),
                            "CAN-5 violated: the teardown wait saw the release of live work ({:?})",
                            seen.phase
                        );
                    } else {
                        let waited = wait(&core);
                        assert!(
                            finished.load(SeqCst),
                            "EXC-4 violated: wait() returned before the work completed"
                        );
                        assert_eq!(waited, Ok(()), "EXC-4 violated: wait() on successful work");
                        assert_eq!(
                            is_complete(&core),
                            Ok(true),
                            "EXC-5 violated: is_complete() after wait() returned Ok(())"
                        );
                    }
                })
            })
            .collect();
        assert!(core.start());
        finished.store(true, SeqCst);
        let retained = core.finish(Ok(())).expect("running work finishes once");
        drop(retained);
        core.mark_released();
        for waiter in waiters {
            waiter.join().unwrap();
        }
    },
};

/// `is_complete` / `resources_releasable` vs completion (EXC-2, EXC-3,
/// EXC-8): an observer polls both while the worker runs and a NativeCancel
/// request arrives. `is_complete` is never `Ok(true)` and
/// `resources_releasable` never `true` while native work is live (a
/// cancellation request alone is not release), and `Ok(true)` stays.
pub(crate) const OBSERVERS: Model = Model {
    name: "observers_race_completion",
    bound: 4,
    liveness: "EXC-1",
    run: |variant| {
        let core = shared(variant.core(Vec::new()));
        let live = shared(AtomicBool::new(false));
        let worker = {
            let core = core.clone();
            let live = live.clone();
            spawn(move || execute(&core, &live, |cancelled| !cancelled))
        };
        let canceller = {
            let core = core.clone();
            spawn(move || {
                if let CancelRequest::TornDown(retained) = core.request_cancel("model") {
                    drop(retained);
                    core.mark_released();
                }
            })
        };
        let mut reported_true = false;
        for _ in 0..2 {
            let complete = is_complete(&core);
            let releasable = resources_releasable(&core);
            let live_now = live.load(SeqCst);
            if complete == Ok(true) {
                assert!(
                    !live_now,
                    "EXC-2 violated: is_complete() is Ok(true) while the work runs"
                );
            }
            if releasable {
                assert!(
                    !live_now,
                    "EXC-8 violated: resources_releasable() is true while native work is live"
                );
            }
            if reported_true {
                assert_eq!(
                    complete,
                    Ok(true),
                    "EXC-3 violated: is_complete() after Ok(true)"
                );
            }
            reported_true = complete == Ok(true);
        }
        worker.join().unwrap();
        canceller.join().unwrap();
        let seen = core.observe();
        assert!(seen.phase.is_terminal() && seen.released);
    },
};

/// Sticky errors vs concurrent observers (EXC-6, EXC-7): an error published
/// while the work is live (an asynchronous fault) is seen by two observers
/// at arbitrary points. Once one saw it, it never sees success again; the
/// work ends `Failed` with it and `wait()` reports it; publishing it
/// released nothing.
pub(crate) const PUBLISHED_ERRORS: Model = Model {
    name: "published_errors_stay",
    bound: 4,
    liveness: "EXC-4",
    run: |variant| {
        let drops = shared(AtomicUsize::new(0));
        let live = shared(AtomicBool::new(false));
        let core = shared(variant.core(vec![resource(&drops, &live, "EXC-7")]));
        assert!(core.start());
        let worker = {
            let core = core.clone();
            let live = live.clone();
            let drops = drops.clone();
            spawn(move || {
                live.store(true, SeqCst);
                core.publish_error(CpuError::Cancelled { operation: "fault" });
                touch(&drops, "EXC-7");
                live.store(false, SeqCst);
                if let Some(retained) = core.finish(Ok(())) {
                    drop(retained);
                    core.mark_released();
                }
            })
        };
        let observer = {
            let core = core.clone();
            spawn(move || {
                let first = core.observe();
                let then = core.observe();
                if first.error.is_some() {
                    assert!(
                        then.error.is_some(),
                        "EXC-6 violated: an observer saw the error, then none"
                    );
                }
            })
        };
        let first = core.observe();
        let last = core.wait_for(None, |seen| seen.released);
        worker.join().unwrap();
        observer.join().unwrap();
        if first.error.is_some() {
            assert!(
                last.error.is_some(),
                "EXC-6 violated: the error was seen, then none ({last:?})"
            );
        }
        assert!(
            last.error.is_some() && last.phase == Phase::Failed,
            "EXC-6 violated: the error published while the work was live is gone ({last:?})"
        );
        assert!(
            wait(&core).is_err(),
            "EXC-6 violated: wait() reports success after an error was published"
        );
    },
};
