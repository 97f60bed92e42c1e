//! How a result gets its values: deferred until the running work evaluates
//! it (cooperatively with its `NativeCancel`, see [`crate::cancel`]), or at
//! once on an eager device; and the strided reads (spans, padding, listed
//! positions, broadcasts) that layout, indexing and broadcasting operations
//! gather their values with.

use std::sync::Arc;

use eredu_nn::PadMode;

use super::shape::{inconsistent, strides};
use crate::error::CpuError;
use crate::ledger::Ledger;
use crate::tensor::{element_count, CpuTensor};

/// Builds a deferred result after checking that its shape is valid. On an
/// eager device ([`crate::Personality::Eager`]) the values are computed
/// here, on the calling thread, and a failure is the call's; only a value
/// that reads the output of communication not yet completed stays deferred.
pub(super) fn lazy(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    shape: Vec<i32>,
    compute: impl Fn() -> Result<Vec<f32>, CpuError> + Send + 'static,
) -> Result<CpuTensor, CpuError> {
    element_count(operation, &shape)?;
    if ledger.eager() {
        match compute() {
            Ok(values) => return Ok(CpuTensor::sharing(ledger, shape, Arc::new(values))),
            Err(CpuError::NotMaterialised { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(CpuTensor::deferred(ledger, shape, compute))
}

/// Which source coordinate each output coordinate of one axis reads.
enum Picks {
    /// Output coordinate `c` reads source coordinate `start + c`.
    Span { start: usize },
    /// The source axis of `extent` with `before` padding coordinates ahead of
    /// it and some after it; padding reads zero, or the nearest edge if `edge`.
    Padded {
        before: usize,
        extent: usize,
        edge: bool,
    },
    /// Output coordinate `c` reads source coordinate `list[c]`.
    Listed(Vec<usize>),
}

/// How one output axis of `extent` reads a source axis of `stride`.
pub(super) struct AxisRead {
    stride: usize,
    extent: usize,
    picks: Picks,
}

impl AxisRead {
    /// Reads source coordinates `start..end` in order.
    pub(super) fn range(stride: usize, start: usize, end: usize) -> Self {
        Self {
            stride,
            extent: end.saturating_sub(start),
            picks: Picks::Span { start },
        }
    }

    /// Reads an unchanged source axis.
    pub(super) fn whole(stride: usize, extent: usize) -> Self {
        Self::range(stride, 0, extent)
    }

    /// Repeats one source element `extent` times.
    pub(super) fn broadcast(extent: usize) -> Self {
        Self::whole(0, extent)
    }

    /// Reads the listed source coordinates in order.
    pub(super) fn listed(stride: usize, list: Vec<usize>) -> Self {
        Self {
            stride,
            extent: list.len(),
            picks: Picks::Listed(list),
        }
    }

    /// Reads a source axis of `extent` padded by `(before, after)` coordinates.
    pub(super) fn padded(
        stride: usize,
        extent: usize,
        (before, after): (usize, usize),
        mode: PadMode,
    ) -> Self {
        Self {
            stride,
            extent: before.saturating_add(extent).saturating_add(after),
            picks: Picks::Padded {
                before,
                extent,
                edge: mode == PadMode::Edge,
            },
        }
    }

    /// Source coordinate read by output coordinate `c`; `None` reads zero.
    fn source(&self, c: usize) -> Option<usize> {
        match &self.picks {
            Picks::Span { start } => Some(start.saturating_add(c)),
            Picks::Padded {
                before,
                extent,
                edge,
            } => match c.checked_sub(*before).filter(|inside| inside < extent) {
                Some(inside) => Some(inside),
                None if !edge => None,
                None if c < *before => Some(0),
                None => Some(extent.saturating_sub(1)),
            },
            Picks::Listed(list) => list.get(c).copied(),
        }
    }
}

/// Copies `source` into a new row-major array whose axes read as `reads` say.
pub(super) fn gather(
    operation: &'static str,
    source: &[f32],
    reads: &[AxisRead],
) -> Result<Vec<f32>, CpuError> {
    let total = reads
        .iter()
        .try_fold(1usize, |total, read| total.checked_mul(read.extent))
        .ok_or_else(|| inconsistent(operation, "an element count that overflows usize"))?;
    let mut output = Vec::with_capacity(total);
    let mut coordinates = vec![0usize; reads.len()];
    for _ in 0..total {
        let offset =
            reads
                .iter()
                .zip(&coordinates)
                .try_fold(0usize, |offset, (read, &coordinate)| {
                    read.source(coordinate)
                        .map(|pick| offset.saturating_add(pick.saturating_mul(read.stride)))
                });
        output.push(match offset {
            Some(offset) => *source.get(offset).ok_or_else(|| {
                inconsistent(
                    operation,
                    format!("offset {offset} in {} values", source.len()),
                )
            })?,
            None => 0.0,
        });
        for (coordinate, read) in coordinates.iter_mut().zip(reads).rev() {
            *coordinate += 1;
            if *coordinate < read.extent {
                break;
            }
            *coordinate = 0;
        }
    }
    Ok(output)
}

/// Reads that broadcast `source` extents to `target` extents (aligned at the end).
pub(super) fn broadcast_reads(source: &[usize], target: &[usize]) -> Vec<AxisRead> {
    let source_strides = strides(source);
    let lead = target.len().saturating_sub(source.len());
    target
        .iter()
        .enumerate()
        .map(|(axis, &extent)| {
            axis.checked_sub(lead)
                .filter(|&source_axis| source.get(source_axis) == Some(&extent))
                .and_then(|source_axis| source_strides.get(source_axis))
                .map_or_else(
                    || AxisRead::broadcast(extent),
                    |&stride| AxisRead::whole(stride, extent),
                )
        })
        .collect()
}

/// Values of `tensor` broadcast to `target` extents.
pub(super) fn broadcast_values(
    operation: &'static str,
    tensor: &CpuTensor,
    target: &[usize],
) -> Result<Vec<f32>, CpuError> {
    let values = tensor.values()?;
    if tensor.extents() == target {
        return Ok(values);
    }
    gather(
        operation,
        &values,
        &broadcast_reads(&tensor.extents(), target),
    )
}

/// A deferred tensor holding `input`'s values under a new shape.
pub(super) fn relabel(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    input: &CpuTensor,
    shape: Vec<i32>,
) -> Result<CpuTensor, CpuError> {
    let input = input.clone();
    lazy(operation, ledger, shape, move || input.values())
}

/// A deferred tensor that gathers `input`'s values as `reads` say.
pub(super) fn regather(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    input: &CpuTensor,
    shape: Vec<i32>,
    reads: Vec<AxisRead>,
) -> Result<CpuTensor, CpuError> {
    let input = input.clone();
    lazy(operation, ledger, shape, move || {
        gather(operation, &input.values()?, &reads)
    })
}
