//! Even and uneven gathers (GAT-1, GAT-2): every member's copy table
//! places each member's input, in member order, along the axis of every
//! output. The planted `GatherReversed`, `GatherMiddleAxisSwapped`,
//! `GatherByArrival` and `UnevenCountsAsElements` defects break them.

use super::part::Copying;
use super::plan::{
    around, check_axis, element_bytes, input, mismatch, off_axis, output, planner, same_element,
    same_meta, same_shapes, segment_table, with_axis,
};
use crate::backend::CudaBackend;
use crate::defect::Defect;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::Segment;
use crate::group::{Contribution, CudaGroup};
use crate::tensor::CudaTensor;
use crate::work::CudaCompletion;
use eredu_core::Submission;
use eredu_runtime::backend::{EvenGatherBackend, UnevenGatherBackend};

fn even_plan_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    even_plan_with(operation, all, false)
}

/// The `GatherMiddleAxisSwapped` defect: along a middle axis, the rows
/// before the axis and the elements after it trade places in the copy.
fn even_swapped_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    even_plan_with(operation, all, true)
}

fn even_plan_with(
    operation: &'static str,
    all: &[Contribution],
    swapped: bool,
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "axis")?;
    same_element(operation, all)?;
    same_shapes(operation, all)?;
    let axis = all[0].meta[0];
    let shape = input(&all[0]).1;
    let (mut outer, extent, mut rest) = around(shape, axis);
    if swapped && axis > 0 && axis + 1 < shape.len() {
        std::mem::swap(&mut outer, &mut rest);
    }
    let inner = extent * rest;
    let n = all.len() as u64;
    let size = element_bytes(all);
    Ok(all
        .iter()
        .map(|me| {
            let segments: Vec<Segment> = all
                .iter()
                .enumerate()
                .map(|(s, c)| Segment {
                    source: input(c).0,
                    destination: output(me).0 + size * s as u64 * inner,
                    rows: outer,
                    row_len: inner,
                    source_stride: inner,
                    destination_stride: n * inner,
                })
                .collect();
            segment_table(&segments, all[0].element)
        })
        .collect())
}

/// The `GatherByArrival` defect: members concatenated in the order they
/// arrived, not in member order.
fn even_by_arrival_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    let mut arrived: Vec<&Contribution> = all.iter().collect();
    arrived.sort_by_key(|c| c.arrival);
    let permuted: Vec<Contribution> = all
        .iter()
        .zip(arrived)
        .map(|(me, at)| Contribution {
            input: at.input.clone(),
            ..me.clone()
        })
        .collect();
    even_plan_checked(operation, &permuted)
}

/// The `GatherReversed` defect: members concatenated last to first.
fn even_reversed_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "axis")?;
    same_shapes(operation, all)?;
    // Position `s` of every output gets member `n - 1 - s`'s input.
    let reversed: Vec<Contribution> = all
        .iter()
        .zip(all.iter().rev())
        .map(|(me, mirror)| Contribution {
            input: mirror.input.clone(),
            ..me.clone()
        })
        .collect();
    even_plan_checked(operation, &reversed)
}

fn uneven_plan_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "axis and counts")?;
    same_element(operation, all)?;
    let axis = all[0].meta[0];
    let counts = &all[0].meta[1..];
    let size = element_bytes(all);
    off_axis(operation, all, axis)?;
    for (member, c) in all.iter().enumerate() {
        let (_, extent, _) = around(input(c).1, axis);
        if extent != counts[member] as u64 {
            return Err(mismatch(
                operation,
                member,
                format!(
                    "has extent {extent} along axis {axis}, counts say {}",
                    counts[member]
                ),
            ));
        }
    }
    let (outer, _, rest) = around(input(&all[0]).1, axis);
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    Ok(all
        .iter()
        .map(|me| {
            let mut offset = 0u64;
            let segments: Vec<Segment> = all
                .iter()
                .zip(counts)
                .map(|(c, &count)| {
                    let count = count as u64;
                    let segment = Segment {
                        source: input(c).0,
                        destination: output(me).0 + size * offset * rest,
                        rows: outer,
                        row_len: count * rest,
                        source_stride: count * rest,
                        destination_stride: total * rest,
                    };
                    offset += count;
                    segment
                })
                .collect();
            segment_table(&segments, all[0].element)
        })
        .collect())
}

