//! EXC: exact completion. `is_complete` is a nonblocking, exact and monotonic
//! observation of one submission; `wait` blocks on that submission only;
//! errors are sticky and are never release; `resources_releasable` is a
//! nonblocking, conservative proof of release that runs no application code.
//!
//! Every row runs on the whole completion matrix (local dependencies, plain
//! submissions and every claimed operation) except EXC-10, which is about
//! local dependencies only. Pending work is kept pending by the driver (hold
//! or late peer); faulted work is additionally held on the subject's own
//! executor, so its injected error is published while the work is still live.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eredu_core::{BoundedCompletionOutcome, BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::blocker::Blocker;
use super::common::{
    any_completion, complete, fork_one_lane, needs, poll, settle, supported, take_completion,
    take_probes, verify_outputs, Parts, Polled,
};
use crate::case::{Body, Row};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Backend, Executor, Harness, HoldGuard, Observer, Probe, Tensor, WorkState};
use crate::matrix::{wait_within, Driver, Handle, Pending, PendingVia, Subject};
use crate::world::{guarded, RankCtx};

/// How many extra observations a stickiness or monotonicity check makes.
const REPEAT: usize = 64;

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "EXC-1",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(is_complete_is_prompt_while_pending::<H>),
        },
        Row {
            id: "EXC-2",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(never_complete_before_the_work::<H>),
        },
        Row {
            id: "EXC-3",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(completion_is_monotonic::<H>),
        },
        Row {
            id: "EXC-4",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(wait_waits_for_this_work_only::<H>),
        },
        Row {
            id: "EXC-5",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(complete_after_wait::<H>),
        },
        Row {
            id: "EXC-6",
            applies: any_completion,
            requires: needs::FAULT.and(needs::HOLD).and(needs::OBSERVER),
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(errors_are_sticky::<H>),
        },
        Row {
            id: "EXC-7",
            applies: any_completion,
            requires: needs::FAULT
                .and(needs::HOLD)
                .and(needs::OBSERVER)
                .and(needs::PROBE)
                .and(needs::LEDGER),
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(an_error_is_not_release::<H>),
        },
        Row {
            id: "EXC-8",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: true,
            // The error clause (releasable_is_false_after_an_error_while_live).
            pass_needs: needs::FAULT.and(needs::HOLD).and(needs::OBSERVER),
            body: Body::Matrix(releasable_is_prompt_conservative_and_inert::<H>),
        },
        Row {
            id: "EXC-9",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(releasable_agrees_with_completion::<H>),
        },
        Row {
            id: "EXC-10",
            applies: |s| s == Subject::LocalDependencies,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 1,
                script: empty_local_dependencies_complete::<H>,
            },
        },
    ]
}

// ---------------------------------------------------------------------------
// Shared pieces.

/// How the driver keeps the subject's work pending, for messages.
fn kept_pending(driver: Driver<impl Harness>) -> &'static str {
    match driver.pending {
        PendingVia::Hold => "its executor was held",
        PendingVia::Lazy => "it was evaluating lazy work known to take longer",
        PendingVia::LatePeer => "a peer had not joined yet",
        PendingVia::PeerFed => "the sum reduction it reads had a peer that had not joined yet",
    }
}

/// An observer when the harness provides one (optional extra evidence).
fn optional_observer<H: Harness>(ctx: &RankCtx<'_, H>, completion: &Handle<H>) -> Option<Observer> {
    ctx.optional_observer(completion.as_ref())
}

/// Waits (bounded) until the observer reports terminal work.
/// Waits (bounded) until the observer reports terminal work, polling
/// `completion` meanwhile when there is one (a backend may launch work only
/// once it is observed). Work that never ends is an inconclusive setup step:
/// it is not what the calling check is about.
fn finished<H: Harness>(
    observer: &Observer,
    completion: Option<&Handle<H>>,
    subject: Subject,
    after: &str,
) -> Check {
    let ended = eventually(slack::RELEASE, || {
        if let Some(completion) = completion {
            let _ = completion.is_complete();
        }
        observer.state().is_terminal()
    });
    if ended {
        Ok(())
    } else {
        Err(crate::check::setup(format!(
            "{subject}: the work was still live {:?} after {after} (observer: {:?})",
            slack::RELEASE,
            observer.state()
        )))
    }
}

