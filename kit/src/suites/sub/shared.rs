//! What the SUB checks (SUB-1..4) share: the operands of every value they
//! build (exact elementwise results), forking lanes, plain submissions,
//! reading a value back bit for bit, and kit setup findings kept apart from
//! the invariant's verdict.

use std::borrow::Borrow;

use eredu_runtime::backend::SubmissionBackend;

use crate::check::{ensure, setup, Check, Finding};
use crate::harness::{Backend, Executor, Harness, OwnedExecutor, Tensor};
use crate::matrix::Handle;
use crate::suites::exact::same_bits;
use crate::world::RankCtx;

/// Operands of every value built here: small dyadic numbers, so each
/// elementwise result is exact and comparable bit for bit.
pub(super) const LHS: [f32; 4] = [1.0, 2.5, -3.0, 4.0];
pub(super) const RHS: [f32; 4] = [0.5, -1.0, 8.0, 0.25];
pub(super) const SHAPE: [usize; 1] = [4];

/// Forks `count` lanes off the rank's executor; errors are violations of `id`.
pub(super) fn fork<H: Harness>(
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
pub(super) fn lane<H: Harness>(owned: &OwnedExecutor<H>) -> &Executor<H> {
    owned.borrow()
}

/// A plain submission of `values`; an `Err` is a violation of `id`.
pub(super) fn submit_values<H: Harness>(
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
pub(super) fn still_pending<H: Harness>(completion: &Handle<H>) -> Result<bool, String> {
    completion.is_complete().map(|complete| !complete)
}

/// Reads `value` back without evaluating it and compares it bit for bit.
/// A value that is not materialised is a violation: `submit` (or the
/// completed work) should have materialised it.
pub(super) fn expect_values<H: Harness>(
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

/// A violation found in kit setup work (a blocker), which is not the
/// invariant's business: inconclusive.
pub(super) fn as_setup(finding: Finding) -> Finding {
    match finding {
        Finding::Violation(message) => setup(message),
        other => other,
    }
}
