//! Lanes raced against a blocked lane (SUB-1's independence, SUB-3's
//! control): the work keeping one lane busy is first seen pending, then work
//! on the free lanes must be seen complete while that lane is surely busy.

use std::time::{Duration, Instant};

use super::shared::still_pending;
use crate::check::{setup, Check, Finding};
use crate::harness::Harness;
use crate::matrix::Handle;
use crate::suites::blocker::Blocker;
use crate::suites::common::settle;

/// Control (SUB-1, SUB-3): the work that keeps a lane busy must be pending
/// (after a settle, where the blocker keeps it busy for certain), or the
/// `unchecked` property cannot be checked: the attempt is inconclusive (the
/// hold did not hold, a sum reduction completed before its late peer joined,
/// lazy work was not pending, or `is_complete` answered early: EXC-2's
/// business). An error from `is_complete` is a violation of `api`.
pub(super) fn blocked_work_is_pending<H: Harness>(
    blocker: &Blocker<'_, '_, H>,
    work: &Handle<H>,
    api: &str,
    what: &str,
    unchecked: &str,
) -> Check {
    if blocker.certain() {
        settle();
    }
    match still_pending(work) {
        Ok(true) => Ok(()),
        Ok(false) if blocker.certain() => Err(setup(format!(
            "{what} reported complete while its lane was {} (the hold instrument did not hold \
             it, a sum reduction completed before its late peer joined, or is_complete answered \
             early, see EXC-2): {unchecked} cannot be checked",
            blocker.how()
        ))),
        Ok(false) => Err(setup(format!(
            "{what} reported complete at once, while its lazy work was known to be still running \
             (is_complete answered early? see EXC-2): {unchecked} cannot be checked"
        ))),
        Err(error) => Err(Finding::Violation(format!(
            "{api}: is_complete on {what} failed: {error}"
        ))),
    }
}

/// Work submitted on a free lane while another lane is blocked.
pub(super) struct Racer<H: Harness> {
    /// Which lane, for messages.
    pub(super) lane: String,
    pub(super) completion: Handle<H>,
    pub(super) submitted: Instant,
}

/// What polling work on free lanes against a blocked lane showed.
pub(super) enum Race {
    /// Every racer was seen complete while the blocked lane was surely busy.
    Completed,
    /// A racer was still pending `elapsed` after its submission, the
    /// blocked lane surely busy all that while.
    Stuck { lane: String, elapsed: Duration },
    /// A racer's `is_complete` reported an error.
    Failed { lane: String, error: String },
    /// The blocked lane may have become free (its lazy work finished) before
    /// every racer was seen complete: nothing was learnt.
    NotBusy,
}

/// Polls `racers` until each has been seen complete while `blocker` was
/// surely busy (every observation is confirmed by a `surely_busy` after it),
/// or one stays pending `limit` after its submission while it is.
pub(super) fn race<H: Harness>(
    blocker: &Blocker<'_, '_, H>,
    racers: &[Racer<H>],
    limit: Duration,
) -> Race {
    let mut done = vec![false; racers.len()];
    loop {
        let mut seen = Vec::new();
        let mut stuck = None;
        for (slot, racer) in racers.iter().enumerate().filter(|(slot, _)| !done[*slot]) {
            match racer.completion.is_complete() {
                Ok(true) => seen.push(slot),
                Ok(false) => {
                    let elapsed = racer.submitted.elapsed();
                    if elapsed >= limit && stuck.is_none() {
                        stuck = Some((racer.lane.clone(), elapsed));
                    }
                }
                Err(error) => {
                    return Race::Failed {
                        lane: racer.lane.clone(),
                        error,
                    }
                }
            }
        }
        // Every observation above is conclusive only if the lane was busy
        // when it was made, which this (later) check confirms.
        if !blocker.surely_busy() {
            return Race::NotBusy;
        }
        for slot in seen {
            done[slot] = true;
        }
        if let Some((lane, elapsed)) = stuck {
            return Race::Stuck { lane, elapsed };
        }
        if done.iter().all(|done| *done) {
            return Race::Completed;
        }
        crate::world::pause(Duration::from_millis(1));
    }
}
