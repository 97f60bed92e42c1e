//! Variable all-to-all (A2A-1): member `p`'s `send[q]` slice goes to member
//! `q`, whose output holds the `receive[p]` slices in member order; zero
//! counts are valid, and every member still takes part.

use super::part::Copying;
use super::plan::{
    around, check_axis, element_bytes, input, mismatch, off_axis, output, planner, same_element,
    segment_table, with_axis,
};
use crate::backend::CudaBackend;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::Segment;
use crate::group::{Contribution, CudaGroup};
use crate::tensor::CudaTensor;
use crate::work::CudaCompletion;
use eredu_core::Submission;
use eredu_runtime::backend::VariableAllToAllBackend;
use eredu_runtime::CommunicationPeerCounts;

fn all_to_all_plan_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    let n = all.len();
    let axis = all[0].meta[0];
    if let Some(member) = all.iter().position(|c| c.meta[0] != axis) {
        return Err(mismatch(
            operation,
            member,
            format!(
                "submitted axis {}, member 0 submitted {axis}",
                all[member].meta[0]
            ),
        ));
    }
    let sends = |p: usize| &all[p].meta[1..=n];
    let receives = |p: usize| &all[p].meta[1 + n..];
    for p in 0..n {
        for q in 0..n {
            if sends(p)[q] != receives(q)[p] {
                return Err(mismatch(
                    operation,
                    p,
                    format!(
                        "sends {} to member {q}, which expects {} from it",
                        sends(p)[q],
                        receives(q)[p]
                    ),
                ));
            }
        }
    }
    same_element(operation, all)?;
    off_axis(operation, all, axis)?;
    let (outer, _, rest) = around(input(&all[0]).1, axis);
    let size = element_bytes(all);
    Ok((0..n)
        .map(|me| {
            let received: u64 = receives(me).iter().map(|&c| c as u64).sum();
            let mut offset = 0u64;
            let segments: Vec<Segment> = (0..n)
                .map(|p| {
                    let extent: u64 = sends(p).iter().map(|&c| c as u64).sum();
                    let before: u64 = sends(p)[..me].iter().map(|&c| c as u64).sum();
                    let len = sends(p)[me] as u64;
                    let segment = Segment {
                        source: input(&all[p]).0 + size * before * rest,
                        destination: output(&all[me]).0 + size * offset * rest,
                        rows: outer,
                        row_len: len * rest,
                        source_stride: extent * rest,
                        destination_stride: received * rest,
                    };
                    offset += len;
                    segment
                })
                .collect();
            segment_table(&segments, all[0].element)
        })
        .collect())
}

planner! {
    all_to_all_plan => all_to_all_plan_checked,
}

impl VariableAllToAllBackend for CudaBackend {
    fn variable_all_to_all(
        value: CudaTensor,
        counts: &CommunicationPeerCounts,
        axis: usize,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        const OP: &str = "variable_all_to_all";
        check_axis(OP, &value, axis)?;
        let n = group.size();
        if counts.group_size() != n {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!("counts for {n} peers"),
                got: format!("counts for {} peers", counts.group_size()),
            });
        }
        let sum = |c: &[usize]| c.iter().try_fold(0usize, |s, n| s.checked_add(*n));
        let overflow = || CudaError::Invalid {
            operation: OP,
            expected: "counts whose sum fits in usize".into(),
            got: "an overflowing sum".into(),
        };
        let sent = sum(counts.send()).ok_or_else(overflow)?;
        let received = sum(counts.receive()).ok_or_else(overflow)?;
        let shape = eredu_nn::Tensor::shape(&value).to_vec();
        let own = shape[axis].max(0) as usize;
        if sent != own {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!(
                    "send counts summing to the input's extent {own} along axis {axis}"
                ),
                got: format!("send counts {:?} summing to {sent}", counts.send()),
            });
        }
        let out = with_axis(OP, &shape, axis, received)?;
        let meta = std::iter::once(axis)
            .chain(counts.send().iter().copied())
            .chain(counts.receive().iter().copied())
            .collect();
        Copying {
            operation: OP,
            planner: all_to_all_plan,
            output_shape: out,
            meta,
            segments: n,
        }
        .submit(&value, group, executor)
    }
}
