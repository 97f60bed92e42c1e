//! Resource ledger and liveness probes: the backend's accounting of every
//! native resource, so the kit can observe retention (RET-*), teardown (CAN-5)
//! and leaks (RET-7) without trusting the completion under test.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use crate::sync::rt::{self, AtomicI64, Mutex, MutexGuard};

/// Identity of one tensor's native storage, stable for the storage's lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StorageId(pub(crate) u64);

impl StorageId {
    /// Numeric value, for reports.
    pub fn value(self) -> u64 {
        self.0
    }
}

/// Kinds of native resource the ledger counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Executor,
    Group,
    Route,
    Pending,
}

/// Counts of live native resources at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerSnapshot {
    /// Tensor storages still allocated.
    pub storages: usize,
    /// Executors (worker lanes) still alive.
    pub executors: usize,
    /// Communication-group member handles still alive.
    pub groups: usize,
    /// Route endpoints still alive.
    pub routes: usize,
    /// Submitted work items that have not reached a terminal state.
    pub pending_work: usize,
    /// Completions handed to the quarantine owner whose work is still live.
    pub quarantined: usize,
}

/// The per-device ledger.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    storages: Mutex<BTreeSet<u64>>,
    next_storage: AtomicI64,
    executors: AtomicI64,
    groups: AtomicI64,
    routes: AtomicI64,
    pending: AtomicI64,
    /// Tensor memory of an eager device is filled when allocated
    /// ([`crate::Personality::Eager`]): set once, before the device is shared.
    eager: bool,
}

impl Ledger {
    /// Whether tensor operations on this device compute when called.
    pub(crate) fn eager(&self) -> bool {
        self.eager
    }

    /// Makes the device eager (before it is shared).
    pub(crate) fn set_eager(&mut self, eager: bool) {
        self.eager = eager;
    }

    pub(crate) fn storage_allocated(&self) -> StorageId {
        let id = self.next_storage.fetch_add(1, Ordering::Relaxed) as u64 + 1;
        self.storages_set().insert(id);
        StorageId(id)
    }

    pub(crate) fn storage_freed(&self, id: StorageId) {
        self.storages_set().remove(&id.0);
    }

    pub(crate) fn storage_live(&self, id: StorageId) -> bool {
        self.storages_set().contains(&id.0)
    }

    pub(crate) fn up(&self, kind: Kind) {
        self.counter(kind).fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn down(&self, kind: Kind) {
        self.counter(kind).fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn snapshot(&self, quarantined: usize) -> LedgerSnapshot {
        let read = |kind| self.counter(kind).load(Ordering::SeqCst).max(0) as usize;
        LedgerSnapshot {
            storages: self.storages_set().len(),
            executors: read(Kind::Executor),
            groups: read(Kind::Group),
            routes: read(Kind::Route),
            pending_work: read(Kind::Pending),
            quarantined,
        }
    }

    fn counter(&self, kind: Kind) -> &AtomicI64 {
        match kind {
            Kind::Executor => &self.executors,
            Kind::Group => &self.groups,
            Kind::Route => &self.routes,
            Kind::Pending => &self.pending,
        }
    }

    fn storages_set(&self) -> MutexGuard<'_, BTreeSet<u64>> {
        rt::lock(&self.storages)
    }
}
