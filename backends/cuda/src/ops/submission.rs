//! Submission on the CUDA backend: forking executors (SUB-1), local work
//! that waits for and retains its values (`submit`, and the
//! `CommunicationBackend`'s local dependencies: RET-1), ordering one
//! executor after another's completion (SUB-3), and retaining a value
//! until a completion (RET-6).

use crate::backend::CudaBackend;
use crate::defect::Defect;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::group::CudaGroup;
use crate::route::CudaRoute;
use crate::tensor::CudaTensor;
use crate::work::CudaCompletion;
use eredu_core::Submission;
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

impl SubmissionBackend for CudaBackend {
    type Executor = CudaExecutor;
    type OwnedExecutor = CudaExecutor;
    type Completion = CudaCompletion;

    fn fork_executors(
        executor: &CudaExecutor,
        count: usize,
    ) -> Result<Vec<CudaExecutor>, CudaError> {
        if executor.device().has(Defect::ForkSharesLane) {
            return Ok((0..count).map(|_| executor.share_stream()).collect());
        }
        (0..count)
            .map(|_| CudaExecutor::new(executor.device()))
            .collect()
    }

    fn submit<'a, I>(executor: &CudaExecutor, values: I) -> Result<CudaCompletion, CudaError>
    where
        CudaTensor: 'a,
        I: IntoIterator<Item = &'a CudaTensor>,
    {
        local("submit", executor, values)
    }

    fn order_after(completion: &CudaCompletion, executor: &CudaExecutor) -> Result<(), CudaError> {
        if executor.device().has(Defect::OrderAfterIgnored) {
            return Ok(());
        }
        match completion.work.event() {
            Some(event) => event.make_wait(executor.stream()),
            None => Ok(()),
        }
    }

    fn retain_until_complete<T: Send + 'static>(
        _executor: &CudaExecutor,
        completion: &CudaCompletion,
        value: T,
    ) -> Result<(), CudaError> {
        // Already complete: nothing uses the value any more; it goes now.
        if let Err(value) = completion.work.retain(Box::new(value)) {
            drop(value);
        }
        Ok(())
    }
}

/// Work that evaluates (waits for) `values` on `executor` and retains them.
fn local<'a>(
    operation: &'static str,
    executor: &CudaExecutor,
    values: impl IntoIterator<Item = &'a CudaTensor>,
) -> Result<CudaCompletion, CudaError> {
    let values: Vec<&CudaTensor> = values.into_iter().collect();
    let mut enqueue = executor.begin(operation)?;
    let retain = !executor.device().has(Defect::LocalWorkDropsInputs);
    for value in &values {
        enqueue.wait_for(value)?;
        if retain {
            enqueue.retain(Box::new(value.storage()));
        }
    }
    enqueue.begin_device_part()?;
    enqueue.complete(Vec::new())
}

impl CommunicationBackend for CudaBackend {
    type CommunicationGroup = CudaGroup;
    type CommunicationRoute = CudaRoute;
    type CommunicationCompletion = CudaCompletion;
    type CommunicationError = CudaError;

    fn submit_local_dependencies<'a, I>(
        values: I,
        executor: &CudaExecutor,
    ) -> Result<Submission<(), CudaCompletion>, CudaError>
    where
        CudaTensor: 'a,
        I: IntoIterator<Item = &'a CudaTensor>,
    {
        let completion = local("submit_local_dependencies", executor, values)?;
        Ok(Submission {
            output: (),
            completion,
        })
    }
}
