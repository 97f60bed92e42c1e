//! CAN: bounded completion and cancellation teardown (safety).
//!
//! `wait_bounded` observes exact completion until its deadline, then applies
//! the policy's disposition: `NativeCancel` returns only after native teardown
//! has finished; `QuarantineUntilComplete` hands the live work and everything
//! it retains to an owner that releases them after exact completion. An `Err`
//! carries the same obligation. These rows run on every completion with a
//! bounded wait (local dependencies and every claimed operation), once per
//! cancellation mode the backend claims. A mode it does not claim
//! (`supports_cancellation` is false) is not a missing instrument: that part
//! does not apply, and the case passes on its claimed parts, with a note
//! naming the part that did not apply ([`each_mode`]). CAN-5 (NativeCancel
//! only) and CAN-6 (quarantine only) are not-supported when their one mode is
//! unclaimed: nothing of them applies.
//!
//! Pending work. The driver keeps work pending: by the hold, by a late peer,
//! or (local subjects of a harness without the hold) by the backend's own lazy
//! work, which is certainly pending only until a known instant
//! ([`crate::lazy`]). Every check that rests on "the work could not have
//! completed" records whether the work was still surely pending right after
//! `wait_bounded` returned ([`Waited::pending`]) or after its observations
//! ([`Seen::pending`]). An outcome that would be a violation, or would leave
//! nothing to check, only because lazy work may have finished is an
//! inconclusive setup finding: the runner retries with more work. A setup
//! step that does not reach its precondition (a stand-in that does not
//! complete, an earlier round that does not drain, an executor stalled by an
//! earlier round) is inconclusive too, never a violation of the case's
//! invariant; only what the row's invariant states is a violation.
//!
//! Choreography. Every round takes the completion out of its [`Pending`] (a
//! completed stand-in takes its place), drops every caller-side handle, and
//! keeps an observer, liveness probes and a ledger snapshot from before
//! submission (those the harness provides). Quarantined rounds are released
//! and drained before the next round starts. Rounds cancelled natively on
//! late-peer subjects are kept unreleased until the case ends, so no peer ever
//! joins a cancelled collective while a later round waits for it (a cancelled
//! receive would otherwise leave the peer's message for the next one); the
//! quarantine part of a case therefore always runs first. Work about to be
//! cancelled with a deadline shorter than [`slack::SETTLE`] is first given
//! that long to start. Rounds whose work must complete before the call use
//! light work even where lazy work keeps the subject pending.

use std::time::{Duration, Instant};

use eredu_core::{BoundedCompletionOutcome, BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::CommunicationBackend;

use super::common::{bounded, completed_value, needs, settle, supported, take_probes, Parts};
use crate::case::{Body, Row};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{
    Backend, Harness, HoldGuard, Instruments, Ledger, Observer, Probe, WorkState,
};
use crate::matrix::{wait_within, Driver, Handle, Pending, PendingVia, Subject};
use crate::world::RankCtx;

use BoundedCompletionOutcome::{Completed, DeadlineExceeded};
use CompletionCancellationMode::{NativeCancel, QuarantineUntilComplete as Quarantine};

/// Both modes, quarantine first: its rounds need late peers to join, and
/// natively cancelled rounds are kept unreleased until the case ends.
const MODES: [CompletionCancellationMode; 2] = [Quarantine, NativeCancel];

/// The edge deadlines of CAN-8 used on pending work.
const EDGE_DEADLINES: [Duration; 2] = [Duration::from_nanos(1), Duration::from_micros(500)];

/// What [`Round::seen`] reads: liveness probes, the observer and the ledger.
const DISPOSITION: Instruments = needs::PROBE.and(needs::OBSERVER).and(needs::LEDGER);

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "CAN-1",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::MatrixPartDone(completion_is_reported_exactly::<H>),
        },
        Row {
            id: "CAN-2",
            applies: bounded,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::MatrixPartDone(deadline_is_honoured::<H>),
        },
        Row {
            id: "CAN-3",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::MatrixPartDone(reported_mode_is_the_policy_mode::<H>),
        },
        Row {
            id: "CAN-4",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::MatrixPartDone(supported_modes_are_honoured::<H>),
        },
        Row {
            id: "CAN-5",
            applies: bounded,
            requires: DISPOSITION,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(native_cancel_finishes_teardown::<H>),
        },
        Row {
            id: "CAN-6",
            applies: bounded,
            requires: DISPOSITION,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(quarantine_retains_until_completion::<H>),
        },
        Row {
            id: "CAN-7",
            applies: bounded,
            // Its rounds hold the subject's executor (late-peer subjects too).
            requires: DISPOSITION.and(needs::FAULT).and(needs::HOLD),
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(errors_never_drop_live_work::<H>),
        },
        Row {
            id: "CAN-8",
            applies: bounded,
            // The CAN-5..7 dispositions are observed when DISPOSITION is present.
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(edge_deadlines_are_safe::<H>),
        },
        Row {
            id: "CAN-9",
            applies: bounded,
            requires: needs::FAULT.and(needs::OBSERVER),
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(failed_work_is_an_error::<H>),
        },
    ]
}

// ---------------------------------------------------------------------------
// Modes and policies.

fn policy(
    timeout: Duration,
    mode: CompletionCancellationMode,
) -> Result<BoundedCompletionWait, Finding> {
    BoundedCompletionWait::new(timeout, mode)
        .map_err(|error| Finding::Harness(format!("bounded wait policy of {timeout:?}: {error}")))
}

