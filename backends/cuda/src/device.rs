//! One CUDA device as the backend sees it: a context of its own, the
//! memory stream, the loaded kernels, the stream pool, the mapped host pool,
//! the reaper that releases retained resources once work completed, and the
//! ledger the instruments read.

use crate::availability;
use crate::defect::Defect;
use crate::element::Element;
use crate::error::{CudaError, CudaVersion};
use crate::ffi::{self, DeviceMemory, HostPool, HostSlot, Launch};
use crate::ptx;
use crate::reaper::Registry;
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaStream, LaunchConfig};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::ffi::Event;

/// What the driver says about the device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Its name.
    pub name: String,
    /// Its ordinal.
    pub ordinal: usize,
    /// The driver's CUDA version.
    pub driver: CudaVersion,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Level-2 cache, in bytes.
    pub l2_cache_bytes: usize,
}

/// Threads per block of every launch.
const THREADS: u64 = 256;

/// Most blocks per multiprocessor in one launch (the grid walks the rest
/// in block-uniform tiles).
const BLOCKS_PER_MULTIPROCESSOR: u64 = 8;

impl DeviceInfo {
    /// Threads in a launch of the largest grid.
    fn most_threads(&self) -> u64 {
        u64::from(self.multiprocessors) * BLOCKS_PER_MULTIPROCESSOR * THREADS
    }

    /// Message sizes, in bytes per rank, where the backend's data path
    /// changes for `element`s on this device, sorted: the sum's share
    /// alignment (a second member's share begins past 256 elements), one
    /// full pass of the largest grid (past it, every thread walks a second
    /// tile: four `f32`s per thread in the sum's vector path, one 32-bit
    /// word per thread in the copies), and the level-2 cache (past it, the
    /// data streams from device memory).
    pub fn boundaries(&self, element: Element) -> Vec<usize> {
        let threads = self.most_threads() as usize;
        let sum_pass = match element {
            Element::F32 => 16 * threads,
            _ => element.size() * threads,
        };
        let mut bytes = vec![
            crate::ffi::SHARE_ALIGN * element.size(),
            sum_pass,
            4 * threads,
            self.l2_cache_bytes,
        ];
        bytes.retain(|&b| b > 0);
        bytes.sort_unstable();
        bytes.dedup();
        bytes
    }
}

/// Live native resources by kind (the resource-ledger instrument).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) storages: AtomicUsize,
    pub(crate) executors: AtomicUsize,
    pub(crate) groups: AtomicUsize,
    pub(crate) routes: AtomicUsize,
    pub(crate) quarantined: Arc<AtomicUsize>,
}

/// A snapshot of the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LedgerSnapshot {
    /// Live device buffers of tensors.
    pub storages: usize,
    /// Live executors.
    pub executors: usize,
    /// Live group members.
    pub groups: usize,
    /// Live routes.
    pub routes: usize,
    /// Work whose retained resources are not yet released.
    pub pending_work: usize,
    /// Quarantined work not yet released.
    pub quarantined: usize,
}

pub(crate) struct DeviceShared {
    pub(crate) context: Arc<CudaContext>,
    pub(crate) memory: Arc<CudaStream>,
    kernels: HashMap<&'static str, CudaFunction>,
    pub(crate) info: DeviceInfo,
    pub(crate) host: Arc<HostPool>,
    streams: Mutex<Vec<Arc<CudaStream>>>,
    pub(crate) pool_size: usize,
    pub(crate) connections: usize,
    pub(crate) registry: Arc<Registry>,
    pub(crate) counters: Counters,
    live_storages: Mutex<HashSet<u64>>,
    next_id: AtomicU64,
    pub(crate) defect: Option<Defect>,
}

impl Drop for DeviceShared {
    /// With work still in flight (a collective whose peer never came, held
    /// work never released), the module and the pinned host memory are left
    /// to the process: unloading one or freeing the other may synchronise
    /// the context, which that work would turn into a hang.
    fn drop(&mut self) {
        if !self.registry.is_empty() {
            std::mem::forget(self.kernels.clone());
            std::mem::forget(Arc::clone(&self.host));
        }
        self.registry.shut_down();
    }
}

