//! Errors: EXC-6 (an error is sticky: every later `is_complete`, `wait`
//! and `wait_bounded` reports one) and EXC-7 (an error is not release:
//! while the failed work is live, nothing it retains is freed).

use super::shared::{supported_policy, Faulted, REPEAT};
use crate::check::{ensure, Check, Finding};
use crate::harness::{Executor, Harness, Probe, WorkState};
use crate::matrix::{Driver, Handle, Subject};
use crate::suites::common::{fork_one_lane, new_work, settle, take_completion, take_probes};
use crate::world::RankCtx;

/// EXC-6: once an injected fault was reported, every later `is_complete`,
/// `wait` and `wait_bounded` reports an error: while the work is still live,
/// and after it ended; also after the rank submitted new work (on another
/// lane while the faulted work is held, then on its own lane and another),
/// which a backend keeping error state where new work can disturb it gets
/// wrong.
pub(super) fn errors_are_sticky<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let subject = driver.subject;
    let mut faulted = Faulted::submit(ctx, driver, ctx.executor())?;
    // Another lane where the backend can fork one (SUB-1 is about those that
    // cannot); the rank's own lane otherwise.
    let forked = fork_one_lane(ctx).ok();
    let other: &Executor<H> = match &forked {
        Some(lane) => std::borrow::Borrow::borrow(lane),
        None => ctx.executor(),
    };
    let held_error = faulted.error_while_held(subject)?;
    let mut newer = Vec::new();
    if let Some(first) = &held_error {
        still_errors(
            faulted.completion(),
            subject,
            first,
            "while the faulted work was still held",
        )?;
        if forked.is_some() {
            newer.extend(new_work(ctx, &[other])?);
        }
        still_errors(
            faulted.completion(),
            subject,
            first,
            "while the faulted work was still held, after the rank submitted new work on another lane",
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
    newer.extend(new_work(ctx, &[ctx.executor(), other])?);
    still_errors(
        completion,
        subject,
        &first,
        "after the rank submitted new work on the faulted work's lane and on another",
    )?;
    // The new work is dropped unwaited, as the runtime drops completions.
    drop(newer);
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
/// nothing of EXC-6 and is inconclusive. Without an observer, nothing tells
/// a fault that never fired from an error the backend lost: inconclusive too.
fn first_error_after_the_end<H: Harness>(
    ctx: &RankCtx<'_, H>,
    faulted: &Faulted<'_, '_, H>,
    subject: Subject,
) -> Result<String, Finding> {
    let seen = match faulted.completion().is_complete() {
        Err(error) => return Ok(error),
        Ok(seen) => seen,
    };
    let state = match faulted.state() {
        Some(WorkState::Completed) => {
            return Err(Finding::Harness(format!(
                "{subject}: the injected fault did not make the work fail (observer: Completed)"
            )))
        }
        Some(state) => state,
        None => {
            return Err(crate::check::setup(format!(
                "{subject}: the faulted work ended and is_complete() returned Ok({seen}): no error was ever \
                 reported, and with no observer nothing tells a fault that never fired from an error the \
                 backend lost, so EXC-6 (stickiness of a reported error) could not be checked"
            )))
        }
    };
    if seen {
        ctx.attribute(
            "EXC-2",
            format!(
                "{subject}: the faulted work ended {state:?}, but is_complete() returned Ok(true), \
                 success for work that never completed"
            ),
        );
    }
    Err(crate::check::setup(format!(
        "{subject}: the faulted work ended {state:?}, but is_complete() returned Ok({seen}) and no \
         error was ever reported, so EXC-6 (stickiness of a reported error) could not be checked"
    )))
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
pub(super) fn an_error_is_not_release<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let subject = driver.subject;
    let lane = fork_one_lane(ctx)?;
    let mut faulted = Faulted::submit(ctx, driver, std::borrow::Borrow::borrow(&lane))?;
    let inputs = faulted.pending.submitted.input_probes.len();
    let probes = take_probes(&mut faulted.pending.submitted);
    drop(faulted.pending.submitted.verify.take());
    let certain = driver.pending != crate::matrix::PendingVia::Lazy;
    crate::suites::common::retained_at_submission(
        ctx,
        &faulted.pending.submitted,
        (&probes, inputs),
        subject,
        certain,
    )?;
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
    let alive = faulted.observer()?.state() == WorkState::Live;
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
    let state = faulted.observer()?.state();
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
