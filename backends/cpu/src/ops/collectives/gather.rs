//! Gathers along an axis (GAT-1, GAT-2): every member's slice in member
//! order, of one extent (`all_gather_even`) or of per-member counts
//! (`all_gather_uneven`).

use std::sync::Arc;

use eredu_core::Submission;
use eredu_runtime::backend::{EvenGatherBackend, UnevenGatherBackend};

use super::along_axis::{axis_views, check_axis, with_axis};
use super::collective::{agree, same_shapes, submission, Collective};
use crate::completion::CpuCompletion;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::group::CpuGroup;
use crate::layout::concat_axis;
use crate::tensor::CpuTensor;
use crate::CpuBackend;

impl EvenGatherBackend for CpuBackend {
    fn all_gather_even(
        value: CpuTensor,
        axis: usize,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "all_gather_even";
        check_axis(OP, &value, axis)?;
        let shape = value.dims().to_vec();
        let width = value.extents()[axis] * group.size();
        let device = executor.device();
        let reversed = device.has(Defect::GatherReversed);
        let by_arrival = device.has(Defect::GatherByArrival);
        let middle_swapped =
            device.has(Defect::GatherMiddleAxisSwapped) && axis > 0 && axis + 1 < shape.len();
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, _| {
                agree(OP, all, "axis", |c| c.meta.clone())?;
                same_shapes(OP, all)?;
                let views = axis_views(OP, all, axis)?;
                let mut blocks: Vec<(&[f32], usize, u64)> = all
                    .iter()
                    .zip(&views)
                    .map(|(c, v)| (c.values.as_slice(), v.extent, c.arrival))
                    .collect();
                if reversed {
                    blocks.reverse();
                }
                if by_arrival {
                    blocks.sort_by_key(|&(_, _, arrival)| arrival);
                }
                let blocks: Vec<(&[f32], usize)> = blocks
                    .into_iter()
                    .map(|(data, extent, _)| (data, extent))
                    .collect();
                let (outer, inner) = if middle_swapped {
                    (views[0].inner, views[0].outer)
                } else {
                    (views[0].outer, views[0].inner)
                };
                Ok(Arc::new(concat_axis(outer, inner, &blocks)))
            }),
        )
        .symmetric();
        collective.meta = vec![axis];
        collective.output_shape = Some(with_axis(&shape, axis, width)?);
        collective.input = Some(value);
        submission(collective.submit(group, executor)?, OP)
    }
}

impl UnevenGatherBackend for CpuBackend {
    fn all_gather_uneven(
        value: CpuTensor,
        counts: &[usize],
        axis: usize,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "all_gather_uneven";
        check_axis(OP, &value, axis)?;
        if counts.len() != group.size() {
            return Err(CpuError::invalid(
                OP,
                format!("one count per member ({})", group.size()),
                format!("{} counts", counts.len()),
            ));
        }
        let own = value.extents()[axis];
        if counts[group.member()] != own {
            return Err(CpuError::invalid(
                OP,
                format!(
                    "member {}'s count {} to equal its extent along axis {axis}",
                    group.member(),
                    counts[group.member()]
                ),
                format!("extent {own}"),
            ));
        }
        let total = counts
            .iter()
            .try_fold(0usize, |sum, c| sum.checked_add(*c))
            .ok_or_else(|| {
                CpuError::invalid(OP, "counts whose sum fits in usize", format!("{counts:?}"))
            })?;
        let shape = value.dims().to_vec();
        let flat_counts = executor.device().has(Defect::UnevenCountsAsElements);
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, _| {
                // meta = [axis, counts...]: every member must name the same ones.
                agree(OP, all, "axis and counts", |c| c.meta.clone())?;
                let counts = &all[0].meta[1..];
                let views = axis_views(OP, all, axis)?;
                if let Some(member) = views.iter().zip(counts).position(|(v, c)| v.extent != *c) {
                    return Err(CpuError::MemberMismatch {
                        operation: OP,
                        member,
                        detail: format!(
                            "has extent {} along axis {axis}, counts say {}",
                            views[member].extent, counts[member]
                        ),
                    });
                }
                if flat_counts {
                    let mut out: Vec<f32> = all
                        .iter()
                        .zip(counts)
                        .flat_map(|(c, n)| c.values.iter().take(*n).copied())
                        .collect();
                    out.resize(views[0].outer * total * views[0].inner, 0.0);
                    return Ok(Arc::new(out));
                }
                let blocks: Vec<(&[f32], usize)> = all
                    .iter()
                    .zip(&views)
                    .map(|(c, v)| (c.values.as_slice(), v.extent))
                    .collect();
                Ok(Arc::new(concat_axis(
                    views[0].outer,
                    views[0].inner,
                    &blocks,
                )))
            }),
        )
        .symmetric();
        collective.meta = std::iter::once(axis)
            .chain(counts.iter().copied())
            .collect();
        collective.output_shape = Some(with_axis(&shape, axis, total)?);
        collective.input = Some(value);
        submission(collective.submit(group, executor)?, OP)
    }
}
