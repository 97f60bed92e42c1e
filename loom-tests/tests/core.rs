//! Interleavings of work completion, cancellation, retention and observation
//! on one completion core (RET-4, RET-6, EXC-6, CAN-5), and the wake-ups of
//! threads blocked on it.
#![cfg(commcheck_loom)]

use commcheck_cpu::loom_core::{CancelRequest, Core, Retained};
use commcheck_cpu::{CpuError, Phase};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A retained value that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted(drops: &Arc<AtomicUsize>) -> Retained {
    Box::new(Counted(Arc::clone(drops)))
}

/// The worker finishes while a `NativeCancel` request arrives: exactly one
/// party releases the retained value, exactly once, and only at a terminal
/// state; the phase is Completed or Cancelled, never anything else.
#[test]
fn finish_races_cancel() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let core = Arc::new(Core::new(vec![counted(&drops)]));
        let worker = {
            let core = Arc::clone(&core);
            thread::spawn(move || {
                if core.start() {
                    let cancelled = core.cancel_requested();
                    let outcome = if cancelled {
                        Err(CpuError::Cancelled { operation: "model" })
                    } else {
                        Ok(())
                    };
                    if let Some(retained) = core.finish(outcome) {
                        drop(retained);
                        core.mark_released();
                    }
                }
            })
        };
        match core.request_cancel("model") {
            CancelRequest::TornDown(retained) => {
                drop(retained);
                core.mark_released();
            }
            CancelRequest::Requested | CancelRequest::AlreadyTerminal => {
                core.wait_for(None, |seen| seen.released);
            }
        }
        worker.join().unwrap();
        let seen = core.observe();
        assert!(matches!(seen.phase, Phase::Completed | Phase::Cancelled));
        assert!(seen.released);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// `retain_until_complete` racing completion: the value is either kept and
/// released by the finisher, or handed back to the caller; never lost, never
/// dropped twice, never dropped before the terminal state.
#[test]
fn retain_races_finish() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let core = Arc::new(Core::new(Vec::new()));
        assert!(core.start());
        let finisher = {
            let core = Arc::clone(&core);
            thread::spawn(move || {
                let retained = core.finish(Ok(())).expect("running work finishes once");
                drop(retained);
                core.mark_released();
            })
        };
        match core.retain(counted(&drops)) {
            Ok(()) => {}
            Err(already_complete) => {
                assert!(core.observe().phase.is_terminal());
                drop(already_complete);
            }
        }
        finisher.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// An error published while work is live is sticky: observers that saw it
/// never see success afterwards, and the work still reaches `Failed`.
#[test]
fn published_errors_stay() {
    loom::model(|| {
        let core = Arc::new(Core::new(Vec::new()));
        assert!(core.start());
        let worker = {
            let core = Arc::clone(&core);
            thread::spawn(move || {
                core.publish_error(CpuError::Cancelled { operation: "fault" });
                core.finish(Ok(()));
                core.mark_released();
            })
        };
        let first = core.observe();
        let last = core.wait_for(None, |seen| seen.released);
        worker.join().unwrap();
        if first.error.is_some() {
            assert!(last.error.is_some());
        }
        assert_eq!(last.phase, Phase::Failed);
    });
}

/// Changes wake blocked waiters only when some are registered: two threads
/// blocked on different conditions both wake, whatever the interleaving
/// with the worker's transitions (no lost wake-up, so no deadlock).
#[test]
fn waiters_are_woken_by_every_change() {
    loom::model(|| {
        let core = Arc::new(Core::new(Vec::new()));
        let waiters: Vec<_> = [false, true]
            .into_iter()
            .map(|for_release| {
                let core = Arc::clone(&core);
                thread::spawn(move || {
                    let seen = core.wait_for(None, |seen| {
                        if for_release {
                            seen.released
                        } else {
                            seen.phase.is_terminal()
                        }
                    });
                    assert!(seen.phase.is_terminal());
                })
            })
            .collect();
        assert!(core.start());
        let retained = core.finish(Ok(())).expect("running work finishes once");
        drop(retained);
        core.mark_released();
        for waiter in waiters {
            waiter.join().unwrap();
        }
    });
}

/// Work complete at submission is terminal and released from the start: a
/// value to retain is handed back at once, a cancellation finds the work
/// terminal, and a wait returns at once.
#[test]
fn completed_at_birth() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let core = Arc::new(Core::completed());
        let seen = core.wait_for(None, |seen| seen.released);
        assert_eq!(seen.phase, Phase::Completed);
        assert!(seen.error.is_none());
        let handed_back = core
            .retain(counted(&drops))
            .expect_err("terminal work retains nothing");
        drop(handed_back);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert!(matches!(
            core.request_cancel("model"),
            CancelRequest::AlreadyTerminal
        ));
    });
}
