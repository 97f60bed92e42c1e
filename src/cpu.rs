//! The harness of the CPU reference backend: every instrument, every claim
//! by default; fewer of either (or a planted defect) for the kit's own tests.

use commcheck::harness::OwnedGroup;
use commcheck::processes::{Listener, Processes};
use commcheck::{
    Claims, CompletionRef, Dtype, Harness, HarnessError, HoldGuard, HostValues, Identity,
    Instruments, Ledger, Observer, Operation, Probe, WireRecord, WorkState, WorldSizes,
};
use commcheck_cpu::{
    CompletionObserver, CpuBackend, CpuCompletion, CpuDevice, CpuExecutor, CpuGroup, CpuRoute,
    CpuTensor, Defect, Element, Fabric, Personality, Phase, PARALLEL_FROM, SUM_BLOCK,
};
use eredu_runtime::CommunicationRouteId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Connects [`CpuBackend`] to the kit, optionally with one planted [`Defect`].
#[derive(Debug, Clone)]
pub struct CpuHarness {
    defect: Option<Defect>,
    claimed: &'static [Operation],
    instruments: Instruments,
    sizes: WorldSizes,
    processes: Option<Arc<CpuProcesses>>,
    personality: Personality,
    /// Whether [`Harness::second_handle`] clones completions (not for the
    /// `no-clone` personality).
    clones: bool,
    /// Element types the device refuses to communicate (none by default).
    refused: Option<Element>,
}

/// The personalities [`CpuHarness::with_personality`] knows: the backend's
/// ([`Personality`]), and `no-clone`, completions used as if they were not
/// `Clone` (the harness offers no second handle).
pub const PERSONALITIES: [&str; 7] = [
    "lazy",
    "eager",
    "collectives-cancel",
    "unstoppable",
    "spin-wait",
    "rendezvous",
    "no-clone",
];

/// The CPU backend's transport between the processes of a launch, shared
/// by every [`CpuHarness`] of the process (see [`CpuHarness::across`]).
#[derive(Debug)]
pub struct CpuProcesses {
    fabric: Arc<Fabric>,
    /// Worlds of each size built so far: the next world's number. Every
    /// process builds the same worlds in the same order (the kit runs the
    /// same cases everywhere), so the numbers agree.
    worlds: Mutex<HashMap<usize, u64>>,
}

impl CpuProcesses {
    /// Connects the CPU backend's transport between the launch's processes
    /// (every process calls this at the same point: the addresses are
    /// exchanged through `processes`).
    pub fn connect(processes: &Processes) -> Result<Arc<Self>, HarnessError> {
        let listener = Listener::bind_configured().map_err(HarnessError::new)?;
        let addresses = processes
            .all_gather(listener.address().as_bytes())
            .map_err(HarnessError::new)?
            .into_iter()
            .map(|address| String::from_utf8_lossy(&address).into_owned())
            .collect::<Vec<_>>();
        let fabric =
            Fabric::connect(listener, processes.rank(), &addresses).map_err(HarnessError::new)?;
        Ok(Arc::new(Self {
            fabric,
            worlds: Mutex::new(HashMap::new()),
        }))
    }

    /// The number of the next world of `ranks` ranks.
    fn next_world(&self, ranks: usize) -> u64 {
        let mut worlds = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        let count = worlds.entry(ranks).or_insert(0);
        *count += 1;
        ((ranks as u64) << 40) | *count
    }
}

impl Default for CpuHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuHarness {
    /// The correct backend, every operation claimed, every instrument provided.
    pub fn new() -> Self {
        Self {
            defect: None,
            claimed: &Operation::ALL,
            instruments: Instruments::ALL,
            sizes: WorldSizes::Any,
            processes: None,
            personality: Personality::Lazy,
            clones: true,
            refused: None,
        }
    }

    /// The backend refusing communication on `element` tensors, while the
    /// harness still offers their dtype (the kit's tests of a backend that
    /// refuses a dtype: its steps are not supported, quoting the backend).
    pub fn refusing(self, element: Element) -> Self {
        Self {
            refused: Some(element),
            ..self
        }
    }