/// Runs `part` for each mode the backend supports, quarantine first. A
/// violation (or an inconclusive part) ends the case; a part with nothing to
/// check makes the case not-supported once every other part passed. A mode
/// the backend does not claim (`supports_cancellation` is false) is no
/// missing instrument: its part does not apply, and a case whose claimed
/// parts all passed is a pass with a note naming the part that did not
/// apply. Only a backend that claims no mode at all leaves nothing to check.
fn each_mode<H: Harness>(
    ctx: &RankCtx<'_, H>,
    part: impl FnMut(CompletionCancellationMode) -> Check,
) -> Check {
    each_claimed_mode(supported::<H>, |note| ctx.note(note), part)
}

/// [`each_mode`] with the claim and the note taken as arguments.
fn each_claimed_mode(
    claimed: impl Fn(CompletionCancellationMode) -> bool,
    mut note: impl FnMut(String),
    mut part: impl FnMut(CompletionCancellationMode) -> Check,
) -> Check {
    let mut parts = Parts::default();
    let mut unclaimed = Vec::new();
    let mut not_applied = Vec::new();
    for mode in MODES {
        if !claimed(mode) {
            unclaimed.push(mode);
            continue;
        }
        match part(mode) {
            Err(Finding::NotSupported(reason)) if reason.starts_with(DID_NOT_APPLY) => {
                not_applied.push(reason);
            }
            outcome => parts.run(outcome)?,
        }
    }
    if unclaimed.len() == MODES.len() {
        return Err(Finding::NotSupported(
            "supports_cancellation is false for both QuarantineUntilComplete and NativeCancel: no bounded wait to check"
                .into(),
        ));
    }
    if unclaimed.len() + not_applied.len() == MODES.len() {
        return Err(crate::check::setup(format!(
            "no claimed mode could be decided: {}",
            not_applied.join("; ")
        )));
    }
    parts.end()?;
    for mode in unclaimed {
        note(format!(
            "the {mode:?} part did not apply: supports_cancellation({mode:?}) is false; every claimed mode was checked"
        ));
    }
    for reason in not_applied {
        note(format!("the NativeCancel {reason}"));
    }
    Ok(())
}

/// Why the cases of `id` are not-supported on this backend before they run:
/// CAN-5 is all NativeCancel and CAN-6 all quarantine, so a backend that
/// does not claim that mode (`supports_cancellation` is false) leaves them
/// nothing to check, as an unclaimed operation does. `None` for every other
/// ID (their unclaimed modes only make parts not apply, see [`each_mode`]).
pub(crate) fn unclaimed_mode<H: Harness>(id: &str) -> Option<String> {
    let mode = match id {
        "CAN-5" => NativeCancel,
        "CAN-6" => Quarantine,
        _ => return None,
    };
    (!supported::<H>(mode)).then(|| {
        format!(
            "{mode:?} is not claimed by this backend (supports_cancellation({mode:?}) is false)"
        )
    })
}

type Outcome = Result<BoundedCompletionOutcome, String>;

/// Whether `outcome` is `Ok(DeadlineExceeded { cancellation: mode })`.
fn exceeded(outcome: &Outcome, mode: CompletionCancellationMode) -> bool {
    matches!(outcome, Ok(DeadlineExceeded { cancellation }) if *cancellation == mode)
}

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Ok(outcome) => format!("Ok({outcome:?})"),
        Err(error) => format!("Err({error})"),
    }
}

/// A timeout as messages show it (`Duration::MAX` by name).
fn shown(timeout: Duration) -> String {
    if timeout == Duration::MAX {
        "Duration::MAX".into()
    } else {
        format!("{timeout:?}")
    }
}

/// Why pending work could not have completed, as messages say it.
fn why_pending(via: PendingVia) -> &'static str {
    match via {
        PendingVia::Hold => "its hold was not released",
        PendingVia::LatePeer => "its late peer had not joined",
        PendingVia::PeerFed => {
            "the sum reduction whose output it reads had a late peer that had not joined"
        }
        PendingVia::Lazy => "its lazy work was certainly still running",
    }
}

/// Why work kept pending may have ended before a check's observation.
fn ended_early(via: PendingVia) -> &'static str {
    match via {
        PendingVia::Lazy => "the lazy work that kept the subject pending may have finished",
        PendingVia::Hold | PendingVia::LatePeer | PendingVia::PeerFed => {
            "the observer reports that the work ended on its own although the kit kept it pending (the \
             operation's own invariant answers for that)"
        }
    }
}

/// The inconclusive finding for an outcome that tells nothing because the
/// work may have ended on its own before `call` returned.
/// Why a disposition check has nothing to check when `call` did not return
/// `DeadlineExceeded { cancellation: mode }`: the work finished first
/// (inconclusive), or the backend answered otherwise (CAN-3 and CAN-4 judge
/// that; here it is not-supported).
fn nothing_to_dispose<H: Harness>(
    driver: Driver<H>,
    mode: CompletionCancellationMode,
    call: &str,
    waited: &Waited,
    what: &str,
) -> Finding {
    if !waited.pending {
        return finished_early(driver.subject, driver.pending, call, waited);
    }
    Finding::NotSupported(format!(
        "{}: {call} yielded {}, not DeadlineExceeded {{ cancellation: {mode:?} }}: no {what} to check (see CAN-3, \
         CAN-4)",
        driver.subject,
        describe(&waited.outcome)
    ))
}

fn finished_early(subject: Subject, via: PendingVia, call: &str, waited: &Waited) -> Finding {
    if completed_in_teardown(waited) {
        return did_not_apply(format!(
            "{subject}: {call} yielded Ok(Completed) {:?} after it was called, not at its deadline: the \
             backend let the work run to its end instead of stopping it (its teardown of such work is not \
             native cancellation), and {}, so Completed may be exact; the NativeCancel part could not be \
             decided on this work (CAN-2 reports the return time)",
            waited.elapsed,
            ended_early(via)
        ));
    }
    crate::check::setup(format!(
        "{subject}: {call} yielded {}, but {} before the call returned",
        describe(&waited.outcome),
        ended_early(via)
    ))
}

