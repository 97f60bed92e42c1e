//! Barrier (BAR-1): a part with no kernel and no plan, between the gates of
//! its instance, so it completes only once every member entered it (the
//! planted `BarrierEarly` defect skips the gates).

use super::part::Part;
use super::plan::planner;
use crate::backend::CudaBackend;
use crate::defect::Defect;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::group::{Contribution, CudaGroup};
use crate::work::CudaCompletion;
use eredu_runtime::backend::BarrierBackend;

fn no_plan_checked(_: &'static str, all: &[Contribution]) -> Result<Vec<Vec<u8>>, CudaError> {
    Ok(vec![Vec::new(); all.len()])
}

planner! {
    no_plan => no_plan_checked,
}

impl BarrierBackend for CudaBackend {
    fn barrier(group: &CudaGroup, executor: &CudaExecutor) -> Result<CudaCompletion, CudaError> {
        let mut part = Part::new("barrier", no_plan);
        part.waits = !executor.device().has(Defect::BarrierEarly);
        part.retained.push(group.retained());
        Ok(part
            .submit(&group.sequence, group.member(), executor)?
            .completion)
    }
}