    /// The backend with the personality named `name` (one of
    /// [`PERSONALITIES`]; see [`commcheck_cpu::personality`]): an honest
    /// design that differs from the default. An unknown name is an error
    /// naming it. `collectives-cancel` makes `supports_cancellation(NativeCancel)`
    /// answer `false` for the rest of the process, and is an error once it
    /// answered `true`: choose it before anything runs.
    ///
    /// ```
    /// use commcheck_reference::cpu::CpuHarness;
    ///
    /// let eager = CpuHarness::new().with_personality("eager").unwrap();
    /// let error = CpuHarness::new().with_personality("eagre").unwrap_err();
    /// assert!(error.to_string().contains("`eagre`"), "{error}");
    /// ```
    pub fn with_personality(self, name: &str) -> Result<Self, HarnessError> {
        if name == "no-clone" {
            return Ok(Self {
                clones: false,
                ..self
            });
        }
        let personality: Personality = name.parse().map_err(|_| {
            HarnessError(format!(
                "unknown CPU harness personality `{name}`: expected one of {}",
                PERSONALITIES
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if personality == Personality::CollectivesCancel {
            commcheck_cpu::personality::restrict_native_cancel_to_collectives()
                .map_err(HarnessError::new)?;
        }
        Ok(Self {
            personality,
            ..self
        })
    }

    /// The personality's name (`lazy` by default).
    pub fn personality(&self) -> &'static str {
        if self.clones {
            self.personality.name()
        } else {
            "no-clone"
        }
    }

    /// The backend with one rank per process: worlds of two or more ranks
    /// span the launch's processes (`mpirun -n N`; see
    /// [`commcheck::processes`]), through the backend's own transport. A
    /// world of one rank stays in its process.
    pub fn across(self, processes: &Arc<CpuProcesses>) -> Self {
        Self {
            processes: Some(Arc::clone(processes)),
            ..self
        }
    }

    /// The backend with one planted defect, in the personality the defect
    /// lives on where it has one ([`Defect::personality`]).
    pub fn with_defect(defect: Defect) -> Self {
        Self {
            defect: Some(defect),
            personality: defect.personality().unwrap_or_default(),
            ..Self::new()
        }
    }

    /// Claims only `operations` (the backend still implements them all).
    pub fn claiming(self, operations: &'static [Operation]) -> Self {
        Self {
            claimed: operations,
            ..self
        }
    }

    /// Provides only `instruments`; the others answer as absent.
    pub fn with_instruments(self, instruments: Instruments) -> Self {
        Self {
            instruments,
            ..self
        }
    }

    /// Declares (and builds) only `sizes`, like a backend with one group per
    /// process; building another size is refused.
    pub fn with_world_sizes(self, sizes: WorldSizes) -> Self {
        Self { sizes, ..self }
    }

    fn device(&self, ranks: usize) -> Result<CpuDevice, HarnessError> {
        let device = match (&self.processes, self.defect) {
            (Some(processes), defect) if ranks > 1 => CpuDevice::spanning(
                Arc::clone(&processes.fabric),
                processes.next_world(ranks),
                defect,
            ),
            (_, Some(defect)) => CpuDevice::with_defect(defect),
            (_, None) => CpuDevice::new(),
        };
        let device = match self.refused {
            Some(element) => device.refusing(element).map_err(|e| {
                HarnessError(format!(
                    "a new device did not take the refusal of {}",
                    e.name()
                ))
            })?,
            None => device,
        };
        device
            .with_personality(self.personality)
            .map_err(|p| HarnessError(format!("a new device did not take the {p} personality")))
    }
}

/// The shared part of a CPU world: one device, all ranks.
#[derive(Debug)]
pub struct CpuWorld {
    device: CpuDevice,
    size: usize,
}

/// One rank of a CPU world.
#[derive(Debug)]
pub struct CpuRank {
    device: CpuDevice,
    executor: CpuExecutor,
    group: CpuGroup,
}

/// The kit's observer over a CPU completion's state (also for harnesses that
/// wrap [`CpuHarness`]).
pub fn observer(observer: CompletionObserver) -> Observer {
    let releasable = observer.clone();
    Observer::new(move || match observer.observe().phase {
        Phase::Queued | Phase::Running => WorkState::Live,
        Phase::Completed => WorkState::Completed,
        Phase::Failed => WorkState::Failed,
        Phase::Cancelled => WorkState::Cancelled,
    })
    .with_releasable(move || releasable.resources_releasable())
}

impl Harness for CpuHarness {
    type Backend = CpuBackend;
    type World = CpuWorld;
    type Rank = CpuRank;
    type Route = CpuRoute;

    fn identity(&self) -> Identity {
        let mut device = match &self.processes {
            None => "host CPU, threads as ranks".to_owned(),
            Some(p) => format!(
                "host CPU, one rank per process ({} processes)",
                p.fabric.size()
            ),
        };
        if self.personality() != "lazy" {
            device.push_str(&format!(", personality {}", self.personality()));
        }
        if let Some(defect) = self.defect {
            device.push_str(&format!(", defect {defect}"));
        }
        Identity {
            name: "commcheck-cpu".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            device,
        }
    }

    fn claims(&self) -> Claims<Self> {
        self.claimed
            .iter()
            .fold(Claims::none(), |claims, operation| match operation {
                Operation::AllReduceSum => claims.sum_reduction(),
                Operation::AllGatherEven => claims.even_gather(),
                Operation::AllGatherUneven => claims.uneven_gather(),
                Operation::VariableAllToAll => claims.variable_all_to_all(),
                Operation::SendReceive => claims.point_to_point(),
                Operation::Broadcast => claims.broadcast(),
                Operation::Barrier => claims.barrier(),
                Operation::AgreeSuccess => claims.failure_agreement(),
            })
    }

    fn instruments(&self) -> Instruments {
        self.instruments
    }

    fn world_sizes(&self) -> WorldSizes {
        self.sizes
    }

    fn world(&self, ranks: usize) -> Result<CpuWorld, HarnessError> {
        if !self.sizes.contains(ranks) {
            return Err(HarnessError(format!(
                "a world of {ranks} ranks is not built: this harness builds {}",
                self.sizes
            )));
        }
        Ok(CpuWorld {
            device: self.device(ranks)?,
            size: ranks,
        })
    }

    fn rank(&self, world: &CpuWorld, rank: usize) -> Result<CpuRank, HarnessError> {
        let device = &world.device;
        Ok(CpuRank {
            device: device.clone(),
            executor: device.executor(),
            group: device
                .join_group("world", world.size, rank)
                .map_err(HarnessError::new)?,
        })
    }

    fn executor<'r>(&self, rank: &'r CpuRank) -> &'r CpuExecutor {
        &rank.executor
    }

    fn context<'r>(&self, rank: &'r CpuRank) -> &'r CpuExecutor {
        &rank.executor
    }

    fn group<'r>(&self, rank: &'r CpuRank) -> &'r CpuGroup {
        &rank.group
    }

    fn route(
        &self,
        rank: &CpuRank,
        id: u64,
        source: usize,
        destination: usize,
    ) -> Result<CpuRoute, HarnessError> {
        rank.device
            .route(
                CommunicationRouteId::new(id),
                source,
                destination,
                rank.group.member(),
            )
            .map_err(HarnessError::new)
    }

    fn tensor(
        &self,
        rank: &CpuRank,
        values: &[f32],
        shape: &[usize],
    ) -> Result<CpuTensor, HarnessError> {
        rank.device
            .tensor(values, &extents(shape)?)
            .map_err(HarnessError::new)
    }

    fn read(&self, _rank: &CpuRank, tensor: &CpuTensor) -> Result<Vec<f32>, HarnessError> {
        tensor
            .read_materialised()
            .ok_or_else(|| not_materialised(tensor))
    }

    fn dtypes(&self) -> Vec<Dtype> {
        Dtype::ALL.to_vec()
    }

    /// A group named after `key` whose member `i` is world rank
    /// `members[i]` (in one process only: across processes, the backend's
    /// transport numbers a group's members by process).
    fn ordered_group(
        &self,
        rank: &CpuRank,
        key: u64,
        members: &[usize],
    ) -> Option<Result<OwnedGroup<Self>, HarnessError>> {
        if self.processes.is_some() {
            return None;
        }
        let me = rank.group.member();
        let Some(position) = members.iter().position(|&m| m == me) else {
            return Some(Err(HarnessError(format!(
                "rank {me} is not in the member list {members:?}"
            ))));
        };
        Some(
            rank.device
                .join_group(&format!("ordered-{key}"), members.len(), position)
                .map(|group| Box::new(group) as OwnedGroup<Self>)
                .map_err(HarnessError::new),
        )
    }

    fn tensor_of(
        &self,
        rank: &CpuRank,
        values: &HostValues,
        shape: &[usize],
    ) -> Result<CpuTensor, HarnessError> {
        let element = match values.dtype() {
            Dtype::F16 => Element::F16,
            Dtype::Bf16 => Element::Bf16,
            _ => Element::F32,
        };
        rank.device
            .typed_tensor_from(element, values.widen(), &extents(shape)?)
            .map_err(HarnessError::new)
    }

    /// The values as the tensor holds them, in its own element type (the
    /// kit compares that with the dtype it asked for).
    fn read_as(
        &self,
        _rank: &CpuRank,
        tensor: &CpuTensor,
        _dtype: Dtype,
    ) -> Result<HostValues, HarnessError> {
        let dtype = match tensor.element() {
            Element::F16 => Dtype::F16,
            Element::Bf16 => Dtype::Bf16,
            _ => Dtype::F32,
        };
        // Narrowed straight from the backend's values: no copy of them first.
        tensor
            .with_materialised(|values| HostValues::narrow(dtype, values))
            .ok_or_else(|| not_materialised(tensor))
    }

    /// The sum's cache block and its parallel split (elements are kept as
    /// `f32` whatever the dtype, so both are element counts), and under the
    /// `rendezvous` personality the bytes from which a transfer waits for
    /// its receiver.
    fn boundaries(&self, dtype: Dtype) -> Vec<usize> {
        let mut boundaries = vec![SUM_BLOCK * dtype.size(), PARALLEL_FROM * dtype.size()];
        if self.personality == Personality::Rendezvous {
            boundaries.push(commcheck_cpu::RENDEZVOUS_FROM);
        }
        boundaries
    }

    fn hold(&self, _rank: &CpuRank, executor: &CpuExecutor) -> Option<HoldGuard> {
        if !self.instruments.hold {
            return None;
        }
        let hold = executor.hold();
        Some(HoldGuard::new(move || hold.release()))
    }

    fn probe(&self, rank: &CpuRank, tensor: &CpuTensor) -> Option<Probe> {
        if !self.instruments.probe {
            return None;
        }
        let device = rank.device.clone();
        let id = tensor.storage_id();
        Some(Probe::new(move || device.storage_live(id)))
    }

    fn ledger(&self, rank: &CpuRank) -> Option<Ledger> {
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

    fn inject_fault(&self, _rank: &CpuRank, executor: &CpuExecutor) -> bool {
        if !self.instruments.fault {
            return false;
        }
        executor.inject_fault();
        true
    }

    fn fail_next_submission(&self, _rank: &CpuRank, executor: &CpuExecutor) -> bool {
        if !self.instruments.submission_fault {
            return false;
        }
        executor.fail_next_submission();
        true
    }

    fn second_handle(&self, completion: &CpuCompletion) -> Option<CpuCompletion> {
        self.clones.then(|| completion.clone())
    }

    fn observer(&self, completion: CompletionRef<'_, Self>) -> Option<Observer> {
        if !self.instruments.observer {
            return None;
        }
        Some(observer(match completion {
            CompletionRef::Plain(c) | CompletionRef::Communication(c) => c.observer(),
        }))
    }

    fn wire_log(&self, route: &CpuRoute) -> Option<Vec<WireRecord>> {
        if !self.instruments.wire_log {
            return None;
        }
        Some(
            route
                .wire_log()
                .into_iter()
                .map(|m| WireRecord {
                    headers: m.headers,
                    payload_bytes: m.payload_bytes,
                })
                .collect(),
        )
    }
}

/// A shape as the device takes it.
fn extents(shape: &[usize]) -> Result<Vec<i32>, HarnessError> {
    shape
        .iter()
        .map(|&d| i32::try_from(d).map_err(HarnessError::new))
        .collect()
}

/// Why a read-back found no values.
fn not_materialised(tensor: &CpuTensor) -> HarnessError {
    HarnessError(format!(
        "{tensor:?} is not materialised (read-back never evaluates)"
    ))
}
