//! Executors: pooled streams (the hold and fault instruments act on them),
//! and the enqueueing of one work item onto an executor's stream.

use crate::device::{CudaDevice, HoldGate, StreamLease};
use crate::error::CudaError;
use crate::ffi::{Event, HostSlot, Launch};
use crate::tensor::CudaTensor;
use crate::work::{CudaCompletion, Parts, Retained, Work};
use cudarc::driver::CudaStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub(crate) struct ExecutorShared {
    pub(crate) device: CudaDevice,
    lease: Arc<StreamLease>,
    /// Held while one work item is enqueued: its operations are contiguous
    /// on the stream.
    submitting: Mutex<()>,
    fault: AtomicBool,
    refuse: AtomicBool,
    id: u64,
}

impl Drop for ExecutorShared {
    fn drop(&mut self) {
        self.device
            .shared
            .counters
            .executors
            .fetch_sub(1, Ordering::SeqCst);
    }
}

/// An executor: one stream of the device's pool. Work submitted on it runs
/// in submission order; every work item keeps the executor (and its stream)
/// until the item completed (RET-2).
#[derive(Clone)]
pub struct CudaExecutor {
    pub(crate) shared: Arc<ExecutorShared>,
}

impl std::fmt::Debug for CudaExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaExecutor")
            .field("id", &self.shared.id)
            .finish_non_exhaustive()
    }
}

impl CudaExecutor {
    /// A new executor on `device` (a stream leased from its pool).
    pub fn new(device: &CudaDevice) -> Result<Self, CudaError> {
        let lease = device.lease("executor")?;
        device
            .shared
            .counters
            .executors
            .fetch_add(1, Ordering::SeqCst);
        Ok(Self {
            shared: Arc::new(ExecutorShared {
                device: device.clone(),
                lease,
                submitting: Mutex::new(()),
                fault: AtomicBool::new(false),
                refuse: AtomicBool::new(false),
                id: device.next_id(),
            }),
        })
    }

    /// Its device.
    pub fn device(&self) -> &CudaDevice {
        &self.shared.device
    }

    /// A new executor on this one's stream: the `ForkSharesLane` defect's
    /// fork (an identity and ledger count of its own, one lane).
    pub(crate) fn share_stream(&self) -> Self {
        let device = self.device();
        device
            .shared
            .counters
            .executors
            .fetch_add(1, Ordering::SeqCst);
        Self {
            shared: Arc::new(ExecutorShared {
                device: device.clone(),
                lease: Arc::clone(&self.shared.lease),
                submitting: Mutex::new(()),
                fault: AtomicBool::new(false),
                refuse: AtomicBool::new(false),
                id: device.next_id(),
            }),
        }
    }

    /// Its identity.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        self.shared.lease.stream()
    }

    /// The hold instrument: work submitted after this stays pending until
    /// the hold is released (a stream wait on a mapped word; only the host
    /// store of [`Hold::release`] opens it).
    pub fn hold(&self) -> Result<Hold, CudaError> {
        let mut enqueue = self.begin("hold")?;
        let gate = Arc::new(HoldGate::new(self.device())?);
        gate.close(self.stream())?;
        // The gate's word stays allocated until the stream got past it.
        enqueue.keep_on_device(Box::new(Arc::clone(&gate)));
        enqueue.counts = false;
        enqueue.finish(Vec::new())?;
        Ok(Hold { gate: Some(gate) })
    }

    /// The fault instrument: the next work item on this executor fails,
    /// its error published while it is still live.
    pub fn inject_fault(&self) {
        self.shared.fault.store(true, Ordering::SeqCst);
    }

    /// The fault instrument: the next submission on this executor is
    /// refused, leaving no work behind.
    pub fn fail_next_submission(&self) {
        self.shared.refuse.store(true, Ordering::SeqCst);
    }

    /// Starts enqueueing one work item: refused (once) by the fault
    /// instrument; otherwise the executor is locked until [`Enqueue::finish`].
    pub(crate) fn begin(&self, operation: &'static str) -> Result<Enqueue<'_>, CudaError> {
        let guard = self
            .shared
            .submitting
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if self.shared.refuse.swap(false, Ordering::SeqCst) {
            return Err(CudaError::SubmissionRefused { operation });
        }
        let device = self.device();
        Ok(Enqueue {
            executor: self,
            _guard: guard,
            operation,
            error: device.slot(4)?,
            cancel: device.slot(4)?,
            started: None,
            device_owned: vec![Box::new(Arc::clone(&self.shared))],
            retained: Vec::new(),
            outputs: Vec::new(),
            failed: None,
            counts: true,
        })
    }
}

