//! What rank 0 tells its late peer, and what the peer tells back: the
//! [`Plan`] of a sequence's collective rounds.
//!
//! Rank 0 writes each round's work (its parameters, [`Plan::set`]) before
//! it submits its own side, and the round's fate when the sequence decides
//! it: joined with a driver ([`Plan::join`], [`Op::Release`]), skipped (a
//! round rank 0 gave up on before the peer joined it, or one submitted after
//! the group was poisoned), or abandoned (given up on after the peer may have
//! joined it: the peer tears its side down at once). [`Plan::done`] says
//! rank 0 will use no more rounds; the peer answers [`Plan::finish`] once its
//! work is torn down, and reports what it saw go wrong on its side
//! ([`Plan::violation`]). The ranks block on the plan through an [`Event`]
//! of the sequence's [`Scheduler`](super::Scheduler), never on a primitive
//! of their own.
//!
//! [`Op::Release`]: super::Op::Release

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use super::op::Work;
use super::scheduler::{lock, Event};

/// One round's plan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned {
    pub(crate) work: Work,
    pub(crate) delay: Duration,
}

/// What the peer is told about a round, in the order it heeds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Told {
    /// Never join the round.
    Skip,
    /// Submit the round's side with the driver of this index (claim order).
    Join(usize),
    /// Rank 0 is done before deciding the round.
    Done,
}

#[derive(Debug, Default)]
struct State {
    rounds: Vec<Option<Planned>>,
    joined: Vec<Option<usize>>,
    skipped: HashSet<usize>,
    abandoned: HashSet<usize>,
    done: bool,
    /// Peers that have torn down and dropped all of their work.
    finished: usize,
    /// What rank 1 saw go wrong on its side of a round (the SPEC ID and a
    /// message): read by rank 0 once rank 1 finished.
    violations: Vec<(&'static str, String)>,
}

/// The two ranks' shared plan (see the module docs).
pub(crate) struct Plan {
    state: Mutex<State>,
    event: Box<dyn Event>,
    /// The late peers (every rank but rank 0), all following this plan.
    peers: usize,
}

impl Plan {
    /// An empty plan for `peers` late peers whose waits block on `event`.
    pub(crate) fn new(event: Box<dyn Event>, peers: usize) -> Self {
        Self {
            state: Mutex::default(),
            event,
            peers,
        }
    }

    /// Changes the state, then wakes the other rank.
    fn tell(&self, change: impl FnOnce(&mut State)) {
        change(&mut lock(&self.state));
        self.event.notify();
    }

    /// Rank 1 is to submit `work` in `round`.
    pub(crate) fn set(&self, round: usize, work: Work) {
        let mut state = lock(&self.state);
        if state.rounds.len() <= round {
            state.rounds.resize(round + 1, None);
        }
        state.rounds[round] = Some(Planned {
            work,
            delay: Duration::ZERO,
        });
    }

    /// Rank 1 joins `round` `delay` after it is told to.
    pub(crate) fn delay(&self, round: usize, delay: Duration) {
        if let Some(Some(planned)) = lock(&self.state).rounds.get_mut(round) {
            planned.delay = delay;
        }
    }

    /// What rank 1 is to submit in `round`.
    pub(crate) fn get(&self, round: usize) -> Option<Planned> {
        lock(&self.state).rounds.get(round).copied().flatten()
    }

    /// Rank 1 submits its side of `round` with driver `driver`.
    pub(crate) fn join(&self, round: usize, driver: usize) {
        self.tell(|state| {
            if state.joined.len() <= round {
                state.joined.resize(round + 1, None);
            }
            state.joined[round] = Some(driver);
        });
    }

    /// Rank 1 never joins `round`.
    pub(crate) fn skip(&self, round: usize) {
        self.tell(|state| {
            state.skipped.insert(round);
        });
    }

    /// Rank 0 gave up on `round` after rank 1 may have joined it: rank 1
    /// tears its side down at once instead of waiting for it.
    pub(crate) fn abandon(&self, round: usize) {
        self.tell(|state| {
            state.abandoned.insert(round);
        });
    }

    /// Whether rank 0 abandoned `round`.
    pub(crate) fn abandoned(&self, round: usize) -> bool {
        lock(&self.state).abandoned.contains(&round)
    }

    /// Rank 0 has released or skipped every round it will ever use.
    pub(crate) fn done(&self) {
        self.tell(|state| state.done = true);
    }

    /// A late peer has torn down and dropped all of its work.
    pub(crate) fn finish(&self) {
        self.tell(|state| state.finished += 1);
    }

    /// What rank 1 is told about `round`, waiting up to `limit` for it;
    /// `None` after `limit`.
    pub(crate) fn next(&self, round: usize, limit: Duration) -> Option<Told> {
        let mut told = None;
        let read = |state: &State| {
            if state.skipped.contains(&round) {
                Some(Told::Skip)
            } else if let Some(Some(driver)) = state.joined.get(round) {
                Some(Told::Join(*driver))
            } else if state.done {
                Some(Told::Done)
            } else {
                None
            }
        };
        self.event.wait_until(
            &mut || {
                told = read(&lock(&self.state));
                told.is_some()
            },
            limit,
        );
        told
    }

    /// Waits up to `limit` for every late peer to finish; whether they did.
    pub(crate) fn await_finished(&self, limit: Duration) -> bool {
        let peers = self.peers;
        self.event
            .wait_until(&mut || lock(&self.state).finished >= peers, limit)
    }

    /// Rank 1 saw `id` violated on its side.
    pub(crate) fn violation(&self, id: &'static str, message: String) {
        lock(&self.state).violations.push((id, message));
    }

    /// The first violation rank 1 saw.
    pub(crate) fn first_violation(&self) -> Option<(&'static str, String)> {
        lock(&self.state).violations.first().cloned()
    }
}
