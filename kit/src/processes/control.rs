//! The control plane of a process world: messages between the processes
//! (which case runs next, host-side signals, world outcomes), over the mesh.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use commcheck_mesh::{Event, Listener, Mesh};

use super::ProcessError;
use crate::check::Check;
use crate::world::{JournalPart, Signals};

/// One message between the processes.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) enum Message {
    /// A process's part of [`Control::all_gather`].
    Gather(Vec<u8>),
    /// The leader: the case named runs next, with this base seed.
    Case { name: String, base: u64 },
    /// The leader: no more cases.
    Done,
    /// A host-side signal raised in world run `epoch`.
    Signal { epoch: u64, name: String },
    /// The sender's ranks of world run `epoch` moved (see
    /// [`crate::world::remote_progress`]).
    Progress { epoch: u64 },
    /// How world run `epoch` ended on the sender.
    Outcome { epoch: u64, outcome: Outcome },
}

/// How a world run ended on one process.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) enum End {
    /// Its rank's script returned.
    Finished(Check),
    /// Its rank panicked (the message says where).
    Crashed(String),
    /// Its rank did not return, and made no progress for a whole watchdog;
    /// where it was (its host, and [`crate::world::inside`]'s record).
    TimedOut(String),
    /// Its rank had not returned by the ceiling, though not hung.
    Overran { ran_ms: u64, idle_ms: u64 },
    /// Its rank blocked in a call that must return at once.
    Blocked {
        what: String,
        invariant: String,
        limit_ms: u64,
    },
    /// It has no rank in this world (the world is smaller than the launch).
    Absent,
    /// It stopped waiting for its rank: the world had already ended elsewhere.
    Abandoned,
}

/// What a process sends at the end of a world run.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Outcome {
    pub(crate) end: End,
    pub(crate) journal: JournalPart,
}

/// Why a wait for another process ended without its message.
#[derive(Debug, Clone)]
pub(crate) enum Stop {
    /// Its connection closed: the process died.
    Lost(String),
    /// Nothing came before the deadline.
    Timeout,
}

#[derive(Default)]
struct State {
    queue: Vec<(usize, Message)>,
    lost: BTreeMap<usize, String>,
    /// The world run whose signals are delivered at once.
    world: Option<(u64, Arc<Signals>)>,
    /// Why the process world can no longer run cases, once it cannot.
    broken: Option<String>,
}

#[derive(Default)]
struct Inbox {
    state: Mutex<State>,
    changed: Condvar,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Inbox {
    fn deliver(&self, event: Event) {
        let mut state = lock(&self.state);
        match event {
            Event::Frame { from, bytes } => match serde_json::from_slice::<Message>(&bytes) {
                Ok(Message::Signal { epoch, name }) => match &state.world {
                    Some((current, signals)) if *current == epoch => signals.deliver(&name),
                    Some((current, _)) if *current > epoch => {}
                    _ => state.queue.push((from, Message::Signal { epoch, name })),
                },
                Ok(Message::Progress { epoch }) => {
                    if matches!(&state.world, Some((current, _)) if *current == epoch) {
                        crate::world::remote_progress();
                    }
                }
                Ok(message) => state.queue.push((from, message)),
                Err(error) => {
                    state
                        .lost
                        .entry(from)
                        .or_insert(format!("it sent an undecodable message: {error}"));
                }
            },
            Event::Lost { peer, reason } => {
                state.lost.entry(peer).or_insert(reason);
            }
        }
        drop(state);
        self.changed.notify_all();
    }
}

/// One process's end of the control plane.
pub(crate) struct Control {
    mesh: Mesh,
    inbox: Arc<Inbox>,
    epoch: AtomicU64,
    /// Every process's mesh address, in rank order.
    addresses: Vec<String>,
}

impl Control {
    /// Connects the mesh of the launch's `addresses.len()` processes.
    pub(crate) fn connect(
        listener: Listener,
        rank: usize,
        addresses: &[String],
    ) -> Result<Arc<Self>, ProcessError> {
        let inbox = Arc::new(Inbox::default());
        let delivering = Arc::clone(&inbox);
        let mesh = listener.connect(
            rank,
            addresses,
            Arc::new(move |event| delivering.deliver(event)),
        )?;
        Ok(Arc::new(Self {
            mesh,
            inbox,
            epoch: AtomicU64::new(0),
            addresses: addresses.to_vec(),
        }))
    }

    /// Every process's mesh address, in rank order.
    pub(crate) fn addresses(&self) -> &[String] {
        &self.addresses
    }

    pub(crate) fn rank(&self) -> usize {
        self.mesh.rank()
    }

    pub(crate) fn size(&self) -> usize {
        self.mesh.size()
    }

    /// The next world run's number (every process counts the same runs).
    pub(crate) fn next_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn encode(message: &Message) -> Vec<u8> {
        // Serialising these plain types cannot fail; an empty frame would
        // be reported by the receiver as undecodable.
        serde_json::to_vec(message).unwrap_or_default()
    }

