//! SUB-2: `submit` materialises exactly the values it is given: lazy
//! values built by the backend's tensor operations read back materialised
//! and bit-exact after the submission completed.

use super::shared::{expect_values, submit_values, LHS, RHS, SHAPE};
use crate::check::{Check, Finding};
use crate::harness::{Harness, Tensor};
use crate::suites::common::must_complete;
use crate::world::RankCtx;

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
    pub(super) name: &'static str,
    pub(super) value: Tensor<H>,
    pub(super) expected: Vec<f32>,
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

/// SUB-2: `submit` evaluates the values it is given: after its completion
/// each of them reads back (without evaluation) materialised and bit-exact.
/// A value built alongside but not submitted is not needed by that
/// submission (it is not asserted unevaluated: backends may be eager), and
/// stays correct when submitted on its own afterwards.
pub(super) fn submit_materialises_the_given_values<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
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
