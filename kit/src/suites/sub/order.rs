//! SUB-3: after `order_after(producer, b)`, work submitted on lane `b`
//! waits for the producer (queued on a busy lane `a`), completes after it,
//! and sees the producer's results.

use std::time::{Duration, Instant};

use eredu_runtime::backend::SubmissionBackend;

use super::race::{blocked_work_is_pending, race, Race, Racer};
use super::shared::{as_setup, expect_values, lane, still_pending, LHS, RHS, SHAPE};
use crate::check::{setup, slack, Check, Finding};
use crate::harness::{Backend, Executor, Harness, Tensor};
use crate::matrix::Handle;
use crate::suites::blocker::{free_lane_limit, Blocker};
use crate::suites::common::must_complete;
use crate::world::RankCtx;

/// Lazy work that blocks lane `a` in SUB-3 is scaled so that its known busy
/// while covers the control and `order_after`.
const SUB_3_FACTOR: usize = 2;

/// SUB-3: after `order_after(producer, b)`, work submitted on lane `b` waits
/// for the producer (queued on lane `a` behind work that keeps `a` busy:
/// held, or lazy), completes after it, and sees the producer's results.
pub(super) fn order_after_orders_the_consumer<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    let lanes = Backend::<H>::fork_executors(ctx.executor(), 2).map_err(|error| {
        setup(format!(
            "SUB-3 needs two forked lanes, but fork_executors(executor, 2) failed: {error} \
             (see SUB-1)"
        ))
    })?;
    let (a, b) = match lanes.as_slice() {
        [a, b] => (lane::<H>(a), lane::<H>(b)),
        _ => {
            return Err(setup(format!(
                "SUB-3 needs two forked lanes; fork_executors(executor, 2) returned {} (see SUB-1)",
                lanes.len()
            )))
        }
    };
    let base = ctx.tensor(&LHS, &SHAPE)?;
    let (produced, produced_values) = derived(ctx, a, &base, &LHS, 2.0)?;
    let blocker = Blocker::block(ctx, a, SUB_3_FACTOR)?;
    let producer = Backend::<H>::submit(a, [&produced])
        .map(Handle::Plain)
        .map_err(|error| setup(format!("submit of the producer on lane a failed: {error}")))?;
    lanes_are_independent(ctx, b, &blocker)?;
    blocked_work_is_pending(
        &blocker,
        &producer,
        "order_after",
        "the producer queued on busy lane a",
        "ordering",
    )?;
    let Handle::Plain(producer_completion) = &producer else {
        return Err(Finding::Harness(
            "a plain submission gave a communication completion".into(),
        ));
    };
    Backend::<H>::order_after(producer_completion, b).map_err(|error| {
        Finding::Violation(format!(
            "order_after(producer, lane b) failed while the producer was pending: {error}"
        ))
    })?;
    let (consumed, consumed_values) = derived(ctx, b, &produced, &produced_values, 1.5)?;
    let consumer = Backend::<H>::submit(b, [&consumed])
        .map(Handle::Plain)
        .map_err(|error| {
            Finding::Violation(format!(
                "order_after: submit of the consumer on lane b after order_after(producer, b) \
                 failed: {error}"
            ))
        })?;
    consumer_waits(&blocker, &producer, &consumer)?;
    blocker
        .release_and_finish(|| "the work keeping lane a busy did not complete once released".into())
        .map_err(as_setup)?;
    must_complete(&producer, || {
        "order_after: the producer did not complete after lane a was released".into()
    })?;
    must_complete(&consumer, || {
        "order_after: the consumer did not complete after its producer did".into()
    })?;
    // The producer's own value is `submit`'s business (SUB-2): a precondition.
    expect_values(
        ctx,
        &produced,
        &produced_values,
        "order_after: the producer's value",
    )
    .map_err(as_setup)?;
    expect_values(
        ctx,
        &consumed,
        &consumed_values,
        "order_after: the consumer's value, computed from the producer's",
    )
}

/// `input * factor` for work on `lane`, lazily where the backend provides
/// `multiply_scalar`, else materialised; with its expected values.
fn derived<H: Harness>(
    ctx: &RankCtx<'_, H>,
    lane: &Executor<H>,
    input: &Tensor<H>,
    values: &[f32],
    factor: f32,
) -> Result<(Tensor<H>, Vec<f32>), Finding> {
    let expected: Vec<f32> = values.iter().map(|v| v * factor).collect();
    match <Tensor<H> as eredu_nn::Tensor>::multiply_scalar(input, factor, ctx.context_on(lane)) {
        Ok(value) => Ok((value, expected)),
        Err(_) => Ok((ctx.tensor(&expected, &SHAPE)?, expected)),
    }
}

