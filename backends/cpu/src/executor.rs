//! Executors: worker threads with FIFO queues (the CPU backend's streams),
//! plus the hold and fault-injection instruments that act on them.
//!
//! # Inline execution
//! Work that cannot block (it has no unpublished or lazy input to wait for,
//! and no peer to meet; see [`Dispatch::Inline`]) skips the hand-off to the
//! worker when its lane is idle: nothing queued, nothing executing, no hold
//! taken. It then runs on the submitting thread, through the same steps as
//! on the worker (start, injected fault, cancel scope, contained panics,
//! finish and release), and its completion is already terminal when the
//! submission returns. The lane is marked busy meanwhile, so work submitted
//! concurrently queues behind it and FIFO order is kept. A held lane, a busy
//! lane or a lane with queued work always queues: the hold instrument keeps
//! work pending exactly as before.
//!
//! # Work with nothing left to do
//! Work that would do nothing at all (local work whose values are all on the
//! host already; a sum over a group of one member of a value on the host)
//! does not even run inline on an idle lane: it is complete at submission
//! ([`CpuExecutor::complete_at_once`]), with a completion born `Completed`
//! that retains nothing (the caller holds every resource the work names
//! until the submission returns). This applies only when the lane is idle as
//! above and no instrument is armed (no injected fault, no submission
//! refusal), and never on a device with a planted defect: every defect acts
//! on the queued or inline path, which such work then takes as before.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::cancel::{self, CancelToken};
use crate::completion::CpuCompletion;
use crate::core::{Core, Retained};
use crate::defect::Defect;
use crate::device::CpuDevice;
use crate::error::CpuError;
use crate::group::GroupMember;
use crate::ledger::Kind;
use crate::sync::rt::{self, AtomicBool, AtomicUsize, Condvar, Instant, Mutex, MutexGuard};

/// How often blocked native work re-checks a cancellation request.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(1);

/// Native work body. It receives the context of its run and must return
/// `Err(CpuError::Cancelled)` promptly once [`WorkCtx::cancelled`] is true.
/// While it runs, the item's cancel token is current on the worker thread
/// ([`crate::cancel`]), so lazy values it evaluates abort with that error too.
pub(crate) type Body = Box<dyn FnOnce(&WorkCtx<'_>) -> Result<(), CpuError> + Send>;

/// Called instead of the body when work ends without its body running
/// (cancelled while queued, abandoned), so a collective can abort its
/// rendezvous and its peers fail instead of hanging.
pub(crate) type Abort = Box<dyn FnOnce(&str) + Send>;

/// What a submission queues: its body, and what to do if the body never runs.
pub(crate) struct Work {
    pub(crate) body: Body,
    pub(crate) abort: Option<Abort>,
}

impl Work {
    /// Work with nothing to undo if it never runs.
    pub(crate) fn local(body: Body) -> Self {
        Self { body, abort: None }
    }
}

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
    /// Ends an item whose body will never run.
    fn abort(self, reason: &str) {
        if let Some(abort) = self.work.abort {
            abort(reason);
        }
    }
}

/// What a running body can ask of its executor.
pub(crate) struct WorkCtx<'a> {
    core: &'a Core,
    operation: &'static str,
    fault: Option<CpuError>,
    stoppable: bool,
}

