//! The device: the scope of one ledger, one defect configuration and one
//! quarantine owner. Executors, groups and routes are made from it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use eredu_runtime::CommunicationRouteId;

use crate::core::{Core, Retained};
use crate::defect::Defect;
use crate::error::CpuError;
use crate::fabric::{Fabric, Span};
use crate::group::{CpuGroup, GroupShared};
use crate::ledger::{Kind, Ledger, LedgerSnapshot, StorageId};
use crate::personality::Personality;
use crate::progress::Progress;
use crate::route::{CpuRoute, RouteShared};
use crate::sync::rt::{AtomicU64, Mutex, MutexGuard};
use crate::tensor::{CpuTensor, Element};

struct DeviceShared {
    ledger: Arc<Ledger>,
    defect: Option<Defect>,
    personality: Personality,
    /// Element types communication refuses (none by default).
    refused: Vec<Element>,
    next_id: AtomicU64,
    /// Work submitted on the device so far (the `SubmissionClearsError`
    /// defect reads it).
    submissions: AtomicU64,
    /// Calls into the backend on this device (the `rendezvous`
    /// personality's progress engine).
    progress: Arc<Progress>,
    quarantine: Mutex<Vec<Arc<Core>>>,
    leaked: Mutex<Vec<Retained>>,
    groups: Mutex<HashMap<String, Weak<GroupShared>>>,
    /// Routes stay registered for the device's lifetime, so a message sent
    /// before the receiver opened its endpoint is still delivered.
    routes: Mutex<HashMap<u64, Arc<RouteShared>>>,
    /// For a device of one process of a world of processes: the fabric and
    /// the world's number (every process numbers its worlds alike).
    span: Option<(Arc<Fabric>, u64)>,
    /// Whether its executors have the planted race (see
    /// [`CpuDevice::with_planted_race`]).
    #[cfg(any(commcheck_shuttle, commcheck_planted_race))]
    planted_race: bool,
}

/// One simulated device: every rank of an in-process world shares it.
///
/// ```
/// use commcheck_cpu::CpuDevice;
///
/// let device = CpuDevice::new();
/// let executor = device.executor();
/// let tensor = device.tensor(&[1.0, 2.0], &[2]).unwrap();
/// assert!(device.storage_live(tensor.storage_id()));
/// drop((tensor, executor));
/// ```
#[derive(Clone)]
pub struct CpuDevice {
    shared: Arc<DeviceShared>,
}

impl std::fmt::Debug for CpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuDevice")
            .field("defect", &self.shared.defect)
            .field("ledger", &self.ledger())
            .finish()
    }
}