/// A hold on an executor's stream (the hold instrument).
#[derive(Debug)]
pub struct Hold {
    gate: Option<Arc<HoldGate>>,
}

impl Hold {
    /// Lets the held work go on.
    pub fn release(mut self) {
        self.open();
    }

    fn open(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.open();
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.open();
    }
}

/// One work item being enqueued on an executor's stream.
pub(crate) struct Enqueue<'e> {
    executor: &'e CudaExecutor,
    _guard: MutexGuard<'e, ()>,
    operation: &'static str,
    error: HostSlot,
    cancel: HostSlot,
    started: Option<HostSlot>,
    device_owned: Vec<Retained>,
    retained: Vec<Retained>,
    /// Tensors this item writes: their readiness is its completion event.
    outputs: Vec<CudaTensor>,
    failed: Option<CudaError>,
    /// Whether the ledger counts the item as pending work (a hold is not work).
    counts: bool,
}

impl Enqueue<'_> {
    pub(crate) fn device(&self) -> &CudaDevice {
        self.executor.device()
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        self.executor.stream()
    }

    /// The stream waits until `tensor` is ready (its producer's event).
    pub(crate) fn wait_for(&mut self, tensor: &CudaTensor) -> Result<(), CudaError> {
        if let Some(ready) = tensor.ready() {
            ready.make_wait(self.stream())?;
        }
        Ok(())
    }

    /// Marks where the item's device part begins: from here on, its kernels
    /// may touch its buffers. An armed fault instrument fails the item here:
    /// its error is published at once, while the item is still live (held,
    /// or waiting for peers), and it ends failed.
    pub(crate) fn begin_device_part(&mut self) -> Result<(), CudaError> {
        let started = self.device().slot(4)?;
        started.write_on(self.stream(), 1)?;
        self.started = Some(started);
        if self.executor.shared.fault.swap(false, Ordering::SeqCst) && self.failed.is_none() {
            self.failed = Some(CudaError::InjectedFault {
                operation: self.operation,
            });
        }
        Ok(())
    }

    /// Launches a kernel of the item (polling its cancel word, writing its
    /// error word).
    pub(crate) fn launch(&mut self, launch: Launch) -> Result<(), CudaError> {
        let (cancel, error) = (self.cancel.address(), self.error.address());
        self.executor
            .device()
            .launch(self.executor.stream(), launch, cancel, error)
    }

    /// Keeps `value` until the device is past the item (its own words,
    /// gates, descriptors: never the caller's resources).
    pub(crate) fn keep_on_device(&mut self, value: Retained) {
        self.device_owned.push(value);
    }

    /// Retains `value` until the item completes or is torn down.
    pub(crate) fn retain(&mut self, value: Retained) {
        self.retained.push(value);
    }

    /// Retains `tensor` and makes it ready with the item's completion.
    pub(crate) fn output(&mut self, tensor: &CudaTensor) {
        self.retain(Box::new(tensor.clone()));
        self.outputs.push(tensor.clone());
    }

    /// Makes `tensor` ready with the item's completion without retaining it
    /// (the `OutputNotRetained` defect).
    pub(crate) fn output_unretained(&mut self, tensor: &CudaTensor) {
        self.outputs.push(tensor.clone());
    }

    /// Records the completion event and registers the item with the reaper.
    pub(crate) fn finish(self, retained: Vec<Retained>) -> Result<Arc<Work>, CudaError> {
        let device = self.executor.device().clone();
        let event = Arc::new(device.record(self.executor.stream(), Event::COMPLETION)?);
        for tensor in &self.outputs {
            tensor.set_ready(Arc::clone(&event));
        }
        let mut all = self.retained;
        all.extend(retained);
        let work = Work::new(Parts {
            operation: self.operation,
            event: Some(event),
            started: self.started,
            error: self.error,
            cancel: self.cancel,
            device_owned: self.device_owned,
            lease: Some(Arc::clone(&self.executor.shared.lease)),
            retained: all,
            quarantined_counter: device.quarantined_counter(),
            failed: self.failed,
            counts: self.counts,
            defect: device.defect(),
            registry: Arc::clone(&device.shared.registry),
        });
        device.shared.registry.register(work.clone());
        Ok(work)
    }

    /// Records the completion event; returns the completion handle.
    pub(crate) fn complete(self, retained: Vec<Retained>) -> Result<CudaCompletion, CudaError> {
        self.finish(retained).map(CudaCompletion::new)
    }
}
