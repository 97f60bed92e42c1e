//! `SubmissionBackend` and `CommunicationBackend`: rank-local work.

use std::sync::{Arc, Weak};

use eredu_core::Submission;
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::{reach, Retention};
use crate::completion::CpuCompletion;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::{CpuExecutor, Dispatch, WorkKind};
use crate::group::CpuGroup;
use crate::route::CpuRoute;
use crate::sync::rt::{self, Instant};
use crate::tensor::{CpuTensor, Storage};
use crate::work::{Work, WorkCtx, CANCEL_POLL};
use crate::CpuBackend;

/// Queues evaluation of `values` on `executor`, retaining their storages (RET-1).
///
/// When every value is on the host there is nothing to do: on an idle lane
/// the work is complete at once. When every value is settled (on the host or
/// failed: nothing to compute or to wait for), the work cannot block and may
/// run inline on an idle lane (see [`crate::executor`]).
fn local_work<'a>(
    operation: &'static str,
    executor: &CpuExecutor,
    values: impl IntoIterator<Item = &'a CpuTensor>,
    evaluate: bool,
) -> Result<CpuCompletion, CpuError> {
    let values: Vec<&CpuTensor> = values.into_iter().collect();
    if values.iter().all(|tensor| tensor.is_materialised()) {
        if let Some(completion) = executor.complete_at_once(operation) {
            return Ok(completion);
        }
    }
    let device = executor.device();
    let retain_inputs = !device.has(Defect::LocalWorkDropsInputs);
    let mut retention = Retention::default();
    let mut settled = true;
    let storages: Vec<Weak<Storage>> = values
        .into_iter()
        .map(|tensor| {
            settled = settled && tensor.storage().is_settled();
            retention.storage(tensor, retain_inputs)
        })
        .collect();
    let hang_when_empty = storages.is_empty()
        && operation == "submit_local_dependencies"
        && device.has(Defect::EmptyLocalDepsHang);
    let dispatch = if (settled || !evaluate) && !hang_when_empty {
        Dispatch::Inline
    } else {
        Dispatch::Queue
    };
    let fenced = fenced_group(executor);
    if let Some(group) = &fenced {
        retention.keep(&group.member, true);
    }
    let body = Box::new(move |ctx: &WorkCtx<'_>| {
        if hang_when_empty {
            while !ctx.cancelled() {
                rt::sleep(CANCEL_POLL);
            }
            return ctx.checkpoint();
        }
        if !evaluate {
            return Ok(());
        }
        for weak in &storages {
            let storage = reach(weak, operation, "tensor storage")?;
            await_published(&storage, ctx)?;
            storage.evaluate()?;
        }
        Ok(())
    });
    let completion = executor.dispatch(
        operation,
        WorkKind::Local,
        dispatch,
        retention.into_vec(),
        || Work::local(body),
    )?;
    Ok(completion.with_fenced_group(fenced.map(|group| group.member)))
}

/// Waits until a communication output this value depends on has published.
fn await_published(storage: &Storage, ctx: &WorkCtx<'_>) -> Result<(), CpuError> {
    while storage.is_pending() {
        ctx.checkpoint()?;
        rt::sleep(CANCEL_POLL);
    }
    Ok(())
}

/// The group the RET-8 defect wrongly attaches to local work.
fn fenced_group(executor: &CpuExecutor) -> Option<CpuGroup> {
    if !executor.device().has(Defect::LocalDepsFenceGroup) {
        return None;
    }
    let last = executor.shared.last_group.lock().ok()?.clone()?;
    Some(CpuGroup { member: last })
}

impl SubmissionBackend for CpuBackend {
    type Executor = CpuExecutor;
    type OwnedExecutor = CpuExecutor;
    type Completion = CpuCompletion;

    fn fork_executors(executor: &CpuExecutor, count: usize) -> Result<Vec<CpuExecutor>, CpuError> {
        let share = executor.device().has(Defect::ForkSharesLane);
        Ok((0..count)
            .map(|_| {
                if share {
                    executor.share_lane()
                } else {
                    executor.device().executor()
                }
            })
            .collect())
    }

    fn submit<'a, I>(executor: &CpuExecutor, values: I) -> Result<CpuCompletion, CpuError>
    where
        CpuTensor: 'a,
        I: IntoIterator<Item = &'a CpuTensor>,
    {
        let evaluate = !executor.device().has(Defect::SubmitSkipsEvaluation);
        local_work("submit", executor, values, evaluate)
    }

    fn order_after(completion: &CpuCompletion, executor: &CpuExecutor) -> Result<(), CpuError> {
        if executor.device().has(Defect::OrderAfterIgnored) {
            return Ok(());
        }
        let producer = Arc::clone(completion.core());
        if producer.observe().phase.is_terminal() {
            return Ok(());
        }
        let body = Box::new(move |ctx: &WorkCtx<'_>| loop {
            let deadline = Instant::now().checked_add(CANCEL_POLL);
            let seen = producer.wait_for(deadline, |seen| seen.phase.is_terminal());
            if seen.phase.is_terminal() {
                return Ok(());
            }
            ctx.checkpoint()?;
        });
        // The gate's own completion is internal: dropping it retains nothing live.
        executor.enqueue("order_after", WorkKind::Local, Vec::new(), || {
            Work::local(body)
        })?;
        Ok(())
    }

    fn retain_until_complete<T: Send + 'static>(
        executor: &CpuExecutor,
        completion: &CpuCompletion,
        value: T,
    ) -> Result<(), CpuError> {
        if executor.device().has(Defect::RetainDropsEarly) {
            drop(value);
            return Ok(());
        }
        let value: crate::core::Retained =
            if executor.device().has(Defect::ReleasableRunsDestructors) {
                Box::new(crate::device::KeptForReleasable(Box::new(value)))
            } else {
                Box::new(value)
            };
        if let Err(already_complete) = completion.core().retain(value) {
            drop(already_complete);
        }
        Ok(())
    }
}

impl CommunicationBackend for CpuBackend {
    type CommunicationGroup = CpuGroup;
    type CommunicationRoute = CpuRoute;
    type CommunicationCompletion = CpuCompletion;
    type CommunicationError = CpuError;

    fn submit_local_dependencies<'a, I>(
        values: I,
        executor: &CpuExecutor,
    ) -> Result<Submission<(), CpuCompletion>, CpuError>
    where
        CpuTensor: 'a,
        I: IntoIterator<Item = &'a CpuTensor>,
    {
        let completion = local_work("submit_local_dependencies", executor, values, true)?;
        Ok(Submission {
            output: (),
            completion,
        })
    }
}
