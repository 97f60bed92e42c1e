//! Lanes: the worker thread and FIFO queue behind one or more executor
//! handles, with the hold and fault-injection instruments that act on them.
//!
//! A lane runs each queued item through the same steps (start, injected
//! fault, hold, cancel scope, contained panics, finish and release), on its
//! worker or, for work that cannot block on an idle, unheld lane, inline on
//! the submitting thread; see [`crate::executor`] for when work runs inline.
//! Work whose launch the SUM-2 defect defers waits in a [`LazyLaunch`].

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::cancel::{self, CancelToken};
use crate::core::Core;
use crate::defect::Defect;
use crate::device::CpuDevice;
use crate::error::CpuError;
use crate::sync::rt::{self, AtomicBool, AtomicUsize, Condvar, Instant, Mutex, MutexGuard};
use crate::work::{Work, WorkCtx, CANCEL_POLL};

/// One queued submission: its state, its operation and its work.
pub(crate) struct WorkItem {
    core: Arc<Core>,
    operation: &'static str,
    work: Work,
    /// Whether a `NativeCancel` request stops the body once it runs (local
    /// work of the [`crate::Personality::Unstoppable`] device runs to its end;
    /// queued work is always cancellable).
    stoppable: bool,
}

impl WorkItem {
    pub(crate) fn new(
        core: Arc<Core>,
        operation: &'static str,
        work: Work,
        stoppable: bool,
    ) -> Self {
        Self {
            core,
            operation,
            work,
            stoppable,
        }
    }

    /// Ends an item whose body will never run.
    fn abort(self, reason: &str) {
        if let Some(abort) = self.work.abort {
            abort(reason);
        }
    }
}

#[derive(Default)]
struct LaneState {
    items: VecDeque<WorkItem>,
    shutdown: bool,
    /// An item is executing, on the worker or inline on its submitting thread.
    busy: bool,
    /// The worker sleeps on `wake` (so a push must notify it).
    sleeping: bool,
}

impl LaneState {
    /// Whether the worker may take the next queued item now.
    fn runnable(&self) -> bool {
        !self.busy && !self.items.is_empty()
    }
}

