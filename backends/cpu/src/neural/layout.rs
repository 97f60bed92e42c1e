//! Layout operations: the same values under another shape (`reshape`,
//! `expand_dims`, `squeeze_axes`), permuted axes (`transpose_axes`,
//! `swap_axes`, `transpose`) and broadcasts (`broadcast_to`).

use super::reads::{broadcast_reads, regather, relabel, AxisRead};
use super::shape::{broadcast_shape, resolve_axis, strides};
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::tensor::{element_count, CpuTensor};

pub(super) fn reshape(
    tensor: &CpuTensor,
    shape: &[i32],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let count = element_count("reshape", shape)?;
    if count != tensor.len() {
        return Err(CpuError::invalid(
            "reshape",
            format!(
                "a shape of {} elements like {:?}",
                tensor.len(),
                tensor.dims()
            ),
            format!("shape {shape:?} of {count} elements"),
        ));
    }
    relabel("reshape", context.ledger(), tensor, shape.to_vec())
}

pub(super) fn broadcast_to(
    tensor: &CpuTensor,
    shape: &[i32],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let compatible = broadcast_shape("broadcast_to", tensor.dims(), shape)? == shape
        && tensor.dims().len() <= shape.len();
    if !compatible {
        return Err(CpuError::invalid(
            "broadcast_to",
            format!("a target shape that {:?} broadcasts to", tensor.dims()),
            format!("shape {shape:?}"),
        ));
    }
    element_count("broadcast_to", shape)?;
    let target: Vec<usize> = shape.iter().map(|&dim| dim.max(0) as usize).collect();
    let reads = broadcast_reads(&tensor.extents(), &target);
    regather(
        "broadcast_to",
        context.ledger(),
        tensor,
        shape.to_vec(),
        reads,
    )
}

pub(super) fn transpose_axes(
    tensor: &CpuTensor,
    axes: &[i32],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let rank = tensor.dims().len();
    let permutation = axes
        .iter()
        .map(|&axis| resolve_axis("transpose_axes", axis, rank))
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = vec![false; rank];
    let is_permutation = permutation.len() == rank
        && permutation
            .iter()
            .all(|&axis| !std::mem::replace(&mut seen[axis], true));
    if !is_permutation {
        return Err(CpuError::invalid(
            "transpose_axes",
            format!(
                "a permutation of the {rank} axes of shape {:?}",
                tensor.dims()
            ),
            format!("axes {axes:?}"),
        ));
    }
    let extents = tensor.extents();
    let source_strides = strides(&extents);
    let shape = permutation
        .iter()
        .map(|&axis| tensor.dims()[axis])
        .collect();
    let reads = permutation
        .iter()
        .map(|&axis| AxisRead::whole(source_strides[axis], extents[axis]))
        .collect();
    regather("transpose_axes", context.ledger(), tensor, shape, reads)
}

pub(super) fn swap_axes(
    tensor: &CpuTensor,
    left: i32,
    right: i32,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let rank = tensor.dims().len();
    let left = resolve_axis("swap_axes", left, rank)?;
    let right = resolve_axis("swap_axes", right, rank)?;
    let mut axes: Vec<i32> = (0..rank).map(|axis| axis as i32).collect();
    axes.swap(left, right);
    transpose_axes(tensor, &axes, context)
}

pub(super) fn transpose(tensor: &CpuTensor, context: &CpuExecutor) -> Result<CpuTensor, CpuError> {
    if tensor.dims().len() != 2 {
        return Err(CpuError::invalid(
            "transpose",
            "a rank-two tensor",
            format!("shape {:?}", tensor.dims()),
        ));
    }
    transpose_axes(tensor, &[1, 0], context)
}

pub(super) fn expand_dims(
    tensor: &CpuTensor,
    axis: i32,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let rank = tensor.dims().len();
    let axis = resolve_axis("expand_dims", axis, rank + 1)?;
    let mut shape = tensor.dims().to_vec();
    shape.insert(axis, 1);
    relabel("expand_dims", context.ledger(), tensor, shape)
}