/// Calls `wait()` on healthy work that must complete (released, or already
/// reported complete), so it cannot hang on a correct backend; expects success.
fn wait_succeeds<H: Harness>(completion: &Handle<H>, subject: Subject, when: &str) -> Check {
    let limit = slack::RELEASE;
    guarded(
        "wait() on released healthy work",
        crate::world::SETUP,
        limit,
        || completion.wait(),
    )
    .map_err(|error| {
        crate::check::setup(format!(
            "{subject}: wait() {when} on healthy work failed: {error}"
        ))
    })
}

/// [`wait_succeeds`] on work already reported complete: `wait()` has nothing
/// left to wait for and must return at once (a hang fails EXC-4 within
/// [`slack::BLOCKED`]).
fn wait_on_complete_succeeds<H: Harness>(
    completion: &Handle<H>,
    subject: Subject,
    when: &str,
) -> Check {
    completion.wait_on_complete().map_err(|error| {
        crate::check::setup(format!(
            "{subject}: wait() {when} on healthy work failed: {error}"
        ))
    })
}

/// A short bounded-wait policy in a mode the completion type supports (used
/// on terminal work, where the mode does not matter, and for teardown).
fn supported_policy<H: Harness>() -> Result<BoundedCompletionWait, Finding> {
    let mode = if supported::<H>(CompletionCancellationMode::NativeCancel) {
        CompletionCancellationMode::NativeCancel
    } else {
        CompletionCancellationMode::QuarantineUntilComplete
    };
    BoundedCompletionWait::new(slack::DEADLINE, mode).map_err(|e| Finding::Harness(e.to_string()))
}

/// The subject's work with an injected fault, held on its executor so the
/// fault's error is published while the work is still live. Operations are
/// also kept pending by their late peer.
struct Faulted<'c, 'w, H: Harness> {
    pending: Pending<'c, 'w, H>,
    hold: Option<HoldGuard>,
    observer: Observer,
}

impl<'c, 'w, H: Harness> Faulted<'c, 'w, H> {
    /// Holds `executor`, injects a fault into its next work item, and submits.
    fn submit(
        ctx: &'c RankCtx<'w, H>,
        driver: Driver<H>,
        executor: &Executor<H>,
    ) -> Result<Self, Finding> {
        let hold = ctx.hold(executor)?;
        ctx.inject_fault(executor)?;
        let pending = driver.pending_on(ctx, executor)?;
        let observer = ctx.observer(pending.submitted.completion.as_ref())?;
        Ok(Self {
            pending,
            hold: Some(hold),
            observer,
        })
    }

    fn completion(&self) -> &Handle<H> {
        &self.pending.submitted.completion
    }

    /// Lets the faulted work run to its (failed) end.
    fn release(&mut self) {
        self.pending.release();
        drop(self.hold.take());
    }

    /// Releases and waits (bounded) until the work is terminal.
    fn release_and_finish(&mut self, subject: Subject) -> Check {
        self.release();
        finished(
            &self.observer,
            Some(self.completion()),
            subject,
            "the faulted work was released",
        )
    }

    /// Polls for the injected error while the work is held; `None` when the
    /// backend reports none while held (it may publish it only at the end).
    fn error_while_held(&self, subject: Subject) -> Result<Option<String>, Finding> {
        match poll(self.completion(), slack::PROMPT) {
            Polled::Error(error) => Ok(Some(error)),
            Polled::Pending => Ok(None),
            Polled::Complete => Err(Finding::Violation(format!(
                "{subject}: is_complete() returned Ok(true) for faulted work that was still held (observer: {:?})",
                self.observer.state()
            ))),
        }
    }
}

// ---------------------------------------------------------------------------
// EXC-1, EXC-2, EXC-3, EXC-5: observing completion.

/// EXC-1: `is_complete()` returns within `slack::PROMPT` while work is pending.
fn is_complete_is_prompt_while_pending<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut pending = driver.pending(ctx)?;
    for call in 0..3 {
        let start = Instant::now();
        let seen = pending.submitted.completion.is_complete();
        let took = start.elapsed();
        ensure(took <= slack::PROMPT, || {
            format!(
                "{}: is_complete() call {} took {took:?} (returned {seen:?}) while the work was pending because {}; \
                 a nonblocking call must return within {:?}",
                driver.subject,
                call + 1,
                kept_pending(driver),
                slack::PROMPT
            )
        })?;
        settle();
    }
    pending.confirm("the last is_complete() call")?;
    complete(&mut pending, "EXC-1")
}

