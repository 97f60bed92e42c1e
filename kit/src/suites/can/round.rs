//! Rounds: one pending submission on the subject rank whose completion is
//! taken out and waited on with a bound (`wait_bounded`), with the
//! observer, liveness probes and ledger snapshot the harness provides, and
//! what the round does afterwards (release, drain, keep natively cancelled
//! late-peer rounds until the case ends). Shared by CAN-1..9; also the
//! rounds on finished work of CAN-1 and CAN-8 ([`finished_work_yields_completed`]).

use std::time::{Duration, Instant};

use eredu_core::BoundedCompletionOutcome::{Completed, DeadlineExceeded};
use eredu_core::CompletionCancellationMode;
use eredu_core::CompletionCancellationMode::NativeCancel;

use super::modes::policy;
use super::outcome::{describe, shown, Waited};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Harness, HoldGuard, Instruments, Ledger, Observer, Probe, WorkState};
use crate::matrix::{wait_within, Driver, Handle, Pending, PendingVia, Subject};
use crate::suites::common::{completed_value, needs, settle, take_probes};
use crate::world::RankCtx;

/// What [`Round::seen`] reads: liveness probes, the observer and the ledger.
pub(super) const DISPOSITION: Instruments = needs::PROBE.and(needs::OBSERVER).and(needs::LEDGER);

/// What a round adds to the driver's standard pending submission.
#[derive(Clone, Copy, Default)]
pub(super) struct Setup {
    /// Inject a fault into the subject's executor before submitting.
    pub(super) fault: bool,
    /// Also hold the subject's executor (late-peer subjects: an injected
    /// error is then published while the work is still live).
    pub(super) hold: bool,
}

/// One pending submission on the subject rank, its completion taken out.
pub(super) struct Round<'c, 'w, H: Harness> {
    pub(super) subject: Subject,
    pub(super) via: PendingVia,
    pub(super) ctx: &'c RankCtx<'w, H>,
    pub(super) pending: Pending<'c, 'w, H>,
    pub(super) completion: Option<Handle<H>>,
    pub(super) observer: Option<Observer>,
    /// Input and output storages; the caller holds no handle on them.
    pub(super) probes: Vec<Probe>,
    /// The ledger just before submission (when the harness has one).
    pub(super) before: Option<Ledger>,
    pub(super) hold: Option<HoldGuard>,
    /// Whether the round let its work complete (hold released, late peers
    /// let in).
    pub(super) released: bool,
    /// Whether its `wait_bounded` reported `DeadlineExceeded { NativeCancel }`.
    pub(super) natively_cancelled: bool,
}

/// Observations made together, right after `wait_bounded` returned.
pub(super) struct Seen {
    /// The observer's state, read first.
    pub(super) state: WorkState,
    /// The observer's state read again, after the probes and the ledger.
    pub(super) state_after: WorkState,
    pub(super) live_probes: usize,
    pub(super) probes: usize,
    pub(super) ledger: Ledger,
    pub(super) before: Ledger,
    /// Whether the work was still surely pending after every reading.
    pub(super) pending: bool,
    pub(super) via: PendingVia,
}

impl Seen {
    /// Whether the work was live during every reading.
    pub(super) fn live_throughout(&self) -> bool {
        self.state == WorkState::Live && self.state_after == WorkState::Live
    }
}

impl<'c, 'w, H: Harness> Round<'c, 'w, H> {
    pub(super) fn start(
        ctx: &'c RankCtx<'w, H>,
        driver: Driver<H>,
        setup: Setup,
    ) -> Result<Self, Finding> {
        let stand_in = stand_in(ctx)?;
        let before = ctx.optional_ledger();
        if setup.fault {
            ctx.inject_fault(ctx.executor())?;
        }
        let hold = if setup.hold {
            Some(ctx.hold(ctx.executor())?)
        } else {
            None
        };
        let mut pending = driver.pending(ctx)?;
        let inputs = pending.submitted.input_probes.len();
        let probes = take_probes(&mut pending.submitted);
        // The caller keeps no handle on the outputs either.
        drop(pending.submitted.verify.take());
        let held = !setup.fault || setup.hold || driver.pending == PendingVia::Hold;
        if held {
            // Work that may end alone (a sender, a root) is pending only
            // while the backend says so.
            let certain =
                hold.is_some() || (driver.pending != PendingVia::Lazy && !pending.submitted.alone);
            crate::suites::common::retained_at_submission(
                ctx,
                &pending.submitted,
                (&probes, inputs),
                driver.subject,
                certain,
            )?;
        }
        let observer = ctx.optional_observer(pending.submitted.completion.as_ref());
        let completion = std::mem::replace(&mut pending.submitted.completion, stand_in);
        Ok(Self {
            subject: driver.subject,
            via: driver.pending,
            ctx,
            pending,
            completion: Some(completion),
            observer,
            probes,
            before,
            hold,
            released: false,
            natively_cancelled: false,
        })
    }

