//! Observing completion with `is_complete`: EXC-1 (it never blocks, even on
//! pending work), EXC-2 (never `Ok(true)` before the work completed), EXC-3
//! (monotonic: `Ok(true)` stays) and EXC-5 (`Ok(true)` once `wait`
//! returned).

use std::time::{Duration, Instant};

use super::shared::{
    finished, kept_pending, optional_observer, wait_on_complete_succeeds, wait_succeeds, REPEAT,
};
use crate::check::{ensure, slack, Check};
use crate::harness::{Harness, WorkState};
use crate::matrix::Driver;
use crate::suites::common::{complete, settle, verify_outputs};
use crate::world::RankCtx;

/// EXC-1: `is_complete()` returns within `slack::PROMPT` while work is pending.
pub(super) fn is_complete_is_prompt_while_pending<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut pending = driver.pending(ctx)?;
    for call in 0..3 {
        let _seen = crate::world::prompt(
            "is_complete()",
            "EXC-1",
            || pending.submitted.completion.is_complete(),
            |seen| {
                format!(
                    "{}: is_complete() call {} (returned {seen:?}) while the work was pending because {}",
                    driver.subject,
                    call + 1,
                    kept_pending(driver)
                )
            },
        )?;
        settle();
    }
    pending.confirm("the last is_complete() call")?;
    complete(&mut pending, "EXC-1")
}

/// EXC-2: `is_complete()` never says `Ok(true)` while the work is pending,
/// and when it first does, the work has completed (observer, output values).
pub(super) fn never_complete_before_the_work<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
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
pub(super) fn completion_is_monotonic<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
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
pub(super) fn complete_after_wait<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut pending = driver.pending(ctx)?;
    let observer = optional_observer(ctx, &pending.submitted.completion);
    pending.release();
    if let Some(observer) = &observer {
        // No is_complete() here: the first query after wait() is under test.
        finished::<H>(Some(observer), None, driver.subject, "it was released")?;
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
