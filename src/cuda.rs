//! The harness of the CUDA reference backend: stream-ranks of one GPU,
//! every instrument, every claim. Without a usable GPU every case is
//! not-supported with the reason (the driver library searched, the version
//! found, no device); with `COMMCHECK_REQUIRE_CUDA=1` they fail instead.

use commcheck::{
    Claims, CompletionRef, Dtype, Harness, HarnessError, HoldGuard, HostValues, Identity,
    Instruments, Ledger, Observer, Probe, WireRecord, WorkState, WorldSizes,
};
use commcheck_cuda::{
    CompletionObserver, CudaBackend, CudaDevice, CudaExecutor, CudaGroup, CudaRoute, CudaTensor,
    Defect, DeviceInfo, Element, Phase,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Opens a device, one at a time: contexts created concurrently contend
/// in the driver (seconds each, with 16 at once).
fn open(ordinal: usize, defect: Option<Defect>) -> Result<CudaDevice, commcheck_cuda::CudaError> {
    static OPENING: Mutex<()> = Mutex::new(());
    let _one = OPENING.lock().unwrap_or_else(|p| p.into_inner());
    match defect {
        Some(defect) => CudaDevice::with_defect(ordinal, defect),
        None => CudaDevice::open(ordinal),
    }
}

/// Connects [`CudaBackend`] to the kit.
#[derive(Debug)]
pub struct CudaHarness {
    ordinal: usize,
    defect: Option<Defect>,
    /// `Ok(description)` of the device, or why CUDA is not usable here.
    probe: Result<String, String>,
    /// What the driver said of the device (its data-path boundaries).
    info: Option<DeviceInfo>,
    /// `COMMCHECK_REQUIRE_CUDA`: fail rather than not-supported (`Err`: the
    /// setting itself is bad, which fails every case).
    required: Result<bool, String>,
    /// Devices of finished worlds with nothing in flight, reused by the next
    /// world (a context per world, without paying for one each time).
    idle: Arc<Mutex<Vec<CudaDevice>>>,
    /// The instruments offered ([`Instruments::ALL`] unless
    /// [`CudaHarness::with_instruments`] says otherwise).
    instruments: Instruments,
}

/// Devices kept for reuse at most (ones still draining included).
const IDLE_DEVICES: usize = 16;

impl Default for CudaHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl CudaHarness {
    /// The harness of device 0.
    pub fn new() -> Self {
        Self::on(0, None)
    }

    /// The harness of device 0 with one planted [`Defect`].
    pub fn with_defect(defect: Defect) -> Self {
        Self::on(0, Some(defect))
    }

    fn on(ordinal: usize, defect: Option<Defect>) -> Self {
        let (probe, idle, info) = match open(ordinal, defect) {
            Ok(device) => {
                let info = device.info().clone();
                (
                    Ok(format!(
                        "{} (compute {}.{}), driver CUDA {}, stream-ranks of one device",
                        info.name,
                        info.compute_capability.0,
                        info.compute_capability.1,
                        info.driver
                    )),
                    vec![device],
                    Some(info),
                )
            }
            Err(error) => (Err(error.to_string()), Vec::new(), None),
        };
        Self {
            ordinal,
            defect,
            probe,
            info,
            required: commcheck_cuda::cuda_required().map_err(|e| e.to_string()),
            idle: Arc::new(Mutex::new(idle)),
            instruments: Instruments::ALL,
        }
    }

    /// Offers only `instruments`: with [`Instruments::NONE`], the black-box
    /// run of an eager, asynchronous backend, as a vendor without
    /// instruments would certify theirs.
    ///
    /// ```
    /// use commcheck::{Harness, Instruments};
    /// let black_box = commcheck_reference::cuda::CudaHarness::new().with_instruments(Instruments::NONE);
    /// assert_eq!(black_box.instruments(), Instruments::NONE);
    /// ```
    pub fn with_instruments(mut self, instruments: Instruments) -> Self {
        self.instruments = instruments;
        self
    }

    /// `Ok` when a device was opened here; otherwise why CUDA is not usable.
    pub fn usable(&self) -> Result<(), String> {
        self.probe.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// A device with nothing in flight: a finished world's, or a new one.
    fn device(&self) -> Result<CudaDevice, HarnessError> {
        let reusable = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let found = idle.iter().position(CudaDevice::is_quiescent);
            found.map(|index| idle.remove(index))
        };
        match reusable {
            Some(device) => Ok(device),
            None => open(self.ordinal, self.defect).map_err(HarnessError::new),
        }
    }
}

/// The shared part of a CUDA world: its device (a context of its own), the
/// group's members and the routes, handed to ranks as they are built.
pub struct CudaWorld {
    device: CudaDevice,
    members: Mutex<Vec<Option<CudaGroup>>>,
    routes: Arc<Routes>,
    idle: Arc<Mutex<Vec<CudaDevice>>>,
}

impl std::fmt::Debug for CudaWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaWorld")
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl Drop for CudaWorld {
    /// The device goes back for the next world (reused once nothing of this
    /// one is in flight; the oldest beyond a few are closed).
    fn drop(&mut self) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.push(self.device.clone());
        if idle.len() > IDLE_DEVICES {
            idle.remove(0);
        }
    }
}

