//! SUB: the submission backend (`SubmissionBackend` of eredu-runtime):
//! forked executors are independent lanes (SUB-1), `submit` materialises
//! exactly the values it is given (SUB-2), `order_after` orders a consumer
//! after its producer (SUB-3), and a submission that returns `Err` leaves no
//! live native work behind (SUB-4).

use std::borrow::Borrow;
use std::time::{Duration, Instant};

use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::blocker::{free_lane_limit, Blocker};
use super::common::{must_complete, needs, settle};
use super::exact::same_bits;
use crate::case::{Body, Row};
use crate::check::{ensure, eventually, setup, slack, Check, Finding};
use crate::harness::{Backend, Executor, Harness, Ledger, OwnedExecutor, Probe, Tensor};
use crate::matrix::{Handle, Subject};
use crate::world::RankCtx;

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "SUB-1",
            applies: |s| s == Subject::ForkExecutors,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Blocks(forked_lanes_are_independent::<H>),
        },
        Row {
            id: "SUB-2",
            applies: |s| s == Subject::Submit,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 1,
                script: submit_materialises_the_given_values::<H>,
            },
        },
        Row {
            id: "SUB-3",
            applies: |s| s == Subject::OrderAfter,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Blocks(order_after_orders_the_consumer::<H>),
        },
        Row {
            id: "SUB-4",
            applies: |s| s == Subject::Submit,
            requires: SUB_4_NEEDS,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 1,
                script: failed_submit_leaves_no_work::<H>,
            },
        },
        Row {
            id: "SUB-4",
            applies: |s| s == Subject::LocalDependencies,
            requires: SUB_4_NEEDS,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 1,
                script: failed_local_dependencies_leave_no_work::<H>,
            },
        },
    ]
}

/// SUB-4 arms a submission fault, holds the executor so that work a failed
/// submission wrongly queued stays live, and watches probes and the ledger.
const SUB_4_NEEDS: crate::Instruments = needs::SUBMISSION_FAULT
    .and(needs::HOLD)
    .and(needs::PROBE)
    .and(needs::LEDGER);

/// Operands of every value built here: small dyadic numbers, so each
/// elementwise result is exact and comparable bit for bit.
const LHS: [f32; 4] = [1.0, 2.5, -3.0, 4.0];
const RHS: [f32; 4] = [0.5, -1.0, 8.0, 0.25];
const SHAPE: [usize; 1] = [4];

// ---------------------------------------------------------------------------
// Shared helpers.

/// Forks `count` lanes off the rank's executor; errors are violations of `id`.
fn fork<H: Harness>(
    ctx: &RankCtx<'_, H>,
    count: usize,
    id: &str,
) -> Result<Vec<OwnedExecutor<H>>, Finding> {
    Backend::<H>::fork_executors(ctx.executor(), count).map_err(|error| {
        Finding::Violation(format!(
            "{id}: fork_executors(executor, {count}) failed: {error}"
        ))
    })
}

/// The executor behind an owned lane.
fn lane<H: Harness>(owned: &OwnedExecutor<H>) -> &Executor<H> {
    owned.borrow()
}

/// A plain submission of `values`; an `Err` is a violation of `id`.
fn submit_values<H: Harness>(
    executor: &Executor<H>,
    values: &[&Tensor<H>],
    what: &str,
    id: &str,
) -> Result<Handle<H>, Finding> {
    Backend::<H>::submit(executor, values.iter().copied())
        .map(Handle::Plain)
        .map_err(|error| Finding::Violation(format!("{id}: submit of {what} failed: {error}")))
}

/// Whether `completion` is still pending: `Ok(false)` from `is_complete`.
fn still_pending<H: Harness>(completion: &Handle<H>) -> Result<bool, String> {
    completion.is_complete().map(|complete| !complete)
}