impl WorkCtx<'_> {
    /// Whether a `NativeCancel` teardown was requested (and stops this body).
    pub(crate) fn cancelled(&self) -> bool {
        self.stoppable && self.core.cancel_requested()
    }

    /// `Err(Cancelled)` once cancellation was requested.
    pub(crate) fn checkpoint(&self) -> Result<(), CpuError> {
        if self.cancelled() {
            Err(CpuError::Cancelled {
                operation: self.operation,
            })
        } else {
            Ok(())
        }
    }

    /// The fault injected into this item, if any. Bodies that rendezvous with
    /// peers must still abort their rendezvous so peers fail instead of hanging.
    pub(crate) fn fault(&self) -> Option<&CpuError> {
        self.fault.as_ref()
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
    /// Executor handles (`ExecShared`) on this lane; the last one retires it.
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
    fn spawn(id: u64, device: &CpuDevice) -> Arc<Self> {
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
            core.publish_error(error.clone());
            if device.has(Defect::ErrorReleases) {
                drop(core.take_retained());
            }
            Some(error)
        } else {
            None
        };
        if !inline {
            self.wait_while_held(&core);
        }
        if !inline && self.is_shut_down() {
            self.abandon(id, device, &core, operation);
            if let Some(abort) = abort {
                abort("its executor was destroyed");
            }
            return;
        }
        let ctx = WorkCtx {
            core: &core,
            operation,
            fault,
            stoppable,
        };
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
        let outcome = match (outcome, ctx.fault) {
            (Ok(()), Some(fault)) => Err(fault),
            (outcome, _) => outcome,
        };
        device.finish(&core, outcome);
    }

    fn wait_while_held(&self, core: &Core) {
        let mut holds = guard(&self.holds);
        while *holds > 0 && !core.cancel_requested() && !self.is_shut_down() {
            holds = match self.released.wait_timeout(holds, CANCEL_POLL) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    fn push(&self, item: WorkItem) {
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
    fn try_run_inline(&self, id: u64, device: &CpuDevice, item: WorkItem) -> Result<(), WorkItem> {
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
    fn idle(&self) -> bool {
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

/// The executor handle's shared part; its drop retires the lane.
pub(crate) struct ExecShared {
    pub(crate) id: u64,
    pub(crate) device: CpuDevice,
    lane: Arc<Lane>,
    /// The last group used on this executor (only the RET-8 defect reads it).
    pub(crate) last_group: Mutex<Option<Arc<GroupMember>>>,
}

impl ExecShared {
    fn new(id: u64, device: &CpuDevice, lane: Arc<Lane>) -> Arc<Self> {
        lane.handles.fetch_add(1, Ordering::SeqCst);
        device.ledger_ref().up(Kind::Executor);
        Arc::new(Self {
            id,
            device: device.clone(),
            lane,
            last_group: Mutex::new(None),
        })
    }
}

impl Drop for ExecShared {
    fn drop(&mut self) {
        if self.lane.handles.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.lane.shutdown();
        }
        self.device.ledger_ref().down(Kind::Executor);
    }
}

/// A CPU executor: one worker thread with a FIFO queue.
///
/// Work that cannot block, submitted while the lane is idle and not held,
/// runs on the submitting thread instead, in the same order (see the
/// module documentation of `executor`): its completion is then already
/// complete when the submission returns.
///
/// Also the tensor context of the CPU backend. Cloning shares the lane;
/// [`eredu_runtime::backend::SubmissionBackend::fork_executors`] makes new lanes.
#[derive(Clone)]
pub struct CpuExecutor {
    pub(crate) shared: Arc<ExecShared>,
}

impl std::fmt::Debug for CpuExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuExecutor")
            .field("id", &self.shared.id)
            .finish_non_exhaustive()
    }
}

impl CpuExecutor {
    pub(crate) fn spawn(device: &CpuDevice) -> Self {
        let id = device.next_id();
        Self {
            shared: ExecShared::new(id, device, Lane::spawn(id, device)),
        }
    }

    /// A second executor handle onto the same lane (the SUB-1 defect's fork).
    pub(crate) fn share_lane(&self) -> Self {
        let device = &self.shared.device;
        Self {
            shared: ExecShared::new(device.next_id(), device, Arc::clone(&self.shared.lane)),
        }
    }

    /// Stable identity of this executor.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The device this executor belongs to.
    pub fn device(&self) -> &CpuDevice {
        &self.shared.device
    }

    /// The ledger that accounts for tensors made on this executor.
    pub(crate) fn ledger(&self) -> &std::sync::Arc<crate::ledger::Ledger> {
        self.shared.device.ledger_ref()
    }

    /// Hold instrument: work on this executor stays pending (started but
    /// blocked, like a stream waiting on a host-mapped word) until the returned
    /// guard is released or dropped. Holds nest.
    pub fn hold(&self) -> Hold {
        *guard(&self.shared.lane.holds) += 1;
        Hold {
            lane: Arc::clone(&self.shared.lane),
            released: false,
        }
    }

    /// Fault injection: the next work item that starts on this executor fails.
    ///
    /// The error is published when the item starts, while its native work is
    /// still live (held, or waiting for peers), so observers see a sticky error
    /// before release (EXC-6, EXC-7).
    pub fn inject_fault(&self) {
        self.shared.lane.fault_next.store(true, Ordering::SeqCst);
    }

    /// Fault injection at submission: the next submission call on this executor
    /// returns `Err` (SUB-4).
    pub fn fail_next_submission(&self) {
        self.shared
            .lane
            .fail_next_submission
            .store(true, Ordering::SeqCst);
    }

    /// The completion of work with nothing left to do (see the module
    /// documentation), complete at once: `None` unless the lane is idle and
    /// the device has no planted defect, in which case the work must be
    /// submitted through [`CpuExecutor::dispatch`] instead.
    pub(crate) fn complete_at_once(&self, operation: &'static str) -> Option<CpuCompletion> {
        let device = &self.shared.device;
        if device.defect().is_some() || !self.shared.lane.idle() {
            return None;
        }
        Some(CpuCompletion::new(
            Arc::new(Core::completed()),
            device.clone(),
            operation,
        ))
    }

    /// Queues native work. `retained` lives until the work is terminal; the
    /// executor itself is retained too (RET-2). `build` makes the work only
    /// once the submission is admitted, so a refused submission leaves no
    /// trace (no group sequence number taken, nothing queued).
    pub(crate) fn enqueue(
        &self,
        operation: &'static str,
        kind: WorkKind,
        retained: Vec<Retained>,
        build: impl FnOnce() -> Work,
    ) -> Result<CpuCompletion, CpuError> {
        self.dispatch(operation, kind, Dispatch::Queue, retained, build)
    }

    /// [`CpuExecutor::enqueue`], choosing how the work reaches the lane:
    /// work that cannot block may run inline (see the module documentation).
    pub(crate) fn dispatch(
        &self,
        operation: &'static str,
        kind: WorkKind,
        dispatch: Dispatch,
        mut retained: Vec<Retained>,
        build: impl FnOnce() -> Work,
    ) -> Result<CpuCompletion, CpuError> {
        let device = &self.shared.device;
        let fail = take_flag(&self.shared.lane.fail_next_submission);
        let refused = CpuError::InjectedFault {
            operation,
            executor: self.shared.id,
        };
        if fail && !device.has(Defect::SubmitErrorLeavesWork) {
            return Err(refused);
        }
        if !device.has(Defect::ExecutorNotRetained) {
            retained.push(Box::new(Arc::clone(&self.shared)));
        }
        let core = Arc::new(Core::new(retained));
        device.ledger_ref().up(Kind::Pending);
        let item = WorkItem {
            core: Arc::clone(&core),
            operation,
            work: build(),
            stoppable: kind == WorkKind::Communication
                || device.personality() != crate::Personality::Unstoppable,
        };
        let completion = CpuCompletion::new(core, device.clone(), operation);
        if kind == WorkKind::Communication && device.has(Defect::LazyLaunch) {
            return Ok(completion.with_lazy_launch(LazyLaunch {
                lane: Arc::clone(&self.shared.lane),
                item,
            }));
        }
        let item = match dispatch {
            // A refused submission (SUB-4 defect) leaves its work queued.
            Dispatch::Inline if !fail => {
                match self
                    .shared
                    .lane
                    .try_run_inline(self.shared.id, device, item)
                {
                    Ok(()) => return Ok(completion),
                    Err(item) => item,
                }
            }
            _ => item,
        };
        self.shared.lane.push(item);
        if fail {
            // SUB-4 defect: the work is live, but the caller is told it was never submitted.
            return Err(refused);
        }
        Ok(completion)
    }
}

/// How a submission reaches its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dispatch {
    /// Always through the queue, to the worker thread.
    Queue,
    /// The work cannot block: it waits for no unpublished or lazy value and
    /// for no peer, and reads only values already on the host. It runs on
    /// the submitting thread when its lane is idle and not held.
    Inline,
}

/// Whether work is rank-local or communicates with peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkKind {
    /// Local dependencies, plain submissions, ordering gates.
    Local,
    /// Collectives and point-to-point transfers.
    Communication,
}