/// EXC-2: `is_complete()` never says `Ok(true)` while the work is pending,
/// and when it first does, the work has completed (observer, output values).
fn never_complete_before_the_work<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut pending = driver.pending(ctx)?;
    let start = Instant::now();
    while start.elapsed() < slack::SETTLE {
        let seen = pending.submitted.completion.is_complete();
        if matches!(seen, Ok(true)) {
            pending.confirm("is_complete() returned Ok(true)")?;
        }
        ensure(!matches!(seen, Ok(true)), || {
            format!(
                "{}: is_complete() returned Ok(true) {:?} after submission, while the work could not have completed \
                 because {}",
                driver.subject,
                start.elapsed(),
                kept_pending(driver)
            )
        })?;
        crate::world::pause(Duration::from_millis(1));
    }
    pending.confirm("the last is_complete() call")?;
    let observer = optional_observer(ctx, &pending.submitted.completion);
    complete(&mut pending, "EXC-2")?;
    if let Some(observer) = observer {
        let state = observer.state();
        ensure(state == WorkState::Completed, || {
            format!(
                "{}: is_complete() returned Ok(true) while the observer reported {state:?}",
                driver.subject
            )
        })?;
    }
    verify_outputs(&mut pending, ctx)
}

/// EXC-3: after the first `Ok(true)`, no later call (interleaved with
/// `wait()`) reports `Ok(false)`.
fn completion_is_monotonic<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut pending = driver.pending(ctx)?;
    complete(&mut pending, "EXC-3")?;
    let completion = &pending.submitted.completion;
    for call in 1..=REPEAT {
        let seen = completion.is_complete();
        ensure(matches!(seen, Ok(true)), || {
            format!(
                "{}: is_complete() returned {seen:?} on call {call} after it had returned Ok(true); expected Ok(true) forever",
                driver.subject
            )
        })?;
        if call % 16 == 0 {
            wait_on_complete_succeeds(
                completion,
                driver.subject,
                "after is_complete() returned Ok(true)",
            )?;
        }
    }
    Ok(())
}

/// EXC-5: once `wait()` returned `Ok(())`, `is_complete()` is `Ok(true)`,
/// from its very first call on. (No `is_complete` before `wait`: the first
/// query after completion is the one under test.)
fn complete_after_wait<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut pending = driver.pending(ctx)?;
    let observer = optional_observer(ctx, &pending.submitted.completion);
    pending.release();
    if let Some(observer) = &observer {
        // No is_complete() here: the first query after wait() is under test.
        finished::<H>(observer, None, driver.subject, "it was released")?;
    }
    let completion = &pending.submitted.completion;
    wait_succeeds(completion, driver.subject, "on released work")?;
    for call in 1..=REPEAT / 4 {
        let seen = completion.is_complete();
        ensure(matches!(seen, Ok(true)), || {
            format!(
                "{}: is_complete() call {call} after wait() returned Ok(()) gave {seen:?}, expected Ok(true)",
                driver.subject
            )
        })?;
    }
    verify_outputs(&mut pending, ctx)
}

// ---------------------------------------------------------------------------
// EXC-4: wait.

/// EXC-4: `wait()` returns only after this work completed, and waits for
/// nothing else: with a submission blocked on another executor lane, the
/// subject's released work completes and `wait()` returns.
fn wait_waits_for_this_work_only<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    wait_returns_only_after_completion(ctx, driver)?;
    wait_ignores_a_blocked_lane(ctx, driver)
}

/// EXC-4, first half: `wait()` right after release returns only once the
/// work completed: the observer reports it completed (when the harness has
/// one), `is_complete()` agrees, and the outputs hold their values.
fn wait_returns_only_after_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut pending = driver.pending(ctx)?;
    let observer = optional_observer(ctx, &pending.submitted.completion);
    settle();
    pending.release();
    wait_succeeds(
        &pending.submitted.completion,
        driver.subject,
        "right after release",
    )?;
    if let Some(observer) = observer {
        let state = observer.state();
        ensure(state == WorkState::Completed, || {
            format!(
                "{}: wait() returned Ok(()) while the observer reported {state:?}; expected it to return only after completion",
                driver.subject
            )
        })?;
    }
    // Black-box: the work is complete once wait() returned (a stale first
    // query is EXC-5's business, so a few queries are allowed).
    let completion = &pending.submitted.completion;
    let seen: Vec<_> = (0..3).map(|_| completion.is_complete()).collect();
    ensure(seen.iter().any(|seen| matches!(seen, Ok(true))), || {
        format!(
            "{}: wait() returned Ok(()), yet is_complete() then returned {seen:?}; wait() must return only after this \
             submission completed",
            driver.subject
        )
    })?;
    verify_outputs(&mut pending, ctx)
}

