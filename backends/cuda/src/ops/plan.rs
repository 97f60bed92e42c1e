//! What the planners of collectives share: the checks that members agree
//! (element type, shapes, arguments; members that disagree all fail), the
//! checks of one member's arguments (axis, output extent), the layout of a
//! copy table in the kernels' halves, and the `planner!` macro that turns
//! a collective's checked plan into its [`Planner`](crate::group::Planner).

use crate::element::Element;
use crate::error::CudaError;
use crate::ffi::Segment;
use crate::group::Contribution;
use crate::tensor::CudaTensor;

/// Little-endian bytes of `words` (the layout of the kernels' structs).
pub(super) fn bytes(words: impl IntoIterator<Item = u64>) -> Vec<u8> {
    words.into_iter().flat_map(u64::to_le_bytes).collect()
}

/// The copy table of `segments`, whose lengths and strides count
/// `element`s (the kernel's are in halves).
pub(super) fn segment_table(segments: &[Segment], element: Element) -> Vec<u8> {
    let halves = element.halves();
    bytes(
        std::iter::once(segments.len() as u64).chain(segments.iter().flat_map(|s| {
            [
                s.source,
                s.destination,
                s.rows,
                s.row_len * halves,
                s.source_stride * halves,
                s.destination_stride * halves,
            ]
        })),
    )
}

/// Bytes per element of the collective's tensors.
pub(super) fn element_bytes(all: &[Contribution]) -> u64 {
    all[0].element.size() as u64
}

/// Every member submitted tensors of member 0's element type.
pub(super) fn same_element(operation: &'static str, all: &[Contribution]) -> Result<(), CudaError> {
    let first = all[0].element;
    match all.iter().position(|c| c.element != first) {
        Some(member) => Err(mismatch(
            operation,
            member,
            format!(
                "submitted a {} tensor, member 0 submitted {first}",
                all[member].element
            ),
        )),
        None => Ok(()),
    }
}

/// Bytes of a segment table of `count` segments.
pub(super) fn table_bytes(count: usize) -> usize {
    8 + count * std::mem::size_of::<Segment>()
}

pub(super) fn mismatch(operation: &'static str, member: usize, detail: String) -> CudaError {
    CudaError::Mismatch {
        operation,
        message: format!("member {member} {detail}"),
    }
}

pub(super) fn input(c: &Contribution) -> (u64, &[i32]) {
    c.input
        .as_ref()
        .map_or((0, &[][..]), |(a, s)| (*a, s.as_slice()))
}

pub(super) fn output(c: &Contribution) -> (u64, &[i32]) {
    c.output
        .as_ref()
        .map_or((0, &[][..]), |(a, s)| (*a, s.as_slice()))
}

pub(super) fn same_shapes(operation: &'static str, all: &[Contribution]) -> Result<(), CudaError> {
    let first = input(&all[0]).1;
    match all.iter().position(|c| input(c).1 != first) {
        Some(member) => Err(mismatch(
            operation,
            member,
            format!(
                "submitted shape {:?}, member 0 submitted {first:?}",
                input(&all[member]).1
            ),
        )),
        None => Ok(()),
    }
}

pub(super) fn same_meta(
    operation: &'static str,
    all: &[Contribution],
    what: &str,
) -> Result<(), CudaError> {
    let first = &all[0].meta;
    match all.iter().position(|c| &c.meta != first) {
        Some(member) => Err(mismatch(
            operation,
            member,
            format!(
                "submitted {what} {:?}, member 0 submitted {first:?}",
                all[member].meta
            ),
        )),
        None => Ok(()),
    }
}

/// `(outer, extent, rest)` of `shape` around `axis`: rows before the axis,
/// the axis's extent, elements after it.
pub(super) fn around(shape: &[i32], axis: usize) -> (u64, u64, u64) {
    let dims: Vec<u64> = shape.iter().map(|&d| d.max(0) as u64).collect();
    let outer = dims[..axis].iter().product();
    let rest = dims[axis + 1..].iter().product();
    (outer, dims[axis], rest)
}

/// Members agree on every extent but `axis`.
pub(super) fn off_axis(
    operation: &'static str,
    all: &[Contribution],
    axis: usize,
) -> Result<(), CudaError> {
    let first = input(&all[0]).1;
    for (member, c) in all.iter().enumerate() {
        let shape = input(c).1;
        let agrees = shape.len() == first.len()
            && shape
                .iter()
                .zip(first)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
        if !agrees {
            return Err(mismatch(
                operation,
                member,
                format!("submitted shape {shape:?}, which differs from member 0's {first:?} off axis {axis}"),
            ));
        }
    }
    Ok(())
}

pub(super) fn check_axis(
    operation: &'static str,
    value: &CudaTensor,
    axis: usize,
) -> Result<(), CudaError> {
    if axis >= eredu_nn::Tensor::shape(value).len() {
        return Err(CudaError::Invalid {
            operation,
            expected: format!(
                "an axis below the input's rank {}",
                eredu_nn::Tensor::shape(value).len()
            ),
            got: format!("axis {axis}"),
        });
    }
    Ok(())
}

pub(super) fn with_axis(
    operation: &'static str,
    shape: &[i32],
    axis: usize,
    extent: usize,
) -> Result<Vec<i32>, CudaError> {
    let mut out = shape.to_vec();
    out[axis] = i32::try_from(extent).map_err(|_| CudaError::Invalid {
        operation,
        expected: "an output extent that fits in i32".into(),
        got: extent.to_string(),
    })?;
    Ok(out)
}

/// Defines each `$name` as the [`Planner`](crate::group::Planner) of a
/// collective from its `$checked` plan: every member's plan, or the same
/// error for all of them.
macro_rules! planner {
    ($($name:ident => $checked:ident),* $(,)?) => {
        $(
            pub(super) fn $name(
                operation: &'static str,
                all: &[$crate::group::Contribution],
            ) -> Vec<Result<Vec<u8>, $crate::error::CudaError>> {
                $crate::group::for_all(all.len(), $checked(operation, all))
            }
        )*
    };
}

pub(super) use planner;
