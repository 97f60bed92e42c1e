//! CAN: bounded completion and cancellation teardown (safety).
//!
//! `wait_bounded` observes exact completion until its deadline, then applies
//! the policy's disposition: `NativeCancel` returns only after native teardown
//! has finished; `QuarantineUntilComplete` hands the live work and everything
//! it retains to an owner that releases them after exact completion. An `Err`
//! carries the same obligation. These rows run on every completion with a
//! bounded wait (local dependencies and every claimed operation), and each
//! (invariant, mode) part of a mode the backend does not support
//! (`supports_cancellation` is false) is not-supported, never pass.
//!
//! Choreography. Work is kept pending by the driver (hold or late peer). Every
//! round takes the completion out of its [`Pending`] (a completed stand-in
//! takes its place), drops every caller-side handle, and keeps an observer,
//! liveness probes and a ledger snapshot from before submission. Quarantined
//! rounds are released and drained before the next round starts. Rounds
//! cancelled natively on late-peer subjects are kept unreleased until the case
//! ends, so no peer ever joins a cancelled collective while a later round
//! waits for it (a cancelled receive would otherwise leave the peer's message
//! for the next one); the quarantine part of a case therefore always runs
//! first. Work about to be cancelled with a deadline shorter than
//! [`slack::SETTLE`] is first given that long to start.

use std::time::{Duration, Instant};

use eredu_core::{BoundedCompletionOutcome, BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::{bounded, must_complete, needs, settle, supported, take_probes};
use crate::case::{Body, Row};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Backend, Harness, HoldGuard, Ledger, Observer, Probe, Tensor, WorkState};
use crate::matrix::{Driver, Handle, Pending, PendingVia, Subject};
use crate::world::RankCtx;

use BoundedCompletionOutcome::{Completed, DeadlineExceeded};
use CompletionCancellationMode::{NativeCancel, QuarantineUntilComplete as Quarantine};

/// Both modes, quarantine first: its rounds need late peers to join, and
/// natively cancelled rounds are kept unreleased until the case ends.
const MODES: [CompletionCancellationMode; 2] = [Quarantine, NativeCancel];

