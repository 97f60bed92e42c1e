//! Joining tensors: along an existing axis (`concatenate`) or a new one
//! (`stack`).

use super::reads::lazy;
use super::shape::{inconsistent, resolve_axis, split_at_axis, to_dim};
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::tensor::{element_count, CpuTensor};

/// Concatenates, for each of `outer` blocks, the next `chunk` values of every part.
pub(super) fn interleave(
    operation: &'static str,
    parts: &[(CpuTensor, usize)],
    outer: usize,
) -> Result<Vec<f32>, CpuError> {
    let values = parts
        .iter()
        .map(|(tensor, chunk)| Ok((tensor.values()?, *chunk)))
        .collect::<Result<Vec<_>, CpuError>>()?;
    let mut output = Vec::with_capacity(values.iter().map(|(part, _)| part.len()).sum());
    for block in 0..outer {
        for (part, chunk) in &values {
            let piece = part
                .get(block * chunk..(block + 1) * chunk)
                .ok_or_else(|| inconsistent(operation, format!("{} values", part.len())))?;
            output.extend_from_slice(piece);
        }
    }
    Ok(output)
}

pub(super) fn concatenate(
    values: &[CpuTensor],
    axis: i32,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let first = values
        .first()
        .ok_or_else(|| CpuError::invalid("concatenate", "at least one tensor", "no tensors"))?;
    let axis = resolve_axis("concatenate", axis, first.dims().len())?;
    let mut shape = first.dims().to_vec();
    shape[axis] = 0;
    for value in values {
        let matches = value.dims().len() == shape.len()
            && value
                .dims()
                .iter()
                .zip(first.dims())
                .enumerate()
                .all(|(other, (dim, expected))| other == axis || dim == expected);
        if !matches {
            return Err(CpuError::invalid(
                "concatenate",
                format!(
                    "shapes equal to {:?} except along axis {axis}",
                    first.dims()
                ),
                format!("shape {:?}", value.dims()),
            ));
        }
        shape[axis] = shape[axis].checked_add(value.dims()[axis]).ok_or_else(|| {
            CpuError::invalid("concatenate", "an extent that fits in i32", "an overflow")
        })?;
    }
    let (outer, _, inner) = split_at_axis(&first.extents(), axis);
    let parts: Vec<(CpuTensor, usize)> = values
        .iter()
        .map(|value| (value.clone(), value.extents()[axis].saturating_mul(inner)))
        .collect();
    lazy("concatenate", context.ledger(), shape, move || {
        interleave("concatenate", &parts, outer)
    })
}

pub(super) fn stack(
    values: &[CpuTensor],
    axis: i32,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let first = values
        .first()
        .ok_or_else(|| CpuError::invalid("stack", "at least one tensor", "no tensors"))?;
    let axis = resolve_axis("stack", axis, first.dims().len() + 1)?;
    if let Some(other) = values.iter().find(|value| value.dims() != first.dims()) {
        return Err(CpuError::invalid(
            "stack",
            format!("every shape equal to {:?}", first.dims()),
            format!("shape {:?}", other.dims()),
        ));
    }
    let mut shape = first.dims().to_vec();
    shape.insert(axis, to_dim("stack", values.len())?);
    element_count("stack", &shape)?;
    let (outer, extent, inner) = split_at_axis(&first.extents(), axis);
    let chunk = extent.saturating_mul(inner);
    let parts: Vec<(CpuTensor, usize)> =
        values.iter().map(|value| (value.clone(), chunk)).collect();
    lazy("stack", context.ledger(), shape, move || {
        interleave("stack", &parts, outer)
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::tensor::CpuTensor;
    use eredu_nn::Tensor;

    #[test]
    fn concatenate_joins_along_a_middle_axis() {
        let ctx = ctx();
        let first = iota(&ctx, &[2, 1, 2]);
        let second_values: Vec<f32> = (10..18).map(|value| value as f32).collect();
        let second = tensor(&ctx, &second_values, &[2, 2, 2]);
        let expected = [
            0.0, 1.0, 10.0, 11.0, 12.0, 13.0, 2.0, 3.0, 14.0, 15.0, 16.0, 17.0,
        ];
        let parts = [first.clone(), second.clone()];
        for axis in [1, -2] {
            let joined = CpuTensor::concatenate(&parts, axis, &ctx).expect("concatenate");
            check(&joined, &ctx, &[2, 3, 2], &expected);
        }
        let message = error(CpuTensor::concatenate(&parts, 0, &ctx));
        assert!(message.contains("except along axis 0"), "{message}");
        assert!(error(CpuTensor::concatenate(&[], 0, &ctx)).contains("at least one tensor"));
        let flat = iota(&ctx, &[4]);
        assert!(error(CpuTensor::concatenate(&[first, flat], 0, &ctx)).contains("concatenate"));
    }

    #[test]
    fn stack_inserts_a_new_axis() {
        let ctx = ctx();
        let parts = [
            tensor(&ctx, &[0.0, 1.0, 2.0], &[3]),
            tensor(&ctx, &[3.0, 4.0, 5.0], &[3]),
        ];
        let stacked = CpuTensor::stack(&parts, 0, &ctx).expect("stack");
        check(&stacked, &ctx, &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let interleaved = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0];
        for axis in [1, -1] {
            let stacked = CpuTensor::stack(&parts, axis, &ctx).expect("stack");
            check(&stacked, &ctx, &[3, 2], &interleaved);
        }
        let mismatched = [parts[0].clone(), iota(&ctx, &[2])];
        assert!(error(CpuTensor::stack(&mismatched, 0, &ctx)).contains("every shape equal"));
        assert!(error(CpuTensor::stack(&parts, 2, &ctx)).contains("stack"));
    }
}