/// One worker thread and its queue.
pub(crate) struct Lane {
    state: Mutex<LaneState>,
    wake: Condvar,
    holds: Mutex<usize>,
    released: Condvar,
    fault_next: AtomicBool,
    fail_next_submission: AtomicBool,
    /// Executor handles (`ExecShared`, see [`Lane::attach`]) on this lane;
    /// the last one retires it.
    handles: AtomicUsize,
    /// The planted race (see `CpuDevice::with_planted_race`).
    #[cfg(any(commcheck_shuttle, commcheck_planted_race))]
    lost_wakeup: bool,
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Lane {
    pub(crate) fn spawn(id: u64, device: &CpuDevice) -> Arc<Self> {
        let lane = Arc::new(Self {
            state: Mutex::new(LaneState::default()),
            wake: Condvar::new(),
            holds: Mutex::new(0),
            released: Condvar::new(),
            fault_next: AtomicBool::new(false),
            fail_next_submission: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
            #[cfg(any(commcheck_shuttle, commcheck_planted_race))]
            lost_wakeup: device.planted_race(),
        });
        let worker = Arc::clone(&lane);
        let device = device.clone();
        let spawned = rt::Builder::new()
            .name(format!("commcheck-cpu-executor-{id}"))
            .spawn(move || worker.run(id, &device));
        if let Err(error) = spawned {
            // Without a worker nothing would ever run: fail work instead of hanging.
            let mut state = guard(&lane.state);
            state.shutdown = true;
            drop(state);
            eprintln!("commcheck-cpu: could not start executor thread {id}: {error}");
        }
        lane
    }

    fn run(&self, id: u64, device: &CpuDevice) {
        loop {
            self.spin_for_work();
            let item = {
                let mut state = guard(&self.state);
                loop {
                    if state.shutdown {
                        // Queued work outliving its executor: only reachable
                        // when completions do not retain it (RET-2 defect).
                        let abandoned: Vec<_> = state.items.drain(..).collect();
                        drop(state);
                        for item in abandoned {
                            self.abandon(id, device, &item.core, item.operation);
                            item.abort("its executor was destroyed");
                        }
                        return;
                    }
                    if !state.busy {
                        if let Some(item) = state.items.pop_front() {
                            state.busy = true;
                            break item;
                        }
                    }
                    state.sleeping = true;
                    state = match self.wake.wait(state) {
                        Ok(guard) => guard,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    state.sleeping = false;
                }
            };
            self.execute(id, device, item, false);
            #[cfg(any(commcheck_shuttle, commcheck_planted_race))]
            if self.lost_wakeup {
                self.sleep_after_item();
                continue;
            }
            guard(&self.state).busy = false;
        }
    }

    /// The planted race (see `CpuDevice::with_planted_race`): after an item,
    /// a worker that found its queue empty as it cleared `busy` goes to sleep
    /// at once, in a second critical section, without looking at its queue
    /// again (it does look for shutdown). Work pushed in between sees no
    /// sleeper and wakes nobody.
    #[cfg(any(commcheck_shuttle, commcheck_planted_race))]
    fn sleep_after_item(&self) {
        let idle = {
            let mut state = guard(&self.state);
            state.busy = false;
            state.items.is_empty()
        };
        if !idle {
            return;
        }
        let mut state = guard(&self.state);
        if state.shutdown {
            return;
        }
        state.sleeping = true;
        state = match self.wake.wait(state) {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        state.sleeping = false;
    }

    /// Polls briefly for new work before the worker sleeps (see [`crate::sync::SPIN`]).
    fn spin_for_work(&self) {
        let until = Instant::now() + crate::sync::SPIN;
        while Instant::now() < until {
            if let Ok(state) = self.state.try_lock() {
                if state.runnable() || state.shutdown {
                    return;
                }
            }
            rt::yield_now();
        }
    }

    fn abandon(&self, id: u64, device: &CpuDevice, core: &Core, operation: &'static str) {
        if core.start() || core.observe().phase == crate::core::Phase::Running {
            let error = CpuError::ExecutorGone {
                operation,
                executor: id,
            };
            device.finish(core, Err(error));
        }
    }

    fn is_shut_down(&self) -> bool {
        guard(&self.state).shutdown
    }

    /// Runs one item: `inline` when the submitting thread runs it on an idle,
    /// unheld lane (see [`Lane::try_run_inline`]), which then neither waits
    /// for holds nor can find its executor shut down (the submitter holds a
    /// handle on it).
    fn execute(&self, id: u64, device: &CpuDevice, item: WorkItem, inline: bool) {
        if !item.core.start() {
            // Cancelled while queued: teardown is accounted for; tell the peers.
            item.abort("it was cancelled before it started");
            return;
        }
        let WorkItem {
            core,
            operation,
            work: Work { body, abort },
            stoppable,
        } = item;
        let fault = if take_flag(&self.fault_next) {
            let error = CpuError::InjectedFault {
                operation,
                executor: id,
            };
            // The EXC-7 defect releases before it publishes, so whoever
            // sees the error sees the release too (no window between them).
            if device.has(Defect::ErrorReleases) {
                drop(core.take_retained());
            }
            core.publish_error(error.clone());
            Some(error)
        } else {
            None
        };
        if !inline {
            self.wait_while_held(&core, device.has(Defect::NativeCancelNoTeardown));
        }
        if !inline && self.is_shut_down() {
            self.abandon(id, device, &core, operation);
            if let Some(abort) = abort {
                abort("its executor was destroyed");
            }
            return;
        }
        let ctx = WorkCtx::new(&core, operation, fault, stoppable)
            .polled(device.has(Defect::NativeCancelNoTeardown));
        let outcome = match core.cancel_requested() {
            true => {
                if let Some(abort) = abort {
                    abort("it was cancelled before its body ran");
                }
                Err(CpuError::Cancelled { operation })
            }
            false => match catch_unwind(AssertUnwindSafe(|| {
                // Lazy values the body evaluates observe this item's
                // cancellation, unless the body cannot be stopped.
                let _scope = stoppable
                    .then(|| cancel::enter(CancelToken::new(Arc::clone(&core), operation)));
                body(&ctx)
            })) {
                Ok(outcome) => outcome,
                Err(payload) => Err(CpuError::Panicked {
                    operation,
                    message: panic_message(payload.as_ref()),
                }),
            },
        };
        let outcome = match (outcome, ctx.into_fault()) {
            (Ok(()), Some(fault)) => Err(fault),
            (outcome, _) => outcome,
        };
        device.finish(&core, outcome);
    }

    /// Blocks while the lane is held, until a `NativeCancel` request (unless
    /// the worker notices requests only on its own, `late`: the
    /// `NativeCancelNoTeardown` defect, whose held work is then torn down
    /// once the hold ends, after the request returned) or a shutdown.
    fn wait_while_held(&self, core: &Core, late: bool) {
        let mut holds = guard(&self.holds);
        while *holds > 0 && (late || !core.cancel_requested()) && !self.is_shut_down() {
            holds = match self.released.wait_timeout(holds, CANCEL_POLL) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    pub(crate) fn push(&self, item: WorkItem) {
        let mut state = guard(&self.state);
        state.items.push_back(item);
        let sleeping = state.sleeping;
        drop(state);
        if sleeping {
            self.wake.notify_one();
        }
    }

    /// Runs `item` on the calling thread when the lane is idle (nothing
    /// queued, nothing executing) and not held; otherwise hands it back to
    /// be queued. The lane is busy while it runs, so concurrent submissions
    /// queue behind it.
    ///
    /// A hold taken concurrently with this call may or may not keep the item
    /// pending, as on the worker (which checks holds once the item started);
    /// a hold taken before the submission always does.
    pub(crate) fn try_run_inline(
        &self,
        id: u64,
        device: &CpuDevice,
        item: WorkItem,
    ) -> Result<(), WorkItem> {
        if *guard(&self.holds) > 0 {
            return Err(item);
        }
        {
            let mut state = guard(&self.state);
            if state.shutdown || state.busy || !state.items.is_empty() {
                return Err(item);
            }
            state.busy = true;
        }
        let _busy = InlineRun(self);
        self.execute(id, device, item, true);
        Ok(())
    }

    /// Whether work submitted now would run inline and unhindered: nothing
    /// queued or executing, not shut down, no hold taken, and no fault or
    /// submission refusal armed. Like a hold, an instrument armed by another
    /// thread concurrently with a submission may or may not apply to it; one
    /// armed before the submission always does.
    pub(crate) fn idle(&self) -> bool {
        if self.fault_next.load(Ordering::SeqCst)
            || self.fail_next_submission.load(Ordering::SeqCst)
            || *guard(&self.holds) > 0
        {
            return false;
        }
        let state = guard(&self.state);
        !state.shutdown && !state.busy && state.items.is_empty()
    }

    /// Ends an inline run: the lane is idle again, and the worker is woken
    /// when work queued meanwhile.
    fn end_inline_run(&self) {
        let mut state = guard(&self.state);
        state.busy = false;
        let wake = state.sleeping && !state.items.is_empty();
        drop(state);
        if wake {
            self.wake.notify_one();
        }
    }

    fn shutdown(&self) {
        guard(&self.state).shutdown = true;
        self.wake.notify_all();
    }

    /// A new executor handle on this lane.
    pub(crate) fn attach(&self) {
        self.handles.fetch_add(1, Ordering::SeqCst);
    }

    /// An executor handle on this lane is gone; the last one retires it.
    pub(crate) fn detach(&self) {
        if self.handles.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.shutdown();
        }
    }

    /// Hold instrument: work on this lane stays pending until the returned
    /// guard is released or dropped. Holds nest.
    pub(crate) fn hold(self: &Arc<Self>) -> Hold {
        *guard(&self.holds) += 1;
        Hold {
            lane: Arc::clone(self),
            released: false,
        }
    }

    /// Fault injection: the next work item that starts on this lane fails.
    pub(crate) fn inject_fault(&self) {
        self.fault_next.store(true, Ordering::SeqCst);
    }

    /// Fault injection at submission: the next submission on this lane is refused.
    pub(crate) fn refuse_next_submission(&self) {
        self.fail_next_submission.store(true, Ordering::SeqCst);
    }

    /// Whether the next submission is refused, clearing the instrument.
    pub(crate) fn take_submission_refusal(&self) -> bool {
        take_flag(&self.fail_next_submission)
    }
}

/// Clears an instrument's flag, saying whether it was set (a plain read
/// first: the flag is almost never set, and the read is cheaper than a swap).
fn take_flag(flag: &AtomicBool) -> bool {
    flag.load(Ordering::SeqCst) && flag.swap(false, Ordering::SeqCst)
}

/// An inline run in progress; dropping it (even while unwinding from a
/// panicking destructor of a released value) ends the run.
struct InlineRun<'a>(&'a Lane);

impl Drop for InlineRun<'_> {
    fn drop(&mut self) {
        self.0.end_inline_run();
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

/// Work whose queueing is deferred to its first observation (SUM-2 defect).
pub(crate) struct LazyLaunch {
    lane: Arc<Lane>,
    item: WorkItem,
}

impl LazyLaunch {
    pub(crate) fn new(lane: Arc<Lane>, item: WorkItem) -> Self {
        Self { lane, item }
    }

    pub(crate) fn launch(self) {
        self.lane.push(self.item);
    }
}

/// A held executor; see [`crate::CpuExecutor::hold`].
#[must_use = "dropping a hold releases it at once"]
pub struct Hold {
    lane: Arc<Lane>,
    released: bool,
}

impl Hold {
    /// Releases the hold.
    pub fn release(mut self) {
        self.release_now();
    }

    fn release_now(&mut self) {
        if !self.released {
            self.released = true;
            let mut holds = guard(&self.lane.holds);
            *holds = holds.saturating_sub(1);
            drop(holds);
            self.lane.released.notify_all();
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release_now();
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("released", &self.released)
            .finish()
    }
}