/// Whether a NativeCancel wait returned `Ok(Completed)` well after its
/// deadline on work the kit cannot vouch was still pending then: the
/// backend ran the work to its end during teardown (it cannot stop it), and
/// the completion may be exact. A backend that answers `Completed` *at* the
/// deadline gets no such benefit of the doubt.
fn completed_in_teardown(waited: &Waited) -> bool {
    waited.mode == NativeCancel
        && matches!(waited.outcome, Ok(Completed))
        && !waited.pending
        && waited.elapsed > waited.timeout.saturating_add(slack::OVERRUN)
}

/// Marks a part's finding as a part that did not apply (see [`each_mode`]).
const DID_NOT_APPLY: &str = "part did not apply: ";

/// The finding of a part that did not apply: noted, never a verdict.
fn did_not_apply(reason: String) -> Finding {
    Finding::NotSupported(format!("{DID_NOT_APPLY}{reason}"))
}

// ---------------------------------------------------------------------------
// Rounds: one pending submission whose completion is waited on with a bound.

/// What a round adds to the driver's standard pending submission.
#[derive(Clone, Copy, Default)]
struct Setup {
    /// Inject a fault into the subject's executor before submitting.
    fault: bool,
    /// Also hold the subject's executor (late-peer subjects: an injected
    /// error is then published while the work is still live).
    hold: bool,
}

/// One pending submission on the subject rank, its completion taken out.
struct Round<'c, 'w, H: Harness> {
    subject: Subject,
    via: PendingVia,
    ctx: &'c RankCtx<'w, H>,
    pending: Pending<'c, 'w, H>,
    completion: Option<Handle<H>>,
    observer: Option<Observer>,
    /// Input and output storages; the caller holds no handle on them.
    probes: Vec<Probe>,
    /// The ledger just before submission (when the harness has one).
    before: Option<Ledger>,
    hold: Option<HoldGuard>,
    /// Whether the round let its work complete (hold released, late peers
    /// let in).
    released: bool,
    /// Whether its `wait_bounded` reported `DeadlineExceeded { NativeCancel }`.
    natively_cancelled: bool,
}

/// What one `wait_bounded` call returned.
struct Waited {
    outcome: Outcome,
    /// The policy's timeout and mode.
    timeout: Duration,
    mode: CompletionCancellationMode,
    /// How long the call took.
    elapsed: Duration,
    /// Whether the work was still surely pending right after the call
    /// returned (always, for held or late-peer work not yet released).
    pending: bool,
}

/// Observations made together, right after `wait_bounded` returned.
struct Seen {
    /// The observer's state, read first.
    state: WorkState,
    /// The observer's state read again, after the probes and the ledger.
    state_after: WorkState,
    live_probes: usize,
    probes: usize,
    ledger: Ledger,
    before: Ledger,
    /// Whether the work was still surely pending after every reading.
    pending: bool,
    via: PendingVia,
}

impl Seen {
    /// Whether the work was live during every reading.
    fn live_throughout(&self) -> bool {
        self.state == WorkState::Live && self.state_after == WorkState::Live
    }
}