/// Work whose queueing is deferred to its first observation (SUM-2 defect).
pub(crate) struct LazyLaunch {
    lane: Arc<Lane>,
    item: WorkItem,
}

impl LazyLaunch {
    pub(crate) fn launch(self) {
        self.lane.push(self.item);
    }
}

/// A held executor; see [`CpuExecutor::hold`].
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

#[cfg(test)]
mod tests {
    //! Inline execution keeps every obligation of queued work.

    use eredu_core::{
        BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion,
        CompletionCancellationMode,
    };
    use eredu_runtime::backend::{CommunicationBackend, SumReductionBackend};

    use crate::{CpuBackend, CpuDevice, CpuError};

    fn local(executor: &super::CpuExecutor, value: &crate::CpuTensor) -> crate::CpuCompletion {
        CpuBackend::submit_local_dependencies([value], executor)
            .expect("submits")
            .completion
    }

    #[test]
    fn settled_work_on_an_idle_lane_is_complete_at_return() {
        let device = CpuDevice::new();
        let executor = device.executor();
        let value = device.tensor(&[1.0, 2.0], &[2]).unwrap();
        let completion = local(&executor, &value);
        assert_eq!(completion.is_complete(), Ok(true));
        assert!(completion.resources_releasable());
        assert_eq!(device.ledger().pending_work, 0);
        let group = device.group(1).unwrap().remove(0);
        let sum = CpuBackend::all_reduce_sum(value.clone(), &group, &executor).unwrap();
        assert_eq!(sum.completion.is_complete(), Ok(true));
        assert_eq!(sum.output.read_materialised(), Some(vec![1.0, 2.0]));
        assert_ne!(sum.output.storage_id(), value.storage_id());
    }

