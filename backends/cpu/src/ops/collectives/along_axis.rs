//! Shapes of collectives along an axis (the gathers and the all-to-all):
//! the axis checked against the input's rank, the output's extent along it,
//! and every member's view of its contribution, which must agree with
//! member 0's off the axis.

use crate::error::CpuError;
use crate::frame::Contribution;
use crate::layout::AxisView;
use crate::tensor::CpuTensor;

pub(super) fn extents(shape: &[i32]) -> Vec<usize> {
    shape.iter().map(|&d| d.max(0) as usize).collect()
}

pub(super) fn check_axis(
    operation: &'static str,
    tensor: &CpuTensor,
    axis: usize,
) -> Result<(), CpuError> {
    if axis >= tensor.dims().len() {
        return Err(CpuError::invalid(
            operation,
            format!("an axis below the input's rank {}", tensor.dims().len()),
            format!("axis {axis}"),
        ));
    }
    Ok(())
}

pub(super) fn with_axis(shape: &[i32], axis: usize, extent: usize) -> Result<Vec<i32>, CpuError> {
    let mut out = shape.to_vec();
    out[axis] = i32::try_from(extent).map_err(|_| {
        CpuError::invalid(
            "output shape",
            "an extent that fits in i32",
            extent.to_string(),
        )
    })?;
    Ok(out)
}

/// Checks that members agree on every extent but `axis`, and returns their views.
pub(super) fn axis_views(
    operation: &'static str,
    all: &[Contribution],
    axis: usize,
) -> Result<Vec<AxisView>, CpuError> {
    let first = extents(&all[0].shape);
    all.iter()
        .enumerate()
        .map(|(member, c)| {
            let shape = extents(&c.shape);
            let agrees = shape.len() == first.len()
                && shape
                    .iter()
                    .zip(&first)
                    .enumerate()
                    .all(|(i, (a, b))| i == axis || a == b);
            match AxisView::new(&shape, axis) {
                Some(view) if agrees => Ok(view),
                _ => Err(CpuError::MemberMismatch {
                    operation,
                    member,
                    detail: format!(
                        "submitted shape {:?}, which differs from member 0's {:?} off axis {axis}",
                        c.shape, all[0].shape
                    ),
                }),
            }
        })
        .collect()
}
