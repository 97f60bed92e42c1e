//! One member's part of a collective (or of a point-to-point exchange) and
//! how it is enqueued on the member's stream: its inputs waited for and
//! retained (RET-3), its outputs made ready with its completion (RET-5),
//! the `go` and `fin` gates around its kernels, and its arrival at the
//! instance (see [`crate::group`]). A refused submission takes no sequence
//! number and leaves nothing behind (SUB-4).
//!
//! [`Copying`] is the part of every collective whose kernel copies
//! segments from the member's plan (the gathers, all-to-all, broadcast).

use super::plan::table_bytes;
use crate::defect::Defect;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::{Event, HostSlot, Launch};
use crate::group::{Arrival, Contribution, CudaGroup, Planner, Sequence};
use crate::tensor::CudaTensor;
use crate::work::{CudaCompletion, Parts, Rendezvous, Retained, Work};
use eredu_core::Submission;
use std::sync::Arc;

/// A completion that failed before anything was enqueued.
fn failed(
    executor: &CudaExecutor,
    operation: &'static str,
    error: CudaError,
) -> Result<CudaCompletion, CudaError> {
    let device = executor.device();
    Ok(CudaCompletion::new(Work::new(Parts {
        operation,
        event: None,
        started: None,
        error: device.slot(4)?,
        cancel: device.slot(4)?,
        device_owned: Vec::new(),
        lease: None,
        retained: Vec::new(),
        quarantined_counter: device.quarantined_counter(),
        failed: Some(error),
        counts: true,
        defect: device.defect(),
        registry: std::sync::Arc::clone(&device.shared.registry),
    })))
}

/// One member's part of a collective, before it is enqueued.
pub(super) struct Part<'a> {
    operation: &'static str,
    pub(super) inputs: Vec<&'a CudaTensor>,
    pub(super) outputs: Vec<CudaTensor>,
    pub(super) contribution: Contribution,
    planner: Planner,
    /// Bytes of the member's plan slot (0: none).
    pub(super) plan: usize,
    /// Kernels before the member arrives (a sender's framing).
    pub(super) before: Vec<Launch>,
    /// The member's kernels, given its plan slot's address.
    pub(super) kernels: Box<dyn Fn(u64) -> Vec<Launch> + 'a>,
    pub(super) retained: Vec<Retained>,
    pub(super) device_owned: Vec<Retained>,
    /// Whether the part waits for its peers (false only under `BarrierEarly`).
    pub(super) waits: bool,
}

impl<'a> Part<'a> {
    pub(super) fn new(operation: &'static str, planner: Planner) -> Self {
        Self {
            operation,
            inputs: Vec::new(),
            outputs: Vec::new(),
            contribution: Contribution::default(),
            planner,
            plan: 0,
            before: Vec::new(),
            kernels: Box::new(|_| Vec::new()),
            retained: Vec::new(),
            device_owned: Vec::new(),
            waits: true,
        }
    }

    /// Enqueues the part on `member`'s stream and joins it to its instance.
    pub(super) fn submit(
        self,
        sequence: &Sequence,
        member: usize,
        executor: &CudaExecutor,
    ) -> Result<Submitted, CudaError> {
        // A refused submission (the fault instrument) takes no sequence
        // number and leaves nothing behind (SUB-4).
        let mut enqueue = executor.begin(self.operation)?;
        let instance = sequence.next(member, self.operation, self.planner)?;
        let drops = device_has(executor, Defect::CollectiveDropsResources);
        let mut retained = self.retained;
        if drops {
            retained.clear();
        }
        if let Some(reason) = instance.cancelled() {
            drop(enqueue);
            let error = CudaError::Cancelled {
                operation: self.operation,
                reason,
            };
            return Ok(Submitted {
                outputs: self.outputs,
                completion: failed(executor, self.operation, error)?,
                plan: None,
            });
        }
        let device = executor.device();
        let plan = match self.plan {
            0 => None,
            bytes => Some(Arc::new(device.slot(bytes)?)),
        };
        let go = Arc::new(device.slot(4)?);
        let fin = Arc::new(device.slot(4)?);
        for input in &self.inputs {
            enqueue.wait_for(input)?;
            if !drops {
                enqueue.retain(Box::new(input.storage()));
            }
        }
        enqueue.begin_device_part()?;
        for launch in self.before {
            enqueue.launch(launch)?;
        }
        let arrive = Arc::new(device.record(enqueue.stream(), Event::COMPLETION)?);
        if self.waits {
            go.wait_on(enqueue.stream(), 1)?;
        }
        for launch in (self.kernels)(plan.as_ref().map_or(0, |p| p.address())) {
            enqueue.launch(launch)?;
        }
        let done = Arc::new(device.record(enqueue.stream(), Event::COMPLETION)?);
        if self.waits {
            fin.wait_on(enqueue.stream(), 1)?;
        }
        let unretained = device_has(executor, Defect::OutputNotRetained);
        for output in &self.outputs {
            if unretained {
                enqueue.output_unretained(output);
            } else {
                enqueue.output(output);
            }
        }
        enqueue.keep_on_device(Box::new((
            Arc::clone(&go),
            Arc::clone(&fin),
            plan.clone(),
            Arc::clone(&arrive),
            Arc::clone(&done),
        )));
        for kept in self.device_owned {
            enqueue.keep_on_device(kept);
        }
        let work = enqueue.finish(retained)?;
        work.join(Arc::clone(&instance) as Arc<dyn Rendezvous>, member);
        instance.arrive(
            member,
            Arrival {
                contribution: self.contribution,
                arrive,
                go,
                done,
                fin,
                plan: plan.clone(),
                work: Arc::downgrade(&work),
            },
        );
        Ok(Submitted {
            outputs: self.outputs,
            completion: CudaCompletion::new(work),
            plan,
        })
    }
}

/// A submitted part: the member's outputs, its completion, its plan slot.
pub(super) struct Submitted {
    pub(super) outputs: Vec<CudaTensor>,
    pub(super) completion: CudaCompletion,
    pub(super) plan: Option<Arc<HostSlot>>,
}

impl Submitted {
    /// The submission of a part with one output.
    pub(super) fn one(mut self) -> Submission<CudaTensor, CudaCompletion> {
        Submission {
            output: self.outputs.remove(0),
            completion: self.completion,
        }
    }
}

fn device_has(executor: &CudaExecutor, defect: Defect) -> bool {
    executor.device().has(defect)
}

/// A collective whose kernel copies segments from the member's plan.
pub(super) struct Copying {
    pub(super) operation: &'static str,
    pub(super) planner: Planner,
    pub(super) output_shape: Vec<i32>,
    pub(super) meta: Vec<usize>,
    /// Segments in each member's copy table.
    pub(super) segments: usize,
}

impl Copying {
    pub(super) fn submit(
        self,
        value: &CudaTensor,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        let element = value.element();
        let output = CudaTensor::pending(executor.device(), element, self.output_shape.clone())?;
        let mut part = Part::new(self.operation, self.planner);
        part.contribution = Contribution {
            input: Some((value.address(), eredu_nn::Tensor::shape(value).to_vec())),
            output: Some((output.address(), self.output_shape)),
            meta: self.meta,
            element,
            ..Contribution::default()
        };
        let elements = output.len() as u64 * element.halves();
        part.plan = table_bytes(self.segments);
        part.kernels = Box::new(move |table| vec![Launch::CopySegments { table, elements }]);
        part.inputs = vec![value];
        part.outputs = vec![output];
        part.retained.push(group.retained());
        Ok(part
            .submit(&group.sequence, group.member(), executor)?
            .one())
    }
}