/// What keeps EXC-4's forked lane busy: the hold when the harness has one;
/// else, where late peers keep the subject pending, a second round of the
/// subject's own work on the lane, whose peer joins only after the subject's
/// (submitted after it, so a backend that matches a group's collectives in
/// submission order pairs each with its own: black-box, with no timing);
/// else a [`Blocker`] (fed, or lazy work). `send_receive` rounds share one
/// route, where two receives could take each other's message, so it keeps a
/// blocker.
fn peer_round_keeps_busy<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> bool {
    !ctx.harness().instruments().hold
        && driver.pending.late_peers()
        && driver.subject != Subject::Operation(crate::Operation::SendReceive)
}

enum Busy<'c, 'w, H: Harness> {
    Blocker(Blocker<'c, 'w, H>),
    Round(Pending<'c, 'w, H>),
}

impl<'c, 'w, H: Harness> Busy<'c, 'w, H> {
    fn on(ctx: &'c RankCtx<'w, H>, driver: Driver<H>, lane: &Executor<H>) -> Result<Self, Finding> {
        if peer_round_keeps_busy(ctx, driver) {
            return Ok(Self::Round(driver.about_to_release_on(ctx, lane)?));
        }
        let blocker = Blocker::block(ctx, lane, 4)?;
        if matches!(blocker.completion.is_complete(), Ok(true)) {
            blocker.confirm("the blocked lane's work reported complete")?;
            return Err(if blocker.certain() && !ctx.harness().instruments().hold {
                crate::check::setup(
                    "work on the output of a sum reduction whose late peer had not joined reported \
                     complete (see EXC-2): the forked lane is not busy",
                )
            } else {
                Finding::Harness(
                    "the hold instrument did not keep work on a forked lane pending".into(),
                )
            });
        }
        Ok(Self::Blocker(blocker))
    }

    fn confirm(&self, what: &str) -> Check {
        match self {
            Self::Blocker(blocker) => blocker.confirm(what),
            Self::Round(round) => round.confirm(what),
        }
    }

    fn release_and_finish(self) -> Check {
        let what = "the submission on the forked lane did not complete once released";
        match self {
            Self::Blocker(blocker) => blocker.release_and_finish(|| what.into()),
            Self::Round(mut round) => round
                .release_and_wait()
                .map_err(|error| crate::check::setup(format!("{what}: {error}"))),
        }
    }
}

/// EXC-4, second half: a busy forked lane (see [`Busy`]) delays neither the
/// subject's work nor its `wait()`: once the work is reported complete,
/// `wait()` has nothing left to wait for and must return at once (a `wait()`
/// that waits for the other lane fails within [`slack::BLOCKED`]), while the
/// other lane is still busy.
fn wait_ignores_a_blocked_lane<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let lane = fork_one_lane(ctx)?;
    let lane: &Executor<H> = std::borrow::Borrow::borrow(&lane);
    // A late-peer round on the lane (the subject's work, or a fed blocker's)
    // comes after the subject's: peers join rounds in order.
    let late_peer_round = !ctx.harness().instruments().hold && driver.pending.late_peers();
    let (busy, mut pending) = if late_peer_round {
        let pending = driver.about_to_release(ctx)?;
        (Busy::on(ctx, driver, lane)?, pending)
    } else {
        let busy = Busy::on(ctx, driver, lane)?;
        (busy, driver.about_to_release(ctx)?)
    };
    let observer = optional_observer(ctx, &pending.submitted.completion);
    pending.release();
    let limit = pending.submitted.completes_within();
    let completion = &pending.submitted.completion;
    let finished = match &observer {
        Some(observer) => eventually(limit, || {
            let _ = completion.is_complete();
            observer.state().is_terminal()
        }),
        None => wait_within(completion, limit).is_ok(),
    };
    busy.confirm("the subject's work finished")?;
    ensure(finished, || {
        format!(
            "{}: released work did not finish within {limit:?} while a submission on another executor lane was kept \
             busy (observer: {:?}); it must not wait for other lanes",
            driver.subject,
            observer.as_ref().map(Observer::state)
        )
    })?;
    wait_on_complete_succeeds(
        &pending.submitted.completion,
        driver.subject,
        "on finished work while another executor lane was busy",
    )?;
    busy.confirm("wait() returned")?;
    verify_outputs(&mut pending, ctx)?;
    busy.release_and_finish()
}