/// An open device (cheap to clone: every clone is the same device).
#[derive(Clone)]
pub struct CudaDevice {
    pub(crate) shared: Arc<DeviceShared>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("name", &self.shared.info.name)
            .field("streams", &self.shared.pool_size)
            .finish_non_exhaustive()
    }
}

/// The hardware work queues streams are spread over
/// (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 unless set; at most 32).
fn connections() -> Result<usize, CudaError> {
    match std::env::var("CUDA_DEVICE_MAX_CONNECTIONS") {
        Err(_) => Ok(8),
        Ok(value) => match value.parse::<usize>() {
            Ok(n @ 1..=32) => Ok(n),
            _ => Err(CudaError::Invalid {
                operation: "CUDA_DEVICE_MAX_CONNECTIONS",
                expected: "a number from 1 to 32".into(),
                got: format!("{value:?}"),
            }),
        },
    }
}

impl CudaDevice {
    /// Opens device `ordinal` in a context of its own: finds the driver,
    /// creates the context (cudarc's event tracking off), the memory stream
    /// and the stream pool (all before any stream is held), loads the
    /// kernels and starts the reaper. No GPU, no driver or an old one is an
    /// error saying which.
    ///
    /// The pool has one stream per hardware queue but the memory stream's
    /// (`CUDA_DEVICE_MAX_CONNECTIONS` − 1): a stream waiting on a gate then
    /// never holds another stream's work.
    pub fn open(ordinal: usize) -> Result<Self, CudaError> {
        Self::open_with(ordinal, None)
    }

    /// [`Self::open`] with one planted [`Defect`] (the kit's mutant proofs).
    pub fn with_defect(ordinal: usize, defect: Defect) -> Result<Self, CudaError> {
        Self::open_with(ordinal, Some(defect))
    }

