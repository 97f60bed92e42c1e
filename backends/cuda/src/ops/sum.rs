//! Sum reduction (SUM-1): every member's kernel sums its
//! 256-element-aligned share of all members' inputs into every output, in
//! member order (16-bit elements widened to `f32`, rounded once), reading
//! the peers' addresses from its plan. The planted `SumRepeatsFirstMember`,
//! `SumSharePastFirstRepeats` and `SumBf16AsF16` defects break it.

use super::part::Part;
use super::plan::{bytes, input, output, planner, same_element, same_shapes};
use crate::backend::CudaBackend;
use crate::defect::Defect;
use crate::element::Element;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::{share, Launch};
use crate::group::{Contribution, CudaGroup, Planner};
use crate::tensor::CudaTensor;
use crate::work::CudaCompletion;
use eredu_core::Submission;
use eredu_runtime::backend::SumReductionBackend;

fn sum_plan_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_element(operation, all)?;
    same_shapes(operation, all)?;
    let mut words = vec![0u64; 2 * crate::ffi::MAX_RANKS];
    for (member, c) in all.iter().enumerate() {
        words[member] = input(c).0;
        words[crate::ffi::MAX_RANKS + member] = output(c).0;
    }
    Ok(vec![bytes(words); all.len()])
}

/// The `SumRepeatsFirstMember` defect: member 0's input read twice.
fn sum_repeating_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    let mut all = all.to_vec();
    if all.len() > 1 {
        let first = all[0].input.clone();
        let last = all.len() - 1;
        all[last].input = first;
    }
    sum_plan_checked(operation, &all)
}

/// The `SumSharePastFirstRepeats` defect: every member but member 0 (whose
/// share is the first 256-element-aligned chunk, and the whole message
/// below that) reads member 0's input in place of the last member's.
fn sum_share_repeating_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    let right = sum_plan_checked(operation, all)?;
    let wrong = sum_repeating_checked(operation, all)?;
    Ok(right
        .into_iter()
        .zip(wrong)
        .enumerate()
        .map(|(member, (right, wrong))| if member == 0 { right } else { wrong })
        .collect())
}

planner! {
    sum_plan => sum_plan_checked,
    sum_repeating => sum_repeating_checked,
    sum_share_repeating => sum_share_repeating_checked,
}

impl SumReductionBackend for CudaBackend {
    fn all_reduce_sum(
        value: CudaTensor,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        const OP: &str = "all_reduce_sum";
        let shape = eredu_nn::Tensor::shape(&value).to_vec();
        let element = value.element();
        let output = CudaTensor::pending(executor.device(), element, shape.clone())?;
        let (n, member, len) = (group.size(), group.member(), value.len());
        let device = executor.device();
        let planner: Planner = if device.has(Defect::SumRepeatsFirstMember) {
            sum_repeating
        } else if device.has(Defect::SumSharePastFirstRepeats) {
            sum_share_repeating
        } else {
            sum_plan
        };
        // The `SumBf16AsF16` defect: bf16 bits summed as f16.
        let code = match element {
            Element::Bf16 if device.has(Defect::SumBf16AsF16) => Element::F16.code(),
            element => element.code(),
        };
        let mut part = Part::new(OP, planner);
        part.contribution = Contribution {
            input: Some((value.address(), shape.clone())),
            output: Some((output.address(), shape)),
            element,
            ..Contribution::default()
        };
        part.plan = 16 * crate::ffi::MAX_RANKS;
        part.kernels = Box::new(move |ranks| {
            let (begin, end) = share(len, n, member);
            vec![Launch::AllReduceSum {
                ranks,
                count: n as u32,
                begin,
                end,
                element: code,
            }]
        });
        part.inputs = vec![&value];
        part.outputs = vec![output];
        part.retained.push(group.retained());
        Ok(part.submit(&group.sequence, member, executor)?.one())
    }
}