// ---------------------------------------------------------------------------
// EXC-6, EXC-7: errors.

/// EXC-6: once an injected fault was reported, every later `is_complete`,
/// `wait` and `wait_bounded` reports an error: while the work is still live,
/// and after it ended.
fn errors_are_sticky<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let subject = driver.subject;
    let mut faulted = Faulted::submit(ctx, driver, ctx.executor())?;
    let held_error = faulted.error_while_held(subject)?;
    if let Some(first) = &held_error {
        still_errors(
            faulted.completion(),
            subject,
            first,
            "while the faulted work was still held",
        )?;
    }
    faulted.release_and_finish(subject)?;
    let first = match held_error {
        Some(first) => first,
        None => first_error_after_the_end(ctx, &faulted, subject)?,
    };
    let completion = faulted.completion();
    still_errors(completion, subject, &first, "after the faulted work ended")?;
    if completion.wait().is_ok() {
        return Err(Finding::Violation(format!(
            "{subject}: wait() returned Ok(()) after is_complete() had reported the error {first:?}"
        )));
    }
    still_errors(completion, subject, &first, "after wait() reported it")?;
    if !completion.is_bounded() {
        return Ok(());
    }
    let completion = take_completion(ctx, &mut faulted.pending)?;
    match completion.wait_bounded(ctx, supported_policy::<H>()?) {
        Some(Ok(outcome)) => Err(Finding::Violation(format!(
            "{subject}: wait_bounded() returned Ok({outcome:?}) after the error {first:?} had been reported; \
             expected the error again"
        ))),
        Some(Err(_)) | None => Ok(()),
    }
}

/// The injected error of work that ended without reporting it while held.
/// EXC-6 is about an error once *reported*: failed work whose `is_complete`
/// has reported no error yet says nothing about stickiness. `Ok(true)` for
/// work the observer saw fail is success reported for work that never
/// completed (EXC-2), recorded for EXC-2; either way this attempt checked
/// nothing of EXC-6 and is inconclusive.
fn first_error_after_the_end<H: Harness>(
    ctx: &RankCtx<'_, H>,
    faulted: &Faulted<'_, '_, H>,
    subject: Subject,
) -> Result<String, Finding> {
    match faulted.completion().is_complete() {
        Err(error) => Ok(error),
        Ok(seen) => match faulted.observer.state() {
            WorkState::Completed => Err(Finding::Harness(format!(
                "{subject}: the injected fault did not make the work fail (observer: Completed)"
            ))),
            state => {
                if seen {
                    ctx.attribute(
                        "EXC-2",
                        format!(
                            "{subject}: the faulted work ended {state:?}, but is_complete() returned Ok(true),                              success for work that never completed"
                        ),
                    );
                }
                Err(crate::check::setup(format!(
                    "{subject}: the faulted work ended {state:?}, but is_complete() returned Ok({seen}) and no                      error was ever reported, so EXC-6 (stickiness of a reported error) could not be checked"
                )))
            }
        },
    }
}

/// `REPEAT` further `is_complete` calls all report an error.
fn still_errors<H: Harness>(
    completion: &Handle<H>,
    subject: Subject,
    first: &str,
    when: &str,
) -> Check {
    for call in 1..=REPEAT {
        if let Ok(seen) = completion.is_complete() {
            return Err(Finding::Violation(format!(
                "{subject}: is_complete() returned Ok({seen}) on call {call} {when}, after it had reported the error \
                 {first:?}; errors must be sticky"
            )));
        }
    }
    Ok(())
}

