//! SUB: the submission backend (`SubmissionBackend` of eredu-runtime):
//! forked executors are independent lanes (SUB-1), `submit` materialises
//! exactly the values it is given (SUB-2), `order_after` orders a consumer
//! after its producer (SUB-3), and a submission that returns `Err` leaves no
//! live native work behind (SUB-4).

use std::borrow::Borrow;

use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::exact::same_bits;
use super::{must_complete, needs, settle};
use crate::case::{Body, Row};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Backend, Executor, Harness, Ledger, OwnedExecutor, Probe, Tensor};
use crate::matrix::{wait_within, Handle, Subject};
use crate::world::RankCtx;

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "SUB-1",
            applies: |s| s == Subject::ForkExecutors,
            requires: needs::HOLD,
            timing: true,
            body: Body::Direct {
                ranks: 1,
                script: forked_lanes_are_independent::<H>,
            },
        },
        Row {
            id: "SUB-2",
            applies: |s| s == Subject::Submit,
            requires: needs::NOTHING,
            timing: false,
            body: Body::Direct {
                ranks: 1,
                script: submit_materialises_the_given_values::<H>,
            },
        },
        Row {
            id: "SUB-3",
            applies: |s| s == Subject::OrderAfter,
            requires: needs::HOLD,
            timing: true,
            body: Body::Direct {
                ranks: 1,
                script: order_after_orders_the_consumer::<H>,
            },
        },
        Row {
            id: "SUB-4",
            applies: |s| s == Subject::Submit,
            requires: SUB_4_NEEDS,
            timing: false,
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
            body: Body::Direct {
                ranks: 1,
                script: failed_local_dependencies_leave_no_work::<H>,
            },
        },
    ]
}

/// SUB-4 arms a submission fault, holds the executor so that work a failed
/// submission wrongly queued stays live, and watches probes and the ledger.
const SUB_4_NEEDS: crate::Instruments = needs::FAULT
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

/// Control (SUB-1, SUB-3): the `held` work must be pending under its hold,
/// or the `unchecked` property cannot be checked (a harness problem); an
/// error from `is_complete` is a violation of `api`.
fn held_work_is_pending<H: Harness>(
    work: &Handle<H>,
    api: &str,
    held: &str,
    unchecked: &str,
) -> Check {
    match still_pending(work) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Finding::Harness(format!(
            "{held} reported complete while held (the hold instrument did not hold it, or \
             is_complete answered early, see EXC-2): {unchecked} cannot be checked"
        ))),
        Err(error) => Err(Finding::Violation(format!(
            "{api}: is_complete on {held} failed: {error}"
        ))),
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

