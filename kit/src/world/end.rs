//! How a world run ended ([`WorldEnd`]): finished, crashed, timed out (a
//! hang), overran (too slow to tell), or blocked in a call that must return
//! at once.

use crate::check::Check;
use std::time::Duration;

/// How one world run ended.
pub(crate) enum WorldEnd {
    /// Every rank returned; findings in rank order.
    Finished(Vec<Check>),
    /// A rank panicked, or its process died; `message` says which
    /// (`panicked: ...`).
    Crashed { rank: usize, message: String },
    /// Not every rank returned, and none of the world's ranks made progress
    /// for a whole case watchdog: a hang.
    TimedOut {
        ranks: Vec<usize>,
        /// Where each of `ranks` was ([`watch::whereabouts`]; for a rank
        /// of another process, as that process said).
        stacks: Vec<String>,
    },
    /// Not every rank returned by the ceiling ([`overrun`]), but the world
    /// was still making progress (its last progress `idle` before): too slow
    /// on this machine now to tell a hang from load, so it proves nothing.
    Overran {
        ranks: Vec<usize>,
        ran: Duration,
        idle: Duration,
    },
    /// A rank blocked in a call the kit expects to return at once (see
    /// [`guarded`]).
    Blocked {
        rank: usize,
        what: String,
        invariant: String,
        limit: Duration,
    },
}

/// The ranks of a timed-out world and where each was, as lines to append
/// to a message (empty when nothing is known).
pub(crate) fn where_they_were(ranks: &[usize], stacks: &[String]) -> String {
    ranks
        .iter()
        .zip(stacks)
        .map(|(rank, stack)| format!("\n  rank {rank}: {stack}"))
        .collect()
}