impl<'c, 'w, H: Harness> Round<'c, 'w, H> {
    fn start(ctx: &'c RankCtx<'w, H>, driver: Driver<H>, setup: Setup) -> Result<Self, Finding> {
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
            let certain = hold.is_some() || driver.pending != PendingVia::Lazy;
            super::common::retained_at_submission(ctx, &probes, inputs, driver.subject, certain)?;
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
    fn start_finished(ctx: &'c RankCtx<'w, H>, driver: Driver<H>) -> Result<Self, Finding> {
        let light = match driver.pending {
            PendingVia::Lazy => Driver {
                pending: PendingVia::LatePeer,
                ..driver
            },
            PendingVia::Hold | PendingVia::LatePeer | PendingVia::PeerFed => driver,
        };
        Self::start(ctx, light, Setup::default())
    }

    fn completion(&self) -> Result<&Handle<H>, Finding> {
        self.completion
            .as_ref()
            .ok_or_else(|| Finding::Harness("the round's completion was already consumed".into()))
    }

    /// Lets the work complete: releases the hold(s) and lets late peers join.
    fn release(&mut self) {
        drop(self.hold.take());
        self.pending.release();
        self.released = true;
    }

    /// After a `NativeCancel` teardown: lets the subject's executor run again
    /// (releases the holds), but lets no late peer join the cancelled round.
    fn unhold(&mut self) {
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
    fn surely_pending(&self) -> bool {
        self.pending.surely_pending()
    }

    /// How long released work may take to complete.
    fn completes_within(&self) -> Duration {
        self.pending.submitted.completes_within()
    }

    /// Releases the work and waits (bounded) until it completed: a setup
    /// step, inconclusive when it fails.
    fn complete_before_waiting(&mut self) -> Check {
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
    fn let_start(&self, timeout: Duration) {
        if timeout < slack::SETTLE {
            settle();
        }
    }

    /// Calls `wait_bounded`: the outcome, how long the call took, and whether
    /// the work was still surely pending when it returned.
    fn wait_bounded(
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
        let outcome = outcome.ok_or_else(|| {
            Finding::NotSupported(format!("{}: completion has no bounded wait", self.subject))
        })?;
        Ok(Waited {
            outcome,
            timeout,
            mode,
            elapsed,
            pending,
        })
    }

    fn observer(&self) -> Result<&Observer, Finding> {
        self.observer.as_ref().ok_or_else(|| {
            Finding::NotSupported("the harness provides no completion observer".into())
        })
    }

    /// The ledger from just before submission.
    fn before(&self) -> Result<Ledger, Finding> {
        self.before
            .ok_or_else(|| Finding::NotSupported("the harness provides no resource ledger".into()))
    }

    /// Observer state, probes and ledger, read together; the state is read
    /// before and after the others, then whether the work is surely pending.
    fn seen(&self) -> Result<Seen, Finding> {
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
    fn drain(mut self) -> Check {
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
    fn dispose(mut self, mode: CompletionCancellationMode, kept: &mut Vec<Self>) -> Check {
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
fn wait_on_pending<'c, 'w, H: Harness>(
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

/// CAN-1: pending work never yields `Ok(Completed)` while it is surely
/// pending; if it may have finished during `call`, the round tells nothing.
fn not_completed_while_pending(
    subject: Subject,
    via: PendingVia,
    call: &str,
    waited: &Waited,
) -> Check {
    match &waited.outcome {
        Ok(Completed) if waited.pending => Err(Finding::Violation(completed_while_pending(
            subject, via, call,
        ))),
        Ok(Completed) => Err(finished_early(subject, via, call, waited)),
        _ => Ok(()),
    }
}

/// The CAN-1 violation `Completed` on surely pending work is, as messages say it.
fn completed_while_pending(subject: Subject, via: PendingVia, call: &str) -> String {
    format!(
        "{subject}: {call} yielded Ok(Completed) although the work could not have completed ({})",
        why_pending(via)
    )
}

/// How work came to be finished before `wait_bounded` was called on it.
#[derive(Clone, Copy)]
enum Finished {
    /// It was released and completed before the call.
    BeforeTheCall,
    /// Its late peers were released just before the call (late-peer
    /// subjects only: held work could never be released during the wait).
    JustReleased,
}

/// CAN-1, CAN-8: `wait_bounded(timeout, mode)` on work that has finished
/// (or, `JustReleased`, is about to) yields `Ok(Completed)`.
fn finished_work_yields_completed<H: Harness>(
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

// ---------------------------------------------------------------------------
// Disposition checks shared by CAN-5..8.

/// CAN-5: right after `DeadlineExceeded{NativeCancel}` returned, native work is
/// terminal, the probed storages (no caller handle left) are freed, and the
/// ledger counts no more pending work than before the submission.
fn torn_down(seen: &Seen, subject: Subject, after: &str) -> Check {
    ensure(seen.state.is_terminal(), || {
        format!("{subject}: native work was still {:?} right after {after} returned: teardown had not finished", seen.state)
    })?;
    ensure(seen.live_probes == 0, || {
        format!(
            "{subject}: {} of {} probed storages (no caller handle left) were still allocated right after {after} returned: teardown had not released them",
            seen.live_probes, seen.probes
        )
    })?;
    ensure(seen.ledger.pending_work <= seen.before.pending_work, || {
        format!(
            "{subject}: right after {after} returned the ledger counts {} pending work items, {} before the submission: the cancelled work is still live",
            seen.ledger.pending_work, seen.before.pending_work
        )
    })
}

/// CAN-6: while quarantined work is live, everything it retains is alive and
/// the ledger shows it quarantined. Work that ended although it was surely
/// pending is a violation; work that ended when lazy work may have finished
/// leaves nothing to check (inconclusive).
fn retained(seen: &Seen, subject: Subject, after: &str) -> Check {
    if !seen.live_throughout() {
        let state = if seen.state == WorkState::Live {
            seen.state_after
        } else {
            seen.state
        };
        if !seen.pending {
            return Err(crate::check::setup(format!(
                "{subject}: work {after} was {state:?}, but {} by then",
                ended_early(seen.via)
            )));
        }
        return Err(Finding::Violation(format!(
            "{subject}: work {after} was {state:?} although it could not have completed ({})",
            why_pending(seen.via)
        )));
    }
    ensure(seen.live_probes == seen.probes, || {
        format!(
            "{subject}: {} of {} probed storages were freed {after} while the quarantined work was live",
            seen.probes - seen.live_probes,
            seen.probes
        )
    })?;
    ensure(seen.ledger.quarantined > seen.before.quarantined, || {
        format!(
            "{subject}: {after}, live work was not quarantined: the ledger counts {} quarantined completions, {} before",
            seen.ledger.quarantined, seen.before.quarantined
        )
    })
}

/// CAN-7: an `Err` reports terminal work, or live work in the selected disposition.
fn error_disposition(
    seen: &Seen,
    subject: Subject,
    mode: CompletionCancellationMode,
    error: &str,
) -> Check {
    if seen.state.is_terminal() {
        return Ok(());
    }
    match mode {
        NativeCancel => Err(Finding::Violation(format!(
            "{subject}: wait_bounded under NativeCancel returned Err({error}) while native work was still live: it was not torn down first"
        ))),
        Quarantine => retained(seen, subject, &format!("after wait_bounded under QuarantineUntilComplete returned Err({error})")),
    }
}

/// CAN-6 (and RET-7): released quarantined work finishes, then every probed
/// storage is freed and the ledger's quarantine drains. Work that does not
/// finish after its release is a setup failure (nothing to check).
fn released_after_completion<H: Harness>(round: &Round<'_, '_, H>) -> Check {
    let subject = round.subject;
    let observer = round.observer()?;
    let limit = round.completes_within();
    if !eventually(limit, || observer.state().is_terminal()) {
        return Err(crate::check::setup(format!(
            "{subject}: quarantined work was still {:?} {limit:?} after its release, so its release of resources could not be checked",
            observer.state()
        )));
    }
    let freed = eventually(slack::RELEASE_RESOURCES, || {
        round.probes.iter().all(|probe| !probe.is_live())
    });
    ensure(freed, || {
        format!(
            "{subject}: probed storages were still allocated {:?} after the quarantined work finished",
            slack::RELEASE_RESOURCES
        )
    })?;
    let before = round.before()?;
    let mut last = round.ctx.ledger()?;
    let drained = eventually(slack::RELEASE_RESOURCES, || {
        last = round.ctx.ledger().unwrap_or(last);
        last.quarantined <= before.quarantined
    });
    ensure(drained, || {
        format!(
            "{subject}: the ledger still counts {} quarantined completions {:?} after the work finished ({} before)",
            last.quarantined,
            slack::RELEASE_RESOURCES,
            before.quarantined
        )
    })
}

/// CAN-5 (and CAN-8): the executor accepts and completes new work after a
/// teardown. Called once the round's holds are released.
fn executor_still_works<H: Harness>(ctx: &RankCtx<'_, H>, subject: Subject) -> Check {
    // One materialised value (empty local work is EXC-10's subject).
    let value = ctx.tensor(&[1.0], &[1])?;
    let submission =
        Backend::<H>::submit_local_dependencies([&value], ctx.executor()).map_err(|error| {
            Finding::Violation(format!(
                "{subject}: after a NativeCancel teardown the executor refused new work: {error}"
            ))
        })?;
    let policy = policy(slack::RELEASE, NativeCancel)?;
    let outcome = Handle::<H>::Communication(submission.completion)
        .wait_bounded(ctx, policy)
        .unwrap_or_else(|| Err("no bounded wait".into()));
    ensure(matches!(outcome, Ok(Completed)), || {
        format!(
            "{subject}: after a NativeCancel teardown, new local work on the same executor yielded {} within {:?}, expected Ok(Completed)",
            describe(&outcome),
            slack::RELEASE
        )
    })
}

/// After `DeadlineExceeded{NativeCancel}`: the executor, its holds released,
/// accepts and completes new work; then the round is disposed of.
fn after_native_cancel<'c, 'w, H: Harness>(
    mut round: Round<'c, 'w, H>,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Check {
    let (ctx, subject) = (round.ctx, round.subject);
    round.unhold();
    executor_still_works(ctx, subject)?;
    round.dispose(NativeCancel, kept)
}

/// A violation of invariant `id` seen while checking the case's invariant
/// `checking`: recorded for `id` (never the case's verdict), and the case
/// learnt nothing about its own invariant from this round (inconclusive).
fn recorded_for<H: Harness>(
    ctx: &RankCtx<'_, H>,
    id: &str,
    checking: &str,
    message: String,
) -> Finding {
    ctx.attribute(id, message.clone());
    Finding::Inconclusive(format!(
        "{id} violated while checking {checking} (recorded for {id}): {message}"
    ))
}

/// CAN-8: waits on pending work with an edge `timeout` under `mode`, and
/// checks it by what that returned. Black-box: after
/// `DeadlineExceeded{NativeCancel}` the executor completes new work. With
/// `observed` (probes, observer and ledger), also the disposition: CAN-5 for
/// NativeCancel, CAN-6 for quarantine, and an `Err` leaves no live resource
/// dropped (CAN-7). Then disposes of the round. What the edge deadline breaks
/// of CAN-1, CAN-3 or CAN-4 (`Completed`, another mode or `Err` on work still
/// surely pending) is recorded for that invariant; a round that reports
/// `Completed` leaves no disposition to check (inconclusive).
fn edge_round<'c, 'w, H: Harness>(
    mut round: Round<'c, 'w, H>,
    timeout: Duration,
    mode: CompletionCancellationMode,
    observed: bool,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Check {
    let (subject, ctx, via) = (round.subject, round.ctx, round.via);
    round.let_start(timeout);
    let waited = round.wait_bounded(timeout, mode)?;
    let seen = if observed { Some(round.seen()?) } else { None };
    let call = format!("wait_bounded({}, {mode:?}) on pending work", shown(timeout));
    match &waited.outcome {
        Ok(Completed) => {
            let finding = if waited.pending {
                let message = completed_while_pending(subject, via, &call);
                recorded_for(ctx, "CAN-1", "CAN-8", message)
            } else {
                finished_early(subject, via, &call, &waited)
            };
            round.dispose(mode, kept)?;
            Err(finding)
        }
        Ok(DeadlineExceeded { cancellation }) => {
            if *cancellation != mode {
                ctx.attribute(
                    "CAN-3",
                    format!(
                        "{subject}: {call} reported DeadlineExceeded {{ cancellation: {cancellation:?} }}, expected {mode:?}"
                    ),
                );
            }
            // The disposition due is the policy's (the selected one).
            match (mode, &seen) {
                (NativeCancel, seen) => {
                    if let Some(seen) = seen {
                        torn_down(seen, subject, &format!("{call} (DeadlineExceeded)"))?;
                    }
                    after_native_cancel(round, kept)
                }
                (Quarantine, Some(seen)) => {
                    retained(
                        seen,
                        subject,
                        &format!("right after {call} returned DeadlineExceeded"),
                    )?;
                    round.release();
                    released_after_completion(&round)
                }
                (Quarantine, None) => round.dispose(mode, kept),
            }
        }
        Err(error) => {
            if waited.pending {
                ctx.attribute(
                    "CAN-4",
                    format!(
                        "{subject}: supports_cancellation({mode:?}) is true, yet {call} yielded Err({error}) while the work \
                         was certainly pending ({}), expected Ok(DeadlineExceeded {{ cancellation: {mode:?} }})",
                        why_pending(via)
                    ),
                );
            }
            match &seen {
                Some(seen) => {
                    error_disposition(seen, subject, mode, error)?;
                    if mode == Quarantine {
                        round.release();
                        released_after_completion(&round)
                    } else {
                        round.dispose(mode, kept)
                    }
                }
                None => round.dispose(mode, kept),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// CAN-1

/// CAN-1: work that completed before the call yields `Ok(Completed)` under a
/// generous deadline; work still pending at a short deadline never does.
fn completion_is_reported_exactly<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        finished_work_yields_completed(ctx, driver, slack::RELEASE, mode, Finished::BeforeTheCall)?;
        let waited = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        let call = format!(
            "wait_bounded({:?}, {mode:?}) on work that had not finished",
            slack::DEADLINE
        );
        not_completed_while_pending(driver.subject, driver.pending, &call, &waited)
    })
}

// ---------------------------------------------------------------------------
// CAN-2

/// CAN-2: `DeadlineExceeded` never comes before the timeout, and under
/// quarantine the call returns within the timeout plus [`slack::OVERRUN`].
/// A NativeCancel wait returns once teardown has finished, which the
/// contract does not bound: only its lower bound is checked, and a return
/// later than the timeout plus the slack is reported here, once, as a note
/// with the deadline, the return time and the outcome (never a failure, and
/// never a teardown measured on other work subtracted from it).
fn deadline_is_honoured<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        let waited = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        returns_on_time(ctx, driver.subject, &waited)
    })
}

fn returns_on_time<H: Harness>(ctx: &RankCtx<'_, H>, subject: Subject, waited: &Waited) -> Check {
    let (timeout, mode, elapsed) = (waited.timeout, waited.mode, waited.elapsed);
    let call = format!("wait_bounded({timeout:?}, {mode:?}) on pending work");
    if matches!(waited.outcome, Ok(DeadlineExceeded { .. })) {
        ensure(elapsed >= timeout, || {
            format!("{subject}: {call} returned DeadlineExceeded after only {elapsed:?}, before its timeout")
        })?;
    }
    let late = elapsed > timeout + slack::OVERRUN;
    if mode == NativeCancel {
        if late {
            ctx.note(format!(
                "{subject}: {call} returned {} after {elapsed:?}, {:?} past its deadline: NativeCancel returns once \
                 native teardown has finished, which the contract does not bound (when it returned, the backend \
                 reported the work {})",
                describe(&waited.outcome),
                elapsed.saturating_sub(timeout),
                match waited.outcome {
                    Ok(Completed) => "complete",
                    Ok(DeadlineExceeded { .. }) => "torn down",
                    Err(_) => "failed",
                }
            ));
        }
        return Ok(());
    }
    ensure(!late, || {
        format!(
            "{subject}: {call} returned {} after {elapsed:?}, later than the timeout plus {:?} slack",
            describe(&waited.outcome),
            slack::OVERRUN
        )
    })
}

// ---------------------------------------------------------------------------
// CAN-3, CAN-4

/// CAN-3: the cancellation a `DeadlineExceeded` reports is the policy's mode.
fn reported_mode_is_the_policy_mode<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        let waited = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        let call = format!(
            "wait_bounded({:?}, {mode:?}) on pending work",
            slack::DEADLINE
        );
        match &waited.outcome {
            Ok(DeadlineExceeded { cancellation }) => ensure(*cancellation == mode, || {
                format!(
                    "{}: {call} reported DeadlineExceeded {{ cancellation: {cancellation:?} }}, expected {mode:?}",
                    driver.subject
                )
            }),
            _ if !waited.pending => Err(finished_early(driver.subject, driver.pending, &call, &waited)),
            other => Err(Finding::NotSupported(format!(
                "{}: pending work under {mode:?} yielded {}, which reports no cancellation (see CAN-1, CAN-4)",
                driver.subject,
                describe(other)
            ))),
        }
    })
}

/// CAN-4: a mode the backend claims (`supports_cancellation` true) turns
/// pending work into `Ok(DeadlineExceeded { cancellation: mode })`: an `Err`
/// or `Completed` on work still surely pending when the call returned, or
/// another mode, is a violation.
fn supported_modes_are_honoured<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        let waited = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        let call = format!(
            "wait_bounded({:?}, {mode:?}) on pending work",
            slack::DEADLINE
        );
        let other_mode = matches!(waited.outcome, Ok(DeadlineExceeded { .. }));
        if exceeded(&waited.outcome, mode) {
            Ok(())
        } else if !waited.pending && !other_mode {
            Err(finished_early(
                driver.subject,
                driver.pending,
                &call,
                &waited,
            ))
        } else {
            Err(Finding::Violation(format!(
                "{}: supports_cancellation({mode:?}) is true, yet {call} yielded {}{}, expected Ok(DeadlineExceeded {{ cancellation: {mode:?} }})",
                driver.subject,
                describe(&waited.outcome),
                if other_mode {
                    String::new()
                } else {
                    format!(" although the work was certainly still pending ({})", why_pending(driver.pending))
                }
            )))
        }
    })
}

// ---------------------------------------------------------------------------
// CAN-5, CAN-6

/// CAN-5: when `DeadlineExceeded{NativeCancel}` returns, teardown is finished:
/// the work is terminal, its retained storages are freed (the caller holds
/// no handle), the ledger counts it no more, and the executor completes new work.
/// Runs only where NativeCancel is claimed ([`unclaimed_mode`] gates it).
fn native_cancel_finishes_teardown<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    let mut round = Round::start(ctx, driver, Setup::default())?;
    let waited = round.wait_bounded(slack::DEADLINE, NativeCancel)?;
    let seen = round.seen()?;
    let call = format!(
        "wait_bounded({:?}, NativeCancel) on pending work",
        slack::DEADLINE
    );
    if !exceeded(&waited.outcome, NativeCancel) {
        round.dispose(NativeCancel, &mut kept)?;
        return Err(nothing_to_dispose(
            driver,
            NativeCancel,
            &call,
            &waited,
            "teardown",
        ));
    }
    let after = format!(
        "wait_bounded({:?}, NativeCancel) -> DeadlineExceeded",
        slack::DEADLINE
    );
    torn_down(&seen, driver.subject, &after)?;
    after_native_cancel(round, &mut kept)
}

/// CAN-6: after `DeadlineExceeded{QuarantineUntilComplete}` everything the work
/// retains stays alive while it is live, and is released once it completed.
fn quarantine_retains_until_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut round = Round::start(ctx, driver, Setup::default())?;
    let waited = round.wait_bounded(slack::DEADLINE, Quarantine)?;
    if !exceeded(&waited.outcome, Quarantine) {
        round.drain()?;
        let call = format!(
            "wait_bounded({:?}, QuarantineUntilComplete) on pending work",
            slack::DEADLINE
        );
        return Err(nothing_to_dispose(
            driver,
            Quarantine,
            &call,
            &waited,
            "quarantine",
        ));
    }
    let after = "DeadlineExceeded{QuarantineUntilComplete} returned";
    retained(
        &round.seen()?,
        driver.subject,
        &format!("right after {after}"),
    )?;
    settle();
    retained(
        &round.seen()?,
        driver.subject,
        &format!("{:?} after {after}", slack::SETTLE),
    )?;
    round.release();
    released_after_completion(&round)
}

// ---------------------------------------------------------------------------
// CAN-7, CAN-8, CAN-9

/// CAN-7: an `Err` from `wait_bounded` reports terminal work, or comes after
/// live work was put in the selected disposition. A fault is injected before
/// submission, and the work is kept live by its hold (late-peer subjects: by
/// a hold on the subject's executor as well as the late peer), so the error
/// can be published while the work is still live. A backend that publishes
/// the error only once the work ended never returns an error for live work:
/// CAN-7 holds by its design (a pass with a note).
fn errors_never_drop_live_work<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        let setup = Setup {
            fault: true,
            hold: driver.pending.late_peers(),
        };
        let mut round = Round::start(ctx, driver, setup)?;
        // Let the injected error become observable (bounded; never asserted).
        let mut reported = None;
        {
            let completion = round.completion()?;
            eventually(slack::PROMPT, || match completion.is_complete() {
                Ok(false) => false,
                Ok(true) => true,
                Err(error) => {
                    reported = Some(error);
                    true
                }
            });
        }
        let waited = round.wait_bounded(slack::DEADLINE, mode)?;
        let seen = round.seen()?;
        let Err(error) = &waited.outcome else {
            return no_error_for_live_work(round, mode, &waited, &seen, reported, &mut kept);
        };
        error_disposition(&seen, driver.subject, mode, error)?;
        if mode == Quarantine && !seen.state.is_terminal() {
            settle();
            let later = round.seen()?;
            if !later.state.is_terminal() {
                let after = format!(
                    "{:?} after wait_bounded under QuarantineUntilComplete returned Err({error})",
                    slack::SETTLE
                );
                retained(&later, driver.subject, &after)?;
            }
        }
        round.dispose(mode, &mut kept)
    })
}

