//! Indexing: views by position and range (`index`), rows taken by an index
//! tensor (`take_axis`, whose integral `f32` indexes are checked when the
//! result is evaluated) and padding with zeros or edge values (`pad`).

use eredu_nn::{Index, PadMode};

use super::reads::{gather, lazy, regather, AxisRead};
use super::shape::{inconsistent, resolve_axis, strides, to_dim};
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::tensor::{element_count, CpuTensor};

/// Resolves one axis of `index`, returning its output extent (none for `At`)
/// and how it reads the source.
pub(super) fn index_axis(
    index: Index,
    extent: usize,
    stride: usize,
) -> Result<(Option<usize>, AxisRead), CpuError> {
    let signed = i64::try_from(extent).unwrap_or(i64::MAX);
    let wrap = |value: i32| {
        let value = i64::from(value);
        if value < 0 {
            value + signed
        } else {
            value
        }
    };
    let position = |value: i64| usize::try_from(value).unwrap_or(0);
    match index {
        Index::Full => Ok((Some(extent), AxisRead::whole(stride, extent))),
        Index::At(at) => {
            let resolved = wrap(at);
            if !(0..signed).contains(&resolved) {
                return Err(CpuError::invalid(
                    "index",
                    format!("a position in [-{extent}, {extent})"),
                    format!("At({at}) on an axis of extent {extent}"),
                ));
            }
            let resolved = position(resolved);
            Ok((None, AxisRead::range(stride, resolved, resolved + 1)))
        }
        Index::Range(start, end) => {
            let (first, last) = (wrap(start), wrap(end));
            if first < 0 || first > last || last > signed {
                return Err(CpuError::invalid(
                    "index",
                    format!("0 <= start <= end <= {extent} after wrapping negative bounds"),
                    format!("Range({start}, {end}) on an axis of extent {extent}"),
                ));
            }
            let (first, last) = (position(first), position(last));
            Ok((Some(last - first), AxisRead::range(stride, first, last)))
        }
    }
}

/// Resolves one `take_axis` index value against an axis of `extent`.
pub(super) fn take_position(value: f32, extent: usize) -> Result<usize, CpuError> {
    let signed = i64::try_from(extent).unwrap_or(i64::MAX);
    let integral = value.is_finite() && value.fract() == 0.0 && value.abs() <= 9.0e15;
    let resolved = match value as i64 {
        whole if whole < 0 => whole + signed,
        whole => whole,
    };
    if integral && (0..signed).contains(&resolved) {
        usize::try_from(resolved).map_err(|_| inconsistent("take_axis", "an unaddressable index"))
    } else {
        Err(CpuError::invalid(
            "take_axis",
            format!("integral indexes in [-{extent}, {extent})"),
            format!("index {value}"),
        ))
    }
}

pub(super) fn index(
    tensor: &CpuTensor,
    indexes: &[Index],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let extents = tensor.extents();
    if indexes.len() > extents.len() {
        return Err(CpuError::invalid(
            "index",
            format!(
                "at most {} indexes for shape {:?}",
                extents.len(),
                tensor.dims()
            ),
            format!("{} indexes", indexes.len()),
        ));
    }
    let mut shape = Vec::with_capacity(extents.len());
    let mut reads = Vec::with_capacity(extents.len());
    for (axis, (&extent, stride)) in extents.iter().zip(strides(&extents)).enumerate() {
        let index = indexes.get(axis).copied().unwrap_or(Index::Full);
        let (kept, read) = index_axis(index, extent, stride)?;
        if let Some(kept) = kept {
            shape.push(to_dim("index", kept)?);
        }
        reads.push(read);
    }
    regather("index", context.ledger(), tensor, shape, reads)
}

pub(super) fn take_axis(
    tensor: &CpuTensor,
    indexes: &CpuTensor,
    axis: i32,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let rank = tensor.dims().len();
    let axis = resolve_axis("take_axis", axis, rank)?;
    let mut shape = tensor.dims()[..axis].to_vec();
    shape.extend_from_slice(indexes.dims());
    shape.extend_from_slice(&tensor.dims()[axis + 1..]);
    element_count("take_axis", &shape)?;
    let (input, indexes) = (tensor.clone(), indexes.clone());
    lazy("take_axis", context.ledger(), shape, move || {
        let extents = input.extents();
        let source_strides = strides(&extents);
        let positions = indexes
            .values()?
            .into_iter()
            .map(|value| take_position(value, extents[axis]))
            .collect::<Result<Vec<_>, _>>()?;
        let mut reads: Vec<AxisRead> = extents
            .iter()
            .zip(&source_strides)
            .map(|(&extent, &stride)| AxisRead::whole(stride, extent))
            .collect();
        reads[axis] = AxisRead::listed(source_strides[axis], positions);
        gather("take_axis", &input.values()?, &reads)
    })
}

