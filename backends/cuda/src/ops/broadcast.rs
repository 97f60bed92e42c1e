//! Broadcast (BRD-1, BRD-2): every member's output is a copy of the root's
//! input, whatever the others submitted; an out-of-range root is an error
//! (the planted `BroadcastRootWraps` defect wraps it around).

use super::part::Copying;
use super::plan::{input, output, planner, same_element, same_meta, same_shapes, segment_table};
use crate::backend::CudaBackend;
use crate::defect::Defect;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::Segment;
use crate::group::{Contribution, CudaGroup};
use crate::tensor::{elements, CudaTensor};
use crate::work::CudaCompletion;
use eredu_core::Submission;
use eredu_runtime::backend::BroadcastBackend;

fn broadcast_plan_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "root")?;
    same_element(operation, all)?;
    same_shapes(operation, all)?;
    let root = all[0].meta[0];
    let (source, shape) = input(&all[root]);
    let len = elements(operation, shape)? as u64;
    Ok(all
        .iter()
        .map(|me| {
            segment_table(
                &[Segment {
                    source,
                    destination: output(me).0,
                    rows: 1,
                    row_len: len,
                    source_stride: len,
                    destination_stride: len,
                }],
                all[0].element,
            )
        })
        .collect())
}

planner! {
    broadcast_plan => broadcast_plan_checked,
}

impl BroadcastBackend for CudaBackend {
    fn broadcast(
        value: CudaTensor,
        root: usize,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        const OP: &str = "broadcast";
        let root = if root >= group.size() && executor.device().has(Defect::BroadcastRootWraps) {
            root % group.size()
        } else {
            root
        };
        if root >= group.size() {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!("a root member index below the group size {}", group.size()),
                got: format!("root {root}"),
            });
        }
        let shape = eredu_nn::Tensor::shape(&value).to_vec();
        Copying {
            operation: OP,
            planner: broadcast_plan,
            output_shape: shape,
            meta: vec![root],
            segments: 1,
        }
        .submit(&value, group, executor)
    }
}