/// Control for SUB-3: lane `b` completes work while lane `a` is surely busy,
/// so a pending consumer can only be waiting because of `order_after`.
/// Otherwise the ordering cannot be checked (setup; see SUB-1).
fn lanes_are_independent<H: Harness>(
    ctx: &RankCtx<'_, H>,
    b: &Executor<H>,
    blocker: &Blocker<'_, '_, H>,
) -> Check {
    let input = ctx.tensor(&RHS, &SHAPE)?;
    blocker.confirm("control work was submitted on lane b")?;
    let submitted = Instant::now();
    let completion = Backend::<H>::submit(b, [&input])
        .map(Handle::Plain)
        .map_err(|error| setup(format!("submit of control work on lane b failed: {error}")))?;
    let racer = Racer {
        lane: "lane b".into(),
        completion,
        submitted,
    };
    let how = blocker.how();
    match race(
        blocker,
        std::slice::from_ref(&racer),
        free_lane_limit(blocker),
    ) {
        Race::Completed => Ok(()),
        Race::Stuck { lane, elapsed } => Err(setup(format!(
            "SUB-3 needs independent lanes, but control work on {lane} was still pending \
             {elapsed:?} after its submission while lane a was {how} (see SUB-1)"
        ))),
        Race::Failed { lane, error } => Err(setup(format!(
            "control work on {lane} failed while lane a was {how}: {error}"
        ))),
        Race::NotBusy => Err(setup(
            "the lazy work keeping lane a busy may have finished before control work on lane b \
             was seen complete",
        )),
    }
}

/// SUB-3's observation, by the backend's own answers. A consumer seen
/// complete while the producer still reports pending is a violation,
/// whatever the machine's load (a later `is_complete` of the producer saying
/// `Ok(false)` means it had not completed when the consumer had). Where the
/// blocker keeps lane `a` busy for certain (the hold, or a fed round), the
/// consumer is watched for [`slack::SETTLE`] while the producer surely waits. With lazy work on lane `a` it is watched until the producer
/// completes: the consumer must be seen pending while the producer is, and
/// complete only after it; no guess of how long the lazy work takes enters
/// a verdict (the watch is bounded by the case's release limit only).
fn consumer_waits<H: Harness>(
    blocker: &Blocker<'_, '_, H>,
    producer: &Handle<H>,
    consumer: &Handle<H>,
) -> Check {
    let how = blocker.how();
    let limit = blocker.completes_within();
    let started = Instant::now();
    let mut seen_waiting = false;
    loop {
        match still_pending(consumer) {
            Ok(true) if blocker.certain() && started.elapsed() >= slack::SETTLE => {
                return blocker.confirm("the ordered consumer was last seen pending");
            }
            Ok(true) if blocker.certain() => {}
            Ok(true) => match still_pending(producer) {
                Ok(true) if started.elapsed() >= limit => {
                    return Err(setup(format!(
                        "the producer on lane a ({how}) still reported pending after {limit:?}"
                    )))
                }
                Ok(true) => seen_waiting = true,
                // The producer ended (or failed: SUB-2's and EXC's business)
                // while the consumer was still pending: ordered.
                Ok(false) | Err(_) if seen_waiting => return Ok(()),
                Ok(false) | Err(_) => return Err(setup(
                    "the producer completed before the ordered consumer was seen waiting for it",
                )),
            },
            Ok(false) => {
                let elapsed = started.elapsed();
                let producer_pending = still_pending(producer);
                return match producer_pending {
                    Ok(true) => Err(Finding::Violation(format!(
                        "order_after: work submitted on lane b after order_after(producer, b) \
                         completed (seen {elapsed:?} after its submission) while the producer, \
                         queued on lane a ({how}), still reported pending; expected the consumer \
                         to wait for the producer"
                    ))),
                    // Both ended between two looks, after the consumer was
                    // seen waiting while the producer was pending.
                    _ if seen_waiting => Ok(()),
                    _ => Err(setup(format!(
                        "the ordered consumer completed, but its producer may have completed first \
                         (producer's is_complete: {producer_pending:?})"
                    ))),
                };
            }
            Err(error) => {
                return Err(Finding::Violation(format!(
                    "order_after: the ordered consumer failed while its producer was pending \
                     (lane a {how}): {error}"
                )))
            }
        }
        crate::world::pause(Duration::from_millis(1));
    }
}
