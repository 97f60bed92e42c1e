//! EXC-10: `submit_local_dependencies` with no tensors completes
//! (successfully) within [`slack::RELEASE`].

use std::time::Instant;

use eredu_runtime::backend::CommunicationBackend;

use super::shared::supported_policy;
use crate::check::{slack, Check, Finding};
use crate::harness::{Backend, Harness, Tensor};
use crate::matrix::{wait_within, Handle};
use crate::world::RankCtx;

/// EXC-10: `submit_local_dependencies` with no tensors completes (successfully)
/// within `slack::RELEASE`.
pub(super) fn empty_local_dependencies_complete<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    let submission =
        Backend::<H>::submit_local_dependencies(std::iter::empty::<&Tensor<H>>(), ctx.executor())
            .map_err(|e| {
            Finding::Violation(format!(
                "submit_local_dependencies with no tensors failed: {e}"
            ))
        })?;
    let completion = Handle::<H>::Communication(submission.completion);
    let start = Instant::now();
    let outcome = wait_within(&completion, slack::RELEASE);
    let took = start.elapsed();
    if outcome.is_err() {
        // Tear the stuck work down so it does not outlive the case.
        if let Ok(policy) = supported_policy::<H>() {
            let _ = completion.wait_bounded(ctx, policy);
        }
    }
    outcome.map_err(|error| {
        Finding::Violation(format!(
            "local_dependencies: submit_local_dependencies with no tensors did not complete ({error}, after {took:?}); \
             expected it to complete promptly"
        ))
    })
}