    #[test]
    fn a_held_lane_keeps_settled_work_pending_and_retained() {
        let device = CpuDevice::new();
        let executor = device.executor();
        let group = device.group(1).unwrap().remove(0);
        let hold = executor.hold();
        let value = device.tensor(&[1.0, 2.0], &[2]).unwrap();
        let id = value.storage_id();
        let completion = local(&executor, &value);
        let sum = CpuBackend::all_reduce_sum(value, &group, &executor).unwrap();
        let output = sum.output.storage_id();
        drop((sum.output, group));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(completion.is_complete(), Ok(false));
        assert_eq!(sum.completion.is_complete(), Ok(false));
        assert!(!completion.resources_releasable());
        assert!(device.storage_live(id) && device.storage_live(output));
        assert_eq!(device.ledger().groups, 1);
        hold.release();
        completion.wait().unwrap();
        sum.completion.wait().unwrap();
        for observer in [completion.observer(), sum.completion.observer()] {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !observer.observe().released && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
        assert!(!device.storage_live(id) && !device.storage_live(output));
        assert_eq!(device.ledger().groups, 0);
    }

    #[test]
    fn settled_work_queues_behind_busy_lanes_in_order() {
        let device = CpuDevice::new();
        let executor = device.executor();
        let hold = executor.hold();
        let value = device.tensor(&[1.0], &[1]).unwrap();
        let first = local(&executor, &value);
        drop(hold);
        // The lane may still be busy with `first`: whatever runs `second`
        // (the worker or this thread), it completes after `first`.
        let second = local(&executor, &value);
        second.wait().unwrap();
        assert_eq!(first.is_complete(), Ok(true));
    }

    #[test]
    fn an_injected_fault_fails_inline_work_for_good() {
        let device = CpuDevice::new();
        let executor = device.executor();
        let value = device.tensor(&[1.0], &[1]).unwrap();
        executor.inject_fault();
        let completion = local(&executor, &value);
        assert!(matches!(
            completion.wait(),
            Err(CpuError::InjectedFault { .. })
        ));
        assert!(matches!(
            completion.wait(),
            Err(CpuError::InjectedFault { .. })
        ));
        let group = device.group(1).unwrap().remove(0);
        executor.inject_fault();
        let sum = CpuBackend::all_reduce_sum(value.clone(), &group, &executor).unwrap();
        assert!(matches!(
            sum.completion.is_complete(),
            Err(CpuError::InjectedFault { .. })
        ));
        assert_eq!(sum.output.read_materialised(), None);
        let policy = BoundedCompletionWait::new(
            std::time::Duration::from_millis(10),
            CompletionCancellationMode::NativeCancel,
        )
        .unwrap();
        assert!(sum.completion.wait_bounded(policy).is_err());
        // The next submission is unaffected.
        let completion = local(&executor, &value);
        assert_eq!(
            completion.wait_bounded(policy),
            Ok(BoundedCompletionOutcome::Completed)
        );
        assert_eq!(device.ledger().pending_work, 0);
    }

    #[test]
    fn work_with_nothing_to_do_is_complete_at_submission_unless_instrumented() {
        let device = CpuDevice::new();
        let executor = device.executor();
        let group = device.group(1).unwrap().remove(0);
        let value = device.tensor(&[1.0, 2.0], &[2]).unwrap();
        let completion = local(&executor, &value);
        let seen = completion.observer().observe();
        assert!(seen.phase == crate::Phase::Completed && seen.released);
        let sum = CpuBackend::all_reduce_sum(value.clone(), &group, &executor).unwrap();
        assert!(sum.completion.observer().observe().released);
        let output = sum.output.storage_id();
        assert_ne!(output, value.storage_id());
        assert_eq!(sum.output.read_materialised(), Some(vec![1.0, 2.0]));
        drop(sum.output);
        assert!(!device.storage_live(output));
        // An armed submission refusal still refuses it, and only it.
        executor.fail_next_submission();
        assert!(matches!(
            CpuBackend::submit_local_dependencies([&value], &executor),
            Err(CpuError::InjectedFault { .. })
        ));
        executor.fail_next_submission();
        assert!(CpuBackend::all_reduce_sum(value.clone(), &group, &executor).is_err());
        assert_eq!(local(&executor, &value).is_complete(), Ok(true));
        assert_eq!(device.ledger().pending_work, 0);
    }

    #[test]
    fn a_device_with_a_defect_never_completes_work_at_submission() {
        // RET-7: what completed work retained is leaked, so it was retained.
        let device = CpuDevice::with_defect(crate::Defect::LeakRetained);
        let executor = device.executor();
        let value = device.tensor(&[1.0], &[1]).unwrap();
        let id = value.storage_id();
        local(&executor, &value).wait().unwrap();
        drop(value);
        assert!(device.storage_live(id));
    }
}
