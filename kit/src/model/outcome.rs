//! What a sequence run returns and how it runs: [`Options`], the [`Stats`]
//! of a sequence that matched the model, and the first [`Divergence`] (the
//! step, its operation and the SPEC ID violated) of one that did not.

use std::time::Duration;

use super::op::Op;
use crate::harness::Instruments;

/// How [`check_sequence_with`](super::check_sequence_with) runs a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Watchdog of the whole sequence: a hang (a `wait` that never returns)
    /// becomes a divergence at the step that hung. Under
    /// [`check_sequence_on`](super::check_sequence_on), whose scheduler
    /// answers for hangs, it bounds only the wait for both ranks' state.
    pub limit: Duration,
    /// Settling after each submission and release, giving work time to
    /// start (and wrongly complete, or publish an injected fault) before the
    /// next observation. Zero (the default) keeps the hot path free of
    /// waits: the per-step checks still catch whatever happened by then, and
    /// long random runs catch the rest. Otherwise, with an observer, the
    /// settle is by events: the lanes get a few scheduling points, then rank
    /// 0 waits until every submission the model says will finish by itself
    /// is observed ended (bounded by `limit` only, so a loaded machine
    /// changes nothing); without an observer it sleeps this long.
    pub settle: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            limit: Duration::from_secs(30),
            settle: Duration::ZERO,
        }
    }
}

/// What a sequence that matched the model did, and what it could check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Operations that acted on the backend.
    pub executed: usize,
    /// Operations the model could not follow in their state, skipped.
    pub skipped: usize,
    /// Submissions made.
    pub submissions: usize,
    /// The instruments the harness provided. Checks that need a missing one
    /// (probes: retention; observer: work state; ledger: the final drain;
    /// hold: pending local work; fault: error paths) did not run, so an `Ok`
    /// vouches only for what these allowed to be observed.
    pub instruments: Instruments,
}

/// The first disagreement between the backend and the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the step in the sequence; the sequence's length for the
    /// final drain.
    pub step: usize,
    /// The operation of that step (`None` for the final drain or the world).
    pub op: Option<Op>,
    /// The SPEC ID violated; `None` when the harness (not the backend)
    /// failed, or a hang or crash could not be attributed.
    pub id: Option<&'static str>,
    /// What was expected and what happened.
    pub message: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.op {
            Some(op) => write!(f, "step {} ({op}): ", self.step)?,
            None => write!(f, "step {} (final drain): ", self.step)?,
        }
        match self.id {
            Some(id) => write!(f, "{id}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl Divergence {
    /// Whether the kit could not place an injected fault: it did not fail the
    /// work it was armed for and may have failed other work (a lazy launch,
    /// or the fault instrument's own reading of "the next native work
    /// item"). Such a divergence names no invariant; it says the sequence is
    /// inconclusive, not that the backend broke the contract, and the fuzz
    /// targets do not report it.
    pub fn fault_unplaced(&self) -> bool {
        self.id.is_none() && self.message.ends_with(super::blame::UNPLACED_FAULT)
    }

    /// Whether the divergence says the sequence is inconclusive rather than
    /// that the backend broke the contract: an unplaced fault
    /// ([`Divergence::fault_unplaced`]), or a wait the kit bounds by time
    /// that expired, a time it cannot vouch for on a loaded machine. It names
    /// no invariant, and the fuzz targets do not report it.
    pub fn inconclusive(&self) -> bool {
        self.fault_unplaced()
            || (self.id.is_none() && self.message.ends_with(super::blame::UNVOUCHED_TIME))
    }
}

impl std::error::Error for Divergence {}