pub(super) fn squeeze_axes(
    tensor: &CpuTensor,
    axes: &[i32],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let rank = tensor.dims().len();
    let mut remove = vec![false; rank];
    for &axis in axes {
        let resolved = resolve_axis("squeeze_axes", axis, rank)?;
        if tensor.dims()[resolved] != 1 || std::mem::replace(&mut remove[resolved], true) {
            return Err(CpuError::invalid(
                "squeeze_axes",
                format!("distinct unit axes of shape {:?}", tensor.dims()),
                format!("axes {axes:?}"),
            ));
        }
    }
    let shape = tensor
        .dims()
        .iter()
        .zip(&remove)
        .filter(|(_, &removed)| !removed)
        .map(|(&dim, _)| dim)
        .collect();
    relabel("squeeze_axes", context.ledger(), tensor, shape)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use eredu_nn::Tensor;

    #[test]
    fn reshape_keeps_row_major_order() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        check(
            &value.reshape(&[3, 1, 2], &ctx).expect("reshape"),
            &ctx,
            &[3, 1, 2],
            &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        );
    }

    #[test]
    fn reshape_rejects_other_element_counts() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        let message = error(value.reshape(&[4, 2], &ctx));
        assert!(message.contains("reshape") && message.contains("6 elements"));
        assert!(message.contains("[4, 2] of 8 elements"), "{message}");
        let message = error(value.reshape(&[-1, 3], &ctx));
        assert!(message.contains("reshape") && message.contains("non-negative extents"));
    }

    #[test]
    fn transpose_axes_permutes_three_dimensions() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3, 4]);
        let expected = [
            0.0, 4.0, 8.0, 12.0, 16.0, 20.0, 1.0, 5.0, 9.0, 13.0, 17.0, 21.0, 2.0, 6.0, 10.0, 14.0,
            18.0, 22.0, 3.0, 7.0, 11.0, 15.0, 19.0, 23.0,
        ];
        let permuted = value.transpose_axes(&[2, 0, 1], &ctx).expect("permutes");
        check(&permuted, &ctx, &[4, 2, 3], &expected);
        let negative = value.transpose_axes(&[-1, 0, -2], &ctx).expect("permutes");
        check(&negative, &ctx, &[4, 2, 3], &expected);
    }

    #[test]
    fn transpose_axes_rejects_non_permutations() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3, 4]);
        for axes in [&[0, 0, 1][..], &[0, 1], &[0, 1, 2, 3]] {
            let message = error(value.transpose_axes(axes, &ctx));
            assert!(message.contains("transpose_axes"), "{message}");
        }
        assert!(error(value.transpose_axes(&[0, 1, 3], &ctx)).contains("axis in [-3, 3)"));
    }

    #[test]
    fn swap_axes_and_transpose() {
        let ctx = ctx();
        let matrix = iota(&ctx, &[2, 3]);
        let expected = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0];
        check(
            &matrix.transpose(&ctx).expect("transpose"),
            &ctx,
            &[3, 2],
            &expected,
        );
        let cube = iota(&ctx, &[2, 1, 3]);
        let swapped = cube.swap_axes(0, -1, &ctx).expect("swap_axes");
        check(&swapped, &ctx, &[3, 1, 2], &expected);
        assert!(error(cube.transpose(&ctx)).contains("a rank-two tensor"));
        assert!(error(cube.swap_axes(0, 3, &ctx)).contains("swap_axes"));
    }

    #[test]
    fn expand_and_squeeze_unit_axes() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        let values = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        check(
            &value.expand_dims(-1, &ctx).expect("expand"),
            &ctx,
            &[2, 3, 1],
            &values,
        );
        check(
            &value.expand_dims(0, &ctx).expect("expand"),
            &ctx,
            &[1, 2, 3],
            &values,
        );
        assert!(error(value.expand_dims(3, &ctx)).contains("expand_dims"));
        let padded = iota(&ctx, &[1, 2, 1, 3]);
        check(
            &padded.squeeze_axes(&[0, -2], &ctx).expect("squeeze"),
            &ctx,
            &[2, 3],
            &values,
        );
        for axes in [&[1][..], &[0, 0], &[4]] {
            assert!(error(padded.squeeze_axes(axes, &ctx)).contains("squeeze_axes"));
        }
    }

    #[test]
    fn broadcast_to_repeats_values() {
        let ctx = ctx();
        let row = tensor(&ctx, &[1.0, 2.0], &[2]);
        check(
            &row.broadcast_to(&[2, 2], &ctx).expect("broadcast"),
            &ctx,
            &[2, 2],
            &[1.0, 2.0, 1.0, 2.0],
        );
        assert!(error(row.broadcast_to(&[3], &ctx)).contains("broadcast_to"));
    }
}
