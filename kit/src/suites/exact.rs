//! Exact comparison of outputs: an output read back from the backend and
//! compared, shape then values, with what it should hold by the value
//! checks' one verifier ([`judge`]), and where it differs, quoted. Shared by
//! the family suites (SUM-1, GAT-1, GAT-2, A2A-1, BRD-1, P2P-1) and SUB-2,
//! SUB-3 ([`same_bits`]).

use super::scenario::{judge, Expected, Mismatch};
use crate::check::{Check, Finding};
use crate::harness::{Harness, Tensor};
use crate::operation::Operation;
use crate::world::RankCtx;

/// Bit-exact equality (NaN payloads and signed zeros included).
pub(crate) fn same_bits(got: &[f32], expected: &[f32]) -> bool {
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

/// A shape as a tensor reports it, as extents (a negative extent reads as
/// `usize::MAX`, which no expected shape has).
fn extents(got: &[i32]) -> Vec<usize> {
    got.iter()
        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
        .collect()
}

/// What an output holds where it is not what it should be.
pub(crate) enum Differs {
    /// Its shape, which is not the expected one (its values were not read).
    Shape(Vec<i32>),
    /// Its values, which are not the expected ones (see [`judge`]).
    Values(Vec<f32>, Mismatch),
}

/// Compares an output's shape, then its values, with `expected` by the
/// value checks' one verifier ([`judge`]: bit for bit, or within the sum's
/// bound); `None` when both match. The output is read in the rank's current
/// dtype; an output of another dtype is a violation.
pub(crate) fn differs<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    output: &Tensor<H>,
    expected: &Expected,
) -> Result<Option<Differs>, Finding> {
    let got_shape = eredu_nn::Tensor::shape(output);
    if extents(got_shape) != expected.shape {
        return Ok(Some(Differs::Shape(got_shape.to_vec())));
    }
    // Read after the backend reported the work complete: a failed read is a
    // value the backend never wrote, or the harness's own read failing; the
    // kit cannot tell which, so it blames neither (inconclusive).
    let got = ctx.read(output).map_err(|finding| match finding {
        Finding::Harness(error) => crate::check::setup(format!(
            "{operation}: the output could not be read back after its completion was reported ({error}): \
             either the backend never wrote it or the harness's read failed, and the kit cannot tell which"
        )),
        other => other,
    })?;
    Ok(judge(expected, &expected.shape, &got).map(|mismatch| Differs::Values(got, mismatch)))
}

/// Checks an output's shape and values (see [`differs`]); `what` names the
/// operation, the rank, the step and what the output should be.
pub(crate) fn check_output<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    what: impl Fn() -> String,
    output: &Tensor<H>,
    expected: &Expected,
) -> Check {
    match differs(ctx, operation, output, expected)? {
        None => Ok(()),
        Some(Differs::Shape(got_shape)) => Err(Finding::Violation(format!(
            "{}: output shape {got_shape:?}, expected {:?}",
            what(),
            expected.shape
        ))),
        Some(Differs::Values(got, mismatch)) => Err(Finding::Violation(format!(
            "{}: {}",
            what(),
            value_difference(&got, expected, mismatch)
        ))),
    }
}

/// At most this many values are quoted in a message.
const QUOTED: usize = 16;

/// Where values that are not the expected ones first differ from them (long
/// outputs are quoted around that element only).
pub(crate) fn value_difference(got: &[f32], expected: &Expected, mismatch: Mismatch) -> String {
    let quote = |values: &[f32], at: usize| {
        let from = at.saturating_sub(QUOTED / 2);
        let shown: Vec<f32> = values.iter().skip(from).take(QUOTED).copied().collect();
        if values.len() <= QUOTED {
            format!("{shown:?}")
        } else {
            format!(
                "[… {shown:?} …] (elements {from} to {} of {})",
                from + shown.len(),
                values.len()
            )
        }
    };
    match mismatch {
        Mismatch::Element(at) => {
            let rule = match &expected.bound {
                Some(bound) => format!("expected {} within {}", expected.values[at], bound[at]),
                None => format!("expected {} bit for bit", expected.values[at]),
            };
            format!(
                "output element {at} is {}, {rule} (output {}, expected {})",
                got[at],
                quote(got, at),
                quote(&expected.values, at)
            )
        }
        Mismatch::Shape | Mismatch::Length => format!(
            "output holds {} values, expected {} ({} instead of {})",
            got.len(),
            expected.values.len(),
            quote(got, 0),
            quote(&expected.values, 0)
        ),
    }
}
