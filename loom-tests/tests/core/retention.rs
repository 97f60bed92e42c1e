//! Models of what the work retains and when it is released: the last
//! handle dropped during completion (RET-4, RET-7), `retain_until_complete`
//! racing the work (RET-6), and work complete at submission (EXC-10, EXC-5,
//! RET-6).

use commcheck_cpu::loom_core::{CancelRequest, Core, Retained};
use commcheck_cpu::{Defect, Phase};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;

use crate::explore::*;
use crate::harness::*;
use crate::mirrors::*;

/// A handle on the work, dropped as `CpuCompletion::drop` drops it: through
/// the core only under the backend's planted RET-4 defect
/// (`Defect::DropReleasesPending`), which releases pending work's values.
pub(crate) struct Handle {
    core: Leak<Arc<Core>>,
    variant: Variant,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        if self.variant == Variant::Backend(Defect::DropReleasesPending)
            && !self.core.observe().phase.is_terminal()
        {
            drop(self.core.take_retained());
        }
    }
}

/// Drop of the last handle vs completion (RET-4, RET-7): the user drops its
/// completion while the executor, holding its own handle, runs the work.
/// Whichever handle goes last, the retained value is released once, after
/// the native work stopped using it, and never leaked.
pub(crate) const LAST_HANDLE: Model = Model {
    name: "last_handle_races_completion",
    bound: 4,
    liveness: "RET-7",
    run: |variant| {
        let drops = shared(AtomicUsize::new(0));
        let live = shared(AtomicBool::new(false));
        let core = shared(variant.core(vec![resource(&drops, &live, "RET-4")]));
        let worker = {
            let core = core.clone();
            let live = live.clone();
            let drops = drops.clone();
            spawn(move || {
                execute(&core, &live, |_| {
                    touch(&drops, "RET-4");
                    true
                });
            })
        };
        let user = spawn(move || drop(Handle { core, variant }));
        worker.join().unwrap();
        user.join().unwrap();
        let released = drops.load(SeqCst);
        assert_eq!(
            released, 1,
            "RET-7 violated: the retained value was released {released} times once the work \
             completed and every handle was dropped"
        );
    },
};

/// A `retain_until_complete` value: counts its drops and checks that it is
/// not dropped before the work completed (`done` is set just before `finish`).
pub(crate) struct Value {
    drops: Leak<Arc<AtomicUsize>>,
    done: Leak<Arc<AtomicBool>>,
}

impl Drop for Value {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        assert!(
            self.done.load(SeqCst),
            "RET-6 violated: a retained value was dropped before the work completed"
        );
        self.drops.fetch_add(1, SeqCst);
    }
}

pub(crate) fn value(drops: &Leak<Arc<AtomicUsize>>, done: &Leak<Arc<AtomicBool>>) -> Retained {
    Box::new(Value {
        drops: drops.clone(),
        done: done.clone(),
    })
}

/// `retain_until_complete` racing the work (RET-6): while the executor
/// starts and finishes the work, the value is either kept and released by
/// the finisher, or handed back to the caller because the work is already
/// terminal; never dropped before completion, never lost, never dropped twice.
pub(crate) const RETAIN_RACES_FINISH: Model = Model {
    name: "retain_races_finish",
    bound: 5,
    liveness: "RET-6",
    run: |variant| {
        let drops = shared(AtomicUsize::new(0));
        let done = shared(AtomicBool::new(false));
        let core = shared(variant.core(Vec::new()));
        let finisher = {
            let core = core.clone();
            let done = done.clone();
            spawn(move || {
                assert!(core.start(), "nothing cancels this work");
                done.store(true, SeqCst);
                let retained = core.finish(Ok(())).expect("running work finishes once");
                drop(retained);
                core.mark_released();
            })
        };
        match core.retain(value(&drops, &done)) {
            Ok(()) => {}
            Err(handed_back) => {
                assert!(
                    core.observe().phase.is_terminal(),
                    "RET-6 violated: the value was handed back while the work is live"
                );
                drop(handed_back);
            }
        }
        finisher.join().unwrap();
        let released = drops.load(SeqCst);
        assert_eq!(released, 1, "RET-6 violated: dropped {released} times");
    },
};

/// Work complete at submission (EXC-10, EXC-5, RET-6): terminal and
/// released from the start, whatever else happens concurrently. A value to
/// retain is handed back at once, a cancellation finds the work terminal,
/// and waits (`wait()`, a teardown's wait for the release) return at once.
pub(crate) const COMPLETED_AT_BIRTH: Model = Model {
    name: "completed_at_birth",
    bound: 5,
    liveness: "EXC-10",
    run: |variant| {
        let drops = shared(AtomicUsize::new(0));
        let done = shared(AtomicBool::new(true));
        let core = shared(variant.completed_core());
        let other = {
            let core = core.clone();
            let drops = drops.clone();
            spawn(move || {
                let handed_back = core
                    .retain(value(&drops, &done))
                    .expect_err("RET-6 violated: complete work kept a value to retain");
                drop(handed_back);
                assert!(
                    matches!(core.request_cancel("model"), CancelRequest::AlreadyTerminal),
                    "EXC-10 violated: complete work is not terminal to a cancellation"
                );
            })
        };
        let seen = core.wait_for(None, |seen| seen.released);
        assert_eq!(seen.phase, Phase::Completed, "EXC-10 violated: {seen:?}");
        assert!(seen.error.is_none(), "EXC-10 violated: {seen:?}");
        assert_eq!(wait(&core), Ok(()), "EXC-10 violated: wait()");
        assert_eq!(
            is_complete(&core),
            Ok(true),
            "EXC-5 violated: is_complete()"
        );
        other.join().unwrap();
        assert_eq!(
            drops.load(SeqCst),
            1,
            "RET-6 violated: the handed-back value"
        );
    },
};