    /// A round whose work is to complete before the call: light work, even
    /// where lazy work keeps the subject pending (it need not be pending, and
    /// lazy work would only make the round slow). One-rank subjects only
    /// have lazy work; letting their absent late peers "join" is a no-op.
    pub(super) fn start_finished(
        ctx: &'c RankCtx<'w, H>,
        driver: Driver<H>,
    ) -> Result<Self, Finding> {
        let light = match driver.pending {
            PendingVia::Lazy => Driver {
                pending: PendingVia::LatePeer,
                ..driver
            },
            PendingVia::Hold | PendingVia::LatePeer | PendingVia::PeerFed => driver,
        };
        Self::start(ctx, light, Setup::default())
    }

    pub(super) fn completion(&self) -> Result<&Handle<H>, Finding> {
        self.completion
            .as_ref()
            .ok_or_else(|| Finding::Harness("the round's completion was already consumed".into()))
    }

    /// Lets the work complete: releases the hold(s) and lets late peers join.
    pub(super) fn release(&mut self) {
        drop(self.hold.take());
        self.pending.release();
        self.released = true;
    }

    /// After a `NativeCancel` teardown: lets the subject's executor run again
    /// (releases the holds), but lets no late peer join the cancelled round.
    pub(super) fn unhold(&mut self) {
        drop(self.hold.take());
        // Peer-fed local work: the reduction that fed it is no cancelled
        // collective, and its peer may join (the executor's queue drains).
        if self.via != PendingVia::LatePeer {
            self.pending.release();
            self.released = true;
        }
    }

    /// Whether the work is certainly still pending as the round left it: not
    /// released, lazy work within its known while, and not ended on its own
    /// (`Cancelled` by the bounded wait under test does not count as ended).
    pub(super) fn surely_pending(&self) -> bool {
        self.pending.surely_pending()
    }

    /// How long released work may take to complete.
    pub(super) fn completes_within(&self) -> Duration {
        self.pending.submitted.completes_within()
    }

    /// Releases the work and waits (bounded) until it completed: a setup
    /// step, inconclusive when it fails.
    pub(super) fn complete_before_waiting(&mut self) -> Check {
        self.release();
        let limit = self.completes_within();
        wait_within(self.completion()?, limit).map_err(|error| {
            crate::check::setup(format!(
                "{}: released work did not complete before the bounded wait: {error}",
                self.subject
            ))
        })
    }

    /// Gives pending work time to start, so a short deadline cancels started work.
    pub(super) fn let_start(&self, timeout: Duration) {
        if timeout < slack::SETTLE {
            settle();
        }
    }

    /// Calls `wait_bounded`: the outcome, how long the call took, and whether
    /// the work was still surely pending when it returned.
    pub(super) fn wait_bounded(
        &mut self,
        timeout: Duration,
        mode: CompletionCancellationMode,
    ) -> Result<Waited, Finding> {
        let policy = policy(timeout, mode)?;
        let completion = self.completion.take().ok_or_else(|| {
            Finding::Harness("the round's completion was already consumed".into())
        })?;
        let started = Instant::now();
        let outcome = completion.wait_bounded(self.ctx, policy);
        self.natively_cancelled = matches!(
            outcome,
            Some(Ok(DeadlineExceeded {
                cancellation: NativeCancel
            }))
        );
        let elapsed = started.elapsed();
        let pending = self.surely_pending();
        let alone = self.pending.submitted.alone;
        let outcome = outcome.ok_or_else(|| {
            Finding::NotSupported(format!("{}: completion has no bounded wait", self.subject))
        })?;
        Ok(Waited {
            outcome,
            timeout,
            mode,
            elapsed,
            pending,
            alone,
        })
    }

    pub(super) fn observer(&self) -> Result<&Observer, Finding> {
        self.observer.as_ref().ok_or_else(|| {
            Finding::NotSupported("the harness provides no completion observer".into())
        })
    }

    /// The ledger from just before submission.
    pub(super) fn before(&self) -> Result<Ledger, Finding> {
        self.before
            .ok_or_else(|| Finding::NotSupported("the harness provides no resource ledger".into()))
    }

    /// Observer state, probes and ledger, read together; the state is read
    /// before and after the others, then whether the work is surely pending.
    pub(super) fn seen(&self) -> Result<Seen, Finding> {
        let observer = self.observer()?;
        let before = self.before()?;
        let state = observer.state();
        let live_probes = self.probes.iter().filter(|probe| probe.is_live()).count();
        let ledger = self.ctx.ledger()?;
        let state_after = observer.state();
        Ok(Seen {
            state,
            state_after,
            live_probes,
            probes: self.probes.len(),
            ledger,
            before,
            pending: self.surely_pending(),
            via: self.via,
        })
    }

