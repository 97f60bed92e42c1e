//! Communication groups: an in-process rendezvous of `n` members in member order.
//!
//! The k-th collective a member submits on a group meets the k-th collective
//! of every other member. A member that has not joined yet keeps the others
//! pending for real (the *late peer*); a member that fails or is cancelled
//! aborts the rendezvous, so its peers fail instead of hanging.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::CpuError;
use crate::fabric::{GroupInbox, Span};
use crate::frame::{Contribution, Frame};
use crate::ledger::{Kind, Ledger};
use crate::sync::rt::{AtomicU64, Condvar, Mutex, MutexGuard, OnceLock};
use crate::tensor::Values;
use crate::work::WorkCtx;

/// Every member's contribution to one collective, in member order, plus a
/// result computed once and shared by members whose outputs are identical.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    pub(crate) contributions: Vec<Contribution>,
    pub(crate) shared: OnceLock<Result<Values, CpuError>>,
}

#[derive(Default)]
struct Slot {
    contributions: Vec<Option<Contribution>>,
    all: Option<Arc<Gathered>>,
    aborted: Option<(usize, String)>,
    departed: usize,
}

impl Slot {
    /// Records `member`'s contribution; the last one makes the gathered set.
    /// Returns whether the set is now whole (what waiting members wait
    /// for: a partial set wakes nobody).
    fn deposit(&mut self, member: usize, contribution: Contribution) -> bool {
        self.contributions[member] = Some(contribution);
        let whole = self.contributions.iter().all(Option::is_some);
        if whole {
            let contributions = self
                .contributions
                .iter_mut()
                .flat_map(Option::take)
                .collect();
            self.all = Some(Arc::new(Gathered {
                contributions,
                shared: OnceLock::new(),
            }));
        }
        whole
    }

    /// The slot of collective `seq`, made empty for `size` members if new.
    fn of(state: &mut GroupState, seq: u64, size: usize) -> &mut Slot {
        state.slots.entry(seq).or_insert_with(|| Slot {
            contributions: vec![None; size],
            ..Slot::default()
        })
    }
}

struct GroupState {
    slots: HashMap<u64, Slot>,
    fenced: Option<String>,
    joined: Vec<bool>,
    /// A member whose process died (groups spanning processes), and why.
    lost: Option<(usize, String)>,
    /// Collectives every local member left (groups spanning processes: a
    /// remote member's late frame for one of them is dropped).
    closed: std::collections::HashSet<u64>,
}