/// A route's key (id, source, destination) and its two ends (sender's,
/// receiver's).
type RouteEnds = HashMap<(u64, usize, usize), (Option<CudaRoute>, Option<CudaRoute>)>;

/// The routes of one world: each rank gets its own end.
#[derive(Default)]
struct Routes {
    ends: Mutex<RouteEnds>,
}

/// One rank of a CUDA world.
pub struct CudaRank {
    device: CudaDevice,
    executor: CudaExecutor,
    group: CudaGroup,
    routes: Arc<Routes>,
}

impl std::fmt::Debug for CudaRank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaRank")
            .field("member", &self.group.member())
            .finish_non_exhaustive()
    }
}

/// `shape` as the backend's `i32` extents.
fn extents(shape: &[usize]) -> Result<Vec<i32>, HarnessError> {
    shape
        .iter()
        .map(|&d| i32::try_from(d).map_err(HarnessError::new))
        .collect()
}

fn observer(observer: CompletionObserver) -> Observer {
    let releasable = observer.clone();
    Observer::new(move || match observer.phase() {
        Phase::Pending => WorkState::Live,
        Phase::Completed => WorkState::Completed,
        Phase::Failed => WorkState::Failed,
        Phase::Cancelled => WorkState::Cancelled,
    })
    .with_releasable(move || releasable.resources_releasable())
}

impl Harness for CudaHarness {
    type Backend = CudaBackend;
    type World = CudaWorld;
    type Rank = CudaRank;
    type Route = CudaRoute;

    fn identity(&self) -> Identity {
        Identity {
            name: "commcheck-cuda".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            device: match (&self.probe, self.defect) {
                (Ok(device), None) => device.clone(),
                (Ok(device), Some(defect)) => format!("{device}, defect {defect}"),
                (Err(reason), _) => format!("no usable CUDA device: {reason}"),
            },
        }
    }

    fn claims(&self) -> Claims<Self> {
        Claims::none()
            .sum_reduction()
            .even_gather()
            .uneven_gather()
            .variable_all_to_all()
            .point_to_point()
            .broadcast()
            .barrier()
            .failure_agreement()
    }

    fn instruments(&self) -> Instruments {
        self.instruments
    }

    fn world_sizes(&self) -> WorldSizes {
        WorldSizes::UpTo(commcheck_cuda::MAX_RANKS)
    }

    fn unavailable(&self) -> Option<String> {
        match (&self.required, &self.probe) {
            (Ok(false), Err(reason)) => Some(format!(
                "no usable CUDA device here ({reason}); set {}=1 to fail instead",
                commcheck_cuda::REQUIRE_CUDA
            )),
            _ => None,
        }
    }

