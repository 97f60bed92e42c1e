//! Communication groups of stream-ranks, and the rendezvous of one
//! collective (or one point-to-point exchange) between them.
//!
//! Each member's part of a collective is enqueued on its own stream at once
//! (submission never waits for peers):
//!
//! ```text
//! [inputs ready] A ─ wait(go) ─ started ─ kernels ─ D ─ wait(fin) ─ C (completion)
//! ```
//!
//! `A`, `D` and `C` are events, `go` and `fin` mapped host words. When the
//! last member arrives, the host writes every member's plan (peer addresses,
//! copy tables) into mapped memory; the reaper opens every `go` once all
//! `A` completed (every input is ready), and every `fin` once all `D`
//! completed (no kernel reads a peer's input or writes a peer's output any
//! more). A member that has not arrived keeps its peers pending for real.
//! A NativeCancel of any member cancels the whole instance: every member's
//! cancel word is set, its gates opened, and the peers fail.

use crate::device::CudaDevice;
use crate::element::Element;
use crate::error::CudaError;
use crate::ffi::{Event, HostSlot};
use crate::reaper::{Pollable, Polled};
use crate::work::{Rendezvous, Work};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// What one member brings to a collective.
#[derive(Debug, Clone, Default)]
pub(crate) struct Contribution {
    /// Input address and shape.
    pub(crate) input: Option<(u64, Vec<i32>)>,
    /// Output address and shape.
    pub(crate) output: Option<(u64, Vec<i32>)>,
    /// Operation arguments every member must agree on, or that pair up
    /// (axis, counts, root, agreement status, headers' lengths).
    pub(crate) meta: Vec<usize>,
    /// Point-to-point values: (header, shape, element type) per value.
    pub(crate) values: Vec<(Vec<u8>, Vec<i32>, Element)>,
    /// The element type of the input (and output).
    pub(crate) element: Element,
    /// Its place in the order the members arrived (set by the instance).
    pub(crate) arrival: usize,
}