pub(crate) struct GroupShared {
    id: u64,
    size: usize,
    ledger: Arc<Ledger>,
    /// The last reduction result, whose buffer the next one reuses once
    /// every output holding it was dropped (saves a large allocation and its
    /// page faults per reduction).
    recycled: Mutex<Option<Values>>,
    state: Mutex<GroupState>,
    changed: Condvar,
    /// The other members' processes, for a group spanning processes.
    span: Option<Span>,
    /// Admission tickets handed out (see [`Contribution::arrival`]).
    admissions: AtomicU64,
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl GroupShared {
    /// A group of `size` members whose native handles `ledger` counts. For
    /// a group of one member per process, of which this process holds one,
    /// `span` reaches the others. `id` numbers the group once it is valid.
    pub(crate) fn new(
        size: usize,
        span: Option<Span>,
        ledger: &Arc<Ledger>,
        id: impl FnOnce() -> u64,
    ) -> Result<Arc<Self>, CpuError> {
        if size == 0 {
            return Err(CpuError::invalid(
                "group",
                "at least one member",
                "a group of 0 members",
            ));
        }
        Ok(Arc::new(Self {
            id: id(),
            size,
            ledger: Arc::clone(ledger),
            recycled: Mutex::new(None),
            admissions: AtomicU64::new(0),
            state: Mutex::new(GroupState {
                slots: HashMap::new(),
                fenced: None,
                joined: vec![false; size],
                lost: None,
                closed: Default::default(),
            }),
            changed: Condvar::new(),
            span,
        }))
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The buffer kept by [`GroupShared::keep`], if any.
    pub(crate) fn take(&self) -> Option<Values> {
        guard(&self.recycled).take()
    }

    /// Keeps a result's buffer for reuse by a later reduction.
    pub(crate) fn keep(&self, values: &Values) {
        *guard(&self.recycled) = Some(Arc::clone(values));
    }

    /// Deposits `member`'s contribution to collective `seq` and, when `wait`,
    /// blocks until every member has deposited; returns all contributions in
    /// member order. Cancellation and injected faults abort the rendezvous.
    fn exchange(
        &self,
        seq: u64,
        member: usize,
        contribution: Contribution,
        ctx: &WorkCtx<'_>,
        operation: &'static str,
        wait: bool,
    ) -> Result<Arc<Gathered>, CpuError> {
        // A group spanning processes sends the contribution to the others,
        // outside the lock (a send may wait for a peer's reader).
        let outgoing = self.span.as_ref().map(|_| Frame::Deposit {
            seq,
            member,
            contribution: contribution.clone(),
        });
        let mut state = guard(&self.state);
        if let Some(reason) = &state.fenced {
            return Err(CpuError::PeerFailed {
                operation,
                member,
                reason: format!("group {} was fenced by {reason}", self.id),
            });
        }
        let size = self.size;
        let local = self.local_members();
        let slot = Slot::of(&mut state, seq, size);
        if let Some(fault) = ctx.fault() {
            slot.aborted.get_or_insert((member, fault.to_string()));
            Self::depart(&mut state, seq, local);
            drop(state);
            self.changed.notify_all();
            self.tell(&Frame::Abort {
                seq,
                member,
                reason: fault.to_string(),
            });
            return Err(fault.clone());
        }
        if let Some((failed, reason)) = slot.aborted.clone() {
            Self::depart(&mut state, seq, local);
            return Err(CpuError::PeerFailed {
                operation,
                member: failed,
                reason,
            });
        }
        if slot.deposit(member, contribution) {
            self.changed.notify_all();
        }
        if let Some(frame) = outgoing {
            drop(state);
            self.tell(&frame);
            state = guard(&self.state);
        }
        if !wait {
            Self::depart(&mut state, seq, local);
            return Ok(Arc::new(Gathered::default()));
        }
        loop {
            let lost = state.lost.clone();
            let Some(slot) = state.slots.get_mut(&seq) else {
                return Err(CpuError::PeerFailed {
                    operation,
                    member,
                    reason: "the rendezvous vanished".into(),
                });
            };
            if let Some(all) = slot.all.clone() {
                Self::depart(&mut state, seq, local);
                return Ok(all);
            }
            if let Some((failed, reason)) = slot.aborted.clone().or(lost) {
                Self::depart(&mut state, seq, local);
                return Err(CpuError::PeerFailed {
                    operation,
                    member: failed,
                    reason,
                });
            }
            if ctx.cancelled() {
                let reason = "cancelled by a NativeCancel deadline";
                slot.aborted = Some((member, reason.into()));
                Self::depart(&mut state, seq, local);
                drop(state);
                self.changed.notify_all();
                self.tell(&Frame::Abort {
                    seq,
                    member,
                    reason: reason.into(),
                });
                return Err(CpuError::Cancelled { operation });
            }
            state = ctx.block(&self.changed, state);
        }
    }

    /// Aborts collective `seq` on behalf of `member`, whose work ended without
    /// running (cancelled before it started, or abandoned): peers fail.
    pub(crate) fn abort(&self, seq: u64, member: usize, reason: &str) {
        let mut state = guard(&self.state);
        let (size, local) = (self.size, self.local_members());
        let slot = Slot::of(&mut state, seq, size);
        let reason = format!("its work ended before it took part: {reason}");
        let tell = slot.all.is_none();
        if tell {
            slot.aborted.get_or_insert_with(|| (member, reason.clone()));
        }
        Self::depart(&mut state, seq, local);
        drop(state);
        self.changed.notify_all();
        if tell {
            self.tell(&Frame::Abort {
                seq,
                member,
                reason,
            });
        }
    }

    /// Members whose handles live in this process: all of them, or one for
    /// a group spanning processes.
    fn local_members(&self) -> usize {
        if self.span.is_some() {
            1
        } else {
            self.size
        }
    }

    /// Records that one local member left collective `seq`; the last one
    /// frees the slot.
    fn depart(state: &mut GroupState, seq: u64, local: usize) {
        if let Some(slot) = state.slots.get_mut(&seq) {
            slot.departed += 1;
            if slot.departed >= local {
                state.slots.remove(&seq);
                if local < state.joined.len() {
                    state.closed.insert(seq);
                }
            }
        }
    }

    /// Sends `frame` to the other members' processes (groups spanning processes).
    fn tell(&self, frame: &Frame) {
        if let Some(span) = &self.span {
            span.to_group(self.size, frame);
        }
    }
}

impl GroupInbox for GroupShared {
    /// Applies a frame another member's process sent.
    fn receive(&self, frame: Frame) {
        let mut state = guard(&self.state);
        match frame {
            Frame::Deposit {
                seq,
                member,
                contribution,
            } => {
                if member >= self.size || state.closed.contains(&seq) {
                    return;
                }
                let slot = Slot::of(&mut state, seq, self.size);
                if slot.all.is_some() || slot.contributions[member].is_some() {
                    return;
                }
                if !slot.deposit(member, contribution) {
                    // A partial set: nobody waits for it.
                    return;
                }
            }
            Frame::Abort {
                seq,
                member,
                reason,
            } => {
                if state.closed.contains(&seq) {
                    return;
                }
                let slot = Slot::of(&mut state, seq, self.size);
                if slot.all.is_none() {
                    slot.aborted.get_or_insert((member, reason));
                }
            }
            Frame::Fence { reason } => {
                state.fenced.get_or_insert(reason);
            }
            Frame::Route(_) => return,
        }
        drop(state);
        self.changed.notify_all();
    }

    /// The process of member `peer` died: every collective still waiting
    /// for members fails, naming it.
    fn peer_lost(&self, peer: usize, reason: &str) {
        guard(&self.state).lost.get_or_insert_with(|| {
            (
                peer,
                format!("the process of member {peer} was lost: {reason}"),
            )
        });
        self.changed.notify_all();
    }
}

/// One member's native handle on a group; counted by the ledger.
pub(crate) struct GroupMember {
    shared: Arc<GroupShared>,
    member: usize,
    next_seq: AtomicU64,
    ledger: Arc<Ledger>,
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        guard(&self.shared.state).joined[self.member] = false;
        self.ledger.down(Kind::Group);
    }
}

impl GroupMember {
    pub(crate) fn member(&self) -> usize {
        self.member
    }

