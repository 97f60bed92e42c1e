//! Reductions over one axis: sums (`sum_axis`) and positions of the first
//! minimum (`argmin_axis`, NaN first as in NumPy, as integral `f32` values).

use super::reads::lazy;
use super::shape::{resolve_axis, split_at_axis};
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::tensor::CpuTensor;

/// Largest extent whose every index is exactly representable as an `f32`.
const MAX_F32_INDEX_EXTENT: usize = 1 << 24;

/// Shape of a reduction over `axis`.
pub(super) fn reduced_shape(shape: &[i32], axis: usize, keep_dims: bool) -> Vec<i32> {
    let mut reduced = shape.to_vec();
    if keep_dims {
        reduced[axis] = 1;
    } else {
        reduced.remove(axis);
    }
    reduced
}

/// Whether `candidate` replaces `best` as the minimum; the first NaN wins, as in NumPy.
fn precedes_minimum(candidate: f32, best: f32) -> bool {
    !best.is_nan() && (candidate < best || candidate.is_nan())
}

pub(super) fn sum_axis(
    value: &CpuTensor,
    axis: i32,
    keep_dims: bool,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let axis = resolve_axis("sum_axis", axis, value.dims().len())?;
    let (outer, extent, inner) = split_at_axis(&value.extents(), axis);
    let input = value.clone();
    let shape = reduced_shape(value.dims(), axis, keep_dims);
    lazy("sum_axis", context.ledger(), shape, move || {
        let values = input.values()?;
        let mut output = vec![0.0; outer.saturating_mul(inner)];
        if output.is_empty() || extent == 0 {
            return Ok(output);
        }
        for (out, block) in output
            .chunks_exact_mut(inner)
            .zip(values.chunks_exact(extent * inner))
        {
            for row in block.chunks_exact(inner) {
                for (sum, &value) in out.iter_mut().zip(row) {
                    *sum += value;
                }
            }
        }
        Ok(output)
    })
}

pub(super) fn argmin_axis(
    value: &CpuTensor,
    axis: i32,
    keep_dims: bool,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let axis = resolve_axis("argmin_axis", axis, value.dims().len())?;
    let (outer, extent, inner) = split_at_axis(&value.extents(), axis);
    if extent == 0 || extent > MAX_F32_INDEX_EXTENT {
        return Err(CpuError::invalid(
            "argmin_axis",
            format!("a reduced axis of extent 1..={MAX_F32_INDEX_EXTENT}"),
            format!("axis {axis} of shape {:?}", value.dims()),
        ));
    }
    let input = value.clone();
    let shape = reduced_shape(value.dims(), axis, keep_dims);
    lazy("argmin_axis", context.ledger(), shape, move || {
        let values = input.values()?;
        let mut output = Vec::with_capacity(outer.saturating_mul(inner));
        if outer == 0 || inner == 0 {
            return Ok(output);
        }
        for block in values.chunks_exact(extent * inner) {
            let mut rows = block.chunks_exact(inner);
            let first = rows.next().unwrap_or_default();
            let mut best: Vec<(usize, f32)> = first.iter().map(|&value| (0, value)).collect();
            for (position, row) in (1..).zip(rows) {
                for (slot, &candidate) in best.iter_mut().zip(row) {
                    if precedes_minimum(candidate, slot.1) {
                        *slot = (position, candidate);
                    }
                }
            }
            output.extend(best.into_iter().map(|(position, _)| position as f32));
        }
        Ok(output)
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::tensor::CpuTensor;
    use eredu_nn::Tensor;

    #[test]
    fn sum_axis_reduces() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        check(
            &CpuTensor::sum_axis(&value, 0, false, &ctx).expect("sum"),
            &ctx,
            &[3],
            &[3.0, 5.0, 7.0],
        );
        check(
            &CpuTensor::sum_axis(&value, -1, true, &ctx).expect("sum"),
            &ctx,
            &[2, 1],
            &[3.0, 12.0],
        );
        check(
            &CpuTensor::mean_axis(&value, 1, false, &ctx).expect("mean"),
            &ctx,
            &[2],
            &[1.0, 4.0],
        );
        assert!(error(CpuTensor::sum_axis(&value, 2, false, &ctx)).contains("sum_axis"));
    }

    #[test]
    fn argmin_axis_returns_first_minimum_positions() {
        let ctx = ctx();
        let value = tensor(&ctx, &[3.0, 1.0, 2.0, 0.0, 5.0, 0.0], &[2, 3]);
        check(
            &CpuTensor::argmin_axis(&value, 1, false, &ctx).expect("argmin"),
            &ctx,
            &[2],
            &[1.0, 0.0],
        );
        check(
            &CpuTensor::argmin_axis(&value, 0, true, &ctx).expect("argmin"),
            &ctx,
            &[1, 3],
            &[1.0, 0.0, 1.0],
        );
        let empty = iota(&ctx, &[2, 0]);
        assert!(error(CpuTensor::argmin_axis(&empty, 1, false, &ctx)).contains("argmin_axis"));
    }
}
