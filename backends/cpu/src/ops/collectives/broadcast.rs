//! Broadcast (BRD-1, BRD-2): every member's output is the root's input; a
//! root outside the group is refused at submission.

use std::sync::Arc;

use eredu_core::Submission;
use eredu_runtime::backend::BroadcastBackend;

use super::collective::{agree, same_shapes, submission, Collective};
use super::sum::{sum, Kernel};
use crate::completion::CpuCompletion;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::group::CpuGroup;
use crate::tensor::{CpuTensor, Element};
use crate::CpuBackend;

impl BroadcastBackend for CpuBackend {
    fn broadcast(
        value: CpuTensor,
        root: usize,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "broadcast";
        let size = group.size();
        let root = if root < size {
            root
        } else if executor.device().has(Defect::BroadcastRootWraps) {
            root % size
        } else {
            return Err(CpuError::invalid(
                OP,
                format!("a root member index below the group size {size}"),
                format!("root {root}"),
            ));
        };
        let sums = executor.device().has(Defect::BroadcastSums);
        let shape = value.dims().to_vec();
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, _| {
                agree(OP, all, "root", |c| c.meta.clone())?;
                same_shapes(OP, all)?;
                if sums {
                    let kernel = Kernel {
                        element: all.first().map_or(Element::F32, |c| c.element),
                        tail_untouched: false,
                        bf16_as_f16: false,
                    };
                    return Ok(sum(all, None, kernel));
                }
                Ok(Arc::clone(&all[root].values))
            }),
        )
        .symmetric();
        collective.meta = vec![root];
        collective.output_shape = Some(shape);
        collective.input = Some(value);
        let early = root == group.member() && executor.device().has(Defect::BroadcastRootEarly);
        let (output, completion) = collective.submit(group, executor)?;
        let completion = if early {
            completion.reporting_early()
        } else {
            completion
        };
        submission((output, completion), OP)
    }
}
