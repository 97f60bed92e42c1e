//! What the ranks of a world share beside the backend: host-side signals for
//! choreography (a late peer joins when told to; relayed to the world's
//! other processes), the values the ranks of one process compute alike
//! (built once), and the journal in which they record notes and
//! violations of other invariants than the case's own.

use super::sample::guard;
use crate::results::Attributed;
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Where a world's signals also go: the other processes of a world whose
/// ranks are processes (see [`crate::processes`]).
pub(crate) type Relay = Box<dyn Fn(&str) + Send + Sync>;

/// Host-side signals shared by the rank threads of one world (and, through
/// the relay, by its other processes).
#[derive(Default)]
pub(crate) struct Signals {
    pub(super) raised: Mutex<HashSet<String>>,
    pub(super) changed: Condvar,
    pub(super) relay: Option<Relay>,
    /// Values every rank of the world would compute alike, by key (see
    /// [`Signals::shared`]).
    memo: Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>,
}

impl Signals {
    /// Signals that are also sent through `relay`.
    pub(crate) fn relayed(relay: Relay) -> Self {
        Self {
            relay: Some(relay),
            ..Self::default()
        }
    }

    /// The value under `key`, built by `build` by the first rank that asks
    /// (the others wait for it) and kept while the world lasts: for inputs
    /// and expectations that are a function of the world's seed and size,
    /// which every rank would otherwise build in full. A key first built
    /// as another type is built again, unshared.
    pub(crate) fn shared<T: Send + Sync + 'static>(
        &self,
        key: String,
        build: impl FnOnce() -> T,
    ) -> Arc<T> {
        let mut memo = guard(&self.memo);
        if let Some(Ok(value)) = memo.get(&key).map(|v| Arc::clone(v).downcast::<T>()) {
            return value;
        }
        let value = Arc::new(build());
        memo.insert(key, Arc::clone(&value) as Arc<dyn Any + Send + Sync>);
        value
    }

    /// Raises `name` here and on every process the relay reaches.
    pub(super) fn raise(&self, name: &str) {
        self.deliver(name);
        if let Some(relay) = &self.relay {
            relay(name);
        }
    }

    /// Raises `name` here only (a signal another process raised).
    pub(crate) fn deliver(&self, name: &str) {
        // A signal raised again changes nothing its waiters look at.
        if guard(&self.raised).insert(name.to_owned()) {
            self.changed.notify_all();
        }
    }

    pub(super) fn wait(&self, name: &str, limit: Duration) -> bool {
        self.wait_any(&[name], limit).is_some()
    }

    /// Start barrier: records that rank `index` was built (or could not be)
    /// and waits until every rank was built. `Err` names what went wrong:
    /// a rank that could not be built, or a timeout.
    pub(super) fn start_barrier(
        &self,
        index: usize,
        built: bool,
        ranks: usize,
        limit: Duration,
    ) -> Result<(), String> {
        self.raise(&if built {
            format!("built-{index}")
        } else {
            format!("unbuilt-{index}")
        });
        let deadline = Instant::now() + limit;
        let mut raised = guard(&self.raised);
        loop {
            if let Some(broken) =
                (0..ranks).find(|rank| raised.contains(&format!("unbuilt-{rank}")))
            {
                return Err(format!("rank {broken} could not be built"));
            }
            if (0..ranks).all(|rank| raised.contains(&format!("built-{rank}"))) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "not every rank of the world was built within {limit:?}"
                ));
            }
            raised = match self.changed.wait_timeout(raised, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Waits for the first of `names` to be raised; returns its index.
    pub(super) fn wait_any(&self, names: &[&str], limit: Duration) -> Option<usize> {
        let deadline = Instant::now() + limit;
        let mut raised = guard(&self.raised);
        loop {
            if let Some(index) = names.iter().position(|name| raised.contains(*name)) {
                return Some(index);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            raised = match self.changed.wait_timeout(raised, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// What the ranks of one case record beside their verdicts: notes on the
/// verdict, and violations of other invariants than the case's own.
#[derive(Default)]
pub(crate) struct Journal {
    pub(super) notes: Mutex<Vec<String>>,
    pub(super) attributed: Mutex<Vec<Attributed>>,
    /// Whether a rank used an instrument of the harness.
    pub(super) instrumented: std::sync::atomic::AtomicBool,
    /// The first time `is_complete()` reported `Ok(true)` while the
    /// harness's observer saw the work still live (an EXC-2 violation).
    pub(super) early: Mutex<Option<String>>,
}

impl Journal {
    /// The first early completion report seen (see [`note_completion_report`]).
    pub(crate) fn early_completion(&self) -> Option<String> {
        guard(&self.early).clone()
    }

    /// Whether a rank used an instrument of the harness.
    pub(crate) fn instrumented(&self) -> bool {
        self.instrumented.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many notes and attributed violations were recorded so far.
    pub(crate) fn marks(&self) -> (usize, usize) {
        (guard(&self.notes).len(), guard(&self.attributed).len())
    }

    /// What was recorded after `marks`, for the other processes of a world.
    pub(crate) fn since(&self, (notes, attributed): (usize, usize)) -> JournalPart {
        JournalPart {
            notes: guard(&self.notes).get(notes..).unwrap_or_default().to_vec(),
            attributed: guard(&self.attributed)
                .get(attributed..)
                .unwrap_or_default()
                .to_vec(),
            instrumented: self.instrumented(),
            early: self.early_completion(),
        }
    }

    /// Adds what another process of the world recorded.
    pub(crate) fn merge(&self, part: JournalPart) {
        guard(&self.notes).extend(part.notes);
        guard(&self.attributed).extend(part.attributed);
        if part.instrumented {
            self.instrumented
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if let Some(early) = part.early {
            guard(&self.early).get_or_insert(early);
        }
    }

    /// Everything recorded so far (notes without duplicates).
    pub(crate) fn take(&self) -> (Vec<String>, Vec<Attributed>) {
        let mut notes = std::mem::take(&mut *guard(&self.notes));
        notes.dedup();
        let mut attributed = std::mem::take(&mut *guard(&self.attributed));
        attributed.dedup();
        (notes, attributed)
    }
}

/// What one process of a world recorded in a world run (see [`Journal::since`]).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct JournalPart {
    pub(super) notes: Vec<String>,
    pub(super) attributed: Vec<Attributed>,
    pub(super) instrumented: bool,
    pub(super) early: Option<String>,
}