impl Default for CpuDevice {
    fn default() -> Self {
        Self::new()
    }
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl CpuDevice {
    /// A correct device.
    pub fn new() -> Self {
        Self::build(None)
    }

    /// A device with one planted defect (see [`Defect`]).
    pub fn with_defect(defect: Defect) -> Self {
        Self::build(Some(defect))
    }

    /// The device of this process in world `world` of a world of
    /// processes: its groups and routes reach the other processes through
    /// `fabric`. Every process must number the world alike. Member `m` of a
    /// group (and rank `m` of a route) is the process of rank `m`.
    pub fn spanning(fabric: Arc<Fabric>, world: u64, defect: Option<Defect>) -> Self {
        Self::build_with(defect, Some((fabric, world)))
    }

    fn build(defect: Option<Defect>) -> Self {
        Self::build_with(defect, None)
    }

    fn build_with(defect: Option<Defect>, span: Option<(Arc<Fabric>, u64)>) -> Self {
        Self {
            shared: Arc::new(DeviceShared {
                ledger: Arc::new(Ledger::default()),
                defect,
                // A defect that lives on one personality's path takes it.
                personality: defect.and_then(Defect::personality).unwrap_or_default(),
                refused: Vec::new(),
                next_id: AtomicU64::new(1),
                submissions: AtomicU64::new(0),
                progress: Arc::default(),
                quarantine: Mutex::new(Vec::new()),
                leaked: Mutex::new(Vec::new()),
                groups: Mutex::new(HashMap::new()),
                routes: Mutex::new(HashMap::new()),
                span,
                #[cfg(any(commcheck_shuttle, commcheck_planted_race))]
                planted_race: cfg!(commcheck_planted_race),
            }),
        }
    }

    /// A correct device, except for the planted race of the shuttle suite
    /// (`shuttle-tests/`), a lost wake-up in its executors: after an item, a
    /// worker that found its queue empty as it marked itself idle goes to
    /// sleep in a second critical section, looking again for shutdown but not
    /// at its queue. Work queued in between sees no sleeper and wakes nobody;
    /// it stays queued until another submission on the lane wakes the worker,
    /// so a `wait` on it never returns (EXC-4), and work nobody waits for
    /// never releases what it retains (RET-7).
    ///
    /// Only under `--cfg commcheck_shuttle`, where shuttle must find it, or
    /// `--cfg commcheck_planted_race`, where every device has it (so the
    /// plain suites can be run against it). It is no [`Defect`]: the plain
    /// suites almost never hit its window.
    #[cfg(any(commcheck_shuttle, commcheck_planted_race))]
    #[doc(hidden)]
    pub fn with_planted_race() -> Self {
        let mut device = Self::build(None);
        if let Some(shared) = Arc::get_mut(&mut device.shared) {
            shared.planted_race = true;
        }
        device
    }

    /// Whether this device's executors have the planted race.
    #[cfg(any(commcheck_shuttle, commcheck_planted_race))]
    #[doc(hidden)]
    pub fn planted_race(&self) -> bool {
        self.shared.planted_race
    }

    /// The planted defect, if any.
    pub fn defect(&self) -> Option<Defect> {
        self.shared.defect
    }

    /// Makes a materialised tensor on this device.
    pub fn tensor(&self, values: &[f32], shape: &[i32]) -> Result<CpuTensor, CpuError> {
        CpuTensor::ready(&self.shared.ledger, "tensor", values.to_vec(), shape)
    }

    /// Makes a materialised tensor of element type `element` from values
    /// given widened to `f32`; a value the element type cannot hold exactly
    /// is an error (nothing is rounded silently).
    pub fn typed_tensor(
        &self,
        element: Element,
        values: &[f32],
        shape: &[i32],
    ) -> Result<CpuTensor, CpuError> {
        self.typed_tensor_from(element, values.to_vec(), shape)
    }

    /// [`CpuDevice::typed_tensor`] from values it keeps (no copy).
    pub fn typed_tensor_from(
        &self,
        element: Element,
        values: Vec<f32>,
        shape: &[i32],
    ) -> Result<CpuTensor, CpuError> {
        if let Some(index) = element.first_unrepresented(&values) {
            return Err(CpuError::invalid(
                "tensor",
                format!("values that are exactly {} values", element.name()),
                format!("{} at index {index}", values[index]),
            ));
        }
        CpuTensor::ready(&self.shared.ledger, "tensor", values, shape)
            .map(|tensor| tensor.of(element))
    }

    /// Makes a group of `size` members; the handles come back in member order.
    pub fn group(&self, size: usize) -> Result<Vec<CpuGroup>, CpuError> {
        let shared = GroupShared::new(size, None, &self.shared.ledger, || self.next_id())?;
        (0..size)
            .map(|member| CpuGroup::join(&shared, member))
            .collect()
    }

    /// Joins member `member` of the group named `key`, which has `size` members.
    ///
    /// Ranks that build their groups independently meet here. The first joiner
    /// fixes the size; a rank that disagrees gets an error, never a hang.
    pub fn join_group(&self, key: &str, size: usize, member: usize) -> Result<CpuGroup, CpuError> {
        if let Some((fabric, _)) = &self.shared.span {
            if member != fabric.rank() || size > fabric.size() {
                return Err(CpuError::invalid(
                    "join_group",
                    format!(
                        "member {} (this process's rank) of at most {} members",
                        fabric.rank(),
                        fabric.size()
                    ),
                    format!("member {member} of {size}"),
                ));
            }
        }
        let mut groups = guard(&self.shared.groups);
        let shared = match groups.get(key).and_then(Weak::upgrade) {
            Some(existing) => existing,
            None => {
                let span = self.shared.span.as_ref().map(|(fabric, world)| Span {
                    fabric: Arc::clone(fabric),
                    world: *world,
                    key: key.to_owned(),
                });
                let created =
                    GroupShared::new(size, span.clone(), &self.shared.ledger, || self.next_id())?;
                if let Some(span) = span {
                    span.fabric.open_group(span.world, key, &created);
                }
                groups.insert(key.to_owned(), Arc::downgrade(&created));
                created
            }
        };
        drop(groups);
        if shared.size() != size {
            return Err(CpuError::invalid(
                "join_group",
                format!("group {key:?} of {} members", shared.size()),
                format!("a member that declares {size} members"),
            ));
        }
        CpuGroup::join(&shared, member)
    }

    /// This rank's endpoint of the directed route `id` from world rank `source`
    /// to world rank `destination`.
    ///
    /// `rank` must be one of the two endpoints, and every rank must declare the
    /// same endpoints for the same route id.
    pub fn route(
        &self,
        id: CommunicationRouteId,
        source: usize,
        destination: usize,
        rank: usize,
    ) -> Result<CpuRoute, CpuError> {
        if source == destination {
            return Err(CpuError::invalid(
                "route",
                "distinct source and destination ranks",
                format!("source {source} and destination {destination}"),
            ));
        }
        if rank != source && rank != destination {
            return Err(CpuError::invalid(
                "route",
                format!(
                    "rank {source} (source) or {destination} (destination) of route {}",
                    id.value()
                ),
                format!("rank {rank}"),
            ));
        }
        let mut routes = guard(&self.shared.routes);
        let shared = Arc::clone(routes.entry(id.value()).or_insert_with(|| {
            let created = RouteShared::new(id, source, destination, self.shared.span.clone());
            if let Some((fabric, world)) = &self.shared.span {
                fabric.open_route(*world, id.value(), &created);
            }
            created
        }));
        drop(routes);
        if shared.endpoints() != (source, destination) {
            let (s, d) = shared.endpoints();
            return Err(CpuError::invalid(
                "route",
                format!("route {} from rank {s} to rank {d}", id.value()),
                format!("a rank declaring it from {source} to {destination}"),
            ));
        }
        Ok(CpuRoute::new(&self.shared.ledger, shared, rank == source))
    }

    /// Counts of live native resources (the resource-ledger instrument).
    pub fn ledger(&self) -> LedgerSnapshot {
        let mut quarantine = guard(&self.shared.quarantine);
        quarantine.retain(|core| !core.observe().phase.is_terminal());
        let quarantined = quarantine.len();
        drop(quarantine);
        self.shared.ledger.snapshot(quarantined)
    }

    /// Liveness probe: is the storage with this id still allocated?
    pub fn storage_live(&self, id: StorageId) -> bool {
        self.shared.ledger.storage_live(id)
    }

    /// The device, refusing communication on tensors of `element`: every
    /// operation's submission fails, naming it (a backend that computes
    /// fewer element types; for the kit's tests of such backends). `Err`
    /// once the device is shared (choose it before cloning).
    pub fn refusing(mut self, element: Element) -> Result<Self, Element> {
        let Some(shared) = Arc::get_mut(&mut self.shared) else {
            return Err(element);
        };
        shared.refused.push(element);
        Ok(self)
    }

    /// Refuses communication on `tensor` when its element type is refused.
    pub(crate) fn admits(
        &self,
        operation: &'static str,
        tensor: &CpuTensor,
    ) -> Result<(), CpuError> {
        if self.shared.refused.contains(&tensor.element()) {
            return Err(CpuError::invalid(
                operation,
                "a tensor of an element type this device communicates",
                format!("a {} tensor", tensor.element().name()),
            ));
        }
        Ok(())
    }

    /// This device with `personality` (see [`Personality`]), set before any
    /// use: a device already shared (cloned, or with executors) keeps its
    /// own, and the personality is returned as the error.
    /// [`Personality::CollectivesCancel`] is a setting of the process too:
    /// see [`crate::personality::restrict_native_cancel_to_collectives`].
    ///
    /// ```
    /// use commcheck_cpu::{CpuDevice, Personality};
    ///
    /// let device = CpuDevice::new().with_personality(Personality::Eager).unwrap();
    /// assert_eq!(device.personality(), Personality::Eager);
    /// ```
    pub fn with_personality(mut self, personality: Personality) -> Result<Self, Personality> {
        let Some(shared) = Arc::get_mut(&mut self.shared) else {
            return Err(personality);
        };
        let Some(ledger) = Arc::get_mut(&mut shared.ledger) else {
            return Err(personality);
        };
        ledger.set_eager(personality == Personality::Eager);
        shared.personality = personality;
        Ok(self)
    }

    /// The device's personality.
    pub fn personality(&self) -> Personality {
        self.shared.personality
    }

    pub(crate) fn has(&self, defect: Defect) -> bool {
        self.shared.defect == Some(defect)
    }

    /// Counts one submission of work on the device; returns the count so far.
    pub(crate) fn submitted(&self) -> u64 {
        self.called();
        self.shared.submissions.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// One call into the backend on this device: under the `rendezvous`
    /// personality, what moves its large transfers (see [`Progress`]).
    pub(crate) fn called(&self) {
        if self.shared.personality == Personality::Rendezvous {
            self.shared.progress.call();
        }
    }

    /// The device's progress engine (see [`Progress`]).
    pub(crate) fn progress(&self) -> &Arc<Progress> {
        &self.shared.progress
    }

    /// Work submitted on the device so far.
    pub(crate) fn submissions(&self) -> u64 {
        self.shared.submissions.load(Ordering::Relaxed)
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.shared.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn ledger_ref(&self) -> &Arc<Ledger> {
        &self.shared.ledger
    }

    /// Hands a live completion to the quarantine owner (CAN-6).
    pub(crate) fn quarantine(&self, core: Arc<Core>) {
        core.mark_quarantined();
        guard(&self.shared.quarantine).push(core);
    }

    /// Moves a work item to its terminal state and releases what it retained.
    pub(crate) fn finish(&self, core: &Core, outcome: Result<(), CpuError>) {
        if let Some(retained) = core.finish(outcome) {
            self.shared.ledger.down(Kind::Pending);
            self.release(core, retained);
            core.mark_released();
        }
    }

    /// Releases retained values of terminal work (outside every lock).
    pub(crate) fn release(&self, core: &Core, retained: Vec<Retained>) {
        if self.has(Defect::LeakRetained) {
            guard(&self.shared.leaked).extend(retained);
        } else if self.has(Defect::ReleasableRunsDestructors) {
            // Defect: keep application values (`retain_until_complete`) on
            // the work until its completion's `resources_releasable` is
            // called (or the completion is dropped); native resources are
            // released as usual.
            let (kept, released): (Vec<_>, Vec<_>) = retained
                .into_iter()
                .partition(|value| value.is::<KeptForReleasable>());
            core.keep_after_end(kept);
            drop(released);
        } else {
            drop(retained);
        }
    }

    /// Accounts for work torn down before it started (NativeCancel of queued work).
    pub(crate) fn torn_down(&self, core: &Core, retained: Vec<Retained>) {
        self.shared.ledger.down(Kind::Pending);
        self.release(core, retained);
        core.mark_released();
    }
}

/// A `retain_until_complete` value under the EXC-8 destructor defect, which
/// keeps it for the next `resources_releasable` call.
pub(crate) struct KeptForReleasable(
    #[allow(dead_code, reason = "held for its destructor")] pub(crate) crate::core::Retained,
);
