//! Collectives without a tensor output: the barrier (BAR-1), which waits
//! for every member, and the failure agreement (AGR-1, AGR-2), whose host
//! boolean says whether every member reported success and is
//! authoritative once the completion completed.

use std::sync::Arc;
use std::time::Duration;

use eredu_core::Submission;
use eredu_runtime::backend::{BarrierBackend, FailureAgreementBackend};

use super::super::reach;
use super::collective::Collective;
use crate::completion::CpuCompletion;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::group::CpuGroup;
use crate::sync::rt::{Instant, Mutex};
use crate::tensor::Values;
use crate::CpuBackend;

impl BarrierBackend for CpuBackend {
    fn barrier(group: &CpuGroup, executor: &CpuExecutor) -> Result<CpuCompletion, CpuError> {
        let mut collective = Collective::new("barrier", Box::new(|_, _| Ok(Values::default())));
        collective.waits = !executor.device().has(Defect::BarrierEarly);
        Ok(collective.submit(group, executor)?.1)
    }
}

/// The host boolean of a failure agreement, authoritative after completion.
#[derive(Debug, Clone)]
pub struct CpuAgreement {
    result: Arc<Mutex<Option<bool>>>,
}

impl FailureAgreementBackend for CpuBackend {
    type FailureAgreementOutput = CpuAgreement;

    fn agree_success(
        local_success: bool,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuAgreement, CpuCompletion>, CpuError> {
        const OP: &str = "agree_success";
        let device = executor.device();
        let local_only = device.has(Defect::AgreementLocal);
        let output = CpuAgreement {
            result: Arc::new(Mutex::new(None)),
        };
        let slot = Arc::downgrade(&output.result);
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, _| {
                let agreed = if local_only {
                    local_success
                } else {
                    all.iter().all(|c| c.meta == [1])
                };
                let slot = reach(&slot, OP, "agreement output")?;
                if let Ok(mut result) = slot.lock() {
                    *result = Some(agreed);
                }
                Ok(Values::default())
            }),
        );
        collective.meta = vec![usize::from(local_success)];
        let (_, completion) = collective.submit(group, executor)?;
        if !device.has(Defect::OutputNotRetained) {
            let retained = Box::new(Arc::clone(&output.result));
            if let Err(already_complete) = completion.core().retain(retained) {
                drop(already_complete);
            }
        }
        if device.has(Defect::AgreementBlocks) {
            let deadline = Instant::now() + Duration::from_secs(2);
            completion
                .core()
                .wait_for(Some(deadline), |seen| seen.phase.is_terminal());
        }
        Ok(Submission { output, completion })
    }

    fn resolve_failure_agreement(output: CpuAgreement) -> Result<bool, CpuError> {
        let value = output.result.lock().ok().and_then(|result| *result);
        value.ok_or_else(|| CpuError::NotMaterialised {
            storage: 0,
            reason: "the failure agreement has not completed".into(),
        })
    }
}
