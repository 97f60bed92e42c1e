//! `eredu_nn::Tensor` on [`CpuTensor`], the dispatch table: each operation
//! the backend implements is one call into its operator family's module
//! (whose `CpuError` becomes the contract's `Error`); the convolutions,
//! normalization, rotary positions and attention are not provided (see
//! [`super::not_provided`]).

use commcheck_not_provided::tensor_not_provided;
use eredu_nn::{Error, Index, PadMode, Tensor};

use super::{
    construction, elementwise, indexing, joining, layout, matmul, not_provided, reduction,
};
use crate::executor::CpuExecutor;
use crate::tensor::CpuTensor;

impl Tensor for CpuTensor {
    type Context = CpuExecutor;

    fn shape(&self) -> &[i32] {
        self.dims()
    }

    fn unloaded_f32(shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(construction::unloaded_f32(shape, context)?)
    }

    fn from_f32_slice(values: &[f32], shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(construction::from_f32_slice(values, shape, context)?)
    }

    fn to_f32_vec(&self, _context: &CpuExecutor) -> Result<Vec<f32>, Error> {
        Ok(self.values()?)
    }

    fn full_f32(value: f32, shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(construction::full_f32(value, shape, context)?)
    }

    fn zeros_like(&self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(construction::zeros_like(self, context)?)
    }

    fn add(&self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(elementwise::add(self, rhs, context)?)
    }

    fn subtract(&self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(elementwise::subtract(self, rhs, context)?)
    }

    fn multiply(&self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(elementwise::multiply(self, rhs, context)?)
    }

    fn multiply_scalar(&self, rhs: f32, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(elementwise::multiply_scalar(self, rhs, context)?)
    }

    fn divide(&self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(elementwise::divide(self, rhs, context)?)
    }

    fn square(&self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(elementwise::square(self, context)?)
    }

    fn maximum_scalar(&self, rhs: f32, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(elementwise::maximum_scalar(self, rhs, context)?)
    }

    fn reshape(&self, shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(layout::reshape(self, shape, context)?)
    }

    fn broadcast_to(&self, shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(layout::broadcast_to(self, shape, context)?)
    }

    fn transpose_axes(&self, axes: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(layout::transpose_axes(self, axes, context)?)
    }

    fn swap_axes(&self, left: i32, right: i32, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(layout::swap_axes(self, left, right, context)?)
    }

    fn transpose(&self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(layout::transpose(self, context)?)
    }

    fn expand_dims(&self, axis: i32, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(layout::expand_dims(self, axis, context)?)
    }

    fn squeeze_axes(&self, axes: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(layout::squeeze_axes(self, axes, context)?)
    }

    fn index(&self, indexes: &[Index], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(indexing::index(self, indexes, context)?)
    }

    fn take_axis(&self, indexes: &Self, axis: i32, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(indexing::take_axis(self, indexes, axis, context)?)
    }

    fn concatenate(values: &[Self], axis: i32, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(joining::concatenate(values, axis, context)?)
    }

    fn stack(values: &[Self], axis: i32, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(joining::stack(values, axis, context)?)
    }

    fn matmul(lhs: &Self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(matmul::matmul(lhs, rhs, context)?)
    }

    fn sum_axis(
        value: &Self,
        axis: i32,
        keep_dims: bool,
        context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Ok(reduction::sum_axis(value, axis, keep_dims, context)?)
    }

    fn argmin_axis(
        value: &Self,
        axis: i32,
        keep_dims: bool,
        context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Ok(reduction::argmin_axis(value, axis, keep_dims, context)?)
    }

    fn pad(
        value: &Self,
        widths: &[(i32, i32)],
        mode: PadMode,
        context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Ok(indexing::pad(value, widths, mode, context)?)
    }