/// The `UnevenCountsAsElements` defect: counts taken as flat element counts.
fn uneven_flat_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "axis and counts")?;
    same_element(operation, all)?;
    let counts = &all[0].meta[1..];
    let size = element_bytes(all);
    Ok(all
        .iter()
        .map(|me| {
            let mut offset = 0u64;
            let segments: Vec<Segment> = all
                .iter()
                .zip(counts)
                .map(|(c, &count)| {
                    let count = count as u64;
                    let segment = Segment {
                        source: input(c).0,
                        destination: output(me).0 + size * offset,
                        rows: 1,
                        row_len: count,
                        source_stride: count,
                        destination_stride: count,
                    };
                    offset += count;
                    segment
                })
                .collect();
            segment_table(&segments, all[0].element)
        })
        .collect())
}

planner! {
    even_plan => even_plan_checked,
    uneven_plan => uneven_plan_checked,
    even_reversed => even_reversed_checked,
    even_by_arrival => even_by_arrival_checked,
    even_swapped => even_swapped_checked,
    uneven_flat => uneven_flat_checked,
}

impl EvenGatherBackend for CudaBackend {
    fn all_gather_even(
        value: CudaTensor,
        axis: usize,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        const OP: &str = "all_gather_even";
        check_axis(OP, &value, axis)?;
        let shape = eredu_nn::Tensor::shape(&value).to_vec();
        let extent = shape[axis].max(0) as usize;
        let width = extent.checked_mul(group.size()).ok_or(CudaError::Invalid {
            operation: OP,
            expected: "an output extent that fits in usize".into(),
            got: format!("{extent} × {}", group.size()),
        })?;
        let out = with_axis(OP, &shape, axis, width)?;
        Copying {
            operation: OP,
            planner: if executor.device().has(Defect::GatherReversed) {
                even_reversed
            } else if executor.device().has(Defect::GatherByArrival) {
                even_by_arrival
            } else if executor.device().has(Defect::GatherMiddleAxisSwapped) {
                even_swapped
            } else {
                even_plan
            },
            output_shape: out,
            meta: vec![axis],
            segments: group.size(),
        }
        .submit(&value, group, executor)
    }
}

impl UnevenGatherBackend for CudaBackend {
    fn all_gather_uneven(
        value: CudaTensor,
        counts: &[usize],
        axis: usize,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        const OP: &str = "all_gather_uneven";
        check_axis(OP, &value, axis)?;
        if counts.len() != group.size() {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!("one count per member ({})", group.size()),
                got: format!("{} counts", counts.len()),
            });
        }
        let shape = eredu_nn::Tensor::shape(&value).to_vec();
        let own = shape[axis].max(0) as usize;
        if counts[group.member()] != own {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!(
                    "member {}'s count {} to equal its extent along axis {axis}",
                    group.member(),
                    counts[group.member()]
                ),
                got: format!("extent {own}"),
            });
        }
        let total = counts
            .iter()
            .try_fold(0usize, |sum, c| sum.checked_add(*c))
            .ok_or(CudaError::Invalid {
                operation: OP,
                expected: "counts whose sum fits in usize".into(),
                got: format!("{counts:?}"),
            })?;
        let out = with_axis(OP, &shape, axis, total)?;
        let meta = std::iter::once(axis)
            .chain(counts.iter().copied())
            .collect();
        Copying {
            operation: OP,
            planner: if executor.device().has(Defect::UnevenCountsAsElements) {
                uneven_flat
            } else {
                uneven_plan
            },
            output_shape: out,
            meta,
            segments: group.size(),
        }
        .submit(&value, group, executor)
    }
}