/// How the last arrival turns contributions into each member's plan: the
/// bytes written into its plan slot, or why that member fails (members that
/// disagree on a collective all fail; a point-to-point receiver fails alone).
pub(crate) type Planner = fn(&'static str, &[Contribution]) -> Vec<Result<Vec<u8>, CudaError>>;

/// A collective's planner result for every member: the same error for all.
pub(crate) fn for_all(
    members: usize,
    plans: Result<Vec<Vec<u8>>, CudaError>,
) -> Vec<Result<Vec<u8>, CudaError>> {
    match plans {
        Ok(plans) => plans.into_iter().map(Ok).collect(),
        Err(error) => vec![Err(error); members],
    }
}

/// One member's part, as the instance sees it.
pub(crate) struct Arrival {
    pub(crate) contribution: Contribution,
    pub(crate) arrive: Arc<Event>,
    pub(crate) go: Arc<HostSlot>,
    pub(crate) done: Arc<Event>,
    pub(crate) fin: Arc<HostSlot>,
    pub(crate) plan: Option<Arc<HostSlot>>,
    pub(crate) work: Weak<Work>,
}

#[derive(Default)]
struct InstanceState {
    arrivals: Vec<Option<Arrival>>,
    arrived: usize,
    planned: bool,
    go_open: bool,
    fin_open: bool,
    cancelled: Option<String>,
}

/// One occurrence of a collective on a group (or an exchange on a route).
pub(crate) struct Instance {
    operation: &'static str,
    planner: Planner,
    state: Mutex<InstanceState>,
}

impl Instance {
    fn new(operation: &'static str, planner: Planner, size: usize) -> Arc<Self> {
        let mut state = InstanceState::default();
        state.arrivals.resize_with(size, || None);
        Arc::new(Self {
            operation,
            planner,
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InstanceState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Why the instance was cancelled, if it was.
    pub(crate) fn cancelled(&self) -> Option<String> {
        self.lock().cancelled.clone()
    }

    /// Member `member` arrived. The last arrival plans every member's part;
    /// members that disagree fail, all of them.
    pub(crate) fn arrive(&self, member: usize, mut arrival: Arrival) {
        let mut state = self.lock();
        if let Some(reason) = state.cancelled.clone() {
            drop(state);
            fail_arrival(&arrival, self.operation, &reason);
            return;
        }
        if state.arrivals[member].is_none() {
            arrival.contribution.arrival = state.arrived;
            state.arrived += 1;
        }
        state.arrivals[member] = Some(arrival);
        if state.arrived < state.arrivals.len() {
            return;
        }
        let contributions: Vec<Contribution> = state
            .arrivals
            .iter()
            .flatten()
            .map(|a| a.contribution.clone())
            .collect();
        let plans = (self.planner)(self.operation, &contributions);
        for (arrival, plan) in state.arrivals.iter().flatten().zip(plans) {
            let written = plan.and_then(|bytes| match &arrival.plan {
                Some(slot) => slot.write_bytes(&bytes),
                None => Ok(()),
            });
            if let Err(error) = written {
                // This member fails, and none of its kernels runs.
                if let Some(work) = arrival.work.upgrade() {
                    work.publish(error);
                    work.set_cancel();
                }
            }
        }
        state.planned = true;
    }

    fn open_go(state: &mut InstanceState) {
        for arrival in state.arrivals.iter().flatten() {
            arrival.go.store(1);
        }
        state.go_open = true;
    }

    fn open_fin(state: &mut InstanceState) {
        for arrival in state.arrivals.iter().flatten() {
            arrival.fin.store(1);
        }
        state.fin_open = true;
    }
}

fn fail_arrival(arrival: &Arrival, operation: &'static str, reason: &str) {
    if let Some(work) = arrival.work.upgrade() {
        work.publish(CudaError::Cancelled {
            operation,
            reason: reason.to_string(),
        });
        work.set_cancel();
    }
    arrival.go.store(1);
    arrival.fin.store(1);
}

impl Rendezvous for Instance {
    fn cancel(&self, member: usize, reason: &str) -> Vec<Arc<Event>> {
        let mut state = self.lock();
        let reason = format!("member {member}'s {reason}");
        if state.cancelled.is_none() {
            state.cancelled = Some(reason.clone());
        }
        // Kernels may be running only once `go` opened: wait for theirs.
        let running: Vec<Arc<Event>> = if state.go_open && !state.fin_open {
            state
                .arrivals
                .iter()
                .flatten()
                .map(|a| Arc::clone(&a.done))
                .collect()
        } else {
            Vec::new()
        };
        for (index, arrival) in state.arrivals.iter().enumerate() {
            let Some(arrival) = arrival else { continue };
            if let Some(work) = arrival.work.upgrade() {
                work.set_cancel();
                if index != member {
                    work.publish(CudaError::Cancelled {
                        operation: self.operation,
                        reason: reason.clone(),
                    });
                }
            }
        }
        Self::open_go(&mut state);
        Self::open_fin(&mut state);
        running
    }
}

impl Pollable for Instance {
    fn poll(&self) -> Polled {
        let mut state = self.lock();
        if state.fin_open {
            return Polled::Done;
        }
        if !state.planned {
            return Polled::Pending;
        }
        let all = |event: fn(&Arrival) -> &Arc<Event>| {
            state
                .arrivals
                .iter()
                .flatten()
                .all(|a| event(a).query().unwrap_or(true))
        };
        if !state.go_open {
            if all(|a| &a.arrive) {
                Self::open_go(&mut state);
                return Polled::Progressed;
            }
            return Polled::Pending;
        }
        if all(|a| &a.done) {
            Self::open_fin(&mut state);
            return Polled::Done;
        }
        Polled::Pending
    }
}

/// Instances of one group (or route), by sequence number.
pub(crate) struct Sequence {
    device: CudaDevice,
    size: usize,
    next: Vec<AtomicU64>,
    /// Each instance, with how many members reached it so far.
    instances: Mutex<HashMap<u64, (Arc<Instance>, usize)>>,
}

impl Sequence {
    pub(crate) fn new(device: &CudaDevice, size: usize) -> Self {
        Self {
            device: device.clone(),
            size,
            next: (0..size).map(|_| AtomicU64::new(0)).collect(),
            instances: Mutex::new(HashMap::new()),
        }
    }

    /// Member `member`'s next instance: created by the first member to
    /// reach it (and registered with the reaper), dropped from the table
    /// by the last. Members that name different operations for one
    /// instance fail.
    pub(crate) fn next(
        &self,
        member: usize,
        operation: &'static str,
        planner: Planner,
    ) -> Result<Arc<Instance>, CudaError> {
        let seq = self.next[member].fetch_add(1, Ordering::SeqCst);
        let mut instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        let entry = instances.entry(seq).or_insert_with(|| {
            let instance = Instance::new(operation, planner, self.size);
            self.device
                .shared
                .registry
                .register(Arc::clone(&instance) as Arc<dyn Pollable>);
            (instance, 0)
        });
        entry.1 += 1;
        let (instance, joined) = (Arc::clone(&entry.0), entry.1);
        if joined >= self.size {
            instances.remove(&seq);
        }
        drop(instances);
        if instance.operation != operation {
            let message = format!(
                "member {member} submitted {operation} where a peer submitted {} (collective #{seq} of the group)",
                instance.operation
            );
            // The peers that arrived fail too, rather than wait for a part
            // that will never come.
            drop(instance.cancel(member, &message));
            return Err(CudaError::Mismatch { operation, message });
        }
        Ok(instance)
    }
}

struct MemberToken {
    device: CudaDevice,
}

impl Drop for MemberToken {
    fn drop(&mut self) {
        self.device
            .shared
            .counters
            .groups
            .fetch_sub(1, Ordering::SeqCst);
    }
}

/// One member of a communication group of stream-ranks.
#[derive(Clone)]
pub struct CudaGroup {
    member: usize,
    pub(crate) sequence: Arc<Sequence>,
    token: Arc<MemberToken>,
}

impl std::fmt::Debug for CudaGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaGroup")
            .field("member", &self.member)
            .field("size", &self.sequence.size)
            .finish()
    }
}

impl CudaGroup {
    /// A group of `size` members on `device`: one handle per member, in
    /// member order.
    pub fn create(device: &CudaDevice, size: usize) -> Result<Vec<Self>, CudaError> {
        if size == 0 || size > crate::ffi::MAX_RANKS {
            return Err(CudaError::TooManyRanks {
                requested: size,
                max: crate::ffi::MAX_RANKS,
            });
        }
        let sequence = Arc::new(Sequence::new(device, size));
        Ok((0..size)
            .map(|member| {
                device.shared.counters.groups.fetch_add(1, Ordering::SeqCst);
                Self {
                    member,
                    sequence: Arc::clone(&sequence),
                    token: Arc::new(MemberToken {
                        device: device.clone(),
                    }),
                }
            })
            .collect())
    }

    /// This member's index.
    pub fn member(&self) -> usize {
        self.member
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.sequence.size
    }

    /// What a work item retains of the group (RET-3).
    pub(crate) fn retained(&self) -> Box<dyn std::any::Any + Send> {
        Box::new((Arc::clone(&self.token), Arc::clone(&self.sequence)))
    }
}
