//! A commcheck [`Harness`] for the upstream MLX backend of eredu
//! (`eredu_backend_mlx::backend::nn::shared::MlxNeuralBackend`, crates.io
//! `eredu-backend-mlx` 0.5.0), on MLX's CPU device.
//!
//! MLX keeps one communication group per process, so the harness builds:
//! - in one process ([`MlxHarness::new`]), worlds of one rank: the group
//!   `safemlx::distributed::init(false, Any)` gives a process with no ring
//!   configured (where Open MPI's `libmpi.so` is installed, MLX's MPI
//!   backend in singleton mode; otherwise MLX's empty group), wrapped as an
//!   uncontracted group;
//! - across the processes of an `mpirun -n N` launch
//!   ([`MlxHarness::across`]), worlds of all `N` ranks over MLX's ring
//!   backend (loopback TCP, one rank per process), with the group and the
//!   routes realised from an opaque manifest by
//!   `ParallelCommunicators::from_manifest`, as eredu's partitioned runtime
//!   realises them; and worlds of one rank (on process 0 only) on a size-one
//!   group, the one MLX hands out for a backend it cannot establish
//!   (`init(false, ...)`, see [`singleton_group`]).
//!
//! No instrument is provided ([`Instruments::NONE`]): MLX offers no way to
//! hold a stream, probe a storage, count native resources, inject faults or
//! log wire messages that safemlx exposes. Every claim is an operation trait
//! `MlxNeuralBackend` implements (`src/backend/nn/shared/submission.rs`).

pub mod drive;
pub mod merge;

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use commcheck::processes::Processes;
use commcheck::{Claims, Harness, HarnessError, Identity, Instruments, WorldSizes};
use eredu_backend_mlx::backend::nn::shared::MlxNeuralBackend;
use eredu_backend_mlx::backend::runtime::distributed::topology::{
    CommunicationRouteRealization, ParallelCommunicators,
};
use eredu_backend_mlx::MlxTensor;
use eredu_core::checkpoint::TensorDtype;
use eredu_core::{CollectiveGroupId, CompletionCancellationMode};
use eredu_runtime::backend::CommunicationBackend;
use eredu_runtime::{
    CommunicationCompletionPolicy, CommunicationGroupDescriptor, CommunicationGroupRequirements,
    CommunicationManifest, CommunicationOperation, CommunicationOperationRequirement,
    CommunicationRouteDescriptor, CommunicationRouteId, CommunicationTensorLimits,
};
use safemlx::distributed::{Backend as DistributedBackend, Group as NativeGroup};
use safemlx::{Array, Device, DeviceType, Dtype, Stream, SubmissionScope};

/// The MLX backend's communication group. Its type lives in a private module
/// of `eredu-backend-mlx`: this projection is the only way to name it.
pub type MlxGroup = <MlxNeuralBackend as CommunicationBackend>::CommunicationGroup;

/// Version of `eredu-backend-mlx` this harness certifies.
pub const MLX_BACKEND_VERSION: &str = "0.5.0";

/// Route ids realised per ordered pair of ranks: a route the kit asks for
/// must have an id below this bound (the kit uses ids up to a few hundred).
pub const ROUTE_IDS: u64 = 512;

/// The opaque id of the world group in the harness's manifests.
const WORLD_GROUP: CollectiveGroupId = CollectiveGroupId::new(1);

/// The setup deadline the manifests select. MLX only implements
/// `QuarantineUntilComplete` (see its `mlx_communication_capabilities`).
const SETUP_DEADLINE: Duration = Duration::from_secs(30);

/// The MLX CPU device.
pub fn cpu_stream() -> Stream {
    Stream::new_with_device(&Device::new(DeviceType::Cpu, 0))
}