pub(super) fn pad(
    value: &CpuTensor,
    widths: &[(i32, i32)],
    mode: PadMode,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let extents = value.extents();
    let invalid = |expected: String| {
        CpuError::invalid(
            "pad",
            expected,
            format!("widths {widths:?} for shape {:?}", value.dims()),
        )
    };
    if widths.len() != extents.len() {
        return Err(invalid(format!("{} (before, after) widths", extents.len())));
    }
    let mut shape = Vec::with_capacity(extents.len());
    let mut reads = Vec::with_capacity(extents.len());
    for ((&extent, stride), &(before, after)) in extents.iter().zip(strides(&extents)).zip(widths) {
        let (Ok(before), Ok(after)) = (usize::try_from(before), usize::try_from(after)) else {
            return Err(invalid("non-negative widths".into()));
        };
        if mode == PadMode::Edge && extent == 0 && before + after > 0 {
            return Err(invalid(
                "non-empty axes wherever edge padding is added".into(),
            ));
        }
        shape.push(to_dim("pad", before + extent + after)?);
        reads.push(AxisRead::padded(stride, extent, (before, after), mode));
    }
    element_count("pad", &shape)?;
    regather("pad", context.ledger(), value, shape, reads)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use eredu_nn::{Index, PadMode, Tensor};

    use crate::tensor::CpuTensor;

    #[test]
    fn index_selects_positions_and_ranges() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3, 4]);
        let row = value
            .index(&[Index::At(1), Index::Range(1, 3)], &ctx)
            .expect("index");
        check(
            &row,
            &ctx,
            &[2, 4],
            &[16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0],
        );
        let tail = value
            .index(&[Index::Full, Index::At(-1), Index::Range(-2, 4)], &ctx)
            .expect("index");
        check(&tail, &ctx, &[2, 2], &[10.0, 11.0, 22.0, 23.0]);
    }

    #[test]
    fn index_rejects_out_of_range_selections() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        let message = error(value.index(&[Index::Full, Index::At(3)], &ctx));
        assert!(
            message.contains("At(3) on an axis of extent 3"),
            "{message}"
        );
        let message = error(value.index(&[Index::Range(2, 1)], &ctx));
        assert!(message.contains("Range(2, 1)"), "{message}");
        let message = error(value.index(&[Index::Full; 3], &ctx));
        assert!(message.contains("at most 2 indexes"), "{message}");
    }

    #[test]
    fn take_axis_gathers_along_a_middle_axis() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3, 2]);
        let rows = tensor(&ctx, &[2.0, 0.0, 2.0], &[3]);
        check(
            &value.take_axis(&rows, 1, &ctx).expect("take_axis"),
            &ctx,
            &[2, 3, 2],
            &[
                4.0, 5.0, 0.0, 1.0, 4.0, 5.0, 10.0, 11.0, 6.0, 7.0, 10.0, 11.0,
            ],
        );
        let matrix = iota(&ctx, &[3, 2]);
        let nested = tensor(&ctx, &[1.0, -1.0], &[2, 1]);
        check(
            &matrix.take_axis(&nested, 0, &ctx).expect("take_axis"),
            &ctx,
            &[2, 1, 2],
            &[2.0, 3.0, 4.0, 5.0],
        );
    }

    #[test]
    fn take_axis_rejects_bad_indexes_when_read() {
        let ctx = ctx();
        let matrix = iota(&ctx, &[3, 2]);
        for bad in [3.0, 0.5, -4.0] {
            let taken = matrix
                .take_axis(&tensor(&ctx, &[bad], &[1]), 0, &ctx)
                .expect("shapes are valid");
            let message = error(taken.to_f32_vec(&ctx));
            assert!(message.contains("take_axis"), "{message}");
            assert!(message.contains("integral indexes in [-3, 3)"), "{message}");
        }
        assert!(error(matrix.take_axis(&iota(&ctx, &[1]), 2, &ctx)).contains("take_axis"));
    }

    #[test]
    fn pad_with_constants_and_edges() {
        let ctx = ctx();
        let value = tensor(&ctx, &[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        check(
            &CpuTensor::pad(&value, &[(1, 0), (0, 1)], PadMode::Constant, &ctx).expect("pad"),
            &ctx,
            &[3, 3],
            &[0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 3.0, 4.0, 0.0],
        );
        check(
            &CpuTensor::pad(&value, &[(0, 1), (1, 0)], PadMode::Edge, &ctx).expect("pad"),
            &ctx,
            &[3, 3],
            &[1.0, 1.0, 2.0, 3.0, 3.0, 4.0, 3.0, 3.0, 4.0],
        );
        let message = error(CpuTensor::pad(&value, &[(1, 1)], PadMode::Constant, &ctx));
        assert!(message.contains("2 (before, after) widths"), "{message}");
        let message = error(CpuTensor::pad(
            &value,
            &[(0, 0), (-1, 0)],
            PadMode::Edge,
            &ctx,
        ));
        assert!(message.contains("non-negative widths"), "{message}");
    }
}
