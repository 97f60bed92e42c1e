//! The variable all-to-all (A2A-1): each member sends every peer its own
//! count of slices along an axis and receives theirs, in member order; a
//! member with nothing to send or receive still meets its peers.

use std::sync::Arc;

use eredu_core::Submission;
use eredu_runtime::backend::VariableAllToAllBackend;
use eredu_runtime::CommunicationPeerCounts;

use super::along_axis::{axis_views, check_axis, with_axis};
use super::collective::{agree, submission, Collective};
use crate::completion::CpuCompletion;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::group::CpuGroup;
use crate::layout::{concat_axis, slice_axis};
use crate::tensor::CpuTensor;
use crate::CpuBackend;

impl VariableAllToAllBackend for CpuBackend {
    fn variable_all_to_all(
        value: CpuTensor,
        counts: &CommunicationPeerCounts,
        axis: usize,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "variable_all_to_all";
        check_axis(OP, &value, axis)?;
        let n = group.size();
        if counts.group_size() != n {
            return Err(CpuError::invalid(
                OP,
                format!("counts for {n} peers"),
                format!("counts for {} peers", counts.group_size()),
            ));
        }
        let sum = |c: &[usize]| c.iter().try_fold(0usize, |s, n| s.checked_add(*n));
        let overflow =
            || CpuError::invalid(OP, "counts whose sum fits in usize", "an overflowing sum");
        let sent = sum(counts.send()).ok_or_else(overflow)?;
        let received = sum(counts.receive()).ok_or_else(overflow)?;
        let own = value.extents()[axis];
        if sent != own {
            return Err(CpuError::invalid(
                OP,
                format!("send counts summing to the input's extent {own} along axis {axis}"),
                format!("send counts {:?} summing to {sent}", counts.send()),
            ));
        }
        let zero = sent == 0 && received == 0;
        let shape = value.dims().to_vec();
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, me| {
                // meta = [axis, send[0..n], receive[0..n]].
                agree(OP, all, "axis", |c| c.meta.first().copied())?;
                let sends = |p: usize| &all[p].meta[1..=n];
                let receives = |p: usize| &all[p].meta[1 + n..];
                for p in 0..n {
                    for q in 0..n {
                        if sends(p)[q] != receives(q)[p] {
                            return Err(CpuError::MemberMismatch {
                                operation: OP,
                                member: p,
                                detail: format!(
                                    "sends {} to member {q}, which expects {} from it",
                                    sends(p)[q],
                                    receives(q)[p]
                                ),
                            });
                        }
                    }
                }
                let views = axis_views(OP, all, axis)?;
                let blocks: Vec<(Vec<f32>, usize)> = (0..n)
                    .map(|p| {
                        let offset: usize = sends(p)[..me].iter().sum();
                        let len = sends(p)[me];
                        (slice_axis(&all[p].values, views[p], offset, len), len)
                    })
                    .collect();
                let blocks: Vec<(&[f32], usize)> =
                    blocks.iter().map(|(d, n)| (d.as_slice(), *n)).collect();
                Ok(Arc::new(concat_axis(
                    views[me].outer,
                    views[me].inner,
                    &blocks,
                )))
            }),
        );
        collective.meta = std::iter::once(axis)
            .chain(counts.send().iter().copied())
            .chain(counts.receive().iter().copied())
            .collect();
        collective.waits = !(zero && executor.device().has(Defect::AllToAllZeroSkips));
        collective.output_shape = Some(with_axis(&shape, axis, received)?);
        collective.input = Some(value);
        submission(collective.submit(group, executor)?, OP)
    }
}
