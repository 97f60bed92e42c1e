//! The CPU backend as the kit sees it under shuttle: a [`Harness`] whose
//! world is one device (a correct one, the planted lost wake-up, or one of
//! the kit's planted defects), a group of every rank, and the routes
//! between them, with every instrument the kit's sequence model reads
//! (hold, liveness probes, observer, ledger, fault injection, wire log,
//! second handles). Built under `--cfg commcheck_shuttle`, the device's
//! executors, rendezvous and routes run on shuttle's primitives.

use commcheck::{
    Claims, CompletionRef, Harness, HarnessError, HoldGuard, Identity, Instruments, Ledger,
    Observer, Probe, WireRecord, WorkState,
};
use commcheck_cpu::{
    CpuBackend, CpuCompletion, CpuDevice, CpuExecutor, CpuGroup, CpuRoute, CpuTensor, Defect, Phase,
};
use eredu_runtime::CommunicationRouteId;

/// Which device a sequence runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A correct device.
    Clean,
    /// A device with the planted lost wake-up in its executors
    /// (`CpuDevice::with_planted_race`).
    PlantedRace,
    /// A device with one of the kit's planted defects.
    Defect(Defect),
}

impl Backend {
    fn device(self) -> CpuDevice {
        match self {
            Self::Clean => CpuDevice::new(),
            Self::PlantedRace => CpuDevice::with_planted_race(),
            Self::Defect(defect) => CpuDevice::with_defect(defect),
        }
    }
}

/// The CPU backend on `backend`'s device, every operation claimed.
#[derive(Debug, Clone, Copy)]
pub struct ShuttleHarness {
    backend: Backend,
}

impl ShuttleHarness {
    /// A harness whose worlds run on `backend`'s device.
    pub fn new(backend: Backend) -> Self {
        Self { backend }
    }
}

/// A world: one device shared by its ranks.
#[derive(Debug)]
pub struct CpuWorld {
    device: CpuDevice,
    size: usize,
}

/// One rank of a world.
#[derive(Debug)]
pub struct CpuRank {
    device: CpuDevice,
    executor: CpuExecutor,
    group: CpuGroup,
}

fn extents(shape: &[usize]) -> Result<Vec<i32>, HarnessError> {
    shape
        .iter()
        .map(|&d| i32::try_from(d).map_err(HarnessError::new))
        .collect()
}

impl Harness for ShuttleHarness {
    type Backend = CpuBackend;
    type World = CpuWorld;
    type Rank = CpuRank;
    type Route = CpuRoute;

    fn identity(&self) -> Identity {
        Identity {
            name: "commcheck-cpu".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            device: format!("host CPU under shuttle, {:?}", self.backend),
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
        Instruments::ALL
    }

    fn second_handle(&self, completion: &CpuCompletion) -> Option<CpuCompletion> {
        Some(completion.clone())
    }

    fn world(&self, ranks: usize) -> Result<CpuWorld, HarnessError> {
        Ok(CpuWorld {
            device: self.backend.device(),
            size: ranks,
        })
    }

    fn rank(&self, world: &CpuWorld, rank: usize) -> Result<CpuRank, HarnessError> {
        let device = world.device.clone();
        Ok(CpuRank {
            executor: device.executor(),
            group: device
                .join_group("world", world.size, rank)
                .map_err(HarnessError::new)?,
            device,
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
            .ok_or_else(|| HarnessError(format!("{tensor:?} is not materialised")))
    }

    fn hold(&self, _rank: &CpuRank, executor: &CpuExecutor) -> Option<HoldGuard> {
        let hold = executor.hold();
        Some(HoldGuard::new(move || hold.release()))
    }

    fn probe(&self, rank: &CpuRank, tensor: &CpuTensor) -> Option<Probe> {
        let (device, id) = (rank.device.clone(), tensor.storage_id());
        Some(Probe::new(move || device.storage_live(id)))
    }

    fn ledger(&self, rank: &CpuRank) -> Option<Ledger> {
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
        executor.inject_fault();
        true
    }

    fn fail_next_submission(&self, _rank: &CpuRank, executor: &CpuExecutor) -> bool {
        executor.fail_next_submission();
        true
    }

    fn observer(&self, completion: CompletionRef<'_, Self>) -> Option<Observer> {
        let observer = match completion {
            CompletionRef::Plain(c) | CompletionRef::Communication(c) => c.observer(),
        };
        let releasable = observer.clone();
        Some(
            Observer::new(move || match observer.observe().phase {
                Phase::Queued | Phase::Running => WorkState::Live,
                Phase::Completed => WorkState::Completed,
                Phase::Failed => WorkState::Failed,
                Phase::Cancelled => WorkState::Cancelled,
            })
            .with_releasable(move || releasable.resources_releasable()),
        )
    }

    fn wire_log(&self, route: &CpuRoute) -> Option<Vec<WireRecord>> {
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