    /// Sequence number of the next collective this member submits.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::SeqCst)
    }

    /// The next admission ticket of the group (see [`Contribution::arrival`]).
    pub(crate) fn ticket(&self) -> u64 {
        self.shared.admissions.fetch_add(1, Ordering::SeqCst)
    }

    /// See [`GroupShared::exchange`].
    pub(crate) fn exchange(
        &self,
        seq: u64,
        contribution: Contribution,
        ctx: &WorkCtx<'_>,
        operation: &'static str,
        wait: bool,
    ) -> Result<Arc<Gathered>, CpuError> {
        // A cancellation request wakes the wait for peers.
        ctx.wake_on_cancel(
            &self.shared,
            |shared| (&shared.state, &shared.changed),
            || {
                self.shared
                    .exchange(seq, self.member, contribution, ctx, operation, wait)
            },
        )
    }

    /// The rendezvous this member meets its peers in, and its index there.
    /// (Holding it keeps the rendezvous, not the member's native handle.)
    pub(crate) fn rendezvous(&self) -> (Arc<GroupShared>, usize) {
        (Arc::clone(&self.shared), self.member)
    }

    /// Fails every later collective on this group (only the RET-8 defect calls this).
    pub(crate) fn fence(&self, reason: &str) {
        guard(&self.shared.state).fenced = Some(reason.to_owned());
        self.shared.changed.notify_all();
        self.shared.tell(&Frame::Fence {
            reason: reason.to_owned(),
        });
    }
}

/// The CPU backend's communication group: this member's handle.
#[derive(Clone)]
pub struct CpuGroup {
    pub(crate) member: Arc<GroupMember>,
}

impl std::fmt::Debug for CpuGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuGroup")
            .field("group", &self.member.shared.id)
            .field("member", &self.member.member)
            .field("size", &self.member.shared.size)
            .finish()
    }
}

impl CpuGroup {
    pub(crate) fn join(shared: &Arc<GroupShared>, member: usize) -> Result<Self, CpuError> {
        if member >= shared.size {
            return Err(CpuError::invalid(
                "join_group",
                format!("a member index below {}", shared.size),
                format!("member {member}"),
            ));
        }
        let mut state = guard(&shared.state);
        if std::mem::replace(&mut state.joined[member], true) {
            return Err(CpuError::invalid(
                "join_group",
                format!("member {member} to join once"),
                "a second join of the same member".to_owned(),
            ));
        }
        drop(state);
        let ledger = Arc::clone(&shared.ledger);
        ledger.up(Kind::Group);
        Ok(Self {
            member: Arc::new(GroupMember {
                shared: Arc::clone(shared),
                member,
                next_seq: AtomicU64::new(0),
                ledger,
            }),
        })
    }

    /// This member's index in member order.
    pub fn member(&self) -> usize {
        self.member.member
    }

    /// Number of members.
    pub fn size(&self) -> usize {
        self.member.shared.size
    }
}