    /// Sends `message` to every other process. A failed send is seen as a
    /// lost peer by the reader of that connection, so it is not reported here.
    pub(crate) fn broadcast(&self, message: &Message) {
        let _ = self.mesh.broadcast(&Self::encode(message));
    }

    /// Sends a signal raised in world run `epoch` to its other ranks
    /// (processes `0..ranks`).
    pub(crate) fn signal(&self, epoch: u64, ranks: usize, name: &str) {
        let bytes = Self::encode(&Message::Signal {
            epoch,
            name: name.to_owned(),
        });
        for to in (0..ranks).filter(|to| *to != self.rank()) {
            let _ = self.mesh.send(to, &bytes);
        }
    }

    /// Tells the other ranks of world run `epoch` (`ranks` ranks) that this
    /// process's rank moved.
    pub(crate) fn progress(&self, epoch: u64, ranks: usize) {
        let bytes = Self::encode(&Message::Progress { epoch });
        for to in (0..ranks).filter(|to| *to != self.rank()) {
            let _ = self.mesh.send(to, &bytes);
        }
    }

    /// Delivers world run `epoch`'s signals to `signals` from now on,
    /// including those that arrived early.
    pub(crate) fn register(&self, epoch: u64, signals: Arc<Signals>) {
        let mut state = lock(&self.inbox.state);
        state.queue.retain(|(_, message)| match message {
            Message::Signal { epoch: sent, name } if *sent == epoch => {
                signals.deliver(name);
                false
            }
            Message::Signal { epoch: sent, .. } => *sent > epoch,
            _ => true,
        });
        state.world = Some((epoch, signals));
    }

    /// Stops delivering world run `epoch`'s signals.
    pub(crate) fn unregister(&self, epoch: u64) {
        let mut state = lock(&self.inbox.state);
        if state
            .world
            .as_ref()
            .is_some_and(|(current, _)| *current == epoch)
        {
            // Later signals of this run are dropped, not queued.
            state.world = Some((epoch, Arc::new(Signals::default())));
        }
    }

    /// Waits for the first message from `from` that `pick` accepts, until
    /// `deadline`; it is removed from the inbox.
    pub(crate) fn wait(
        &self,
        from: usize,
        deadline: Instant,
        pick: impl Fn(&Message) -> bool,
    ) -> Result<Message, Stop> {
        let mut state = lock(&self.inbox.state);
        loop {
            if let Some(at) = state
                .queue
                .iter()
                .position(|(sender, message)| *sender == from && pick(message))
            {
                return Ok(state.queue.remove(at).1);
            }
            if let Some(reason) = state.lost.get(&from) {
                return Err(Stop::Lost(reason.clone()));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Stop::Timeout);
            }
            state = self
                .inbox
                .changed
                .wait_timeout(state, (deadline - now).min(Duration::from_secs(1)))
                .map_or_else(|poisoned| poisoned.into_inner().0, |(state, _)| state);
        }
    }

    /// Whether world run `epoch` already ended elsewhere: another of its
    /// first `ranks` processes reported a crash, a block or a timeout, or
    /// was lost.
    pub(crate) fn ended_elsewhere(&self, epoch: u64, ranks: usize) -> bool {
        let state = lock(&self.inbox.state);
        state.lost.keys().any(|peer| *peer < ranks)
            || state.queue.iter().any(|(_, message)| {
                matches!(message, Message::Outcome { epoch: sent, outcome }
                    if *sent == epoch && !matches!(outcome.end, End::Finished(_) | End::Absent))
            })
    }

    /// Every process's `mine`, in rank order (all call this together).
    pub(crate) fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, ProcessError> {
        self.broadcast(&Message::Gather(mine.to_vec()));
        let limit = commcheck_mesh::connect_limit()?;
        let deadline = Instant::now() + limit;
        (0..self.size())
            .map(|from| {
                if from == self.rank() {
                    return Ok(mine.to_vec());
                }
                match self.wait(from, deadline, |m| matches!(m, Message::Gather(_))) {
                    Ok(Message::Gather(bytes)) => Ok(bytes),
                    Ok(_) | Err(Stop::Timeout) => Err(ProcessError::Lost(format!(
                        "rank {from} did not join an all-gather within {limit:?} ({})",
                        commcheck_mesh::CONNECT_SETTING
                    ))),
                    Err(Stop::Lost(reason)) => Err(ProcessError::Lost(format!(
                        "rank {from} was lost during an all-gather: {reason}"
                    ))),
                }
            })
            .collect()
    }

    /// A description of the first lost peer, if any.
    pub(crate) fn lost(&self) -> Option<String> {
        lock(&self.inbox.state)
            .lost
            .iter()
            .next()
            .map(|(peer, reason)| format!("the process of rank {peer} was lost: {reason}"))
    }

    /// Records that the process world cannot run more cases, and why.
    pub(crate) fn break_with(&self, why: String) {
        lock(&self.inbox.state).broken.get_or_insert(why);
    }

    /// Why the process world cannot run more cases, once it cannot.
    pub(crate) fn broken(&self) -> Option<String> {
        lock(&self.inbox.state).broken.clone()
    }
}
