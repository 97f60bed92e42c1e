//! Loom models of the CPU completion core (see the crate docs for what each
//! model covers, what is not modelled, and how to run deeper).
//!
//! Every model runs twice: on the shipped core, where loom must find no
//! failing interleaving, and with a mutant planted, where loom must find
//! one and the failure must name the invariant the mutant breaks.
#![cfg(commcheck_loom)]

use std::io::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::time::Instant;

use commcheck_cpu::loom_core::{CancelRequest, Core, Mutant, Retained};
use commcheck_cpu::{CpuError, Defect, Observation, Phase};
use eredu_core::{BoundedCompletionOutcome, CompletionCancellationMode};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};
use loom::thread;

// ---------------------------------------------------------------------------
// Exploration: variants, preemption bounds, counting, failures
// ---------------------------------------------------------------------------

/// Which core a model run explores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// The shipped core.
    Clean,
    /// A loom-only mutant planted in the core (`commcheck_cpu::loom_core::Mutant`).
    Core(Mutant),
    /// A planted defect of the backend, replayed by the model over the core
    /// (for a mechanism that lives outside `core.rs`).
    Backend(Defect),
}

impl Variant {
    /// SPEC ID of the invariant the variant breaks (`None` for the shipped core).
    fn breaks(self) -> Option<&'static str> {
        match self {
            Variant::Clean => None,
            Variant::Core(mutant) => Some(mutant.invariant()),
            Variant::Backend(defect) => Some(defect.invariant()),
        }
    }

    /// A core of queued work retaining `retained`.
    fn core(self, retained: Vec<Retained>) -> Core {
        self.plant(Core::new(retained))
    }

    /// A core of work complete at submission.
    fn completed_core(self) -> Core {
        self.plant(Core::completed())
    }

    fn plant(self, core: Core) -> Core {
        match self {
            Variant::Core(mutant) => core.with_mutant(mutant),
            Variant::Clean | Variant::Backend(_) => core,
        }
    }
}

/// One loom model of the core.
struct Model {
    name: &'static str,
    /// Preemption bound of the default run (see the crate docs).
    bound: usize,
    /// The invariant a deadlock of this model breaks: every blocking call of
    /// a model is expected to return, so loom's "deadlock" is reported as a
    /// violation of it.
    liveness: &'static str,
    run: fn(Variant),
}

/// The preemption bound a model runs with: `LOOM_MAX_PREEMPTIONS` (read by
/// loom itself) for every model, else none with `COMMCHECK_LOOM_DEEP=1`,
/// else the model's own.
fn preemption_bound(model: &Model, builder: &loom::model::Builder) -> Option<usize> {
    if builder.preemption_bound.is_some() {
        return builder.preemption_bound;
    }
    match std::env::var("COMMCHECK_LOOM_DEEP") {
        Ok(deep) if !deep.is_empty() && deep != "0" => None,
        _ => Some(model.bound),
    }
}

struct Explored {
    interleavings: usize,
    bound: Option<usize>,
    failure: Option<String>,
}

impl Explored {
    fn bound(&self) -> String {
        self.bound
            .map_or_else(|| "none".to_owned(), |bound| bound.to_string())
    }
}

/// Runs `model` on `variant` under loom, counting the executions (the
/// interleavings explored) and catching the first failure.
fn explore(model: &Model, variant: Variant) -> Explored {
    let mut builder = loom::model::Builder::new();
    let bound = preemption_bound(model, &builder);
    builder.preemption_bound = bound;
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&count);
    let run = model.run;
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        builder.check(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            run(variant);
        });
    }));
    let failure = result.err().map(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".to_owned());
        if message.starts_with("deadlock") {
            format!(
                "{} violated: a thread blocked on the core is never woken; loom: {message}",
                model.liveness
            )
        } else {
            message
        }
    });
    Explored {
        interleavings: count.load(std::sync::atomic::Ordering::Relaxed),
        bound,
        failure,
    }
}

