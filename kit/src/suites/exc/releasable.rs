//! `resources_releasable`: EXC-8 (nonblocking and conservative: never true
//! while the work is live, after an error, a cancel request or a passed
//! deadline included, and it runs no application code such as retained
//! values' destructors) and EXC-9 (it agrees with completion: true once the
//! work completed and its resources were released).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use eredu_core::{BoundedCompletionOutcome, BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::SubmissionBackend;

use super::shared::{finished, kept_pending, optional_observer, Faulted};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Backend, Harness, WorkState};
use crate::matrix::{Driver, Handle, Subject};
use crate::suites::common::{
    complete, needs, settle, supported, take_completion, verify_outputs, Parts,
};
use crate::world::RankCtx;

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
    let _inside = Inside::enter();
    crate::world::prompt(
        "resources_releasable()",
        "EXC-8",
        || completion.resources_releasable(),
        |releasable| format!("{subject}: {when} (returned {releasable})"),
    )
}

/// EXC-8, clause by clause: `resources_releasable()` is prompt and false
/// while work is pending, and drops no value given to `retain_until_complete`
/// inside the call (black-box); it is false after an error while the work is
/// live (fault injection, hold and observer); and it is never true because a
/// bounded wait timed out (read on a second handle after `wait_bounded`
/// consumed the first: the observer's reading, or a second handle of the
/// backend's own). A part that cannot run makes the case not-supported unless
/// another part found a violation.
pub(super) fn releasable_is_prompt_conservative_and_inert<H: Harness>(
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
    let state = faulted.observer()?.state();
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
                finished::<H>(
                    Some(observer),
                    None,
                    subject,
                    "the quarantined work was released",
                )?;
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
pub(super) fn releasable_agrees_with_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
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