/// SUB-1: `fork_executors(e, n)` returns exactly `n` executors, and they are
/// independent lanes: while one of them is held (with work queued on it),
/// work submitted on each of the others completes.
fn forked_lanes_are_independent<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    // Independence first: it is the behaviour under test, and checking it on
    // the first lanes forked keeps its verdict free of earlier forks' drops.
    let lanes = forked_exactly(ctx, 3)?;
    for held in 0..lanes.len() {
        others_run_while_one_is_held(ctx, &lanes, held)?;
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

/// Holds lane `held` with work queued on it; every other lane completes work.
fn others_run_while_one_is_held<H: Harness>(
    ctx: &RankCtx<'_, H>,
    lanes: &[OwnedExecutor<H>],
    held: usize,
) -> Check {
    let input = ctx.tensor(&LHS, &SHAPE)?;
    let hold = ctx.hold(lane::<H>(&lanes[held]))?;
    let blocked = submit_values::<H>(
        lane::<H>(&lanes[held]),
        &[&input],
        "work on the held lane",
        "SUB-1",
    )?;
    settle();
    let held_work = format!("work on held forked lane {held}");
    held_work_is_pending(&blocked, "fork_executors", &held_work, "lane independence")?;
    for (index, other) in lanes.iter().enumerate().filter(|(index, _)| *index != held) {
        let work = submit_values::<H>(lane::<H>(other), &[&input], "work on a free lane", "SUB-1")?;
        must_complete(&work, || {
            format!(
                "fork_executors: work on forked lane {index} did not complete while forked lane \
                 {held} was held, so the lanes are not independent"
            )
        })?;
    }
    hold.release();
    must_complete(&blocked, || {
        format!(
            "fork_executors: work on forked lane {held} did not complete after its hold was \
             released"
        )
    })
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

/// SUB-3: after `order_after(producer, b)`, work submitted on lane `b` waits
/// for the producer (held on lane `a`), completes after its release, and
/// sees the producer's results.
fn order_after_orders_the_consumer<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    let lanes = fork(ctx, 2, "SUB-3")?;
    let (a, b) = match lanes.as_slice() {
        [a, b] => (lane::<H>(a), lane::<H>(b)),
        _ => {
            return Err(Finding::NotSupported(format!(
                "SUB-3 needs two forked lanes; fork_executors(executor, 2) returned {} (see SUB-1)",
                lanes.len()
            )))
        }
    };
    let base = ctx.tensor(&LHS, &SHAPE)?;
    let (produced, produced_values) = derived(ctx, &base, &LHS, 2.0)?;
    let hold = ctx.hold(a)?;
    let producer = submit_values::<H>(a, &[&produced], "the producer", "SUB-3")?;
    lanes_are_independent(ctx, b)?;
    held_work_is_pending(&producer, "order_after", "the held producer", "ordering")?;
    let Handle::Plain(producer_completion) = &producer else {
        return Err(Finding::Harness(
            "a plain submission gave a communication completion".into(),
        ));
    };
    Backend::<H>::order_after(producer_completion, b).map_err(|error| {
        Finding::Violation(format!("order_after(producer, lane b) failed: {error}"))
    })?;
    let (consumed, consumed_values) = derived(ctx, &produced, &produced_values, 1.5)?;
    let consumer = submit_values::<H>(b, &[&consumed], "the consumer", "SUB-3")?;
    settle();
    consumer_waits(&consumer)?;
    hold.release();
    must_complete(&producer, || {
        "order_after: the producer did not complete after release".into()
    })?;
    must_complete(&consumer, || {
        "order_after: the consumer did not complete after its producer did".into()
    })?;
    expect_values(
        ctx,
        &produced,
        &produced_values,
        "order_after: the producer's value",
    )?;
    expect_values(
        ctx,
        &consumed,
        &consumed_values,
        "order_after: the consumer's value, computed from the producer's",
    )
}

/// `input * factor`, lazily where the backend provides `multiply_scalar`,
/// else materialised; with its expected values.
fn derived<H: Harness>(
    ctx: &RankCtx<'_, H>,
    input: &Tensor<H>,
    values: &[f32],
    factor: f32,
) -> Result<(Tensor<H>, Vec<f32>), Finding> {
    let expected: Vec<f32> = values.iter().map(|v| v * factor).collect();
    match <Tensor<H> as eredu_nn::Tensor>::multiply_scalar(input, factor, ctx.context()) {
        Ok(value) => Ok((value, expected)),
        Err(_) => Ok((ctx.tensor(&expected, &SHAPE)?, expected)),
    }
}

/// Control for SUB-3: lane `b` runs work while lane `a` is held, so a
/// pending consumer can only be waiting because of `order_after`.
fn lanes_are_independent<H: Harness>(ctx: &RankCtx<'_, H>, b: &Executor<H>) -> Check {
    let input = ctx.tensor(&RHS, &SHAPE)?;
    let control = submit_values::<H>(b, &[&input], "control work", "SUB-3")?;
    wait_within(&control, slack::RELEASE).map_err(|error| {
        Finding::NotSupported(format!(
            "SUB-3 needs independent lanes, but work on the second forked lane did not complete \
             while the first was held (see SUB-1): {error}"
        ))
    })
}

/// The consumer stays pending while its producer is held.
fn consumer_waits<H: Harness>(consumer: &Handle<H>) -> Check {
    match still_pending(consumer) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Finding::Violation(format!(
            "order_after: work submitted on lane b after order_after(producer, b) completed while the \
             producer on lane a was still held (checked after {:?})",
            slack::SETTLE
        ))),
        Err(error) => Err(Finding::Violation(format!(
            "order_after: the ordered consumer failed while its producer was held: {error}"
        ))),
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
fn failed_submission_leaves_no_work<H: Harness>(ctx: &RankCtx<'_, H>, api: Api) -> Check {
    let before = ctx.ledger()?;
    let hold = ctx.hold(ctx.executor())?;
    let probes = submit_refused(ctx, api)?;
    nothing_left_behind(ctx, api, before, &probes)?;
    hold.release();
    still_accepts_work(ctx, api)
}

/// Makes inputs, arms the submission fault, submits; returns probes on the
/// inputs, whose handles are all dropped on return.
fn submit_refused<H: Harness>(ctx: &RankCtx<'_, H>, api: Api) -> Result<Vec<Probe>, Finding> {
    let materialised = ctx.tensor(&LHS, &SHAPE)?;
    let mut inputs = vec![materialised];
    if let Ok(lazy) =
        <Tensor<H> as eredu_nn::Tensor>::multiply_scalar(&inputs[0], 2.0, ctx.context())
    {
        inputs.push(lazy);
    }
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
