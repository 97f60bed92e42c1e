//! Submitting and releasing: `Op::Submit` (the driver's standard or
//! parameterised submission, kept pending by a hold or the late peer, with
//! an injected fault where the model can tell where it lands),
//! `Op::Release` and `Op::LateRelease`, and what a refused or failed
//! submission of clean work violates (its value invariant, SUB-1 when a
//! fault armed on another lane took it, RET-8 when only a deadline on local
//! dependencies came before it).

use std::time::Duration;

use super::blame::{breach, from_finding, value_id, Breach};
use super::live::Live;
use super::op::Work;
use super::reference::{Fate, HandleState, NewSubmission, Via};
use super::runner::Runner;
use super::scheduler::soon;
use super::variant::Vary;
use crate::check::Finding;
use crate::harness::{Harness, WorkState};
use crate::matrix::{self, Driver, PendingVia, Subject};

/// Scheduling points a settle gives the backend's threads before it looks
/// at the observers (a lane picks up the work just submitted).
const LANE_TURNS: usize = 8;

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    /// The driver of `work`, its index in claim order, and its
    /// parameterised submission (for the parameterised kinds); `None` when
    /// the operation is not claimed.
    pub(super) fn driver(&self, work: Work) -> Option<(Driver<H>, usize, Option<Vary<H>>)> {
        match work {
            Work::LocalDependencies => Some((
                matrix::local_dependencies_driver::<H>(PendingVia::Hold),
                0,
                None,
            )),
            Work::Submit => Some((matrix::submit_driver::<H>(PendingVia::Hold), 0, None)),
            Work::Operation(index) => {
                let index = usize::from(index).checked_rem(self.drivers.len())?;
                Some((self.drivers[index], index, None))
            }
            // Per-member parameters name two members.
            _ if self.ctx.size() != 2 => None,
            varied => {
                let (driver, vary) = self.ctx.harness().claims().varied(varied.operation()?)?;
                let index = self
                    .drivers
                    .iter()
                    .position(|d| d.subject == driver.subject)?;
                Some((driver, index, Some(vary)))
            }
        }
    }

    /// The invariant a failure of clean work (no fault, nothing that must
    /// fail) violates: its value invariant, or RET-8 for a collective when
    /// only a bounded wait on local dependencies left work unfinished before
    /// it (the likeliest cause: that deadline fenced the group).
    pub(super) fn clean_failure_id(&self, subject: Subject) -> &'static str {
        if subject.operation().is_some() && self.local_deadline && !self.fenced {
            "RET-8"
        } else {
            value_id(subject)
        }
    }

    /// A failure of clean work (submission `index`): usually
    /// [`Self::clean_failure_id`]'s invariant, RET-2 on a dropped lane. But when a fault injected
    /// into another submission has not shown there, the fault may have
    /// landed here instead, and the value invariant would be the wrong one
    /// to blame. The fault instrument fails "the next native work item on
    /// the executor" it was armed on: when the observer shows the faulted
    /// submission on another lane did not fail, the two lanes share one
    /// queue (SUB-1: forked lanes are independent). On the same lane, or
    /// without an observer to tell, the kit names no invariant: a lazy
    /// launch or the instrument's own reading of "next" would do the same.
    pub(super) fn clean_failure(&self, index: usize, message: String) -> Breach {
        let record = &self.model.subs[index];
        let unshown = |k: usize| {
            let other = &self.model.subs[k];
            k != index
                && other.faulted
                && !other.error_seen
                && self.observer_state(k) != Some(WorkState::Failed)
        };
        let Some(other) = (0..self.model.subs.len()).find(|&k| unshown(k)) else {
            // Its lane's executor was dropped while it was queued: the
            // completion must keep the executor alive until it ends (RET-2).
            if self.dropped(record.lane) {
                return breach(
                    "RET-2",
                    format!("{message}; its lane's executor was dropped while it was queued (the completion must keep it alive)"),
                );
            }
            return breach(self.clean_failure_id(record.subject), message);
        };
        let lane = self.model.subs[other].lane;
        let observed = self.observer_state(other).is_some();
        if observed && lane != record.lane {
            return breach(
                "SUB-1",
                format!(
                    "{message}; the fault injected into submission {other} on lane {lane} did not fail it                      (observer: {:?}): it failed this work on lane {} instead, so the two lanes share one queue",
                    self.observer_state(other),
                    record.lane
                ),
            );
        }
        Breach {
            id: None,
            message: format!(
                "{message}; the fault injected into submission {other} (lane {lane}) has not shown there                  ({}), so it may have landed on this work: a lazily launched submission or the fault                  instrument's reading of \"the next native work item\" would do this; {}",
                match self.observer_state(other) {
                    Some(state) => format!("observer: {state:?}"),
                    None => "no observer".into(),
                },
                super::blame::UNPLACED_FAULT
            ),
        }
    }

    /// Whether the observer says submission `index`'s work has ended.
    pub(super) fn observed_ended(&self, index: usize) -> bool {
        self.observer_state(index)
            .is_some_and(WorkState::is_terminal)
    }

    /// `Op::Submit`: the driver's standard submission on `lane`, kept pending
    /// by a hold (local work) or the late peer (operations).
    pub(super) fn submit(&mut self, work: Work, lane: u8, fault: bool) -> Result<bool, Breach> {
        let Some((driver, driver_index, vary)) = self.driver(work) else {
            return Ok(false);
        };
        let work = work.normalized();
        let must_fail = vary.and(work.must_fail());
        let subject = driver.subject;
        if subject.operation().is_some() && self.model.poisoned() {
            return Ok(false);
        }
        let lane = match subject.operation() {
            Some(_) => self
                .model
                .group_lane(|i| self.observed_ended(i))
                .unwrap_or(usize::from(lane) % self.lanes()),
            None => usize::from(lane) % self.lanes(),
        };
        if self.dropped(lane) {
            return Ok(false);
        }
        let faulted = fault
            && self.instruments.fault
            && self
                .model
                .fault_lands_here(lane, |i| self.observed_ended(i))
            && self
                .ctx
                .harness()
                .inject_fault(self.ctx.state(), self.lane(lane));
        let via = match driver.pending {
            PendingVia::Hold if self.instruments.hold => Via::Hold,
            PendingVia::Hold | PendingVia::Lazy => Via::Unheld,
            PendingVia::LatePeer | PendingVia::PeerFed => Via::LatePeer,
        };
        let what = format!("submission {}", self.model.subs.len());
        let round = self.model.rounds.len();
        if subject.operation().is_some() {
            self.plan.set(round, work);
        }
        let submitted = match (via, vary) {
            (Via::Unheld, _) => (driver.submit)(self.ctx, self.lane(lane), matrix::Load::Light)
                .map(|submitted| Live::new(None, Some(submitted), driver_index)),
            (Via::Hold | Via::LatePeer, None) => driver
                .pending_on(self.ctx, self.lane(lane))
                .map(|pending| Live::new(Some(pending), None, driver_index)),
            (Via::Hold | Via::LatePeer, Some(vary)) => driver
                .pending_with(self.ctx, self.lane(lane), |ctx, executor| {
                    vary(ctx, executor, work)
                })
                .map(|pending| Live::new(Some(pending), None, driver_index)),
        };
        let mut live = match submitted {
            Ok(live) => live,
            // A tensor the harness cannot make: nothing was submitted.
            Err(Finding::NotSupported(_)) => return Ok(false),
            // Work that must fail may be refused at submission (a fault
            // armed for it then stays armed for the lane's next work).
            Err(_) if must_fail.is_some() => {
                if faulted {
                    self.model.refused(lane, subject.operation().is_some());
                }
                return Ok(true);
            }
            Err(finding) => return self.refused(finding, subject, lane, faulted, &what),
        };
        if self.instruments.observer {
            live.observer = live
                .completion(HandleState::Held)
                .and_then(|completion| self.ctx.harness().observer(completion.as_ref()));
        }
        let outputs_held = live.verify.is_some();
        self.model.submit(NewSubmission {
            subject,
            lane,
            via,
            // A broadcast from rank 0 needs no peer's part (see the model).
            needs_peer: via == Via::LatePeer && work != Work::Broadcast { root: 0 },
            faulted,
            must_fail,
            outputs_held,
        });
        self.live.push(live);
        self.stats.submissions += 1;
        self.settle();
        Ok(true)
    }

    /// A submission returned `Err`: a divergence, unless a fault was armed
    /// (a backend may report it at submission); then the lane's later work,
    /// and the group, may fail.
    pub(super) fn refused(
        &mut self,
        finding: Finding,
        subject: Subject,
        lane: usize,
        faulted: bool,
        what: &str,
    ) -> Result<bool, Breach> {
        let collective = subject.operation().is_some();
        match finding {
            Finding::Violation(_) if faulted => {
                self.model.refused(lane, collective);
                Ok(true)
            }
            // After a bounded wait left a round unfinished, a backend may
            // refuse new work on the group: no more collectives.
            _ if collective && self.fenced => {
                self.model.refused(lane, true);
                Ok(true)
            }
            // Only local dependencies were left unfinished: they select no
            // group, so their deadline must not fence it (RET-8).
            Finding::Violation(message) | Finding::Inconclusive(message)
                if collective && self.local_deadline =>
            {
                Err(breach("RET-8", format!("{subject} ({what}) was refused after a bounded wait on local dependencies ended at its deadline (no collective was left unfinished): {message}")))
            }
            finding => Err(from_finding(
                finding,
                value_id(subject),
                &format!("{subject} ({what}) failed with no fault injected"),
            )),
        }
    }

    /// `Op::Release`: lets the work complete (a late peer `delay` later),
    /// then settles (see [`Options::settle`](super::Options::settle)).
    pub(super) fn release_and_settle(&mut self, index: usize, delay: Duration) -> bool {
        if let Some(round) = self.model.subs[index].round {
            self.plan.delay(round, delay);
        }
        let released = self.release(index);
        self.settle();
        released
    }

    /// Settles after a submission or release (see
    /// [`Options::settle`](super::Options::settle)), by events where the
    /// harness gives them: with an observer, until every submission the
    /// model says will finish by itself (released, or never held) is
    /// observed ended (at most the watchdog's limit), after giving the lanes
    /// a turn to pick up new work; without one, by sleeping `settle`.
    pub(super) fn settle(&self) {
        let settle = self.options.settle;
        if settle.is_zero() {
            return;
        }
        if !self.instruments.observer {
            self.scheduler.sleep(settle);
            return;
        }
        let statuses = self.model.statuses();
        let due: Vec<usize> = (0..self.live.len())
            .filter(|&index| {
                statuses[index].due && self.observer_state(index) == Some(WorkState::Live)
            })
            .collect();
        for _ in 0..LANE_TURNS {
            self.scheduler.yield_now();
        }
        // Bounded by the watchdog, not by `settle`: work the model says will
        // finish by itself does, however loaded the machine (a bound of its
        // own would let a late lane hide a defect from this replay only).
        soon(&*self.scheduler, self.options.limit, || {
            due.iter().all(|&index| self.observed_ended(index))
        });
    }

    /// Lets the work complete: releases the hold or lets the peer join.
    pub(super) fn release(&mut self, index: usize) -> bool {
        if self.model.subs[index].released {
            return false;
        }
        if let Some(pending) = &mut self.live[index].pending {
            pending.release();
        }
        if let Some((round, fate)) = self.model.release(index) {
            self.publish(round, fate, self.live[index].driver);
        }
        true
    }

    /// Tells the late peer a round's fate.
    pub(super) fn publish(&self, round: usize, fate: Fate, driver: usize) {
        match fate {
            Fate::Joined => self.plan.join(round, driver),
            Fate::Skipped => self.plan.skip(round),
            Fate::Unreleased => {}
        }
    }

    /// Rank 0 gave up on `round` (torn down): poison the group, skip every
    /// round not joined yet, and have the peer tear down any it joined.
    pub(super) fn give_up(&mut self, round: usize) {
        self.model.poison(round);
        for later in round..self.model.rounds.len() {
            if self.model.skip(later) {
                self.plan.skip(later);
            } else {
                self.plan.abandon(later);
            }
        }
    }
}
