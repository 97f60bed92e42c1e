//! SUB-4: a submission (`submit` or `submit_local_dependencies`) that
//! returns `Err` leaves no live native work behind, and the executor still
//! completes new work afterwards.

use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::shared::{LHS, RHS, SHAPE};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Backend, Executor, Harness, Ledger, Probe, Tensor};
use crate::matrix::Handle;
use crate::suites::common::must_complete;
use crate::world::RankCtx;

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

pub(super) fn failed_submit_leaves_no_work<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    failed_submission_leaves_no_work(ctx, Api::Submit)
}

pub(super) fn failed_local_dependencies_leave_no_work<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
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