/// One line on the test binary's stderr, outside libtest's output capture,
/// so CI logs show it for passing tests too.
fn report(line: String) {
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// The shipped core: loom must find no failing interleaving.
fn clean(model: &Model) {
    let explored = explore(model, Variant::Clean);
    report(format!(
        "loom {}: {} interleavings (preemption bound {})",
        model.name,
        explored.interleavings,
        explored.bound()
    ));
    if let Some(failure) = &explored.failure {
        panic!(
            "loom {}: the shipped core fails in interleaving {} (preemption bound {}): {failure}",
            model.name,
            explored.interleavings,
            explored.bound()
        );
    }
}

/// A mutant: loom must find a failing interleaving, and the failure must
/// name the invariant the mutant breaks.
fn mutant(model: &Model, variant: Variant) {
    let expected = variant.breaks().expect("a mutant breaks an invariant");
    let explored = explore(model, variant);
    let Some(failure) = &explored.failure else {
        panic!(
            "loom {} with {variant:?}: no failing interleaving among {} (preemption bound {}): \
             the model does not catch this {expected} mutant",
            model.name,
            explored.interleavings,
            explored.bound()
        );
    };
    report(format!(
        "loom {} with {variant:?}: caught in interleaving {} (preemption bound {}): {}",
        model.name,
        explored.interleavings,
        explored.bound(),
        failure.lines().next().unwrap_or_default()
    ));
    assert!(
        failure.contains(&format!("{expected} violated")),
        "loom {} with {variant:?}: expected a {expected} violation, got: {failure}",
        model.name
    );
}

// ---------------------------------------------------------------------------
// Mirrors of the completion (completion.rs, device.rs) over the core
// ---------------------------------------------------------------------------

/// `Completion::is_complete` of `CpuCompletion`, without planted defects.
fn is_complete(core: &Core) -> Result<bool, CpuError> {
    let seen = core.observe();
    match seen.error {
        Some(error) => Err(error),
        None => Ok(seen.phase == Phase::Completed),
    }
}

/// `Completion::resources_releasable` of `CpuCompletion`, without planted
/// defects: nonblocking, `false` when the state is contended.
fn resources_releasable(core: &Core) -> bool {
    core.try_observe()
        .is_some_and(|seen| seen.phase.is_terminal())
}

/// `Completion::wait` of `CpuCompletion`, without planted defects.
fn wait(core: &Core) -> Result<(), CpuError> {
    let seen = core.wait_for(None, |seen| {
        seen.phase.is_terminal() || seen.error.is_some()
    });
    match seen.error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// The device's quarantine owner (device.rs): the live work it was handed.
type Quarantine = Mutex<Vec<Arc<Core>>>;

/// `BoundedCompletion::wait_bounded` of `CpuCompletion`, without planted
/// defects, with a deadline that has passed when its wait first looks at the
/// clock: the deadline fires at the waiting thread's first look at the state,
/// and loom places that look anywhere in the worker's progress.
///
/// Returns the outcome and the state seen when it was decided.
fn wait_bounded_expired(
    core: &Arc<Core>,
    mode: CompletionCancellationMode,
    quarantine: &Quarantine,
) -> (Result<BoundedCompletionOutcome, CpuError>, Observation) {
    let seen = core.wait_for(Some(Instant::now()), |seen| {
        seen.phase.is_terminal() || seen.error.is_some()
    });
    if let Some(error) = seen.error.clone() {
        if seen.phase.is_terminal() {
            return (Err(error), seen);
        }
        let after = dispose(core, mode, quarantine);
        return (Err(error), after);
    }
    if seen.phase == Phase::Completed {
        return (Ok(BoundedCompletionOutcome::Completed), seen);
    }
    core.mark_deadline_passed();
    let after = dispose(core, mode, quarantine);
    if after.phase == Phase::Completed && after.error.is_none() {
        return (Ok(BoundedCompletionOutcome::Completed), after);
    }
    (
        Ok(BoundedCompletionOutcome::DeadlineExceeded { cancellation: mode }),
        after,
    )
}

/// `CpuCompletion::dispose`: NativeCancel requests cancellation and waits
/// for the teardown, release included; quarantine hands the work to the owner.
fn dispose(
    core: &Arc<Core>,
    mode: CompletionCancellationMode,
    quarantine: &Quarantine,
) -> Observation {
    match mode {
        CompletionCancellationMode::NativeCancel => match core.request_cancel("model") {
            CancelRequest::TornDown(retained) => {
                drop(retained);
                core.mark_released();
            }
            CancelRequest::Requested | CancelRequest::AlreadyTerminal => {
                core.wait_for(None, |seen| seen.released);
            }
        },
        CompletionCancellationMode::QuarantineUntilComplete => {
            core.mark_quarantined();
            quarantine.lock().unwrap().push(Arc::clone(core));
        }
    }
    core.observe()
}

/// The executor running one item (executor.rs `execute` and device.rs
/// `finish`): start, run the native body (`live` while it may touch retained
/// values; `body` sees whether cancellation was requested and says whether
/// it succeeded), finish, release outside the lock, mark released.
fn execute(core: &Core, live: &AtomicBool, body: impl FnOnce(bool) -> bool) {
    if !core.start() {
        return;
    }
    live.store(true, SeqCst);
    let cancelled = core.cancel_requested();
    let succeeded = body(cancelled);
    live.store(false, SeqCst);
    let outcome = if succeeded {
        Ok(())
    } else {
        Err(CpuError::Cancelled { operation: "model" })
    };
    if let Some(retained) = core.finish(outcome) {
        drop(retained);
        core.mark_released();
    }
}

/// A loom object held by a model thread: dropped as usual, but leaked while
/// the thread unwinds from a failure. After a deadlock loom has no active
/// thread, and dropping a loom object then would abort the test process
/// instead of reporting the failure.
struct Leak<T>(Option<T>);

impl<T> Leak<T> {
    fn new(value: T) -> Self {
        Self(Some(value))
    }
}

/// A new loom `Arc` held as a [`Leak`].
fn shared<T>(value: T) -> Leak<Arc<T>> {
    Leak::new(Arc::new(value))
}

impl<T> std::ops::Deref for Leak<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("a live value")
    }
}

