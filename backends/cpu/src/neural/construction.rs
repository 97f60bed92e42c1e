//! Materialised tensors made from host values or filled with one value
//! (`unloaded_f32`, `from_f32_slice`, `full_f32`, `zeros_like`).

use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::tensor::{element_count, CpuTensor};

/// A materialised tensor of `shape` with every element `value`.
fn filled(
    operation: &'static str,
    value: f32,
    shape: &[i32],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let count = element_count(operation, shape)?;
    CpuTensor::ready(context.ledger(), operation, vec![value; count], shape)
}

pub(super) fn unloaded_f32(shape: &[i32], context: &CpuExecutor) -> Result<CpuTensor, CpuError> {
    filled("unloaded_f32", 0.0, shape, context)
}

pub(super) fn from_f32_slice(
    values: &[f32],
    shape: &[i32],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    CpuTensor::ready(context.ledger(), "from_f32_slice", values.to_vec(), shape)
}

pub(super) fn full_f32(
    value: f32,
    shape: &[i32],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    filled("full_f32", value, shape, context)
}

pub(super) fn zeros_like(tensor: &CpuTensor, context: &CpuExecutor) -> Result<CpuTensor, CpuError> {
    filled("zeros_like", 0.0, tensor.dims(), context)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::tensor::CpuTensor;
    use eredu_nn::Tensor;

    #[test]
    fn construction_and_read_back() {
        let ctx = ctx();
        check(
            &tensor(&ctx, &[1.0, 2.0], &[2, 1]),
            &ctx,
            &[2, 1],
            &[1.0, 2.0],
        );
        check(
            &CpuTensor::unloaded_f32(&[2, 2], &ctx).expect("allocates"),
            &ctx,
            &[2, 2],
            &[0.0; 4],
        );
        let filled = CpuTensor::full_f32(1.5, &[3], &ctx).expect("fills");
        check(&filled, &ctx, &[3], &[1.5; 3]);
        check(
            &filled.zeros_like(&ctx).expect("zeros"),
            &ctx,
            &[3],
            &[0.0; 3],
        );
        let scalar = tensor(&ctx, &[7.0], &[]);
        check(&scalar, &ctx, &[], &[7.0]);
        let message = error(CpuTensor::from_f32_slice(&[1.0; 3], &[2, 2], &ctx));
        assert!(message.contains("from_f32_slice") && message.contains("3 values"));
        assert!(error(CpuTensor::full_f32(0.0, &[-1], &ctx)).contains("non-negative extents"));
    }
}