    fn open_with(ordinal: usize, defect: Option<Defect>) -> Result<Self, CudaError> {
        let driver = availability::driver()?;
        let connections = connections()?;
        let count = CudaContext::device_count().map_err(CudaError::driver("cuDeviceGetCount"))?;
        if count <= 0 {
            return Err(CudaError::NoDevice { driver });
        }
        let context =
            CudaContext::new_non_primary(ordinal, 0).map_err(CudaError::driver("cuCtxCreate"))?;
        ffi::disable_event_tracking(&context);
        ffi::keep_pool_memory(&context)?;
        let new_stream = || {
            context
                .new_stream()
                .map_err(CudaError::driver("cuStreamCreate"))
        };
        let memory = new_stream()?;
        let pool_size = connections.saturating_sub(1).max(1);
        let streams = (0..pool_size)
            .map(|_| new_stream())
            .collect::<Result<Vec<_>, _>>()?;
        let attribute = |attribute| {
            context
                .attribute(attribute)
                .map_err(CudaError::driver("cuDeviceGetAttribute"))
        };
        let info = DeviceInfo {
            name: context
                .name()
                .map_err(CudaError::driver("cuDeviceGetName"))?,
            ordinal,
            driver,
            compute_capability: context
                .compute_capability()
                .map_err(CudaError::driver("cuDeviceGetAttribute"))?,
            total_memory: context
                .total_mem()
                .map_err(CudaError::driver("cuDeviceTotalMem"))?,
            multiprocessors: attribute(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )?
            .max(1) as u32,
            l2_cache_bytes: attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?
                .max(0) as usize,
        };
        let module = context
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx::PTX))
            .map_err(CudaError::driver("cuModuleLoadData (embedded PTX)"))?;
        let mut kernels = HashMap::new();
        for name in ptx::KERNELS {
            let function = module
                .load_function(name)
                .map_err(CudaError::driver("cuModuleGetFunction"))?;
            kernels.insert(name, function);
        }
        let host = HostPool::new(&context);
        let registry = Registry::start(&context)?;
        let device = Self {
            shared: Arc::new(DeviceShared {
                context,
                memory,
                kernels,
                info,
                host,
                streams: Mutex::new(streams),
                pool_size,
                connections,
                registry,
                counters: Counters::default(),
                live_storages: Mutex::new(HashSet::new()),
                next_id: AtomicU64::new(1),
                defect,
            }),
        };
        device.preload()?;
        Ok(device)
    }

    /// Launches every kernel but the trap once with no work, and waits: lazy
    /// module loading then never loads one inside held work.
    fn preload(&self) -> Result<(), CudaError> {
        let error = self.slot(4)?;
        let empty = [
            Launch::AllReduceSum {
                ranks: error.address(),
                count: 0,
                begin: 0,
                end: 0,
                element: 0,
            },
            Launch::CopySegments {
                table: error.address(),
                elements: 1,
            },
            Launch::Receive {
                plan: error.address(),
                offset: 0,
                header_len: 0,
                expected: 0,
                payload: 0,
                len: 0,
            },
            Launch::Frame {
                header: 0,
                header_len: 0,
                payload: 0,
                len: 0,
                message: 0,
            },
            Launch::Elementwise {
                a: 0,
                b: 0,
                out: 0,
                len: 0,
                op: 0,
                factor: 0.0,
            },
            Launch::Matmul {
                a: 0,
                b: 0,
                out: 0,
                m: 0,
                k: 0,
                n: 0,
            },
            Launch::Spin { cycles: 0 },
            Launch::Fault { code: 0 },
        ];
        for launch in empty {
            self.launch(&self.shared.memory, launch, 0, error.address())?;
        }
        self.shared
            .memory
            .synchronize()
            .map_err(CudaError::driver("cuStreamSynchronize (kernel preload)"))
    }

    /// The planted defect, if any.
    pub fn defect(&self) -> Option<Defect> {
        self.shared.defect
    }

    pub(crate) fn has(&self, defect: Defect) -> bool {
        self.shared.defect == Some(defect)
    }

    /// What the driver says about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.shared.context
    }

    /// The pool's size: how many executors may be live at once.
    pub fn streams(&self) -> usize {
        self.shared.pool_size
    }

    /// A stream from the pool, returned when the lease is dropped.
    pub(crate) fn lease(&self, operation: &'static str) -> Result<Arc<StreamLease>, CudaError> {
        let stream = self
            .shared
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .ok_or(CudaError::StreamsExhausted {
                operation,
                streams: self.shared.pool_size,
                connections: self.shared.connections,
            })?;
        Ok(Arc::new(StreamLease {
            stream: Some(stream),
            device: Arc::downgrade(&self.shared),
        }))
    }

    /// A stream of its own (device-layer tests and benchmarks; the backend
    /// leases from the pool).
    pub fn stream(&self) -> Result<Arc<CudaStream>, CudaError> {
        self.shared
            .context
            .new_stream()
            .map_err(CudaError::driver("cuStreamCreate"))
    }

    /// `bytes` of device memory (stream-ordered on the memory stream).
    pub fn alloc(&self, bytes: usize) -> Result<DeviceMemory, CudaError> {
        DeviceMemory::alloc(&self.shared.memory, bytes)
    }

    /// A zeroed slot of mapped host memory (gates, cancel and error words,
    /// descriptors).
    pub fn slot(&self, bytes: usize) -> Result<HostSlot, CudaError> {
        self.shared.host.slot(bytes)
    }

    /// Launches `launch` on `stream`, sized for its elements, polling
    /// `cancel` (a [`HostSlot`] address, or 0) and reporting into `error` (a
    /// [`HostSlot`] address).
    pub fn launch(
        &self,
        stream: &CudaStream,
        launch: Launch,
        cancel: u64,
        error: u64,
    ) -> Result<(), CudaError> {
        let function = self
            .shared
            .kernels
            .get(launch.kernel())
            .ok_or(CudaError::NotProvided {
                operation: launch.kernel(),
            })?;
        let most = u64::from(self.shared.info.multiprocessors) * BLOCKS_PER_MULTIPROCESSOR;
        let blocks = launch.elements().div_ceil(THREADS).clamp(1, most) as u32;
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        ffi::launch(stream, function, config, launch, cancel, error)
    }

    /// An event recorded on `stream` after everything enqueued so far
    /// ([`Event::COMPLETION`] or [`Event::TIMED`]).
    pub fn record(&self, stream: &CudaStream, flags: u32) -> Result<Event, CudaError> {
        let event = Event::new(&self.shared.context, flags)?;
        event.record(stream)?;
        Ok(event)
    }

    pub(crate) fn quarantined_counter(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.shared.counters.quarantined)
    }

    /// A fresh identity (storages, executors).
    pub(crate) fn next_id(&self) -> u64 {
        self.shared.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn storage_born(&self, id: u64) {
        self.shared.counters.storages.fetch_add(1, Ordering::SeqCst);
        self.shared
            .live_storages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id);
    }

    pub(crate) fn storage_freed(&self, id: u64) {
        self.shared.counters.storages.fetch_sub(1, Ordering::SeqCst);
        self.shared
            .live_storages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Whether the device buffer of storage `id` is still allocated (the
    /// liveness-probe instrument).
    pub fn storage_live(&self, id: u64) -> bool {
        self.shared
            .live_storages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&id)
    }

    /// Whether nothing is in flight and every pooled stream is back: the
    /// device can serve a new world as if fresh.
    pub fn is_quiescent(&self) -> bool {
        self.shared.registry.is_empty()
            && self
                .shared
                .streams
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .len()
                == self.shared.pool_size
    }

    /// Live native resources by kind (the resource-ledger instrument).
    pub fn ledger(&self) -> LedgerSnapshot {
        let c = &self.shared.counters;
        LedgerSnapshot {
            storages: c.storages.load(Ordering::SeqCst),
            executors: c.executors.load(Ordering::SeqCst),
            groups: c.groups.load(Ordering::SeqCst),
            routes: c.routes.load(Ordering::SeqCst),
            pending_work: self.shared.registry.unreleased(),
            quarantined: c.quarantined.load(Ordering::SeqCst),
        }
    }
}