impl<T: Clone> Clone for Leak<T> {
    fn clone(&self) -> Self {
        Self::new(T::clone(self))
    }
}

impl<T> Drop for Leak<T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::mem::forget(self.0.take());
        }
    }
}

/// `loom::thread::spawn`, except that a closure loom has not started yet
/// when the model panics is leaked, not dropped: it holds loom objects, and
/// dropping those outside the model would abort the test process instead
/// of reporting the failure.
fn spawn<F>(f: F) -> thread::JoinHandle<()>
where
    F: FnOnce() + Send + 'static,
{
    let f = std::mem::ManuallyDrop::new(f);
    thread::spawn(move || std::mem::ManuallyDrop::into_inner(f)())
}

/// A retained native resource: counts its drops and checks, as it is
/// dropped, that no native work still uses it (`invariant` names the claim).
struct Resource {
    drops: Leak<Arc<AtomicUsize>>,
    live: Leak<Arc<AtomicBool>>,
    invariant: &'static str,
}

impl Drop for Resource {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        assert!(
            !self.live.load(SeqCst),
            "{} violated: a retained value was released while native work uses it",
            self.invariant
        );
        self.drops.fetch_add(1, SeqCst);
    }
}

fn resource(
    drops: &Leak<Arc<AtomicUsize>>,
    live: &Leak<Arc<AtomicBool>>,
    invariant: &'static str,
) -> Retained {
    Box::new(Resource {
        drops: drops.clone(),
        live: live.clone(),
        invariant,
    })
}

/// What native work does with its retained values: touch them, which must
/// find them alive.
fn touch(drops: &AtomicUsize, invariant: &str) {
    assert_eq!(
        drops.load(SeqCst),
        0,
        "{invariant} violated: native work touches a retained value that was already released"
    );
}

// ---------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------