/// CAN-7 when faulted, held work yielded no `Err`. `DeadlineExceeded` on work
/// that was live with no error published means the backend publishes the
/// injected error only once the work ended: no error path ever sees live
/// work, so CAN-7 holds by design (a pass, with a note saying why, once the
/// fault is seen to have taken effect or the work was torn down). Anything
/// else is another invariant's violation (recorded for it, the case
/// inconclusive) or lazy work that finished early.
fn no_error_for_live_work<'c, 'w, H: Harness>(
    mut round: Round<'c, 'w, H>,
    mode: CompletionCancellationMode,
    waited: &Waited,
    seen: &Seen,
    reported: Option<String>,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Check {
    let (subject, ctx) = (round.subject, round.ctx);
    let call = format!(
        "wait_bounded({:?}, {mode:?}) on held work with an injected fault",
        slack::DEADLINE
    );
    let elsewhere = |id: &str, message: String| recorded_for(ctx, id, "CAN-7", message);
    if let Some(error) = reported {
        return Err(elsewhere(
            "EXC-6",
            format!(
                "{subject}: is_complete() reported Err({error}), then {call} yielded {}: errors must be sticky",
                describe(&waited.outcome)
            ),
        ));
    }
    if seen.state == WorkState::Failed {
        return Err(elsewhere(
            "CAN-9",
            format!(
                "{subject}: {call} yielded {} although the work had failed",
                describe(&waited.outcome)
            ),
        ));
    }
    match &waited.outcome {
        Ok(Completed) if waited.pending => Err(elsewhere(
            "CAN-1",
            completed_while_pending(subject, round.via, &call),
        )),
        Ok(DeadlineExceeded { .. }) if waited.pending => {
            let ended = match mode {
                Quarantine => {
                    round.release();
                    let observer = round.observer()?;
                    let limit = round.completes_within();
                    eventually(limit, || observer.state().is_terminal());
                    match observer.state() {
                        WorkState::Failed => "ended Failed once released".to_owned(),
                        WorkState::Live => {
                            return Err(crate::check::setup(format!(
                                "{subject}: the quarantined faulted work was still Live {limit:?} after its release"
                            )))
                        }
                        other => {
                            return Err(crate::check::setup(format!(
                                "{subject}: fault injection did not make the work fail: after release it was {other:?}"
                            )))
                        }
                    }
                }
                NativeCancel => {
                    let state = seen.state;
                    round.dispose(mode, kept)?;
                    format!("was {state:?} after its teardown")
                }
            };
            ctx.note(format!(
                "{subject} under {mode:?}: the backend publishes an injected fault only once the work ended (the held \
                 work was still Live with no error at the deadline, {call} yielded {}, and the work {ended}); no \
                 error is ever returned for live work, so no error path can drop live resources",
                describe(&waited.outcome)
            ));
            Ok(())
        }
        _ => Err(finished_early(subject, round.via, &call, waited)),
    }
}

/// CAN-8: edge deadlines neither panic nor overflow (a panic is a `crash`
/// verdict). Black-box: `Duration::MAX` on work that completed (and, on
/// late-peer subjects, on work released just before the call: completions
/// are thread-affine, so held work could never be released during the wait)
/// yields `Ok(Completed)`; 1 ns and 500 µs on pending work never yield
/// `Completed` while it is surely pending, report the policy's mode, and
/// leave the executor working after a NativeCancel. With probes, observer and
/// ledger, the work also gets the disposition CAN-5..7 require; without them
/// a note says those were not observed.
fn edge_deadlines_are_safe<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let observed = ctx.harness().instruments().covers(DISPOSITION);
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        unbounded_deadline_completes(ctx, driver, mode)?;
        for timeout in EDGE_DEADLINES {
            let round = Round::start(ctx, driver, Setup::default())?;
            edge_round(round, timeout, mode, observed, &mut kept)?;
        }
        Ok(())
    })?;
    if !observed {
        ctx.note(format!(
            "{}: the CAN-5..7 dispositions under edge deadlines were not observed (they need the {} instrument(s)); \
             only the black-box parts of CAN-8 were checked",
            driver.subject,
            ctx.harness().instruments().missing(DISPOSITION).join(", ")
        ));
    }
    Ok(())
}