    /// Releases the work and waits until it is terminal (seen by the
    /// observer, or without one, by the executor completing new work), so the
    /// next round starts clean. Not getting there is a setup failure: an
    /// earlier round left the executor stalled.
    pub(super) fn drain(mut self) -> Check {
        self.release();
        let limit = self.completes_within();
        if !self.pending.await_late_peers(limit) {
            return Err(crate::check::setup(format!(
                "{}: an earlier round's late peers had not finished their part {limit:?} after its release",
                self.subject
            )));
        }
        let Some(observer) = &self.observer else {
            return executor_drained(self.ctx, self.subject, limit);
        };
        if eventually(limit, || observer.state().is_terminal()) {
            Ok(())
        } else {
            Err(crate::check::setup(format!(
                "{}: an earlier round's work was still {:?} {limit:?} after its release",
                self.subject,
                observer.state()
            )))
        }
    }

    /// After `wait_bounded` under `mode`: quarantined (or otherwise
    /// unfinished) work is released and drained; natively cancelled work on a
    /// late-peer subject is kept unreleased in `kept` until the case ends. A
    /// late-peer round under `NativeCancel` that the backend did not report
    /// natively cancelled (an `Err`, another mode) may still be live, e.g.
    /// quarantined, and may fence the group until it completes: its late
    /// peers are let in, and their part waited for, without blame (it may
    /// also have been torn down, and a peer's part then ends on its own).
    pub(super) fn dispose(
        mut self,
        mode: CompletionCancellationMode,
        kept: &mut Vec<Self>,
    ) -> Check {
        match (mode, self.via) {
            (NativeCancel, PendingVia::LatePeer) if self.natively_cancelled => {
                kept.push(self);
                Ok(())
            }
            (NativeCancel, via) if via.late_peers() => {
                self.release();
                let _ = self.pending.await_late_peers(slack::RELEASE * 2);
                Ok(())
            }
            _ => self.drain(),
        }
    }
}

/// A completed completion standing in for a taken one. It evaluates one
/// materialised value (not zero: empty local work is EXC-10's subject).
fn stand_in<H: Harness>(ctx: &RankCtx<'_, H>) -> Result<Handle<H>, Finding> {
    completed_value(ctx, slack::RELEASE, || {
        "the completed stand-in of a round (is the executor stalled by an earlier round?)".into()
    })
}

/// Without an observer: waits until the executor completes new work, so
/// what an earlier round left on it has drained.
fn executor_drained<H: Harness>(ctx: &RankCtx<'_, H>, subject: Subject, limit: Duration) -> Check {
    completed_value(ctx, limit, || {
        format!("{subject}: after an earlier round was released, the executor was not drained")
    })
    .map(drop)
}

/// Waits with `wait_bounded(timeout, mode)` on fresh pending work (first
/// given time to start if the timeout is shorter than [`slack::SETTLE`]),
/// then disposes of the round.
pub(super) fn wait_on_pending<'c, 'w, H: Harness>(
    ctx: &'c RankCtx<'w, H>,
    driver: Driver<H>,
    timeout: Duration,
    mode: CompletionCancellationMode,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Result<Waited, Finding> {
    let mut round = Round::start(ctx, driver, Setup::default())?;
    round.let_start(timeout);
    let waited = round.wait_bounded(timeout, mode)?;
    round.dispose(mode, kept)?;
    Ok(waited)
}

/// How work came to be finished before `wait_bounded` was called on it.
#[derive(Clone, Copy)]
pub(super) enum Finished {
    /// It was released and completed before the call.
    BeforeTheCall,
    /// Its late peers were released just before the call (late-peer
    /// subjects only: held work could never be released during the wait).
    JustReleased,
}

/// CAN-1, CAN-8: `wait_bounded(timeout, mode)` on work that has finished
/// (or, `JustReleased`, is about to) yields `Ok(Completed)`.
pub(super) fn finished_work_yields_completed<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
    timeout: Duration,
    mode: CompletionCancellationMode,
    finished: Finished,
) -> Check {
    let mut round = Round::start_finished(ctx, driver)?;
    let work = match finished {
        Finished::BeforeTheCall => {
            round.complete_before_waiting()?;
            "work that had completed before the call"
        }
        Finished::JustReleased => {
            round.release();
            "work whose late peers were just released"
        }
    };
    let waited = round.wait_bounded(timeout, mode)?;
    ensure(matches!(waited.outcome, Ok(Completed)), || {
        format!(
            "{}: wait_bounded({}, {mode:?}) on {work} yielded {}, expected Ok(Completed)",
            driver.subject,
            shown(timeout),
            describe(&waited.outcome)
        )
    })
}
