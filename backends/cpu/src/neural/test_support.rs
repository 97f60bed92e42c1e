//! What the tests of the tensor and neural operations share: an executor
//! for a context, tensors made and read through the `eredu_nn::Tensor`
//! contract, and checks of values and of "not provided" errors.

use eredu_nn::Tensor;

use crate::executor::CpuExecutor;
use crate::tensor::CpuTensor;

pub(super) fn ctx() -> CpuExecutor {
    crate::device::CpuDevice::new().executor()
}

pub(super) fn tensor(ctx: &CpuExecutor, values: &[f32], shape: &[i32]) -> CpuTensor {
    CpuTensor::from_f32_slice(values, shape, ctx).expect("valid test tensor")
}

/// A tensor holding 0, 1, 2, … in row-major order.
pub(super) fn iota(ctx: &CpuExecutor, shape: &[i32]) -> CpuTensor {
    let count: i32 = shape.iter().product();
    let values: Vec<f32> = (0..count).map(|value| value as f32).collect();
    tensor(ctx, &values, shape)
}

pub(super) fn read(value: &CpuTensor, ctx: &CpuExecutor) -> Vec<f32> {
    value.to_f32_vec(ctx).expect("tensor evaluates")
}

pub(super) fn check(value: &CpuTensor, ctx: &CpuExecutor, shape: &[i32], expected: &[f32]) {
    assert_eq!(value.shape(), shape);
    assert_eq!(read(value, ctx), expected);
}

pub(super) fn close(actual: &[f32], expected: &[f32]) {
    assert_eq!(actual.len(), expected.len());
    for (actual, expected) in actual.iter().zip(expected) {
        assert!((actual - expected).abs() < 1e-6, "{actual} != {expected}");
    }
}

pub(super) fn error<T: std::fmt::Debug>(result: Result<T, eredu_nn::Error>) -> String {
    result.expect_err("operation must fail").to_string()
}

pub(super) fn assert_not_provided<T: std::fmt::Debug>(
    result: Result<T, eredu_nn::Error>,
    name: &str,
) {
    assert_eq!(
        error(result),
        format!("{name} is not provided by the CPU reference backend")
    );
}