fn unbounded_deadline_completes<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
    mode: CompletionCancellationMode,
) -> Check {
    let unbounded = Duration::MAX;
    finished_work_yields_completed(ctx, driver, unbounded, mode, Finished::BeforeTheCall)?;
    if !driver.pending.late_peers() {
        return Ok(());
    }
    finished_work_yields_completed(ctx, driver, unbounded, mode, Finished::JustReleased)
}

/// CAN-9: work that failed (an injected fault, run to its end) yields `Err`
/// from `wait_bounded`, never `Completed`.
fn failed_work_is_an_error<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    each_mode(ctx, |mode| {
        let setup = Setup {
            fault: true,
            hold: false,
        };
        let mut round = Round::start(ctx, driver, setup)?;
        round.release();
        let limit = round.completes_within();
        let state = {
            let observer = round.observer()?;
            eventually(limit, || observer.state().is_terminal());
            observer.state()
        };
        match state {
            WorkState::Failed => {}
            WorkState::Live => {
                return Err(crate::check::setup(format!(
                    "{}: the faulted work was still Live {limit:?} after its release",
                    driver.subject
                )))
            }
            other => {
                return Err(crate::check::setup(format!(
                "{}: fault injection did not make the work fail: after release it was {other:?}",
                driver.subject
            )))
            }
        }
        let waited = round.wait_bounded(slack::RELEASE, mode)?;
        ensure(waited.outcome.is_err(), || {
            format!(
                "{}: work that had failed yielded {} from wait_bounded({:?}, {mode:?}), expected Err",
                driver.subject,
                describe(&waited.outcome),
                slack::RELEASE
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        claimed: impl Fn(CompletionCancellationMode) -> bool,
        part: impl FnMut(CompletionCancellationMode) -> Check,
    ) -> (Check, Vec<String>) {
        let mut notes = Vec::new();
        let outcome = each_claimed_mode(claimed, |note| notes.push(note), part);
        (outcome, notes)
    }

    #[test]
    fn an_unclaimed_mode_is_a_note_not_a_missing_instrument() {
        let mut ran = Vec::new();
        let (outcome, notes) = run(
            |mode| mode == Quarantine,
            |mode| {
                ran.push(mode);
                Ok(())
            },
        );
        assert_eq!(outcome, Ok(()));
        assert_eq!(ran, [Quarantine]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("NativeCancel part did not apply"),
            "{notes:?}"
        );
    }

    #[test]
    fn a_claimed_part_still_decides() {
        let (outcome, notes) = run(
            |mode| mode == Quarantine,
            |_| Err(Finding::Violation("broken".into())),
        );
        assert_eq!(outcome, Err(Finding::Violation("broken".into())));
        assert!(notes.is_empty());
        // A claimed part that could not be checked is still not-supported:
        // an unclaimed mode never turns a missing instrument into a pass.
        let (outcome, _) = run(
            |mode| mode == NativeCancel,
            |_| Err(Finding::NotSupported("no probe".into())),
        );
        assert!(
            matches!(outcome, Err(Finding::NotSupported(_))),
            "{outcome:?}"
        );
    }

    #[test]
    fn no_claimed_mode_leaves_nothing_to_check() {
        let (outcome, notes) = run(|_| false, |_| Ok(()));
        assert!(
            matches!(outcome, Err(Finding::NotSupported(_))),
            "{outcome:?}"
        );
        assert!(notes.is_empty());
    }

    #[test]
    fn every_claimed_mode_runs_without_a_note() {
        let mut ran = Vec::new();
        let (outcome, notes) = run(
            |_| true,
            |mode| {
                ran.push(mode);
                Ok(())
            },
        );
        assert_eq!(outcome, Ok(()));
        assert_eq!(ran, MODES);
        assert!(notes.is_empty());
    }
}