/// One pooled stream, leased by an executor (and kept by every work item
/// submitted on it: dropping the executor never abandons queued work).
pub(crate) struct StreamLease {
    stream: Option<Arc<CudaStream>>,
    device: std::sync::Weak<DeviceShared>,
}

impl StreamLease {
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        self.stream
            .as_ref()
            .unwrap_or_else(|| unreachable!("a lease holds its stream until dropped"))
    }
}

impl Drop for StreamLease {
    fn drop(&mut self) {
        if let (Some(stream), Some(device)) = (self.stream.take(), self.device.upgrade()) {
            device
                .streams
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(stream);
        }
    }
}

/// The hold instrument on one stream: `close` makes the stream wait on a
/// host-mapped word; only a host store ([`HoldGate::open`]) lets it go on.
#[derive(Debug)]
pub struct HoldGate {
    word: HostSlot,
}

impl HoldGate {
    /// A gate, open.
    pub fn new(device: &CudaDevice) -> Result<Self, CudaError> {
        Ok(Self {
            word: device.slot(4)?,
        })
    }

    /// Closes `stream` behind the gate: work enqueued after this waits for
    /// [`Self::open`].
    pub fn close(&self, stream: &CudaStream) -> Result<(), CudaError> {
        self.word.wait_on(stream, 1)
    }

    /// Opens the gate (a host store; never from a stream).
    pub fn open(&self) {
        self.word.store(1);
    }
}

/// Polls `event` with backoff until it completes or `deadline` passes:
/// `Ok(true)` completed, `Ok(false)` still pending at the deadline (`None`:
/// no deadline).
pub fn poll_until(event: &Event, deadline: Option<Instant>) -> Result<bool, CudaError> {
    let mut pause = Duration::from_micros(1);
    loop {
        if event.query()? {
            return Ok(true);
        }
        let now = Instant::now();
        let left = match deadline {
            Some(deadline) if now >= deadline => return Ok(false),
            Some(deadline) => deadline - now,
            None => Duration::MAX,
        };
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_micros(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> DeviceInfo {
        DeviceInfo {
            name: "an H100-like device".into(),
            ordinal: 0,
            driver: CudaVersion::from_driver(13000),
            compute_capability: (9, 0),
            total_memory: 80 << 30,
            multiprocessors: 132,
            l2_cache_bytes: 50 << 20,
        }
    }

    #[test]
    fn boundaries_name_the_share_the_grid_and_the_cache() {
        let threads = 132 * 8 * 256;
        assert_eq!(
            h100().boundaries(Element::F32),
            vec![1024, 4 * threads, 16 * threads, 50 << 20]
        );
        assert_eq!(
            h100().boundaries(Element::Bf16),
            vec![512, 2 * threads, 4 * threads, 50 << 20]
        );
    }
}
