//! Elementwise arithmetic: deferred maps of one tensor and combinations of
//! two broadcast-compatible tensors (NumPy broadcasting, checked when the
//! operation is called).

use std::sync::Arc;

use super::reads::{broadcast_values, lazy};
use super::shape::broadcast_shape;
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::ledger::Ledger;
use crate::tensor::CpuTensor;

/// A deferred elementwise map of `input`.
pub(super) fn map_values(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    input: &CpuTensor,
    function: impl Fn(f32) -> f32 + Send + 'static,
) -> Result<CpuTensor, CpuError> {
    let input = input.clone();
    lazy(operation, ledger, input.dims().to_vec(), move || {
        Ok(input.values()?.into_iter().map(&function).collect())
    })
}

/// A deferred elementwise combination of two broadcast-compatible tensors.
pub(super) fn zip_values(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    lhs: &CpuTensor,
    rhs: &CpuTensor,
    function: impl Fn(f32, f32) -> f32 + Send + 'static,
) -> Result<CpuTensor, CpuError> {
    let shape = broadcast_shape(operation, lhs.dims(), rhs.dims())?;
    let extents: Vec<usize> = shape.iter().map(|&dim| dim.max(0) as usize).collect();
    let (lhs, rhs) = (lhs.clone(), rhs.clone());
    lazy(operation, ledger, shape, move || {
        let left = broadcast_values(operation, &lhs, &extents)?;
        let right = broadcast_values(operation, &rhs, &extents)?;
        Ok(left
            .into_iter()
            .zip(right)
            .map(|(left, right)| function(left, right))
            .collect())
    })
}

pub(super) fn add(
    tensor: &CpuTensor,
    rhs: &CpuTensor,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    zip_values("add", context.ledger(), tensor, rhs, |a, b| a + b)
}

pub(super) fn subtract(
    tensor: &CpuTensor,
    rhs: &CpuTensor,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    zip_values("subtract", context.ledger(), tensor, rhs, |a, b| a - b)
}

pub(super) fn multiply(
    tensor: &CpuTensor,
    rhs: &CpuTensor,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    zip_values("multiply", context.ledger(), tensor, rhs, |a, b| a * b)
}

pub(super) fn multiply_scalar(
    tensor: &CpuTensor,
    rhs: f32,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    map_values("multiply_scalar", context.ledger(), tensor, move |value| {
        value * rhs
    })
}

pub(super) fn divide(
    tensor: &CpuTensor,
    rhs: &CpuTensor,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    zip_values("divide", context.ledger(), tensor, rhs, |a, b| a / b)
}

pub(super) fn square(tensor: &CpuTensor, context: &CpuExecutor) -> Result<CpuTensor, CpuError> {
    map_values("square", context.ledger(), tensor, |value| value * value)
}

pub(super) fn maximum_scalar(
    tensor: &CpuTensor,
    rhs: f32,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let maximum = move |value: f32| if value < rhs { rhs } else { value };
    map_values("maximum_scalar", context.ledger(), tensor, maximum)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use eredu_nn::Tensor;

    #[test]
    fn elementwise_arithmetic() {
        let ctx = ctx();
        let lhs = tensor(&ctx, &[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let rhs = tensor(&ctx, &[4.0, 3.0, 2.0, 8.0], &[2, 2]);
        check(
            &lhs.add(&rhs, &ctx).expect("add"),
            &ctx,
            &[2, 2],
            &[5.0, 5.0, 5.0, 12.0],
        );
        check(
            &lhs.subtract(&rhs, &ctx).expect("subtract"),
            &ctx,
            &[2, 2],
            &[-3.0, -1.0, 1.0, -4.0],
        );
        check(
            &lhs.multiply(&rhs, &ctx).expect("multiply"),
            &ctx,
            &[2, 2],
            &[4.0, 6.0, 6.0, 32.0],
        );
        check(
            &lhs.divide(&rhs, &ctx).expect("divide"),
            &ctx,
            &[2, 2],
            &[0.25, 2.0 / 3.0, 1.5, 0.5],
        );
    }

    #[test]
    fn elementwise_operations_broadcast() {
        let ctx = ctx();
        let matrix = iota(&ctx, &[2, 3]);
        let row = tensor(&ctx, &[10.0, 20.0, 30.0], &[3]);
        check(
            &matrix.add(&row, &ctx).expect("add"),
            &ctx,
            &[2, 3],
            &[10.0, 21.0, 32.0, 13.0, 24.0, 35.0],
        );
        let column = tensor(&ctx, &[1.0, 2.0], &[2, 1]);
        let line = tensor(&ctx, &[1.0, 10.0, 100.0], &[1, 3]);
        check(
            &column.multiply(&line, &ctx).expect("multiply"),
            &ctx,
            &[2, 3],
            &[1.0, 10.0, 100.0, 2.0, 20.0, 200.0],
        );
        let scalar = tensor(&ctx, &[2.0], &[]);
        check(
            &matrix.divide(&scalar, &ctx).expect("divide"),
            &ctx,
            &[2, 3],
            &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5],
        );
    }

    #[test]
    fn elementwise_rejects_incompatible_shapes() {
        let ctx = ctx();
        let message = error(iota(&ctx, &[2, 3]).add(&iota(&ctx, &[2]), &ctx));
        assert!(message.contains("add"), "{message}");
        assert!(message.contains("[2, 3] and [2]"), "{message}");
    }

    #[test]
    fn scalar_maps() {
        let ctx = ctx();
        let value = tensor(&ctx, &[-2.0, 0.5, 3.0], &[3]);
        check(
            &value.multiply_scalar(2.0, &ctx).expect("multiply_scalar"),
            &ctx,
            &[3],
            &[-4.0, 1.0, 6.0],
        );
        check(
            &value.square(&ctx).expect("square"),
            &ctx,
            &[3],
            &[4.0, 0.25, 9.0],
        );
        check(
            &value.maximum_scalar(1.0, &ctx).expect("maximum_scalar"),
            &ctx,
            &[3],
            &[1.0, 1.0, 3.0],
        );
    }
}