    tensor_not_provided! {
        error: not_provided;
        conv1d,
        conv_transpose1d,
        linear,
        layer_norm,
        gelu,
        elu,
        rope,
        scaled_dot_product_attention,
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::tensor::CpuTensor;
    use eredu_nn::{PadMode, Tensor};

    #[test]
    fn results_stay_deferred_until_read() {
        let ctx = ctx();
        let sum = iota(&ctx, &[2]).add(&iota(&ctx, &[2]), &ctx).expect("add");
        let doubled = sum.multiply_scalar(2.0, &ctx).expect("multiply_scalar");
        assert!(!sum.is_materialised() && !doubled.is_materialised());
        assert_eq!(read(&doubled, &ctx), [0.0, 4.0]);
        assert!(sum.is_materialised() && doubled.is_materialised());
    }

    #[test]
    fn empty_and_oversized_shapes_do_not_panic() {
        let ctx = ctx();
        let empty = iota(&ctx, &[0, 3]);
        check(
            &empty.transpose(&ctx).expect("transpose"),
            &ctx,
            &[3, 0],
            &[],
        );
        check(
            &CpuTensor::sum_axis(&empty, 0, false, &ctx).expect("sum"),
            &ctx,
            &[3],
            &[0.0; 3],
        );
        let no_columns = iota(&ctx, &[2, 0]);
        let no_rows = iota(&ctx, &[0, 2]);
        check(
            &CpuTensor::matmul(&no_columns, &no_rows, &ctx).expect("matmul"),
            &ctx,
            &[2, 2],
            &[0.0; 4],
        );
        let joined = CpuTensor::concatenate(&[empty.clone(), iota(&ctx, &[1, 3])], 0, &ctx)
            .expect("concatenate");
        check(&joined, &ctx, &[1, 3], &[0.0, 1.0, 2.0]);
        let padded = CpuTensor::pad(&empty, &[(1, 0), (0, 0)], PadMode::Constant, &ctx);
        check(&padded.expect("pad"), &ctx, &[1, 3], &[0.0; 3]);
        let vast = CpuTensor::unloaded_f32(&[0, i32::MAX, i32::MAX, i32::MAX], &ctx)
            .expect("an empty tensor");
        let message = error(CpuTensor::sum_axis(&vast, 0, false, &ctx));
        assert!(message.contains("fits in usize"), "{message}");
        assert!(error(
            vast.transpose_axes(&[3, 2, 1, 0], &ctx)
                .and_then(|t| t.to_f32_vec(&ctx))
        )
        .is_empty()
        .eq(&false));
    }

    #[test]
    fn conv1d_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 2, 1]);
        assert_not_provided(
            CpuTensor::conv1d(&value, &value, 1, 0, 1, 1, &ctx),
            "conv1d",
        );
    }

    #[test]
    fn conv_transpose1d_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 2, 1]);
        assert_not_provided(
            CpuTensor::conv_transpose1d(&value, &value, 1, 0, 1, 0, 1, &ctx),
            "conv_transpose1d",
        );
    }

    #[test]
    fn linear_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 2]);
        assert_not_provided(CpuTensor::linear(&value, &value, None, &ctx), "linear");
    }

    #[test]
    fn layer_norm_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 2]);
        assert_not_provided(
            CpuTensor::layer_norm(&value, None, None, 1e-5, &ctx),
            "layer_norm",
        );
    }

    #[test]
    fn gelu_is_not_provided() {
        let ctx = ctx();
        assert_not_provided(CpuTensor::gelu(&iota(&ctx, &[2]), &ctx), "gelu");
    }

    #[test]
    fn elu_is_not_provided() {
        let ctx = ctx();
        assert_not_provided(CpuTensor::elu(&iota(&ctx, &[2]), 1.0, &ctx), "elu");
    }

    #[test]
    fn rope_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 1, 2, 4]);
        assert_not_provided(
            CpuTensor::rope(&value, 4, false, 10_000.0, 1.0, 0, &ctx),
            "rope",
        );
    }

    #[test]
    fn scaled_dot_product_attention_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 1, 2, 2]);
        assert_not_provided(
            CpuTensor::scaled_dot_product_attention(
                &value,
                &value,
                &value,
                1.0,
                eredu_nn::AttentionMask::Causal,
                &ctx,
            ),
            "scaled_dot_product_attention",
        );
    }
}