/// Control (SUB-1, SUB-3): the work that keeps a lane busy must be pending
/// (after a settle, where the blocker keeps it busy for certain), or the
/// `unchecked` property cannot be checked: the attempt is inconclusive (the
/// hold did not hold, a sum reduction completed before its late peer joined,
/// lazy work was not pending, or `is_complete` answered early: EXC-2's
/// business). An error from `is_complete` is a violation of `api`.
fn blocked_work_is_pending<H: Harness>(
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
struct Racer<H: Harness> {
    /// Which lane, for messages.
    lane: String,
    completion: Handle<H>,
    submitted: Instant,
}

/// What polling work on free lanes against a blocked lane showed.
enum Race {
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
fn race<H: Harness>(blocker: &Blocker<'_, '_, H>, racers: &[Racer<H>], limit: Duration) -> Race {
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

/// Reads `value` back without evaluating it and compares it bit for bit.
/// A value that is not materialised is a violation: `submit` (or the
/// completed work) should have materialised it.
fn expect_values<H: Harness>(
    ctx: &RankCtx<'_, H>,
    value: &Tensor<H>,
    expected: &[f32],
    what: &str,
) -> Check {
    let got = ctx.harness().read(ctx.state(), value).map_err(|error| {
        Finding::Violation(format!(
            "{what} is not materialised after its submission completed ({error})"
        ))
    })?;
    ensure(same_bits(&got, expected), || {
        format!("{what} reads back as {got:?}, expected {expected:?}")
    })
}

/// Builds a value from two operands through the tensor context.
type BuildOp<H> = fn(
    &Tensor<H>,
    &Tensor<H>,
    &crate::harness::TensorContext<H>,
) -> Result<Tensor<H>, eredu_nn::Error>;

/// One elementwise tensor operation of `eredu_nn::Tensor` with its host model.
struct Op<H: Harness> {
    name: &'static str,
    build: BuildOp<H>,
    model: fn(f32, f32) -> f32,
}

/// The operations lazy values are built from, in order of preference.
fn ops<H: Harness>() -> [Op<H>; 4] {
    [
        Op {
            name: "add(lhs, rhs)",
            build: |a, b, c| <Tensor<H> as eredu_nn::Tensor>::add(a, b, c),
            model: |a, b| a + b,
        },
        Op {
            name: "multiply_scalar(lhs, 3)",
            build: |a, _, c| <Tensor<H> as eredu_nn::Tensor>::multiply_scalar(a, 3.0, c),
            model: |a, _| a * 3.0,
        },
        Op {
            name: "subtract(rhs, lhs)",
            build: |a, b, c| <Tensor<H> as eredu_nn::Tensor>::subtract(b, a, c),
            model: |a, b| b - a,
        },
        Op {
            name: "multiply(lhs, rhs)",
            build: |a, b, c| <Tensor<H> as eredu_nn::Tensor>::multiply(a, b, c),
            model: |a, b| a * b,
        },
    ]
}

/// A value built by a tensor operation (lazy where the backend defers work),
/// with its expected host values.
struct Built<H: Harness> {
    name: &'static str,
    value: Tensor<H>,
    expected: Vec<f32>,
}

/// Every value the backend's tensor operations build from `lhs` and `rhs`
/// (the operations it does not provide are skipped).
fn build_values<H: Harness>(
    ctx: &RankCtx<'_, H>,
    lhs: &Tensor<H>,
    rhs: &Tensor<H>,
) -> Vec<Built<H>> {
    ops::<H>()
        .into_iter()
        .filter_map(|op| {
            let value = (op.build)(lhs, rhs, ctx.context()).ok()?;
            let expected = LHS
                .iter()
                .zip(&RHS)
                .map(|(a, b)| (op.model)(*a, *b))
                .collect();
            Some(Built {
                name: op.name,
                value,
                expected,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------
// SUB-1

/// Lazy work that blocks a lane in SUB-1 is scaled so that its known busy
/// while comfortably exceeds [`free_lane_limit`].
const SUB_1_FACTOR: usize = 2;

/// SUB-1: `fork_executors(e, n)` returns exactly `n` executors, and they are
/// independent lanes: while one of them is kept busy (held, or evaluating
/// lazy work), work submitted on each of the others completes.
fn forked_lanes_are_independent<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    // Independence first: it is the behaviour under test, and checking it on
    // the first lanes forked keeps its verdict free of earlier forks' drops.
    let lanes = forked_exactly(ctx, 3)?;
    for blocked in 0..lanes.len() {
        others_run_while_one_is_blocked(ctx, &lanes, blocked)?;
    }
    drop(lanes);
    for count in [0, 1] {
        forked_exactly(ctx, count)?;
    }
    Ok(())
}

/// `fork_executors(e, count)` returns exactly `count` executors.
fn forked_exactly<H: Harness>(
    ctx: &RankCtx<'_, H>,
    count: usize,
) -> Result<Vec<OwnedExecutor<H>>, Finding> {
    let lanes = fork(ctx, count, "SUB-1")?;
    ensure(lanes.len() == count, || {
        format!(
            "fork_executors(executor, {count}) returned {} executors, expected exactly {count}",
            lanes.len()
        )
    })?;
    Ok(lanes)
}

/// Keeps lane `blocked` busy with work queued on it; work on every other
/// lane completes while it is surely busy.
fn others_run_while_one_is_blocked<H: Harness>(
    ctx: &RankCtx<'_, H>,
    lanes: &[OwnedExecutor<H>],
    blocked: usize,
) -> Check {
    let input = ctx.tensor(&LHS, &SHAPE)?;
    let blocker = Blocker::block(ctx, lane::<H>(&lanes[blocked]), SUB_1_FACTOR)?;
    blocked_work_is_pending(
        &blocker,
        &blocker.completion,
        "fork_executors",
        &format!("the work keeping forked lane {blocked} busy"),
        "lane independence",
    )?;
    let mut racers = Vec::new();
    for (index, other) in lanes.iter().enumerate().filter(|(i, _)| *i != blocked) {
        blocker.confirm(&format!("work was submitted on forked lane {index}"))?;
        let submitted = Instant::now();
        let completion =
            submit_values::<H>(lane::<H>(other), &[&input], "work on a free lane", "SUB-1")?;
        racers.push(Racer {
            lane: format!("forked lane {index}"),
            completion,
            submitted,
        });
    }
    let how = blocker.how();
    match race(&blocker, &racers, free_lane_limit(&blocker)) {
        Race::Completed => {}
        Race::Stuck { lane, elapsed } => {
            return Err(Finding::Violation(format!(
                "fork_executors: work on {lane} was still pending {elapsed:?} after its submission \
                 while forked lane {blocked} was {how} (expected it to complete meanwhile), so the \
                 lanes are not independent"
            )))
        }
        Race::Failed { lane, error } => {
            return Err(Finding::Violation(format!(
                "fork_executors: work on {lane} failed while forked lane {blocked} was {how}: \
                 {error}"
            )))
        }
        Race::NotBusy => {
            return Err(setup(format!(
            "the lazy work keeping forked lane {blocked} busy may have finished before the work \
                 on the other forked lanes was seen complete"
        )))
        }
    }
    blocker
        .release_and_finish(|| {
            format!("the work keeping forked lane {blocked} busy did not complete once released")
        })
        .map_err(as_setup)
}

/// A violation found in kit setup work (a blocker), which is not the
/// invariant's business: inconclusive.
fn as_setup(finding: Finding) -> Finding {
    match finding {
        Finding::Violation(message) => setup(message),
        other => other,
    }
}

// ---------------------------------------------------------------------------
// SUB-2

/// SUB-2: `submit` evaluates the values it is given: after its completion
/// each of them reads back (without evaluation) materialised and bit-exact.
/// A value built alongside but not submitted is not needed by that
/// submission (it is not asserted unevaluated: backends may be eager), and
/// stays correct when submitted on its own afterwards.
fn submit_materialises_the_given_values<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    let lhs = ctx.tensor(&LHS, &SHAPE)?;
    let rhs = ctx.tensor(&RHS, &SHAPE)?;
    let mut built = build_values(ctx, &lhs, &rhs);
    if built.is_empty() {
        return Err(Finding::NotSupported(
            "SUB-2 needs a lazy value, and the backend's tensor context provides none of add, \
             multiply_scalar, subtract, multiply"
                .into(),
        ));
    }
    let left_out = if built.len() > 1 { built.pop() } else { None };
    let mut given: Vec<&Tensor<H>> = built.iter().map(|b| &b.value).collect();
    given.push(&rhs);
    let completion = submit_values::<H>(ctx.executor(), &given, "the given values", "SUB-2")?;
    must_complete(&completion, || {
        "submit: the submission did not complete".into()
    })?;
    for value in &built {
        expect_values(
            ctx,
            &value.value,
            &value.expected,
            &format!("submit: submitted value {}", value.name),
        )?;
    }
    expect_values(ctx, &rhs, &RHS, "submit: submitted materialised value rhs")?;
    match left_out {
        Some(value) => value_left_out_stays_correct(ctx, &value),
        None => Ok(()),
    }
}

/// The value left out of the first submission evaluates correctly on its own.
fn value_left_out_stays_correct<H: Harness>(ctx: &RankCtx<'_, H>, value: &Built<H>) -> Check {
    let completion = submit_values::<H>(
        ctx.executor(),
        &[&value.value],
        "the value left out",
        "SUB-2",
    )?;
    must_complete(&completion, || {
        format!(
            "submit: a later submission of {} did not complete",
            value.name
        )
    })?;
    expect_values(
        ctx,
        &value.value,
        &value.expected,
        &format!(
            "submit: {} (left out of the first submission, submitted later)",
            value.name
        ),
    )
}

// ---------------------------------------------------------------------------
// SUB-3

/// Lazy work that blocks lane `a` in SUB-3 is scaled so that its known busy
/// while covers the control and `order_after`.
const SUB_3_FACTOR: usize = 2;

/// SUB-3: after `order_after(producer, b)`, work submitted on lane `b` waits
/// for the producer (queued on lane `a` behind work that keeps `a` busy:
/// held, or lazy), completes after it, and sees the producer's results.
fn order_after_orders_the_consumer<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
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

// ---------------------------------------------------------------------------
// SUB-4

/// Which submission API SUB-4 exercises.
#[derive(Clone, Copy)]
enum Api {
    Submit,
    LocalDependencies,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Self::Submit => "submit",
            Self::LocalDependencies => "submit_local_dependencies",
        }
    }

    /// Submits `values` through this API.
    fn call<H: Harness>(
        self,
        executor: &Executor<H>,
        values: &[&Tensor<H>],
    ) -> Result<Handle<H>, String> {
        match self {
            Self::Submit => Backend::<H>::submit(executor, values.iter().copied())
                .map(Handle::Plain)
                .map_err(|e| e.to_string()),
            Self::LocalDependencies => {
                Backend::<H>::submit_local_dependencies(values.iter().copied(), executor)
                    .map(|submission| Handle::Communication(submission.completion))
                    .map_err(|e| e.to_string())
            }
        }
    }
}

fn failed_submit_leaves_no_work<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    failed_submission_leaves_no_work(ctx, Api::Submit)
}

fn failed_local_dependencies_leave_no_work<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    failed_submission_leaves_no_work(ctx, Api::LocalDependencies)
}

/// SUB-4: a submission that returns `Err` leaves no live native work: with
/// the executor held (so wrongly queued work would stay live), once the
/// caller dropped its inputs the ledger's pending work and storages return to
/// what they were before and the inputs' storages are freed; after the hold
/// is released, the executor still completes new work.
///
/// The inputs are made before the hold is taken: on an eager backend the
/// elementwise input is itself work on the executor, which the hold would
/// keep live (with its operands) through no fault of the refused
/// submission.
fn failed_submission_leaves_no_work<H: Harness>(ctx: &RankCtx<'_, H>, api: Api) -> Check {
    let before = ctx.ledger()?;
    let inputs = make_inputs(ctx)?;
    let hold = ctx.hold(ctx.executor())?;
    let probes = submit_refused(ctx, api, inputs)?;
    nothing_left_behind(ctx, api, before, &probes)?;
    hold.release();
    still_accepts_work(ctx, api)
}

/// A materialised input, and (where the backend computes one) an
/// elementwise value of it: lazy on a lazy backend, queued work on an eager
/// one.
fn make_inputs<H: Harness>(ctx: &RankCtx<'_, H>) -> Result<Vec<Tensor<H>>, Finding> {
    let materialised = ctx.tensor(&LHS, &SHAPE)?;
    let mut inputs = vec![materialised];
    if let Ok(lazy) =
        <Tensor<H> as eredu_nn::Tensor>::multiply_scalar(&inputs[0], 2.0, ctx.context())
    {
        inputs.push(lazy);
    }
    Ok(inputs)
}

/// Arms the submission fault and submits `inputs`; returns probes on them,
/// whose handles are all dropped on return.
fn submit_refused<H: Harness>(
    ctx: &RankCtx<'_, H>,
    api: Api,
    inputs: Vec<Tensor<H>>,
) -> Result<Vec<Probe>, Finding> {
    let probes = inputs
        .iter()
        .map(|t| ctx.probe(t))
        .collect::<Result<Vec<_>, _>>()?;
    ctx.fail_next_submission(ctx.executor())?;
    let refs: Vec<&Tensor<H>> = inputs.iter().collect();
    match api.call::<H>(ctx.executor(), &refs) {
        Err(_refused) => Ok(probes),
        Ok(_accepted) => Err(Finding::Harness(format!(
            "the submission fault instrument was armed, but {} returned Ok",
            api.name()
        ))),
    }
}

/// With the executor still held: the inputs' storages are freed and the
/// ledger shows no more pending work or storages than before.
fn nothing_left_behind<H: Harness>(
    ctx: &RankCtx<'_, H>,
    api: Api,
    before: Ledger,
    probes: &[Probe],
) -> Check {
    let mut now = ctx.ledger()?;
    let drained = eventually(slack::RELEASE_RESOURCES, || {
        now = ctx.ledger().unwrap_or(now);
        probes.iter().all(|p| !p.is_live())
            && now.pending_work <= before.pending_work
            && now.storages <= before.storages
    });
    let live = probes.iter().filter(|p| p.is_live()).count();
    ensure(drained, || {
        format!(
            "{}: {:?} after it returned Err (executor held, every input handle dropped), \
             {live} of {} input storages are still allocated and the ledger shows {} pending work \
             item(s) and {} storages (before: {} and {}): the failed submission left live work behind",
            api.name(),
            slack::RELEASE_RESOURCES,
            probes.len(),
            now.pending_work,
            now.storages,
            before.pending_work,
            before.storages
        )
    })
}

/// After the failed submission, the executor still completes new work.
fn still_accepts_work<H: Harness>(ctx: &RankCtx<'_, H>, api: Api) -> Check {
    let input = ctx.tensor(&RHS, &SHAPE)?;
    let work = api.call::<H>(ctx.executor(), &[&input]).map_err(|error| {
        Finding::Violation(format!(
            "{}: after one submission returned Err, the next one (no fault armed) failed too: {error}",
            api.name()
        ))
    })?;
    must_complete(&work, || {
        format!(
            "{}: after a submission returned Err, new work on the executor did not complete",
            api.name()
        )
    })
}
