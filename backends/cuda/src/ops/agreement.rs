//! Failure agreement (AGR-1, AGR-2): every member's status, ANDed by the
//! last arrival into every member's plan word; `agree_success` never waits
//! for peers, and `resolve_failure_agreement` only reads the word (the
//! planted `AgreementLocal` and `AgreementBlocks` defects break them).

use super::part::Part;
use super::plan::planner;
use crate::backend::CudaBackend;
use crate::defect::Defect;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::HostSlot;
use crate::group::{Contribution, CudaGroup, Planner};
use crate::work::CudaCompletion;
use eredu_core::Submission;
use eredu_runtime::backend::FailureAgreementBackend;
use std::sync::Arc;

/// Agreement: every member's plan is `[1, agreed]` (planned, the result).
fn agreement_plan_checked(
    _: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    let agreed = all.iter().all(|c| c.meta == [1]);
    Ok(vec![vec![1, u8::from(agreed)]; all.len()])
}

planner! {
    agreement_plan => agreement_plan_checked,
}

/// The `AgreementLocal` defect: each member's own status.
fn agreement_local(_: &'static str, all: &[Contribution]) -> Vec<Result<Vec<u8>, CudaError>> {
    all.iter()
        .map(|c| Ok(vec![1, u8::from(c.meta == [1])]))
        .collect()
}

/// The host boolean of a failure agreement: every member's status, ANDed
/// once all arrived; authoritative after exact completion.
#[derive(Debug, Clone)]
pub struct CudaAgreement {
    plan: Option<Arc<HostSlot>>,
}

impl FailureAgreementBackend for CudaBackend {
    type FailureAgreementOutput = CudaAgreement;

    fn agree_success(
        local_success: bool,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaAgreement, CudaCompletion>, CudaError> {
        let planner: Planner = if executor.device().has(Defect::AgreementLocal) {
            agreement_local
        } else {
            agreement_plan
        };
        let mut part = Part::new("agree_success", planner);
        part.contribution.meta = vec![usize::from(local_success)];
        part.plan = 2;
        part.retained.push(group.retained());
        let submitted = part.submit(&group.sequence, group.member(), executor)?;
        if executor.device().has(Defect::AgreementBlocks) {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while !matches!(
                eredu_core::Completion::is_complete(&submitted.completion),
                Ok(true) | Err(_)
            ) && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        Ok(Submission {
            output: CudaAgreement {
                plan: submitted.plan,
            },
            completion: submitted.completion,
        })
    }

    fn resolve_failure_agreement(output: CudaAgreement) -> Result<bool, CudaError> {
        let word = output.plan.as_ref().map_or(0, |plan| plan.load());
        match word.to_le_bytes() {
            [1, agreed, ..] => Ok(agreed == 1),
            _ => Err(CudaError::Invalid {
                operation: "resolve_failure_agreement",
                expected: "a completed failure agreement".into(),
                got: "one whose members have not all arrived".into(),
            }),
        }
    }
}
