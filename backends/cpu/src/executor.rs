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

use std::sync::Arc;

use crate::completion::CpuCompletion;
use crate::core::{Core, Retained};
use crate::defect::Defect;
use crate::device::CpuDevice;
use crate::error::CpuError;
use crate::group::GroupMember;
use crate::lane::{Hold, Lane, LazyLaunch, WorkItem};
use crate::ledger::Kind;
use crate::sync::rt::Mutex;
use crate::work::Work;

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
        lane.attach();
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
        self.lane.detach();
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
        self.shared.lane.hold()
    }

    /// Fault injection: the next work item that starts on this executor fails.
    ///
    /// The error is published when the item starts, while its native work is
    /// still live (held, or waiting for peers), so observers see a sticky error
    /// before release (EXC-6, EXC-7).
    pub fn inject_fault(&self) {
        self.shared.lane.inject_fault();
    }

    /// Fault injection at submission: the next submission call on this executor
    /// returns `Err` (SUB-4).
    pub fn fail_next_submission(&self) {
        self.shared.lane.refuse_next_submission();
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
        let fail = self.shared.lane.take_submission_refusal();
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
        device.submitted();
        device.ledger_ref().up(Kind::Pending);
        let item = WorkItem::new(
            Arc::clone(&core),
            operation,
            build(),
            kind == WorkKind::Communication
                || device.personality() != crate::Personality::Unstoppable,
        );
        let completion = CpuCompletion::new(core, device.clone(), operation);
        if kind == WorkKind::Communication && device.has(Defect::LazyLaunch) {
            return Ok(
                completion.with_lazy_launch(LazyLaunch::new(Arc::clone(&self.shared.lane), item))
            );
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

impl CpuDevice {
    /// Starts a new executor (worker lane).
    pub fn executor(&self) -> CpuExecutor {
        CpuExecutor::spawn(self)
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
