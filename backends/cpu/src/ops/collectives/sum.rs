//! The sum reduction (SUM-1): a fused, blocked elementwise sum in
//! member order, bit-reproducible, split between two threads for large
//! outputs, reusing the group's last result buffer once nobody holds it;
//! and `all_reduce_sum` on it.

use std::sync::Arc;

use eredu_core::Submission;
use eredu_runtime::backend::SumReductionBackend;

use super::collective::{same_shapes, submission, Collective, PARALLEL_FROM};
use crate::completion::CpuCompletion;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::frame::Contribution;
use crate::group::CpuGroup;
use crate::tensor::{CpuTensor, Element, Values};
use crate::CpuBackend;

/// Elementwise sum of the members' values, in member order (so results are
/// reproducible bit for bit), written into `recycled` when nobody else holds
/// that buffer any more (a previous result whose outputs were all dropped).
///
/// The sum is fused and blocked (each block of the output is summed over all
/// members while it is in cache), and large outputs are split between two
/// threads: the other members wait for this result, so their cores are idle.
pub(super) fn sum(members: &[Contribution], recycled: Option<Values>, kernel: Kernel) -> Values {
    let len = members.first().map_or(0, |first| first.values.len());
    let mut total = recycled
        .filter(|buffer| buffer.len() == len)
        .unwrap_or_default();
    if total.len() != len || Arc::get_mut(&mut total).is_none() {
        total = Arc::new(vec![0.0f32; len]);
    }
    let Some(buffer) = Arc::get_mut(&mut total) else {
        return total; // unreachable: a fresh Arc is unique
    };
    // `available_parallelism` reads the scheduler's and cgroup's limits (a
    // few system calls): only large outputs ask.
    if len < PARALLEL_FROM || std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        sum_into(buffer, 0, members, kernel);
        return total;
    }
    let (low, high) = buffer.split_at_mut(len / 2);
    std::thread::scope(|scope| {
        scope.spawn(|| sum_into(high, len / 2, members, kernel));
        sum_into(low, 0, members, kernel);
    });
    total
}

/// The sum's cache block, in elements: each block of the output is summed
/// over every member while it is in cache. A boundary of the data path (the
/// harness names it, so the kit's size sweep goes past it).
pub const SUM_BLOCK: usize = 4096;

/// How one sum is computed: its element type (the result is rounded to it
/// once, block by block) and the planted defects of the kernel.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kernel {
    /// The element type of the inputs and the result.
    pub(super) element: Element,
    /// SUM-1 defect: a last, partial block past [`PARALLEL_FROM`] keeps
    /// member 0's values.
    pub(super) tail_untouched: bool,
    /// SUM-1 defect: `bf16` inputs are decoded as `f16` bits.
    pub(super) bf16_as_f16: bool,
}

impl Kernel {
    /// A member's value as the kernel reads it.
    fn load(self, value: f32) -> f32 {
        if self.bf16_as_f16 && self.element == Element::Bf16 {
            half::f16::from_bits(half::bf16::from_f32(value).to_bits()).to_f32()
        } else {
            value
        }
    }
}

/// Writes `out[i] = Σ members[m].values[offset + i]`, block by block, in
/// `f32`, each block then rounded to the element type.
fn sum_into(out: &mut [f32], offset: usize, members: &[Contribution], kernel: Kernel) {
    for (index, block) in out.chunks_mut(SUM_BLOCK).enumerate() {
        let start = offset + index * SUM_BLOCK;
        let end = start + block.len();
        let skipped = kernel.tail_untouched && start >= PARALLEL_FROM && block.len() < SUM_BLOCK;
        for (m, member) in members.iter().enumerate() {
            let Some(values) = member.values.get(start..end) else {
                continue;
            };
            if m == 0 {
                for (acc, &value) in block.iter_mut().zip(values) {
                    *acc = kernel.load(value);
                }
            } else if !skipped {
                for (acc, &value) in block.iter_mut().zip(values) {
                    *acc += kernel.load(value);
                }
            }
        }
        kernel.element.round_all(block);
    }
}

impl SumReductionBackend for CpuBackend {
    fn all_reduce_sum(
        value: CpuTensor,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "all_reduce_sum";
        executor.device().admits(OP, &value)?;
        if group.size() == 1 {
            if let Some(values) = value.storage().ready_values() {
                // The sum over one member of a value on the host is that
                // value, bit for bit: nothing to do, so on an idle lane it is
                // complete at once (see `crate::executor`), its output a new
                // storage sharing the (immutable) values.
                if let Some(completion) = executor.complete_at_once(OP) {
                    // Numbered like any collective on the group, whichever
                    // path it takes.
                    group.member.next_seq();
                    let output =
                        CpuTensor::sharing(executor.ledger(), value.dims().to_vec(), values)
                            .of(value.element());
                    return Ok(Submission { output, completion });
                }
            }
        }
        let shape = value.dims().to_vec();
        let device = executor.device();
        let skip_last = device.has(Defect::SumSkipsLastMember);
        let kernel = Kernel {
            element: value.element(),
            tail_untouched: device.has(Defect::SumTailBlockUntouched),
            bf16_as_f16: device.has(Defect::SumBf16AsF16),
        };
        let recycle = group.member.rendezvous().0;
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, _| {
                same_shapes(OP, all)?;
                if let [alone] = all {
                    // The sum over one member is its input, bit for bit:
                    // share the (immutable) values instead of copying them.
                    return Ok(Arc::clone(&alone.values));
                }
                let members = if skip_last && all.len() > 1 {
                    &all[..all.len() - 1]
                } else {
                    all
                };
                let total = sum(members, recycle.take(), kernel);
                recycle.keep(&total);
                Ok(total)
            }),
        )
        .symmetric();
        collective.input = Some(value);
        collective.output_shape = Some(shape);
        submission(collective.submit(group, executor)?, OP)
    }
}