/// Wait vs completion (EXC-4, EXC-5; CAN-5 for the release wait): two
/// threads block on different conditions, `wait()` (terminal or error, no
/// deadline) and a wait for the release (what a NativeCancel teardown waits
/// for) with a deadline (the branch `wait_bounded` blocks in), while the
/// worker moves the work through start, finish and release. Both wake,
/// whatever the interleaving (no lost wake-up), and neither returns early.
const WAITERS: Model = Model {
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
const OBSERVERS: Model = Model {
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

/// A handle on the work, dropped as `CpuCompletion::drop` drops it: through
/// the core only under the backend's planted RET-4 defect
/// (`Defect::DropReleasesPending`), which releases pending work's values.
struct Handle {
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
const LAST_HANDLE: Model = Model {
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

/// The deadline vs completion race under NativeCancel (CAN-1, CAN-3, CAN-5,
/// RET-7): the worker finishes while a `wait_bounded` whose deadline fires
/// tears the work down. The first disposition wins: `Completed` only for
/// work that succeeded; `DeadlineExceeded` reports the policy's mode, after
/// a teardown that finished (terminal, released, no native work left) and
/// that nothing undoes later; the value is released exactly once.
const FINISH_RACES_CANCEL: Model = Model {
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
const QUARANTINE: Model = Model {
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

/// Sticky errors vs concurrent observers (EXC-6, EXC-7): an error published
/// while the work is live (an asynchronous fault) is seen by two observers
/// at arbitrary points. Once one saw it, it never sees success again; the
/// work ends `Failed` with it and `wait()` reports it; publishing it
/// released nothing.
const PUBLISHED_ERRORS: Model = Model {
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

/// A `retain_until_complete` value: counts its drops and checks that it is
/// not dropped before the work completed (`done` is set just before `finish`).
struct Value {
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

fn value(drops: &Leak<Arc<AtomicUsize>>, done: &Leak<Arc<AtomicBool>>) -> Retained {
    Box::new(Value {
        drops: drops.clone(),
        done: done.clone(),
    })
}

/// `retain_until_complete` racing the work (RET-6): while the executor
/// starts and finishes the work, the value is either kept and released by
/// the finisher, or handed back to the caller because the work is already
/// terminal; never dropped before completion, never lost, never dropped twice.
const RETAIN_RACES_FINISH: Model = Model {
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
const COMPLETED_AT_BIRTH: Model = Model {
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

// ---------------------------------------------------------------------------
// Tests: every model on the shipped core, and with each of its mutants
// ---------------------------------------------------------------------------

macro_rules! clean_tests {
    ($($test:ident: $model:ident;)*) => {
        /// Every model, once.
        const MODELS: &[&Model] = &[$(&$model,)*];
        $(
            #[test]
            fn $test() {
                clean(&$model);
            }
        )*
    };
}

macro_rules! mutant_tests {
    ($($test:ident: $model:ident, $variant:expr;)*) => {
        /// Every mutant run: a model and the variant planted in it.
        const MUTANT_RUNS: &[(&Model, Variant)] = &[$((&$model, $variant),)*];
        $(
            #[test]
            fn $test() {
                mutant(&$model, $variant);
            }
        )*
    };
}

clean_tests! {
    waiters_are_woken_by_every_change: WAITERS;
    observers_race_completion: OBSERVERS;
    last_handle_races_completion: LAST_HANDLE;
    finish_races_cancel: FINISH_RACES_CANCEL;
    quarantine_races_completion: QUARANTINE;
    published_errors_stay: PUBLISHED_ERRORS;
    retain_races_finish: RETAIN_RACES_FINISH;
    completed_at_birth: COMPLETED_AT_BIRTH;
}

mutant_tests! {
    mutant_waiters_stale_wait_check: WAITERS, Variant::Core(Mutant::StaleWaitCheck);
    mutant_observers_cancel_check_then_act: OBSERVERS, Variant::Core(Mutant::CancelCheckThenAct);
    mutant_last_handle_drop_releases_pending:
        LAST_HANDLE, Variant::Backend(Defect::DropReleasesPending);
    mutant_finish_races_cancel_start_check_then_act:
        FINISH_RACES_CANCEL, Variant::Core(Mutant::StartCheckThenAct);
    mutant_quarantine_releases: QUARANTINE, Variant::Core(Mutant::QuarantineReleases);
    mutant_quarantine_cancels: QUARANTINE, Variant::Core(Mutant::QuarantineCancels);
    mutant_published_errors_report_error_once:
        PUBLISHED_ERRORS, Variant::Core(Mutant::ReportErrorOnce);
    mutant_retain_rejects_running: RETAIN_RACES_FINISH, Variant::Core(Mutant::RetainRejectsRunning);
    mutant_completed_at_birth_born_unreleased:
        COMPLETED_AT_BIRTH, Variant::Core(Mutant::BornUnreleased);
}

/// Every model has a mutant run, and every core mutant is planted in a model.
#[test]
fn every_model_and_mutant_is_exercised() {
    for model in MODELS {
        assert!(
            MUTANT_RUNS.iter().any(|(run, _)| run.name == model.name),
            "model {} has no mutant run",
            model.name
        );
    }
    for mutant in Mutant::ALL {
        assert!(
            MUTANT_RUNS
                .iter()
                .any(|(_, variant)| *variant == Variant::Core(*mutant)),
            "mutant {mutant:?} is planted in no model"
        );
    }
}