/// A size-one MLX group for a process whose ring (if any) spans every
/// process. MLX caches its initialised groups by backend name, and a
/// process-wide ring also answers for `any`; so a size-one group is asked
/// for under the name of a backend that cannot be established in this
/// build (NCCL or JACCL on a CPU-only Linux build), for which
/// `init(false, ...)` returns MLX's empty, size-one group (safemlx documents
/// this: "with `strict == false`, failure to establish the requested backend
/// returns a usable size-one group").
pub fn singleton_group() -> Result<NativeGroup, HarnessError> {
    let unavailable = [DistributedBackend::Nccl, DistributedBackend::Jaccl]
        .into_iter()
        .find(|backend| !safemlx::distributed::is_available(*backend))
        .ok_or_else(|| {
            HarnessError(
                "expected NCCL or JACCL to be unavailable in this MLX build (to get MLX's \
                 size-one group next to the ring), but both are available"
                    .into(),
            )
        })?;
    sized_group(
        safemlx::distributed::init(false, unavailable).map_err(HarnessError::new)?,
        1,
        0,
        &format!("MLX's fallback group for the unavailable {unavailable} backend"),
    )
}

/// The size-one group of a process with no ring configured:
/// `init(false, Any)`. MLX tries its ring (no `MLX_HOSTFILE`: skipped), then
/// MPI (with Open MPI's `libmpi.so` installed, a singleton `MPI_Init`), then
/// falls back to its empty group. Never call it in a process where MPI is
/// already initialised (under `mpirun`): use [`singleton_group`] there.
pub fn plain_singleton_group() -> Result<NativeGroup, HarnessError> {
    sized_group(
        safemlx::distributed::init(false, DistributedBackend::Any).map_err(HarnessError::new)?,
        1,
        0,
        "safemlx::distributed::init(false, Any) in a process with no MLX_HOSTFILE",
    )
}

/// Checks that `group` has `size` members and that this process is `rank`.
fn sized_group(
    group: NativeGroup,
    size: usize,
    rank: usize,
    what: &str,
) -> Result<NativeGroup, HarnessError> {
    if group.size() != size || group.rank() != rank {
        return Err(HarnessError(format!(
            "{what}: expected rank {rank} of a group of {size}, got rank {} of {}",
            group.rank(),
            group.size()
        )));
    }
    Ok(group)
}