/// The edge deadlines of CAN-8 used on pending work.
const EDGE_DEADLINES: [Duration; 2] = [Duration::from_nanos(1), Duration::from_micros(500)];

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    let disposition = needs::PROBE.and(needs::OBSERVER).and(needs::LEDGER);
    vec![
        Row {
            id: "CAN-1",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            body: Body::Matrix(completion_is_reported_exactly::<H>),
        },
        Row {
            id: "CAN-2",
            applies: bounded,
            requires: needs::NOTHING,
            timing: true,
            body: Body::Matrix(deadline_is_honoured::<H>),
        },
        Row {
            id: "CAN-3",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            body: Body::Matrix(reported_mode_is_the_policy_mode::<H>),
        },
        Row {
            id: "CAN-4",
            applies: bounded,
            requires: needs::NOTHING,
            timing: false,
            body: Body::Matrix(supported_modes_are_honoured::<H>),
        },
        Row {
            id: "CAN-5",
            applies: bounded,
            requires: disposition,
            timing: false,
            body: Body::Matrix(native_cancel_finishes_teardown::<H>),
        },
        Row {
            id: "CAN-6",
            applies: bounded,
            requires: disposition,
            timing: false,
            body: Body::Matrix(quarantine_retains_until_completion::<H>),
        },
        Row {
            id: "CAN-7",
            applies: bounded,
            requires: disposition.and(needs::FAULT),
            timing: false,
            body: Body::Matrix(errors_never_drop_live_work::<H>),
        },
        Row {
            id: "CAN-8",
            applies: bounded,
            requires: disposition,
            timing: false,
            body: Body::Matrix(edge_deadlines_are_safe::<H>),
        },
        Row {
            id: "CAN-9",
            applies: bounded,
            requires: needs::FAULT.and(needs::OBSERVER),
            timing: false,
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
/// violation ends the case; an unsupported mode (or a part with nothing to
/// check) makes the case not-supported once every other part passed.
fn each_mode<H: Harness>(mut part: impl FnMut(CompletionCancellationMode) -> Check) -> Check {
    let mut unchecked = Vec::new();
    for mode in MODES {
        if !supported::<H>(mode) {
            unchecked.push(format!("supports_cancellation({mode:?}) is false"));
            continue;
        }
        match part(mode) {
            Ok(()) => {}
            Err(Finding::NotSupported(reason)) => unchecked.push(reason),
            Err(finding) => return Err(finding),
        }
    }
    if unchecked.is_empty() {
        Ok(())
    } else {
        Err(Finding::NotSupported(format!(
            "part not checked: {}",
            unchecked.join("; ")
        )))
    }
}

/// Runs `part` for one mode, not-supported when the backend does not support it.
fn only_mode<H: Harness>(mode: CompletionCancellationMode, part: impl FnOnce() -> Check) -> Check {
    if supported::<H>(mode) {
        part()
    } else {
        Err(Finding::NotSupported(format!(
            "supports_cancellation({mode:?}) is false: nothing to check"
        )))
    }
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
}

/// Observations made at one instant, right after `wait_bounded` returned.
struct Seen {
    state: WorkState,
    live_probes: usize,
    probes: usize,
    ledger: Ledger,
    before: Ledger,
}

impl<'c, 'w, H: Harness> Round<'c, 'w, H> {
    fn start(ctx: &'c RankCtx<'w, H>, driver: Driver<H>, setup: Setup) -> Result<Self, Finding> {
        let stand_in = stand_in(ctx)?;
        let before = ctx.harness().ledger(ctx.state());
        if setup.fault {
            ctx.inject_fault(ctx.executor())?;
        }
        let hold = if setup.hold {
            Some(ctx.hold(ctx.executor())?)
        } else {
            None
        };
        let mut pending = driver.pending(ctx)?;
        let probes = take_probes(&mut pending.submitted);
        // The caller keeps no handle on the outputs either.
        drop(pending.submitted.verify.take());
        let observer = ctx
            .harness()
            .observer(pending.submitted.completion.as_ref());
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
        })
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
    }

    /// Releases the work and waits (bounded) until it completed.
    fn complete_before_waiting(&mut self) -> Check {
        self.release();
        must_complete(self.completion()?, || {
            format!("{}: released work did not complete", self.subject)
        })
    }

    /// Gives pending work time to start, so a short deadline cancels started work.
    fn let_start(&self, timeout: Duration) {
        if timeout < slack::SETTLE {
            settle();
        }
    }

    /// Calls `wait_bounded`; the outcome and how long the call took.
    fn wait_bounded(
        &mut self,
        timeout: Duration,
        mode: CompletionCancellationMode,
    ) -> Result<(Outcome, Duration), Finding> {
        let policy = policy(timeout, mode)?;
        let completion = self.completion.take().ok_or_else(|| {
            Finding::Harness("the round's completion was already consumed".into())
        })?;
        let started = Instant::now();
        let outcome = completion.wait_bounded(policy);
        let elapsed = started.elapsed();
        let outcome = outcome.ok_or_else(|| {
            Finding::NotSupported(format!("{}: completion has no bounded wait", self.subject))
        })?;
        Ok((outcome, elapsed))
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

    /// Observer state, probes and ledger, read at once.
    fn seen(&self) -> Result<Seen, Finding> {
        let state = self.observer()?.state();
        let live_probes = self.probes.iter().filter(|probe| probe.is_live()).count();
        let ledger = self.ctx.ledger()?;
        let before = self.before()?;
        Ok(Seen {
            state,
            live_probes,
            probes: self.probes.len(),
            ledger,
            before,
        })
    }

    /// Releases the work and waits until it is terminal (when it can be seen),
    /// so the next round starts clean.
    fn drain(mut self) -> Check {
        self.release();
        let Some(observer) = &self.observer else {
            settle();
            return Ok(());
        };
        let finished = eventually(slack::RELEASE, || observer.state().is_terminal());
        ensure(finished, || {
            format!(
                "{}: released work was still {:?} {:?} after its hold/late peer was released",
                self.subject,
                observer.state(),
                slack::RELEASE
            )
        })
    }

    /// After `wait_bounded` under `mode`: quarantined (or otherwise
    /// unfinished) work is released and drained; natively cancelled work on a
    /// late-peer subject is kept unreleased in `kept` until the case ends.
    fn dispose(self, mode: CompletionCancellationMode, kept: &mut Vec<Self>) -> Check {
        match (mode, self.via) {
            (NativeCancel, PendingVia::LatePeer) => {
                kept.push(self);
                Ok(())
            }
            _ => self.drain(),
        }
    }
}

/// A completed completion standing in for a taken one. It evaluates one
/// materialised value (not zero: empty local work is EXC-10's subject).
fn stand_in<H: Harness>(ctx: &RankCtx<'_, H>) -> Result<Handle<H>, Finding> {
    let value = ctx.tensor(&[1.0], &[1])?;
    let completion = Backend::<H>::submit(ctx.executor(), [&value])
        .map(Handle::Plain)
        .map_err(|error| {
            Finding::Violation(format!(
                "setup: submit of one materialised value failed: {error}"
            ))
        })?;
    must_complete(&completion, || {
        "setup: submit of one materialised value did not complete".into()
    })?;
    Ok(completion)
}

/// Waits with `wait_bounded(timeout, mode)` on fresh pending work (first
/// given time to start if the timeout is shorter than [`slack::SETTLE`]),
/// then disposes of the round; the outcome and how long the call took.
fn wait_on_pending<'c, 'w, H: Harness>(
    ctx: &'c RankCtx<'w, H>,
    driver: Driver<H>,
    timeout: Duration,
    mode: CompletionCancellationMode,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Result<(Outcome, Duration), Finding> {
    let mut round = Round::start(ctx, driver, Setup::default())?;
    round.let_start(timeout);
    let waited = round.wait_bounded(timeout, mode)?;
    round.dispose(mode, kept)?;
    Ok(waited)
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
    let mut round = Round::start(ctx, driver, Setup::default())?;
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
    let (outcome, _) = round.wait_bounded(timeout, mode)?;
    ensure(matches!(outcome, Ok(Completed)), || {
        format!(
            "{}: wait_bounded({}, {mode:?}) on {work} yielded {}, expected Ok(Completed)",
            driver.subject,
            shown(timeout),
            describe(&outcome)
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
/// the ledger shows it quarantined.
fn retained(seen: &Seen, subject: Subject, after: &str) -> Check {
    ensure(seen.state == WorkState::Live, || {
        format!(
            "{subject}: work {after} was {:?} although it could not have completed (its hold/late peer was not released)",
            seen.state
        )
    })?;
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
/// storage is freed and the ledger's quarantine drains.
fn released_after_completion<H: Harness>(round: &Round<'_, '_, H>) -> Check {
    let subject = round.subject;
    let observer = round.observer()?;
    let finished = eventually(slack::RELEASE, || observer.state().is_terminal());
    ensure(finished, || {
        format!(
            "{subject}: quarantined work never finished within {:?} of its release",
            slack::RELEASE
        )
    })?;
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

/// CAN-5: the executor accepts and completes new work after a teardown.
fn executor_still_works<H: Harness>(ctx: &RankCtx<'_, H>, subject: Subject) -> Check {
    let none = std::iter::empty::<&Tensor<H>>();
    let submission =
        Backend::<H>::submit_local_dependencies(none, ctx.executor()).map_err(|error| {
            Finding::Violation(format!(
                "{subject}: after a NativeCancel teardown the executor refused new work: {error}"
            ))
        })?;
    let policy = policy(slack::RELEASE, NativeCancel)?;
    let outcome = Handle::<H>::Communication(submission.completion)
        .wait_bounded(policy)
        .unwrap_or_else(|| Err("no bounded wait".into()));
    ensure(matches!(outcome, Ok(Completed)), || {
        format!(
            "{subject}: after a NativeCancel teardown, new local work on the same executor yielded {} within {:?}, expected Ok(Completed)",
            describe(&outcome),
            slack::RELEASE
        )
    })
}

/// Waits on pending work with `wait_bounded(timeout, mode)` and checks it by
/// what that returned: `Completed` is a violation (the work could not have
/// completed), `DeadlineExceeded` must come with the selected disposition
/// (CAN-5 for NativeCancel, CAN-6 for quarantine), and `Err` must leave no live
/// resource dropped (CAN-7). Then disposes of the round.
fn check_disposition<'c, 'w, H: Harness>(
    mut round: Round<'c, 'w, H>,
    timeout: Duration,
    mode: CompletionCancellationMode,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Check {
    let (subject, ctx) = (round.subject, round.ctx);
    round.let_start(timeout);
    let (outcome, _) = round.wait_bounded(timeout, mode)?;
    let seen = round.seen()?;
    let after = format!("wait_bounded({timeout:?}, {mode:?}) on pending work");
    match (&outcome, mode) {
        (Ok(Completed), _) => Err(Finding::Violation(format!(
            "{subject}: {after} yielded Ok(Completed) although the work could not have completed (its hold/late peer was not released; see CAN-1)"
        ))),
        (Ok(DeadlineExceeded { .. }), NativeCancel) => {
            torn_down(&seen, subject, &format!("{after} (DeadlineExceeded)"))?;
            round.dispose(mode, kept)?;
            executor_still_works(ctx, subject)
        }
        (Ok(DeadlineExceeded { .. }), Quarantine) => {
            retained(&seen, subject, &format!("right after {after} returned DeadlineExceeded"))?;
            round.release();
            released_after_completion(&round)
        }
        (Err(error), _) => {
            error_disposition(&seen, subject, mode, error)?;
            if mode == Quarantine {
                round.release();
                released_after_completion(&round)
            } else {
                round.dispose(mode, kept)
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
    each_mode::<H>(|mode| {
        finished_work_yields_completed(ctx, driver, slack::RELEASE, mode, Finished::BeforeTheCall)?;
        let (outcome, _) = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        ensure(!matches!(outcome, Ok(Completed)), || {
            format!(
                "{}: wait_bounded({:?}, {mode:?}) on work that had not finished (its hold/late peer was not released) yielded Ok(Completed)",
                driver.subject,
                slack::DEADLINE
            )
        })
    })
}

// ---------------------------------------------------------------------------
// CAN-2

/// CAN-2: `DeadlineExceeded` never comes before the timeout, and the call
/// returns within the timeout plus [`slack::OVERRUN`]. Under NativeCancel the
/// teardown is measured on its own first (a wait whose 1 ns deadline has
/// passed at once) and excluded from the bound.
fn deadline_is_honoured<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode::<H>(|mode| {
        let teardown = match mode {
            Quarantine => Duration::ZERO,
            NativeCancel => {
                let deadline = Duration::from_nanos(1);
                let (_, teardown) = wait_on_pending(ctx, driver, deadline, mode, &mut kept)?;
                teardown
            }
        };
        let (outcome, elapsed) = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        returns_on_time(driver.subject, mode, &outcome, elapsed, teardown)
    })
}

fn returns_on_time(
    subject: Subject,
    mode: CompletionCancellationMode,
    outcome: &Outcome,
    elapsed: Duration,
    teardown: Duration,
) -> Check {
    let timeout = slack::DEADLINE;
    let call = format!("wait_bounded({timeout:?}, {mode:?}) on pending work");
    if matches!(outcome, Ok(DeadlineExceeded { .. })) {
        ensure(elapsed >= timeout, || {
            format!("{subject}: {call} returned DeadlineExceeded after only {elapsed:?}, before its timeout")
        })?;
    }
    let teardown_note = if mode == NativeCancel {
        format!(", NativeCancel teardown measured separately at {teardown:?}")
    } else {
        String::new()
    };
    ensure(elapsed <= timeout + slack::OVERRUN + teardown, || {
        format!(
            "{subject}: {call} returned {} after {elapsed:?}, later than the timeout plus {:?} slack{teardown_note}",
            describe(outcome),
            slack::OVERRUN
        )
    })
}

// ---------------------------------------------------------------------------
// CAN-3, CAN-4

/// CAN-3: the cancellation a `DeadlineExceeded` reports is the policy's mode.
fn reported_mode_is_the_policy_mode<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode::<H>(|mode| {
        let (outcome, _) = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        match outcome {
            Ok(DeadlineExceeded { cancellation }) => ensure(cancellation == mode, || {
                format!(
                    "{}: wait_bounded({:?}, {mode:?}) on pending work reported DeadlineExceeded {{ cancellation: {cancellation:?} }}, expected {mode:?}",
                    driver.subject,
                    slack::DEADLINE
                )
            }),
            other => Err(Finding::NotSupported(format!(
                "{}: pending work under {mode:?} yielded {}, which reports no cancellation (see CAN-1, CAN-4)",
                driver.subject,
                describe(&other)
            ))),
        }
    })
}

/// CAN-4: a mode the backend claims (`supports_cancellation` true) turns
/// pending work into `Ok(DeadlineExceeded { cancellation: mode })`.
fn supported_modes_are_honoured<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode::<H>(|mode| {
        let (outcome, _) = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        ensure(exceeded(&outcome, mode), || {
            format!(
                "{}: supports_cancellation({mode:?}) is true, yet wait_bounded({:?}, {mode:?}) on pending work yielded {}, expected Ok(DeadlineExceeded {{ cancellation: {mode:?} }})",
                driver.subject,
                slack::DEADLINE,
                describe(&outcome)
            )
        })
    })
}

// ---------------------------------------------------------------------------
// CAN-5, CAN-6

/// CAN-5: when `DeadlineExceeded{NativeCancel}` returns, teardown is finished:
/// the work is terminal, its retained storages are freed (the caller holds
/// no handle), the ledger counts it no more, and the executor completes new work.
fn native_cancel_finishes_teardown<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    only_mode::<H>(NativeCancel, || {
        let mut kept = Vec::new();
        let mut round = Round::start(ctx, driver, Setup::default())?;
        let (outcome, _) = round.wait_bounded(slack::DEADLINE, NativeCancel)?;
        let seen = round.seen()?;
        if !exceeded(&outcome, NativeCancel) {
            round.dispose(NativeCancel, &mut kept)?;
            return Err(Finding::NotSupported(format!(
                "{}: pending work under NativeCancel yielded {}, not DeadlineExceeded {{ cancellation: NativeCancel }}: no teardown to check (see CAN-3, CAN-4)",
                driver.subject,
                describe(&outcome)
            )));
        }
        let after = format!(
            "wait_bounded({:?}, NativeCancel) -> DeadlineExceeded",
            slack::DEADLINE
        );
        torn_down(&seen, driver.subject, &after)?;
        round.dispose(NativeCancel, &mut kept)?;
        executor_still_works(ctx, driver.subject)
    })
}

/// CAN-6: after `DeadlineExceeded{QuarantineUntilComplete}` everything the work
/// retains stays alive while it is live, and is released once it completed.
fn quarantine_retains_until_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    only_mode::<H>(Quarantine, || {
        let mut round = Round::start(ctx, driver, Setup::default())?;
        let (outcome, _) = round.wait_bounded(slack::DEADLINE, Quarantine)?;
        if !exceeded(&outcome, Quarantine) {
            round.drain()?;
            return Err(Finding::NotSupported(format!(
                "{}: pending work under QuarantineUntilComplete yielded {}, not DeadlineExceeded {{ cancellation: QuarantineUntilComplete }}: no quarantine to check (see CAN-3, CAN-4)",
                driver.subject,
                describe(&outcome)
            )));
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
    })
}

// ---------------------------------------------------------------------------
// CAN-7, CAN-8, CAN-9

/// CAN-7: an `Err` from `wait_bounded` reports terminal work, or comes after
/// live work was put in the selected disposition. A fault is injected before
/// submission, and the work is kept live by its hold (late-peer subjects: by
/// a hold on the subject's executor as well as the late peer), so the error
/// can be published while the work is still live.
fn errors_never_drop_live_work<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode::<H>(|mode| {
        let setup = Setup {
            fault: true,
            hold: driver.pending == PendingVia::LatePeer,
        };
        let mut round = Round::start(ctx, driver, setup)?;
        let completion = round.completion()?;
        // Let the injected error become observable (bounded; never asserted).
        eventually(slack::PROMPT, || {
            !matches!(completion.is_complete(), Ok(false))
        });
        let (outcome, _) = round.wait_bounded(slack::DEADLINE, mode)?;
        let seen = round.seen()?;
        let Err(error) = &outcome else {
            round.dispose(mode, &mut kept)?;
            return Err(Finding::NotSupported(format!(
                "{}: work with an injected fault yielded {} under {mode:?}, not Err: no error path to check",
                driver.subject,
                describe(&outcome)
            )));
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

/// CAN-8: edge deadlines neither panic nor overflow (a panic is a `crash`
/// verdict), and the work still gets the disposition CAN-5..7 require.
/// `Duration::MAX` is used on work that completed (and, on late-peer subjects,
/// on work released just before the call: completions are thread-affine, so
/// held work could never be released during the wait); 1 ns and 500 µs on
/// pending work.
fn edge_deadlines_are_safe<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode::<H>(|mode| {
        unbounded_deadline_completes(ctx, driver, mode)?;
        for timeout in EDGE_DEADLINES {
            let round = Round::start(ctx, driver, Setup::default())?;
            check_disposition(round, timeout, mode, &mut kept)?;
        }
        Ok(())
    })
}

fn unbounded_deadline_completes<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
    mode: CompletionCancellationMode,
) -> Check {
    let unbounded = Duration::MAX;
    finished_work_yields_completed(ctx, driver, unbounded, mode, Finished::BeforeTheCall)?;
    if driver.pending != PendingVia::LatePeer {
        return Ok(());
    }
    finished_work_yields_completed(ctx, driver, unbounded, mode, Finished::JustReleased)
}

/// CAN-9: work that failed (an injected fault, run to its end) yields `Err`
/// from `wait_bounded`, never `Completed`.
fn failed_work_is_an_error<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    each_mode::<H>(|mode| {
        let setup = Setup {
            fault: true,
            hold: false,
        };
        let mut round = Round::start(ctx, driver, setup)?;
        round.release();
        let state = {
            let observer = round.observer()?;
            eventually(slack::RELEASE, || observer.state().is_terminal());
            observer.state()
        };
        if state != WorkState::Failed {
            return Err(Finding::Harness(format!(
                "{}: fault injection did not make the work fail: after release it was {state:?}",
                driver.subject
            )));
        }
        let (outcome, _) = round.wait_bounded(slack::RELEASE, mode)?;
        ensure(outcome.is_err(), || {
            format!(
                "{}: work that had failed yielded {} from wait_bounded({:?}, {mode:?}), expected Err",
                driver.subject,
                describe(&outcome),
                slack::RELEASE
            )
        })
    })
}