/// EXC-7: after an injected fault was reported while the work is held, the
/// work's storages and executor stay allocated and `resources_releasable()`
/// stays false while the work is live. The work runs on a forked lane whose
/// handle is dropped after the error, so the completion alone keeps it alive.
fn an_error_is_not_release<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let subject = driver.subject;
    let lane = fork_one_lane(ctx)?;
    let mut faulted = Faulted::submit(ctx, driver, std::borrow::Borrow::borrow(&lane))?;
    let inputs = faulted.pending.submitted.input_probes.len();
    let probes = take_probes(&mut faulted.pending.submitted);
    drop(faulted.pending.submitted.verify.take());
    let certain = driver.pending != crate::matrix::PendingVia::Lazy;
    super::common::retained_at_submission(ctx, &probes, inputs, subject, certain)?;
    let Some(error) = faulted.error_while_held(subject)? else {
        faulted.release_and_finish(subject)?;
        ctx.note(format!(
            "{subject}: the backend reported the injected fault only after the work ended, so an error never \
             coexisted with live work: by design, no error can release live resources"
        ));
        return Ok(());
    };
    settle();
    nothing_released_while_live(&faulted, &probes, subject, &error, "the error was reported")?;
    let before = ctx.ledger()?.executors;
    let alive = faulted.observer.state() == WorkState::Live;
    drop(lane);
    let after = ctx.ledger()?.executors;
    ensure(!alive || after >= before, || {
        format!(
            "{subject}: after the error {error:?}, dropping the caller's executor handle released the executor \
             ({before} live executors, then {after}) while its faulted work was still held"
        )
    })?;
    settle();
    nothing_released_while_live(
        &faulted,
        &probes,
        subject,
        &error,
        "the caller dropped its executor handle",
    )?;
    faulted.release_and_finish(subject)
}

/// While the observer reports live work: every probe is live. (What
/// `resources_releasable()` says after an error is EXC-8's clause.)
fn nothing_released_while_live<H: Harness>(
    faulted: &Faulted<'_, '_, H>,
    probes: &[Probe],
    subject: Subject,
    error: &str,
    after: &str,
) -> Check {
    let freed = probes.iter().filter(|probe| !probe.is_live()).count();
    // Read last: live now means live while the probes were read.
    let state = faulted.observer.state();
    if state != WorkState::Live {
        return Ok(());
    }
    ensure(freed == 0, || {
        format!(
            "{subject}: after {after} (error {error:?}), {freed} of {} probed storages were freed while the work \
             was still live; an error is not release",
            probes.len()
        )
    })
}

// ---------------------------------------------------------------------------
// EXC-8, EXC-9: resources_releasable.

thread_local! {
    /// Set while this thread is inside `resources_releasable`.
    static INSIDE_RELEASABLE: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as inside `resources_releasable` until dropped.
struct Inside;

impl Inside {
    fn enter() -> Self {
        INSIDE_RELEASABLE.with(|inside| inside.set(true));
        Self
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE_RELEASABLE.with(|inside| inside.set(false));
    }
}

/// A value given to `retain_until_complete` that records whether its
/// destructor ran inside a `resources_releasable` call.
struct Tracked(Arc<AtomicBool>);

impl Drop for Tracked {
    fn drop(&mut self) {
        if INSIDE_RELEASABLE.with(Cell::get) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// Calls `resources_releasable()` marked as such; checks it returns promptly.
fn releasable<H: Harness>(
    completion: &Handle<H>,
    subject: Subject,
    when: &str,
) -> Result<bool, Finding> {
    let inside = Inside::enter();
    let start = Instant::now();
    let releasable = completion.resources_releasable();
    let took = start.elapsed();
    drop(inside);
    ensure(took <= slack::PROMPT, || {
        format!(
            "{subject}: resources_releasable() took {took:?} {when} (returned {releasable}); a nonblocking call must \
             return within {:?}",
            slack::PROMPT
        )
    })?;
    Ok(releasable)
}

/// EXC-8, clause by clause: `resources_releasable()` is prompt and false
/// while work is pending, and drops no value given to `retain_until_complete`
/// inside the call (black-box); it is false after an error while the work is
/// live (fault injection, hold and observer); and it is never true because a
/// bounded wait timed out (read on a second handle after `wait_bounded`
/// consumed the first: the observer's reading, or a second handle of the
/// backend's own). A part that cannot run makes the case not-supported unless
/// another part found a violation.
fn releasable_is_prompt_conservative_and_inert<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut parts = Parts::default();
    parts.run(releasable_is_false_while_pending(ctx, driver))?;
    parts.run(releasable_is_false_after_an_error_while_live(ctx, driver))?;
    parts.run(releasable_is_false_after_a_deadline(ctx, driver))?;
    parts.end()
}

/// EXC-8 on healthy work: false while pending, prompt throughout, and (plain
/// submissions) no retained value dropped inside the call after completion.
fn releasable_is_false_while_pending<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let subject = driver.subject;
    let mut pending = driver.pending(ctx)?;
    let dropped_inside = Arc::new(AtomicBool::new(false));
    if let Handle::Plain(completion) = &pending.submitted.completion {
        Backend::<H>::retain_until_complete(
            ctx.executor(),
            completion,
            Tracked(Arc::clone(&dropped_inside)),
        )
        .map_err(|e| Finding::Violation(format!("retain_until_complete failed: {e}")))?;
    }
    for _ in 0..3 {
        let seen = releasable(
            &pending.submitted.completion,
            subject,
            "while the work was pending",
        )?;
        if seen {
            pending.confirm("resources_releasable() returned true")?;
        }
        ensure(!seen, || {
            format!(
                "{subject}: resources_releasable() returned true while the work was pending because {}",
                kept_pending(driver)
            )
        })?;
        settle();
    }
    complete(&mut pending, "EXC-8")?;
    let completion = &pending.submitted.completion;
    let mut last = Ok(false);
    eventually(slack::RELEASE_RESOURCES, || {
        last = releasable(completion, subject, "after completion");
        !matches!(last, Ok(false))
    });
    last?;
    ensure(!dropped_inside.load(Ordering::SeqCst), || {
        format!(
            "{subject}: a value given to retain_until_complete was dropped inside resources_releasable(); the call \
             must not run application destructors"
        )
    })
}

/// EXC-8 with a fault: an error published while the work is held is no
/// proof of release.
fn releasable_is_false_after_an_error_while_live<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let subject = driver.subject;
    let instruments = ctx.harness().instruments();
    let missing = instruments.missing(needs::FAULT.and(needs::HOLD).and(needs::OBSERVER));
    if !missing.is_empty() {
        return Err(Finding::NotSupported(format!(
            "the error clause needs the {} instrument",
            missing.join(", ")
        )));
    }
    let mut faulted = Faulted::submit(ctx, driver, ctx.executor())?;
    let error = faulted.error_while_held(subject)?;
    let seen = releasable(
        faulted.completion(),
        subject,
        "after an error while the work was held",
    )?;
    let state = faulted.observer.state();
    ensure(!seen || state != WorkState::Live, || {
        format!(
            "{subject}: resources_releasable() returned true while the faulted work was still live (observer: \
             {state:?}, is_complete error: {error:?}); an error is no proof of release"
        )
    })?;
    faulted.release_and_finish(subject)
}

