//! Shapes and axes of the tensor operations: axis resolution, extents,
//! row-major strides and the NumPy broadcast of two shapes. Every check
//! here runs when an operation is called, before anything is deferred.

use crate::error::CpuError;

/// Error for a value computation that contradicts its validated shapes.
pub(super) fn inconsistent(operation: &'static str, got: impl Into<String>) -> CpuError {
    CpuError::invalid(operation, "input values matching their shapes", got)
}

/// Resolves `axis` (negative counts from the end) against `rank` axes.
pub(super) fn resolve_axis(
    operation: &'static str,
    axis: i32,
    rank: usize,
) -> Result<usize, CpuError> {
    let signed_rank = i64::try_from(rank).unwrap_or(i64::MAX);
    let resolved = if axis < 0 {
        i64::from(axis) + signed_rank
    } else {
        i64::from(axis)
    };
    if (0..signed_rank).contains(&resolved) {
        usize::try_from(resolved).map_err(|_| inconsistent(operation, "an unaddressable axis"))
    } else {
        Err(CpuError::invalid(
            operation,
            format!("an axis in [-{rank}, {rank})"),
            format!("axis {axis}"),
        ))
    }
}

/// Converts a computed extent back to the `i32` shape representation.
pub(super) fn to_dim(operation: &'static str, extent: usize) -> Result<i32, CpuError> {
    i32::try_from(extent).map_err(|_| {
        CpuError::invalid(
            operation,
            "an extent that fits in i32",
            format!("extent {extent}"),
        )
    })
}

/// Row-major strides of `extents`.
pub(super) fn strides(extents: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; extents.len()];
    for axis in (0..extents.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1].saturating_mul(extents[axis + 1]);
    }
    strides
}

/// Splits `extents` around `axis` into (outer, axis extent, inner) counts.
///
/// Counts saturate; they are exact whenever the tensor has any elements.
pub(super) fn split_at_axis(extents: &[usize], axis: usize) -> (usize, usize, usize) {
    let product = |extents: &[usize]| extents.iter().fold(1usize, |a, &b| a.saturating_mul(b));
    let outer = product(extents.get(..axis).unwrap_or(extents));
    let extent = extents.get(axis).copied().unwrap_or(1);
    let inner = product(extents.get(axis + 1..).unwrap_or(&[]));
    (outer, extent, inner)
}

/// The NumPy broadcast of two shapes.
pub(super) fn broadcast_shape(
    operation: &'static str,
    lhs: &[i32],
    rhs: &[i32],
) -> Result<Vec<i32>, CpuError> {
    let rank = lhs.len().max(rhs.len());
    let from_end = |shape: &[i32], back: usize| {
        shape
            .len()
            .checked_sub(back)
            .and_then(|axis| shape.get(axis))
            .copied()
            .unwrap_or(1)
    };
    (1..=rank)
        .rev()
        .map(|back| match (from_end(lhs, back), from_end(rhs, back)) {
            (left, right) if left == right => Ok(left),
            (1, other) | (other, 1) => Ok(other),
            _ => Err(CpuError::invalid(
                operation,
                "equal or broadcast-compatible shapes",
                format!("shapes {lhs:?} and {rhs:?}"),
            )),
        })
        .collect()
}