/// An MLX tensor holding `values` with `shape`, materialised: an array
/// built from host data, available at once. It is made without any stream
/// (no copy, no evaluation), so making a tensor never waits behind work
/// queued on a stream.
pub fn materialised(values: &[f32], shape: &[usize]) -> Result<MlxTensor, HarnessError> {
    let dims = shape
        .iter()
        .map(|&extent| {
            i32::try_from(extent).map_err(|_| {
                HarnessError(format!(
                    "expected extents below 2^31, got {extent} in {shape:?}"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Array::try_from_data(values, &dims)
        .map(MlxTensor::from_array)
        .map_err(|error| {
            HarnessError(format!(
                "expected {} values for shape {shape:?}, got {}: {error}",
                shape.iter().product::<usize>(),
                values.len()
            ))
        })
}

/// Reads `tensor`'s values without evaluating it (see [`MlxHarness`]'s
/// `read`): an array whose evaluation submits native work was not
/// materialised, and is refused. The row-major `f32` copy of a
/// materialised array is made on `stream`, which should be one no other
/// work is queued on.
pub fn read_materialised(tensor: &MlxTensor, stream: &Stream) -> Result<Vec<f32>, HarnessError> {
    let array = tensor.as_array();
    if array.size() == 0 {
        return Ok(Vec::new());
    }
    let mut scope = SubmissionScope::begin().map_err(HarnessError::new)?;
    let settled = array.evaluated().map(|_| ());
    scope.seal();
    let status = scope.status();
    settled.map_err(|error| {
        HarnessError(format!(
            "expected a materialised array of shape {:?}, but waiting for its values failed: {error}",
            array.shape()
        ))
    })?;
    if status.has_work() {
        return Err(HarnessError(format!(
            "expected a materialised array of shape {:?}, but reading it made MLX submit native \
             work ({:?}): it was not materialised (the read evaluated it)",
            array.shape(),
            status.activity()
        )));
    }
    // The array itself is materialised: what follows is new work on top of
    // it (a row-major copy, an f32 view), never its own evaluation.
    let as_f32 = if array.dtype() == Dtype::Float32 {
        array.clone()
    } else {
        array
            .as_dtype(Dtype::Float32, stream)
            .map_err(HarnessError::new)?
    };
    let contiguous: Array = as_f32
        .contiguous(false, stream)
        .map_err(HarnessError::new)?;
    let evaluated = contiguous.evaluated().map_err(HarnessError::new)?;
    evaluated.try_to_vec::<f32>().map_err(|error| {
        HarnessError(format!(
            "expected host-readable f32 values for shape {:?}, got {error:?}",
            array.shape()
        ))
    })
}

/// Where the worlds' ranks live.
#[derive(Debug, Clone)]
enum Placement {
    /// One process, worlds of one rank.
    Single,
    /// The processes of a launch: one rank per process over MLX's ring.
    Across(Arc<MlxProcesses>),
    /// No world is built: the catalogue of a launch of this many processes,
    /// for planning runs (see [`MlxHarness::planning`]).
    Planning(usize),
}

/// MLX's ring backend across the processes of one launch (`mpirun -n N`):
/// every process agreed on loopback ports, pointed `MLX_RANK` and
/// `MLX_HOSTFILE` at them, and initialised the ring once (MLX caches it).
#[derive(Debug)]
pub struct MlxProcesses {
    rank: usize,
    size: usize,
    ports: Vec<u16>,
}

impl MlxProcesses {
    /// Sets up MLX's ring across the launch's processes. Every process calls
    /// this at the same point, before anything else initialises MLX's
    /// distributed group: each binds a free loopback port, the ports are
    /// exchanged through `processes`, each writes the hostfile and sets
    /// `MLX_RANK` and `MLX_HOSTFILE`, then all initialise the ring together.
    pub fn connect(processes: &Processes) -> Result<Arc<Self>, HarnessError> {
        let (rank, size) = (processes.rank(), processes.size());
        if size < 2 {
            return Err(HarnessError(format!(
                "expected a launch of at least 2 processes for MLX's ring, got {size}"
            )));
        }
        let port = free_port()?;
        let ports = processes
            .all_gather(&port.to_le_bytes())
            .map_err(HarnessError::new)?
            .into_iter()
            .enumerate()
            .map(|(peer, bytes)| {
                <[u8; 2]>::try_from(bytes.as_slice())
                    .map(u16::from_le_bytes)
                    .map_err(|_| {
                        HarnessError(format!(
                            "expected a 2-byte port from rank {peer}, got {} bytes",
                            bytes.len()
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let hostfile = hostfile_path(rank);
        std::fs::write(&hostfile, hostfile_json(&ports)).map_err(|error| {
            HarnessError(format!("cannot write {}: {error}", hostfile.display()))
        })?;
        // Before MLX's first `init`: MLX reads these once, when it builds
        // (and caches) the process's ring.
        std::env::set_var("MLX_RANK", rank.to_string());
        std::env::set_var("MLX_HOSTFILE", &hostfile);
        let ring = safemlx::distributed::init(true, DistributedBackend::Ring).map_err(|error| {
            HarnessError(format!(
                "MLX's ring did not start (rank {rank} of {size}, hostfile {}): {error}",
                hostfile.display()
            ))
        });
        // MLX has read the hostfile (or failed): it is no longer needed.
        let _ = std::fs::remove_file(&hostfile);
        sized_group(ring?, size, rank, "MLX's ring")?;
        Ok(Arc::new(Self { rank, size, ports }))
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes (ranks of the ring).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The ring's loopback ports, by rank.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }
}

/// A loopback port free at the time of the call.
fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .map_err(|error| HarnessError(format!("cannot bind a loopback port: {error}")))?;
    let port = listener
        .local_addr()
        .map_err(|error| HarnessError(format!("cannot read a bound loopback port: {error}")))?
        .port();
    Ok(port)
}

fn hostfile_path(rank: usize) -> PathBuf {
    std::env::temp_dir().join(format!(
        "commcheck-mlx-{}-rank{rank}-hosts.json",
        std::process::id()
    ))
}

/// MLX's ring hostfile: one list of addresses per rank.
fn hostfile_json(ports: &[u16]) -> String {
    let ranks: Vec<Vec<String>> = ports
        .iter()
        .map(|port| vec![format!("127.0.0.1:{port}")])
        .collect();
    serde_json::to_string(&ranks).unwrap_or_default()
}

/// Connects `MlxNeuralBackend` on MLX's CPU device to the kit.
///
/// Tensors are arrays built from host data ([`materialised`]). `read`
/// reports a tensor that is not materialised as an error
/// ([`read_materialised`]): it waits for the array's values inside a
/// `safemlx::SubmissionScope`, and an array whose wait made MLX submit
/// native work (it was not even scheduled, so not materialised) is refused.
/// safemlx exposes no query of an array's state that avoids the wait itself
/// (MLX's `is_available` is not bound), so: an array that was scheduled but
/// has not finished is waited for (holding MLX's runtime lock meanwhile),
/// and a refused array has been evaluated by the refusal. The kit reads
/// values after their work completed, where neither arises.
#[derive(Debug, Clone)]
pub struct MlxHarness {
    placement: Placement,
}

impl Default for MlxHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl MlxHarness {
    /// Worlds of one rank in this process.
    pub fn new() -> Self {
        Self {
            placement: Placement::Single,
        }
    }

    /// Worlds whose ranks are the processes of the launch (see
    /// [`MlxProcesses::connect`]); a world of one rank stays in process 0.
    pub fn across(processes: &Arc<MlxProcesses>) -> Self {
        Self {
            placement: Placement::Across(Arc::clone(processes)),
        }
    }

    /// A harness that builds no world, with the claims, instruments and
    /// world sizes of [`MlxHarness::across`] a launch of `processes`
    /// processes: its catalogue tells which cases such a launch runs on
    /// which world sizes. Building a world with it is a harness error.
    pub fn planning(processes: usize) -> Self {
        Self {
            placement: Placement::Planning(processes),
        }
    }
}

/// The shared part of an MLX world: only its size (MLX's handles are
/// neither `Send` nor `Sync`, so each rank builds its own on its thread).
#[derive(Debug, Clone, Copy)]
pub struct MlxWorld {
    size: usize,
}

/// One rank of an MLX world.
pub struct MlxRank {
    stream: Stream,
    /// A stream of the harness's own for copying values out in `read`, so
    /// a read never queues behind the kit's work on `stream`.
    reader: Stream,
    group: MlxGroup,
    rank: usize,
    size: usize,
    /// Routes realised from the manifest of each ordered pair of ranks.
    routes: HashMap<(usize, usize), ParallelCommunicators>,
}

impl std::fmt::Debug for MlxRank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MlxRank")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("group", &self.group)
            .finish()
    }
}

fn limits(count_per_peer: Option<usize>) -> Result<CommunicationTensorLimits, HarnessError> {
    let most = i32::MAX as usize;
    CommunicationTensorLimits::new(1, most, most, count_per_peer).map_err(HarnessError::new)
}

fn tensors(
    operation: CommunicationOperation,
    dtypes: &[TensorDtype],
    limits: CommunicationTensorLimits,
) -> Result<CommunicationOperationRequirement, HarnessError> {
    CommunicationOperationRequirement::tensors(operation, dtypes.iter().cloned(), limits, true)
        .map_err(HarnessError::new)
}

/// What the world group's manifest selects: every collective MLX
/// implements, with the dtypes and limits MLX advertises for it.
fn world_requirements() -> Result<CommunicationGroupRequirements, HarnessError> {
    use CommunicationOperation as Op;
    use TensorDtype::{Bf16, F16, F32, I32};
    let floating = [F32, F16, Bf16];
    let with_i32 = [F32, F16, Bf16, I32];
    CommunicationGroupRequirements::new([
        tensors(Op::AllReduceSum, &floating, limits(None)?)?,
        tensors(Op::AllGatherEven, &with_i32, limits(None)?)?,
        tensors(Op::AllGatherUneven, &floating, limits(None)?)?,
        tensors(
            Op::VariableAllToAll,
            &with_i32,
            limits(Some(i32::MAX as usize))?,
        )?,
        tensors(Op::Broadcast, &floating, limits(None)?)?,
        CommunicationOperationRequirement::barrier(true),
        CommunicationOperationRequirement::failure_agreement(true),
    ])
    .map_err(HarnessError::new)
}

/// What every route selects: the dtypes and limits MLX advertises for
/// point-to-point bundles.
fn route_requirement() -> Result<CommunicationOperationRequirement, HarnessError> {
    use TensorDtype::{Bf16, F16, F32, I32, U32};
    let most = i32::MAX as usize;
    let limits =
        CommunicationTensorLimits::new(most, most, most, None).map_err(HarnessError::new)?;
    tensors(
        CommunicationOperation::SendReceive,
        &[F32, F16, Bf16, I32, U32],
        limits,
    )
}

/// The manifest this rank realises for the ordered pair `(source,
/// destination)`: every route id below [`ROUTE_IDS`] from `source` to
/// `destination`, and (for the first pair) the world group.
fn manifest(
    rank: usize,
    size: usize,
    (source, destination): (usize, usize),
    with_world: bool,
) -> Result<CommunicationManifest, HarnessError> {
    let groups = if with_world {
        vec![CommunicationGroupDescriptor::new(
            WORLD_GROUP,
            0,
            (0..size).collect(),
            Some(rank),
            world_requirements()?,
        )
        .map_err(HarnessError::new)?]
    } else {
        Vec::new()
    };
    let requirement = route_requirement()?;
    let routes = (0..ROUTE_IDS)
        .enumerate()
        .map(|(order, id)| {
            CommunicationRouteDescriptor::new(
                CommunicationRouteId::new(id),
                order,
                source,
                destination,
                requirement.clone(),
            )
            .map_err(HarnessError::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let policy = CommunicationCompletionPolicy::new(
        SETUP_DEADLINE,
        CompletionCancellationMode::QuarantineUntilComplete,
    )
    .map_err(HarnessError::new)?;
    Ok(CommunicationManifest::new(size, rank, groups, routes)
        .map_err(HarnessError::new)?
        .with_completion_policy(policy))
}

impl MlxHarness {
    /// Rank `rank` of a world of `size` ranks spanning every process of the
    /// launch: the ring, the world group and the route pool from manifests.
    fn ring_rank(&self, processes: &MlxProcesses, rank: usize) -> Result<MlxRank, HarnessError> {
        let size = processes.size;
        if rank != processes.rank {
            return Err(HarnessError(format!(
                "expected to build rank {} (this process's), asked for rank {rank}",
                processes.rank
            )));
        }
        let native = sized_group(
            safemlx::distributed::init(true, DistributedBackend::Ring)
                .map_err(HarnessError::new)?,
            size,
            rank,
            "MLX's ring",
        )?;
        let stream = cpu_stream();
        let pairs: Vec<(usize, usize)> = (0..size)
            .flat_map(|source| (0..size).map(move |destination| (source, destination)))
            .filter(|(source, destination)| source != destination)
            .collect();
        let mut routes = HashMap::new();
        let mut group = None;
        for (index, pair) in pairs.into_iter().enumerate() {
            let manifest = manifest(rank, size, pair, index == 0)?;
            let communicators = ParallelCommunicators::from_manifest(&manifest, &native, &stream)
                .map_err(|error| {
                HarnessError(format!(
                    "ParallelCommunicators::from_manifest for routes {} -> {} on rank {rank} \
                         of {size}: {error}",
                    pair.0, pair.1
                ))
            })?;
            if index == 0 {
                group = communicators.communication_group(WORLD_GROUP).cloned();
            }
            routes.insert(pair, communicators);
        }
        let group = group.ok_or_else(|| {
            HarnessError(format!(
                "expected the manifest's world group {} to be realised, got none",
                WORLD_GROUP.value()
            ))
        })?;
        Ok(MlxRank {
            stream,
            reader: cpu_stream(),
            group,
            rank,
            size,
            routes,
        })
    }
}

impl Harness for MlxHarness {
    type Backend = MlxNeuralBackend;
    type World = MlxWorld;
    type Rank = MlxRank;
    type Route = CommunicationRouteRealization;

    fn identity(&self) -> Identity {
        Identity {
            name: "eredu-backend-mlx".into(),
            version: MLX_BACKEND_VERSION.into(),
            device: match &self.placement {
                Placement::Single => {
                    "MLX CPU device, one process (size-one group from init(false, Any))".into()
                }
                Placement::Across(processes) => format!(
                    "MLX CPU device, one rank per process over MLX's ring backend ({} processes, \
                     manifest-realised groups and routes)",
                    processes.size
                ),
                Placement::Planning(processes) => {
                    format!("MLX CPU device, planning a launch of {processes} processes")
                }
            },
        }
    }

    fn claims(&self) -> Claims<Self> {
        // Every operation trait `MlxNeuralBackend` implements
        // (eredu-backend-mlx 0.5.0, src/backend/nn/shared/submission.rs).
        Claims::none()
            .sum_reduction()
            .even_gather()
            .uneven_gather()
            .variable_all_to_all()
            .broadcast()
            .barrier()
            .failure_agreement()
            .point_to_point()
    }

    fn instruments(&self) -> Instruments {
        Instruments::NONE
    }

    fn world_sizes(&self) -> WorldSizes {
        match &self.placement {
            Placement::Single => WorldSizes::UpTo(1),
            Placement::Across(processes) => WorldSizes::UpTo(processes.size),
            Placement::Planning(processes) => WorldSizes::UpTo(*processes),
        }
    }

    fn world(&self, ranks: usize) -> Result<MlxWorld, HarnessError> {
        match &self.placement {
            Placement::Planning(_) => Err(HarnessError(format!(
                "a world of {ranks} ranks is not built: this harness only plans runs \
                 (MlxHarness::planning)"
            ))),
            _ if ranks == 1 => Ok(MlxWorld { size: 1 }),
            Placement::Across(processes) if ranks == processes.size => Ok(MlxWorld { size: ranks }),
            Placement::Across(processes) => Err(HarnessError(format!(
                "a world of {ranks} ranks is not built: MLX's ring spans all {} processes of the \
                 launch, so worlds have 1 or {} ranks",
                processes.size, processes.size
            ))),
            Placement::Single => Err(HarnessError(format!(
                "a world of {ranks} ranks is not built: MLX keeps one group per process, so one \
                 process builds worlds of 1 rank (run under mpirun for more)"
            ))),
        }
    }

    fn rank(&self, world: &MlxWorld, rank: usize) -> Result<MlxRank, HarnessError> {
        let single = |native: NativeGroup| MlxRank {
            stream: cpu_stream(),
            reader: cpu_stream(),
            group: MlxGroup::uncontracted(&native),
            rank: 0,
            size: 1,
            routes: HashMap::new(),
        };
        match (&self.placement, world.size) {
            (_, 1) if rank != 0 => Err(HarnessError(format!(
                "expected rank 0 of a world of 1 rank, asked for rank {rank}"
            ))),
            (Placement::Single, 1) => plain_singleton_group().map(single),
            (Placement::Across(_), 1) => singleton_group().map(single),
            (Placement::Across(processes), _) => self.ring_rank(processes, rank),
            (Placement::Single, size) => Err(HarnessError(format!(
                "expected a world of 1 rank in one process, got {size}"
            ))),
            (Placement::Planning(_), size) => Err(HarnessError(format!(
                "expected no world from a planning harness, got one of {size} ranks"
            ))),
        }
    }

    fn executor<'r>(&self, rank: &'r MlxRank) -> &'r Stream {
        &rank.stream
    }

    fn context<'r>(&self, rank: &'r MlxRank) -> &'r Stream {
        &rank.stream
    }

    /// MLX runs a graph on the stream it was built on, whatever stream it is
    /// submitted to: an executor is its own context.
    fn context_on<'r>(&self, _rank: &'r MlxRank, executor: &'r Stream) -> Option<&'r Stream> {
        Some(executor)
    }

    fn group<'r>(&self, rank: &'r MlxRank) -> &'r MlxGroup {
        &rank.group
    }

    fn route(
        &self,
        rank: &MlxRank,
        id: u64,
        source: usize,
        destination: usize,
    ) -> Result<CommunicationRouteRealization, HarnessError> {
        if id >= ROUTE_IDS {
            return Err(HarnessError(format!(
                "expected a route id below {ROUTE_IDS} (the ids realised per pair of ranks when \
                 the world was built), got {id}"
            )));
        }
        let communicators = rank.routes.get(&(source, destination)).ok_or_else(|| {
            HarnessError(format!(
                "expected two distinct ranks of this world of {} for a route, got {source} -> \
                 {destination}",
                rank.size
            ))
        })?;
        communicators
            .route(CommunicationRouteId::new(id))
            .cloned()
            .ok_or_else(|| {
                HarnessError(format!(
                    "expected route {id} ({source} -> {destination}) to be realised, got none"
                ))
            })
    }

    fn tensor(
        &self,
        _rank: &MlxRank,
        values: &[f32],
        shape: &[usize],
    ) -> Result<MlxTensor, HarnessError> {
        materialised(values, shape)
    }

    fn read(&self, rank: &MlxRank, tensor: &MlxTensor) -> Result<Vec<f32>, HarnessError> {
        read_materialised(tensor, &rank.reader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eredu_core::Completion;
    use eredu_nn::Tensor as _;
    use eredu_runtime::backend::SubmissionBackend;

    #[test]
    fn read_accepts_materialised_values() {
        let stream = cpu_stream();
        let tensor = materialised(&[1.0, -0.0, 3.5, 4.0], &[2, 2]).unwrap();
        let got = read_materialised(&tensor, &stream).unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], 1.0);
        assert!(got[1] == 0.0 && got[1].is_sign_negative());
        assert_eq!(&got[2..], &[3.5, 4.0]);
    }

    #[test]
    fn read_refuses_lazy_values() {
        let stream = cpu_stream();
        let a = materialised(&[1.0, 2.0], &[2]).unwrap();
        let lazy = a.multiply_scalar(3.0, &stream).unwrap();
        let error = read_materialised(&lazy, &stream).unwrap_err();
        assert!(error.0.contains("not materialised"), "{error}");
    }

    #[test]
    fn read_accepts_values_a_completed_submission_evaluated() {
        let stream = cpu_stream();
        let a = materialised(&[1.0, 2.0], &[2]).unwrap();
        let lazy = a.multiply_scalar(3.0, &stream).unwrap();
        let completion = MlxNeuralBackend::submit(&stream, [&lazy]).unwrap();
        completion.wait().unwrap();
        assert_eq!(read_materialised(&lazy, &stream).unwrap(), vec![3.0, 6.0]);
    }

    #[test]
    fn read_copies_strided_views_in_row_major_order() {
        let stream = cpu_stream();
        let a = materialised(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
        let transposed = MlxTensor::from_array(a.as_array().transpose(&stream).unwrap());
        safemlx::transforms::eval([transposed.as_array()]).unwrap();
        assert_eq!(
            read_materialised(&transposed, &stream).unwrap(),
            vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
        );
    }

    #[test]
    fn tensors_and_reads_never_wait_behind_queued_work() {
        let stream = cpu_stream();
        let n = 384;
        let factor = materialised(&vec![1.0 / n as f32; n * n], &[n, n]).unwrap();
        let mut chain = factor.clone();
        for _ in 0..64 {
            chain = eredu_nn::Tensor::matmul(&chain, &factor, &stream).unwrap();
        }
        let busy = MlxNeuralBackend::submit(&stream, [&chain]).unwrap();
        let empty = materialised(&[], &[0, 3]).unwrap();
        assert_eq!(
            read_materialised(&empty, &cpu_stream()).unwrap(),
            Vec::<f32>::new()
        );
        let made = materialised(&[5.0, 6.0], &[2]).unwrap();
        assert_eq!(
            read_materialised(&made, &cpu_stream()).unwrap(),
            vec![5.0, 6.0]
        );
        assert!(
            !busy.is_complete().unwrap(),
            "the chain finished before the reads: this machine is too fast for the check"
        );
        busy.wait().unwrap();
    }

    #[test]
    fn one_process_gets_a_singleton_group() {
        let group = plain_singleton_group().unwrap();
        assert_eq!((group.rank(), group.size()), (0, 1));
        let fallback = singleton_group().unwrap();
        assert_eq!((fallback.rank(), fallback.size()), (0, 1));
    }

    #[test]
    fn hostfile_lists_one_loopback_address_per_rank() {
        assert_eq!(
            hostfile_json(&[4000, 4001]),
            r#"[["127.0.0.1:4000"],["127.0.0.1:4001"]]"#
        );
    }
}