/// A reading of `resources_releasable()` that outlives the completion: the
/// observer's, or a second handle of the backend's own.
fn second_reading<H: Harness>(
    ctx: &RankCtx<'_, H>,
    completion: &Handle<H>,
) -> Option<Box<dyn Fn() -> bool>> {
    if let Some(observer) = optional_observer(ctx, completion) {
        if observer.resources_releasable().is_some() {
            return Some(Box::new(move || {
                let releasable = crate::world::polled(
                    "resources_releasable() (observer)",
                    "EXC-8",
                    slack::BLOCKED,
                    || observer.resources_releasable().unwrap_or(false),
                );
                if releasable {
                    crate::world::progressed();
                }
                releasable
            }));
        }
    }
    let Handle::Communication(completion) = completion else {
        return None;
    };
    let second = Handle::<H>::Communication(ctx.harness().second_handle(completion)?);
    Some(Box::new(move || second.resources_releasable()))
}

/// EXC-8's timeout clause: right after `wait_bounded` on pending work
/// returned `DeadlineExceeded`, a second handle's `resources_releasable()` is
/// not true while the work is still live. Under QuarantineUntilComplete the
/// work is certainly live (its hold or late peer is not released, or its
/// lazy work is certainly still running); under NativeCancel the teardown may
/// have ended it, so `true` is a violation only while the observer reports
/// live work.
fn releasable_is_false_after_a_deadline<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let subject = driver.subject;
    let mut checked = false;
    for mode in [
        CompletionCancellationMode::QuarantineUntilComplete,
        CompletionCancellationMode::NativeCancel,
    ] {
        if !supported::<H>(mode) {
            continue;
        }
        let mut pending = driver.pending(ctx)?;
        if !pending.submitted.completion.is_bounded() {
            // Plain submissions have no bounded wait: the clause does not apply.
            return Ok(());
        }
        let observer = optional_observer(ctx, &pending.submitted.completion);
        let Some(second) = second_reading(ctx, &pending.submitted.completion) else {
            return Err(Finding::NotSupported(
                "the timeout clause needs a second handle (an observer with a resources_releasable reading, or \
                 Harness::second_handle)"
                    .into(),
            ));
        };
        if mode == CompletionCancellationMode::NativeCancel && observer.is_none() {
            continue;
        }
        let completion = take_completion(ctx, &mut pending)?;
        let policy = BoundedCompletionWait::new(slack::DEADLINE, mode)
            .map_err(|e| Finding::Harness(e.to_string()))?;
        let outcome = completion.wait_bounded(ctx, policy);
        let Some(Ok(BoundedCompletionOutcome::DeadlineExceeded { .. })) = outcome else {
            pending.confirm("the bounded wait returned")?;
            continue;
        };
        for look in 0..2 {
            let seen = second();
            let live = match &observer {
                Some(observer) => observer.state() == WorkState::Live,
                None => pending.surely_pending(),
            };
            if seen && mode == CompletionCancellationMode::QuarantineUntilComplete {
                pending.confirm("resources_releasable() on the second handle returned true")?;
            }
            ensure(!(seen && live), || {
                format!(
                    "{subject}: resources_releasable() on a second handle returned true {} wait_bounded({:?}, {mode:?}) \
                     returned DeadlineExceeded, while the work was still live because {}; a timeout or a cancellation \
                     request alone is no proof of release",
                    if look == 0 { "right after" } else { "a moment after" },
                    slack::DEADLINE,
                    kept_pending(driver)
                )
            })?;
            checked = true;
            settle();
        }
        // Let quarantined work finish before the next round (natively
        // cancelled late-peer rounds are kept unreleased until the case ends).
        if mode == CompletionCancellationMode::QuarantineUntilComplete {
            pending.release();
            if let Some(observer) = &observer {
                finished::<H>(observer, None, subject, "the quarantined work was released")?;
            } else {
                settle();
            }
        } else {
            std::mem::forget(pending);
        }
    }
    if checked {
        Ok(())
    } else {
        Err(Finding::NotSupported(format!(
            "{subject}: no bounded wait on pending work returned DeadlineExceeded (see CAN-4): the timeout clause \
             had nothing to observe"
        )))
    }
}