    fn world(&self, ranks: usize) -> Result<CudaWorld, HarnessError> {
        if let Err(setting) = &self.required {
            return Err(HarnessError(setting.clone()));
        }
        if let Err(reason) = &self.probe {
            return Err(HarnessError(format!(
                "{}=1 and CUDA is not usable: {reason}",
                commcheck_cuda::REQUIRE_CUDA
            )));
        }
        let device = self.device()?;
        let members = CudaGroup::create(&device, ranks).map_err(HarnessError::new)?;
        Ok(CudaWorld {
            device,
            members: Mutex::new(members.into_iter().map(Some).collect()),
            routes: Arc::default(),
            idle: Arc::clone(&self.idle),
        })
    }

    fn rank(&self, world: &CudaWorld, rank: usize) -> Result<CudaRank, HarnessError> {
        let group = world
            .members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(rank)
            .and_then(Option::take)
            .ok_or_else(|| {
                HarnessError(format!("rank {rank} was already built or is out of range"))
            })?;
        Ok(CudaRank {
            device: world.device.clone(),
            executor: CudaExecutor::new(&world.device).map_err(HarnessError::new)?,
            group,
            routes: Arc::clone(&world.routes),
        })
    }

    fn executor<'r>(&self, rank: &'r CudaRank) -> &'r CudaExecutor {
        &rank.executor
    }

    fn context<'r>(&self, rank: &'r CudaRank) -> &'r CudaExecutor {
        &rank.executor
    }

    fn group<'r>(&self, rank: &'r CudaRank) -> &'r CudaGroup {
        &rank.group
    }

    fn route(
        &self,
        rank: &CudaRank,
        id: u64,
        source: usize,
        destination: usize,
    ) -> Result<CudaRoute, HarnessError> {
        let member = rank.group.member();
        if member != source && member != destination {
            return Err(HarnessError(format!(
                "rank {member} is neither end of route {id} ({source} → {destination})"
            )));
        }
        let mut ends = rank.routes.ends.lock().unwrap_or_else(|p| p.into_inner());
        let entry = match ends.entry((id, source, destination)) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let (sender, receiver) = CudaRoute::pair(&rank.device, id, source, destination)
                    .map_err(HarnessError::new)?;
                entry.insert((Some(sender), Some(receiver)))
            }
        };
        let end = if member == source { &entry.0 } else { &entry.1 };
        end.clone().ok_or_else(|| {
            HarnessError(format!(
                "route {id} ({source} → {destination}) has no end for rank {member}"
            ))
        })
    }

    fn tensor(
        &self,
        rank: &CudaRank,
        values: &[f32],
        shape: &[usize],
    ) -> Result<CudaTensor, HarnessError> {
        CudaTensor::from_host(&rank.device, values, &extents(shape)?).map_err(HarnessError::new)
    }

    fn read(&self, _rank: &CudaRank, tensor: &CudaTensor) -> Result<Vec<f32>, HarnessError> {
        tensor.read().map_err(HarnessError::new)
    }

    fn dtypes(&self) -> Vec<Dtype> {
        Dtype::ALL.to_vec()
    }

    /// The values' little-endian bytes, as a tensor of their element type.
    fn tensor_of(
        &self,
        rank: &CudaRank,
        values: &HostValues,
        shape: &[usize],
    ) -> Result<CudaTensor, HarnessError> {
        let (element, bytes): (Element, Vec<u8>) = match values {
            HostValues::F32(values) => return self.tensor(rank, values, shape),
            HostValues::F16(values) => (
                Element::F16,
                values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            HostValues::Bf16(values) => (
                Element::Bf16,
                values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            other => {
                return Err(HarnessError(format!(
                    "the CUDA harness builds f32, f16 and bf16 tensors, not {}",
                    other.dtype()
                )))
            }
        };
        CudaTensor::from_bytes(&rank.device, element, &bytes, &extents(shape)?)
            .map_err(HarnessError::new)
    }

    /// The values as the tensor holds them, in its own element type (the
    /// kit compares that with the dtype it asked for).
    fn read_as(
        &self,
        _rank: &CudaRank,
        tensor: &CudaTensor,
        _dtype: Dtype,
    ) -> Result<HostValues, HarnessError> {
        if tensor.element() == Element::F32 {
            return tensor
                .read()
                .map(HostValues::F32)
                .map_err(HarnessError::new);
        }
        let bytes = tensor.read_bytes().map_err(HarnessError::new)?;
        let pairs = bytes.chunks_exact(2).map(|b| [b[0], b[1]]);
        Ok(match tensor.element() {
            Element::Bf16 => {
                HostValues::Bf16(pairs.map(commcheck::half::bf16::from_le_bytes).collect())
            }
            _ => HostValues::F16(pairs.map(commcheck::half::f16::from_le_bytes).collect()),
        })
    }

    /// The device's data-path boundaries: the sum's share alignment, one
    /// pass of the largest grid, and the level-2 cache (so the sweep's
    /// largest message, twice the largest boundary, streams from device
    /// memory: 100 MiB per rank with a 50 MiB cache).
    fn boundaries(&self, dtype: Dtype) -> Vec<usize> {
        let element = match dtype {
            Dtype::F16 => Element::F16,
            Dtype::Bf16 => Element::Bf16,
            _ => Element::F32,
        };
        self.info
            .as_ref()
            .map_or_else(Vec::new, |info| info.boundaries(element))
    }

    fn hold(&self, _rank: &CudaRank, executor: &CudaExecutor) -> Option<HoldGuard> {
        if !self.instruments.hold {
            return None;
        }
        let hold = executor.hold().ok()?;
        Some(HoldGuard::new(move || hold.release()))
    }

    fn probe(&self, rank: &CudaRank, tensor: &CudaTensor) -> Option<Probe> {
        if !self.instruments.probe {
            return None;
        }
        let device = rank.device.clone();
        let id = tensor.storage_id();
        Some(Probe::new(move || device.storage_live(id)))
    }

    fn ledger(&self, rank: &CudaRank) -> Option<Ledger> {
        if !self.instruments.ledger {
            return None;
        }
        let snapshot = rank.device.ledger();
        Some(Ledger {
            storages: snapshot.storages,
            executors: snapshot.executors,
            groups: snapshot.groups,
            routes: snapshot.routes,
            pending_work: snapshot.pending_work,
            quarantined: snapshot.quarantined,
        })
    }

    fn inject_fault(&self, _rank: &CudaRank, executor: &CudaExecutor) -> bool {
        if !self.instruments.fault {
            return false;
        }
        executor.inject_fault();
        true
    }

    fn fail_next_submission(&self, _rank: &CudaRank, executor: &CudaExecutor) -> bool {
        if !self.instruments.submission_fault {
            return false;
        }
        executor.fail_next_submission();
        true
    }

    fn second_handle(
        &self,
        completion: &commcheck_cuda::CudaCompletion,
    ) -> Option<commcheck_cuda::CudaCompletion> {
        Some(completion.clone())
    }

    fn observer(&self, completion: CompletionRef<'_, Self>) -> Option<Observer> {
        if !self.instruments.observer {
            return None;
        }
        Some(observer(match completion {
            CompletionRef::Plain(c) | CompletionRef::Communication(c) => c.observer(),
        }))
    }

    fn wire_log(&self, route: &CudaRoute) -> Option<Vec<WireRecord>> {
        if !self.instruments.wire_log {
            return None;
        }
        Some(
            route
                .wire_log()
                .into_iter()
                .map(|m| WireRecord {
                    headers: m.headers,
                    payload_bytes: m.payload_bytes as usize,
                })
                .collect(),
        )
    }
}
