//! Blockers: an executor lane kept busy, for the checks that need *another*
//! lane busy (SUB-1, SUB-3, EXC-4) or work queued behind busy work (RET-1,
//! RET-2, RET-3, RET-5).
//!
//! A lane is kept busy, in order of preference:
//! - by the hold instrument, when the harness has one;
//! - *fed*: by plain work on the output of a sum reduction whose late peers
//!   the kit keeps out until the release (black-box; busy for as long as the
//!   kit says, with no guess of how long any work takes). Used where the
//!   harness claims `all_reduce_sum` and the world has peers playing the
//!   late-peer role ([`crate::matrix::late_peer_rounds`]);
//! - by lazy work of the backend's own (black-box, busy for a known while
//!   only, see [`crate::matrix::lazy`]): the one way that rests on timing.

use std::time::{Duration, Instant};

use eredu_runtime::backend::SubmissionBackend;

use crate::check::{slack, Check, Finding};
use crate::harness::{Backend, Executor, Harness, HoldGuard};
use crate::matrix::{wait_within, Handle, LazyWindow};
use crate::world::RankCtx;

/// How a [`Blocker`] keeps its lane busy.
enum Keep<'c, 'w, H: Harness> {
    /// The hold instrument on the lane (`None` once released).
    Hold(Option<HoldGuard>),
    /// Work on the output of the sum reduction of late-peer round `round`,
    /// whose completion (`feeder`) is kept until the blocker is done with.
    Fed {
        ctx: &'c RankCtx<'w, H>,
        round: usize,
        released: bool,
        #[allow(dead_code, reason = "held, never read")]
        feeder: Handle<H>,
    },
    /// Lazy work: until when it is certainly busy, and how long it takes.
    Lazy(LazyWindow),
}

impl<H: Harness> Keep<'_, '_, H> {
    /// Lets the lane's work go on: drops the hold, or lets the late peers
    /// join the fed round (a no-op for lazy work).
    fn release(&mut self) {
        match self {
            Self::Hold(guard) => drop(guard.take()),
            Self::Fed {
                ctx,
                round,
                released,
                ..
            } => {
                if !*released {
                    *released = true;
                    ctx.signal(&crate::matrix::feed_join(*round));
                }
            }
            Self::Lazy(_) => {}
        }
    }
}

/// A blocker dropped unreleased (an early return) still lets its late peers
/// go on: they join rounds in order, so an unreleased round would stall
/// every later one.
impl<H: Harness> Drop for Keep<'_, '_, H> {
    fn drop(&mut self) {
        self.release();
    }
}

/// An executor lane kept busy (see the module docs).
pub(crate) struct Blocker<'c, 'w, H: Harness> {
    /// The submission that keeps the lane busy.
    pub(crate) completion: Handle<H>,
    keep: Keep<'c, 'w, H>,
}

impl<'c, 'w, H: Harness> Blocker<'c, 'w, H> {
    /// Blocks `executor`; `factor` scales lazy work (to outlast other lazy
    /// work of the same check).
    pub(crate) fn block(
        ctx: &'c RankCtx<'w, H>,
        executor: &Executor<H>,
        factor: usize,
    ) -> Result<Self, Finding> {
        let feed = ctx.harness().claims().feed().filter(|_| ctx.size() >= 2);
        let (keep, input) = if ctx.harness().instruments().hold {
            let hold = ctx.hold(executor)?;
            (Keep::Hold(Some(hold)), ctx.tensor(&[1.0, 2.0], &[2])?)
        } else if let Some(feed) = feed {
            let round = crate::matrix::next_round(ctx);
            let fed = feed(ctx, executor);
            if fed.is_err() {
                ctx.signal(&crate::matrix::feed_join(round));
            }
            let (feeder, output) = fed?;
            let keep = Keep::Fed {
                ctx,
                round,
                released: false,
                feeder,
            };
            (keep, output)
        } else {
            let heavy = crate::matrix::lazy::heavier(ctx, executor, factor)?;
            (Keep::Lazy((heavy.pending_until, heavy.takes)), heavy.tensor)
        };
        // On an error `keep` is dropped, which releases it.
        let completion = Backend::<H>::submit(executor, [&input])
            .map(Handle::Plain)
            .map_err(|e| crate::check::setup(format!("submit on the lane to block failed: {e}")))?;
        Ok(Self { completion, keep })
    }

    /// Whether the lane stays busy until [`Blocker::release_and_finish`],
    /// whatever the load (the hold, or a fed round): no window to watch.
    pub(crate) fn certain(&self) -> bool {
        !matches!(self.keep, Keep::Lazy(_))
    }

    /// How the lane is kept busy, for messages.
    pub(crate) fn how(&self) -> &'static str {
        match self.keep {
            Keep::Hold(_) => "held by the hold instrument",
            Keep::Fed { .. } => "busy with work on a sum reduction whose late peer had not joined",
            Keep::Lazy(_) => "busy evaluating lazy work",
        }
    }

    /// Whether the blocked lane is certainly still busy.
    pub(crate) fn surely_busy(&self) -> bool {
        match &self.keep {
            Keep::Hold(guard) => guard.is_some(),
            Keep::Fed { released, .. } => !released,
            Keep::Lazy((until, _)) => Instant::now() < *until,
        }
    }

    /// `Ok` while the lane is certainly busy, otherwise inconclusive.
    pub(crate) fn confirm(&self, what: &str) -> Check {
        if self.surely_busy() {
            Ok(())
        } else {
            Err(crate::check::setup(format!(
                "the lazy work that blocked another lane may have finished before {what}"
            )))
        }
    }

    /// How long the blocking work may take once released.
    pub(crate) fn completes_within(&self) -> Duration {
        crate::matrix::completes_within(match self.keep {
            Keep::Lazy(window) => Some(window),
            Keep::Hold(_) | Keep::Fed { .. } => None,
        })
    }

    /// Unblocks the lane and waits for its work.
    pub(crate) fn release_and_finish(mut self, what: impl FnOnce() -> String) -> Check {
        self.keep.release();
        wait_within(&self.completion, self.completes_within())
            .map_err(|error| crate::check::setup(format!("{}: {error}", what())))
    }
}

/// How long work on a free lane may stay pending while `blocker` keeps
/// another lane busy: when the lane stays busy for certain, as long as
/// released work may take; against lazy work (busy for a known while only),
/// a prompt bound.
pub(crate) fn free_lane_limit<H: Harness>(blocker: &Blocker<'_, '_, H>) -> Duration {
    if blocker.certain() {
        slack::RELEASE
    } else {
        slack::PROMPT
    }
}