/// EXC-9: `resources_releasable()` never contradicts `is_complete()`: false
/// while pending, and true within `slack::RELEASE_RESOURCES` once the work
/// completed successfully.
fn releasable_agrees_with_completion<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let subject = driver.subject;
    let mut pending = driver.pending(ctx)?;
    settle();
    let completion = &pending.submitted.completion;
    let releasable = completion.resources_releasable();
    let complete_now = completion.is_complete();
    if releasable {
        pending.confirm("resources_releasable() returned true")?;
    }
    ensure(!releasable, || {
        format!(
            "{subject}: resources_releasable() returned true while the work was pending because {} \
             (is_complete(): {complete_now:?})",
            kept_pending(driver)
        )
    })?;
    complete(&mut pending, "EXC-9")?;
    let completion = &pending.submitted.completion;
    ensure(
        eventually(slack::RELEASE_RESOURCES, || {
            completion.resources_releasable()
        }),
        || {
            format!(
            "{subject}: resources_releasable() was still false {:?} after is_complete() returned Ok(true) for work \
             that completed successfully; expected it to agree",
            slack::RELEASE_RESOURCES
        )
        },
    )?;
    let seen = completion.is_complete();
    if !matches!(seen, Ok(true)) {
        // is_complete() had already returned Ok(true): going back is EXC-3's.
        ctx.attribute(
            "EXC-3",
            format!("{subject}: is_complete() returned {seen:?} after it had returned Ok(true)"),
        );
    }
    verify_outputs(&mut pending, ctx)
}

// ---------------------------------------------------------------------------
// EXC-10.

/// EXC-10: `submit_local_dependencies` with no tensors completes (successfully)
/// within `slack::RELEASE`.
fn empty_local_dependencies_complete<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    let submission =
        Backend::<H>::submit_local_dependencies(std::iter::empty::<&Tensor<H>>(), ctx.executor())
            .map_err(|e| {
            Finding::Violation(format!(
                "submit_local_dependencies with no tensors failed: {e}"
            ))
        })?;
    let completion = Handle::<H>::Communication(submission.completion);
    let start = Instant::now();
    let outcome = wait_within(&completion, slack::RELEASE);
    let took = start.elapsed();
    if outcome.is_err() {
        // Tear the stuck work down so it does not outlive the case.
        if let Ok(policy) = supported_policy::<H>() {
            let _ = completion.wait_bounded(ctx, policy);
        }
    }
    outcome.map_err(|error| {
        Finding::Violation(format!(
            "local_dependencies: submit_local_dependencies with no tensors did not complete ({error}, after {took:?}); \
             expected it to complete promptly"
        ))
    })
}
