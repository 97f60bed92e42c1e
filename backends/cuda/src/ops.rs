//! The eredu traits on the CUDA backend: submission, local dependencies, and
//! the eight communication operations over stream-ranks (see
//! [`crate::group`] for how a collective is laid out on the streams).

use crate::backend::CudaBackend;
use crate::defect::Defect;
use crate::element::Element;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::{share, Event, HostSlot, Launch, Segment};
use crate::group::{for_all, Arrival, Contribution, CudaGroup, Planner, Sequence};
use crate::route::CudaRoute;
use crate::tensor::{elements, CudaTensor};
use crate::work::{CudaCompletion, Parts, Rendezvous, Retained, Work};
use eredu_core::Submission;
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, CommunicationBackend, EvenGatherBackend,
    FailureAgreementBackend, PointToPointBackend, SubmissionBackend, SumReductionBackend,
    UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::{CommunicationPeerCounts, RoleExactBoundaryValue};
use std::sync::Arc;

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
struct Part<'a> {
    operation: &'static str,
    inputs: Vec<&'a CudaTensor>,
    outputs: Vec<CudaTensor>,
    contribution: Contribution,
    planner: Planner,
    /// Bytes of the member's plan slot (0: none).
    plan: usize,
    /// Kernels before the member arrives (a sender's framing).
    before: Vec<Launch>,
    /// The member's kernels, given its plan slot's address.
    kernels: Box<dyn Fn(u64) -> Vec<Launch> + 'a>,
    retained: Vec<Retained>,
    device_owned: Vec<Retained>,
    /// Whether the part waits for its peers (false only under `BarrierEarly`).
    waits: bool,
}

impl<'a> Part<'a> {
    fn new(operation: &'static str, planner: Planner) -> Self {
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
    fn submit(
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
struct Submitted {
    outputs: Vec<CudaTensor>,
    completion: CudaCompletion,
    plan: Option<Arc<HostSlot>>,
}

impl Submitted {
    /// The submission of a part with one output.
    fn one(mut self) -> Submission<CudaTensor, CudaCompletion> {
        Submission {
            output: self.outputs.remove(0),
            completion: self.completion,
        }
    }
}

fn device_has(executor: &CudaExecutor, defect: Defect) -> bool {
    executor.device().has(defect)
}

/// Little-endian bytes of `words` (the layout of the kernels' structs).
fn bytes(words: impl IntoIterator<Item = u64>) -> Vec<u8> {
    words.into_iter().flat_map(u64::to_le_bytes).collect()
}

/// The copy table of `segments`, whose lengths and strides count
/// `element`s (the kernel's are in halves).
fn segment_table(segments: &[Segment], element: Element) -> Vec<u8> {
    let halves = element.halves();
    bytes(
        std::iter::once(segments.len() as u64).chain(segments.iter().flat_map(|s| {
            [
                s.source,
                s.destination,
                s.rows,
                s.row_len * halves,
                s.source_stride * halves,
                s.destination_stride * halves,
            ]
        })),
    )
}

/// Bytes per element of the collective's tensors.
fn element_bytes(all: &[Contribution]) -> u64 {
    all[0].element.size() as u64
}

/// Every member submitted tensors of member 0's element type.
fn same_element(operation: &'static str, all: &[Contribution]) -> Result<(), CudaError> {
    let first = all[0].element;
    match all.iter().position(|c| c.element != first) {
        Some(member) => Err(mismatch(
            operation,
            member,
            format!(
                "submitted a {} tensor, member 0 submitted {first}",
                all[member].element
            ),
        )),
        None => Ok(()),
    }
}

/// Bytes of a segment table of `count` segments.
fn table_bytes(count: usize) -> usize {
    8 + count * std::mem::size_of::<Segment>()
}

fn mismatch(operation: &'static str, member: usize, detail: String) -> CudaError {
    CudaError::Mismatch {
        operation,
        message: format!("member {member} {detail}"),
    }
}

fn input(c: &Contribution) -> (u64, &[i32]) {
    c.input
        .as_ref()
        .map_or((0, &[][..]), |(a, s)| (*a, s.as_slice()))
}

fn output(c: &Contribution) -> (u64, &[i32]) {
    c.output
        .as_ref()
        .map_or((0, &[][..]), |(a, s)| (*a, s.as_slice()))
}

fn same_shapes(operation: &'static str, all: &[Contribution]) -> Result<(), CudaError> {
    let first = input(&all[0]).1;
    match all.iter().position(|c| input(c).1 != first) {
        Some(member) => Err(mismatch(
            operation,
            member,
            format!(
                "submitted shape {:?}, member 0 submitted {first:?}",
                input(&all[member]).1
            ),
        )),
        None => Ok(()),
    }
}

fn same_meta(operation: &'static str, all: &[Contribution], what: &str) -> Result<(), CudaError> {
    let first = &all[0].meta;
    match all.iter().position(|c| &c.meta != first) {
        Some(member) => Err(mismatch(
            operation,
            member,
            format!(
                "submitted {what} {:?}, member 0 submitted {first:?}",
                all[member].meta
            ),
        )),
        None => Ok(()),
    }
}

/// `(outer, extent, rest)` of `shape` around `axis`: rows before the axis,
/// the axis's extent, elements after it.
fn around(shape: &[i32], axis: usize) -> (u64, u64, u64) {
    let dims: Vec<u64> = shape.iter().map(|&d| d.max(0) as u64).collect();
    let outer = dims[..axis].iter().product();
    let rest = dims[axis + 1..].iter().product();
    (outer, dims[axis], rest)
}

/// Members agree on every extent but `axis`.
fn off_axis(operation: &'static str, all: &[Contribution], axis: usize) -> Result<(), CudaError> {
    let first = input(&all[0]).1;
    for (member, c) in all.iter().enumerate() {
        let shape = input(c).1;
        let agrees = shape.len() == first.len()
            && shape
                .iter()
                .zip(first)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
        if !agrees {
            return Err(mismatch(
                operation,
                member,
                format!("submitted shape {shape:?}, which differs from member 0's {first:?} off axis {axis}"),
            ));
        }
    }
    Ok(())
}

fn check_axis(operation: &'static str, value: &CudaTensor, axis: usize) -> Result<(), CudaError> {
    if axis >= eredu_nn::Tensor::shape(value).len() {
        return Err(CudaError::Invalid {
            operation,
            expected: format!(
                "an axis below the input's rank {}",
                eredu_nn::Tensor::shape(value).len()
            ),
            got: format!("axis {axis}"),
        });
    }
    Ok(())
}

fn with_axis(
    operation: &'static str,
    shape: &[i32],
    axis: usize,
    extent: usize,
) -> Result<Vec<i32>, CudaError> {
    let mut out = shape.to_vec();
    out[axis] = i32::try_from(extent).map_err(|_| CudaError::Invalid {
        operation,
        expected: "an output extent that fits in i32".into(),
        got: extent.to_string(),
    })?;
    Ok(out)
}

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

/// The `GatherByArrival` defect: members concatenated in the order they
/// arrived, not in member order.
fn even_by_arrival_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    let mut arrived: Vec<&Contribution> = all.iter().collect();
    arrived.sort_by_key(|c| c.arrival);
    let permuted: Vec<Contribution> = all
        .iter()
        .zip(arrived)
        .map(|(me, at)| Contribution {
            input: at.input.clone(),
            ..me.clone()
        })
        .collect();
    even_plan_checked(operation, &permuted)
}

/// The `GatherReversed` defect: members concatenated last to first.
fn even_reversed_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "axis")?;
    same_shapes(operation, all)?;
    // Position `s` of every output gets member `n - 1 - s`'s input.
    let reversed: Vec<Contribution> = all
        .iter()
        .zip(all.iter().rev())
        .map(|(me, mirror)| Contribution {
            input: mirror.input.clone(),
            ..me.clone()
        })
        .collect();
    even_plan_checked(operation, &reversed)
}

/// The `UnevenCountsAsElements` defect: counts taken as flat element counts.
fn uneven_flat_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "axis and counts")?;
    same_element(operation, all)?;
    let counts = &all[0].meta[1..];
    let size = element_bytes(all);
    Ok(all
        .iter()
        .map(|me| {
            let mut offset = 0u64;
            let segments: Vec<Segment> = all
                .iter()
                .zip(counts)
                .map(|(c, &count)| {
                    let count = count as u64;
                    let segment = Segment {
                        source: input(c).0,
                        destination: output(me).0 + size * offset,
                        rows: 1,
                        row_len: count,
                        source_stride: count,
                        destination_stride: count,
                    };
                    offset += count;
                    segment
                })
                .collect();
            segment_table(&segments, all[0].element)
        })
        .collect())
}

/// The `AgreementLocal` defect: each member's own status.
fn agreement_local(_: &'static str, all: &[Contribution]) -> Vec<Result<Vec<u8>, CudaError>> {
    all.iter()
        .map(|c| Ok(vec![1, u8::from(c.meta == [1])]))
        .collect()
}

fn even_plan_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    even_plan_with(operation, all, false)
}

/// The `GatherMiddleAxisSwapped` defect: along a middle axis, the rows
/// before the axis and the elements after it trade places in the copy.
fn even_swapped_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    even_plan_with(operation, all, true)
}

fn even_plan_with(
    operation: &'static str,
    all: &[Contribution],
    swapped: bool,
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "axis")?;
    same_element(operation, all)?;
    same_shapes(operation, all)?;
    let axis = all[0].meta[0];
    let shape = input(&all[0]).1;
    let (mut outer, extent, mut rest) = around(shape, axis);
    if swapped && axis > 0 && axis + 1 < shape.len() {
        std::mem::swap(&mut outer, &mut rest);
    }
    let inner = extent * rest;
    let n = all.len() as u64;
    let size = element_bytes(all);
    Ok(all
        .iter()
        .map(|me| {
            let segments: Vec<Segment> = all
                .iter()
                .enumerate()
                .map(|(s, c)| Segment {
                    source: input(c).0,
                    destination: output(me).0 + size * s as u64 * inner,
                    rows: outer,
                    row_len: inner,
                    source_stride: inner,
                    destination_stride: n * inner,
                })
                .collect();
            segment_table(&segments, all[0].element)
        })
        .collect())
}

fn uneven_plan_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    same_meta(operation, all, "axis and counts")?;
    same_element(operation, all)?;
    let axis = all[0].meta[0];
    let counts = &all[0].meta[1..];
    let size = element_bytes(all);
    off_axis(operation, all, axis)?;
    for (member, c) in all.iter().enumerate() {
        let (_, extent, _) = around(input(c).1, axis);
        if extent != counts[member] as u64 {
            return Err(mismatch(
                operation,
                member,
                format!(
                    "has extent {extent} along axis {axis}, counts say {}",
                    counts[member]
                ),
            ));
        }
    }
    let (outer, _, rest) = around(input(&all[0]).1, axis);
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    Ok(all
        .iter()
        .map(|me| {
            let mut offset = 0u64;
            let segments: Vec<Segment> = all
                .iter()
                .zip(counts)
                .map(|(c, &count)| {
                    let count = count as u64;
                    let segment = Segment {
                        source: input(c).0,
                        destination: output(me).0 + size * offset * rest,
                        rows: outer,
                        row_len: count * rest,
                        source_stride: count * rest,
                        destination_stride: total * rest,
                    };
                    offset += count;
                    segment
                })
                .collect();
            segment_table(&segments, all[0].element)
        })
        .collect())
}

fn all_to_all_plan_checked(
    operation: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    let n = all.len();
    let axis = all[0].meta[0];
    if let Some(member) = all.iter().position(|c| c.meta[0] != axis) {
        return Err(mismatch(
            operation,
            member,
            format!(
                "submitted axis {}, member 0 submitted {axis}",
                all[member].meta[0]
            ),
        ));
    }
    let sends = |p: usize| &all[p].meta[1..=n];
    let receives = |p: usize| &all[p].meta[1 + n..];
    for p in 0..n {
        for q in 0..n {
            if sends(p)[q] != receives(q)[p] {
                return Err(mismatch(
                    operation,
                    p,
                    format!(
                        "sends {} to member {q}, which expects {} from it",
                        sends(p)[q],
                        receives(q)[p]
                    ),
                ));
            }
        }
    }
    same_element(operation, all)?;
    off_axis(operation, all, axis)?;
    let (outer, _, rest) = around(input(&all[0]).1, axis);
    let size = element_bytes(all);
    Ok((0..n)
        .map(|me| {
            let received: u64 = receives(me).iter().map(|&c| c as u64).sum();
            let mut offset = 0u64;
            let segments: Vec<Segment> = (0..n)
                .map(|p| {
                    let extent: u64 = sends(p).iter().map(|&c| c as u64).sum();
                    let before: u64 = sends(p)[..me].iter().map(|&c| c as u64).sum();
                    let len = sends(p)[me] as u64;
                    let segment = Segment {
                        source: input(&all[p]).0 + size * before * rest,
                        destination: output(&all[me]).0 + size * offset * rest,
                        rows: outer,
                        row_len: len * rest,
                        source_stride: extent * rest,
                        destination_stride: received * rest,
                    };
                    offset += len;
                    segment
                })
                .collect();
            segment_table(&segments, all[0].element)
        })
        .collect())
}

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

fn no_plan_checked(_: &'static str, all: &[Contribution]) -> Result<Vec<Vec<u8>>, CudaError> {
    Ok(vec![Vec::new(); all.len()])
}

/// Agreement: every member's plan is `[1, agreed]` (planned, the result).
fn agreement_plan_checked(
    _: &'static str,
    all: &[Contribution],
) -> Result<Vec<Vec<u8>>, CudaError> {
    let agreed = all.iter().all(|c| c.meta == [1]);
    Ok(vec![vec![1, u8::from(agreed)]; all.len()])
}

macro_rules! planner {
    ($($name:ident => $checked:ident),* $(,)?) => {
        $(
            fn $name(operation: &'static str, all: &[Contribution]) -> Vec<Result<Vec<u8>, CudaError>> {
                for_all(all.len(), $checked(operation, all))
            }
        )*
    };
}

planner! {
    sum_plan => sum_plan_checked,
    even_plan => even_plan_checked,
    uneven_plan => uneven_plan_checked,
    all_to_all_plan => all_to_all_plan_checked,
    broadcast_plan => broadcast_plan_checked,
    no_plan => no_plan_checked,
    agreement_plan => agreement_plan_checked,
    sum_repeating => sum_repeating_checked,
    sum_share_repeating => sum_share_repeating_checked,
    even_reversed => even_reversed_checked,
    even_by_arrival => even_by_arrival_checked,
    even_swapped => even_swapped_checked,
    uneven_flat => uneven_flat_checked,
}

/// A collective whose kernel copies segments from the member's plan.
struct Copying {
    operation: &'static str,
    planner: Planner,
    output_shape: Vec<i32>,
    meta: Vec<usize>,
    /// Segments in each member's copy table.
    segments: usize,
}

impl Copying {
    fn submit(
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

impl EvenGatherBackend for CudaBackend {
    fn all_gather_even(
        value: CudaTensor,
        axis: usize,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        const OP: &str = "all_gather_even";
        check_axis(OP, &value, axis)?;
        let shape = eredu_nn::Tensor::shape(&value).to_vec();
        let extent = shape[axis].max(0) as usize;
        let width = extent.checked_mul(group.size()).ok_or(CudaError::Invalid {
            operation: OP,
            expected: "an output extent that fits in usize".into(),
            got: format!("{extent} × {}", group.size()),
        })?;
        let out = with_axis(OP, &shape, axis, width)?;
        Copying {
            operation: OP,
            planner: if executor.device().has(Defect::GatherReversed) {
                even_reversed
            } else if executor.device().has(Defect::GatherByArrival) {
                even_by_arrival
            } else if executor.device().has(Defect::GatherMiddleAxisSwapped) {
                even_swapped
            } else {
                even_plan
            },
            output_shape: out,
            meta: vec![axis],
            segments: group.size(),
        }
        .submit(&value, group, executor)
    }
}

impl UnevenGatherBackend for CudaBackend {
    fn all_gather_uneven(
        value: CudaTensor,
        counts: &[usize],
        axis: usize,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        const OP: &str = "all_gather_uneven";
        check_axis(OP, &value, axis)?;
        if counts.len() != group.size() {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!("one count per member ({})", group.size()),
                got: format!("{} counts", counts.len()),
            });
        }
        let shape = eredu_nn::Tensor::shape(&value).to_vec();
        let own = shape[axis].max(0) as usize;
        if counts[group.member()] != own {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!(
                    "member {}'s count {} to equal its extent along axis {axis}",
                    group.member(),
                    counts[group.member()]
                ),
                got: format!("extent {own}"),
            });
        }
        let total = counts
            .iter()
            .try_fold(0usize, |sum, c| sum.checked_add(*c))
            .ok_or(CudaError::Invalid {
                operation: OP,
                expected: "counts whose sum fits in usize".into(),
                got: format!("{counts:?}"),
            })?;
        let out = with_axis(OP, &shape, axis, total)?;
        let meta = std::iter::once(axis)
            .chain(counts.iter().copied())
            .collect();
        Copying {
            operation: OP,
            planner: if executor.device().has(Defect::UnevenCountsAsElements) {
                uneven_flat
            } else {
                uneven_plan
            },
            output_shape: out,
            meta,
            segments: group.size(),
        }
        .submit(&value, group, executor)
    }
}

impl VariableAllToAllBackend for CudaBackend {
    fn variable_all_to_all(
        value: CudaTensor,
        counts: &CommunicationPeerCounts,
        axis: usize,
        group: &CudaGroup,
        executor: &CudaExecutor,
    ) -> Result<Submission<CudaTensor, CudaCompletion>, CudaError> {
        const OP: &str = "variable_all_to_all";
        check_axis(OP, &value, axis)?;
        let n = group.size();
        if counts.group_size() != n {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!("counts for {n} peers"),
                got: format!("counts for {} peers", counts.group_size()),
            });
        }
        let sum = |c: &[usize]| c.iter().try_fold(0usize, |s, n| s.checked_add(*n));
        let overflow = || CudaError::Invalid {
            operation: OP,
            expected: "counts whose sum fits in usize".into(),
            got: "an overflowing sum".into(),
        };
        let sent = sum(counts.send()).ok_or_else(overflow)?;
        let received = sum(counts.receive()).ok_or_else(overflow)?;
        let shape = eredu_nn::Tensor::shape(&value).to_vec();
        let own = shape[axis].max(0) as usize;
        if sent != own {
            return Err(CudaError::Invalid {
                operation: OP,
                expected: format!(
                    "send counts summing to the input's extent {own} along axis {axis}"
                ),
                got: format!("send counts {:?} summing to {sent}", counts.send()),
            });
        }
        let out = with_axis(OP, &shape, axis, received)?;
        let meta = std::iter::once(axis)
            .chain(counts.send().iter().copied())
            .chain(counts.receive().iter().copied())
            .collect();
        Copying {
            operation: OP,
            planner: all_to_all_plan,
            output_shape: out,
            meta,
            segments: n,
        }
        .submit(&value, group, executor)
    }
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

impl PointToPointBackend for CudaBackend {
    fn send_receive(
        values: Vec<RoleExactBoundaryValue<CudaTensor>>,
        route: &CudaRoute,
        executor: &CudaExecutor,
    ) -> Result<Submission<Vec<CudaTensor>, CudaCompletion>, CudaError> {
        const OP: &str = "send_receive";
        let (headers, tensors): (Vec<Vec<u8>>, Vec<CudaTensor>) = values
            .into_iter()
            .map(RoleExactBoundaryValue::into_parts)
            .unzip();
        let device = executor.device();
        // The message: each value's header, then its payload, each padded
        // to four bytes; one device buffer, one native message. Layout:
        // (offset, header bytes, payload halves) per value.
        let layout: Vec<(u64, u64, u64)> = {
            let mut offset = 0u64;
            headers
                .iter()
                .zip(&tensors)
                .map(|(header, tensor)| {
                    let at = offset;
                    let header_len = header.len() as u64;
                    let halves = tensor.len() as u64 * tensor.element().halves();
                    offset += header_len.next_multiple_of(4) + (2 * halves).next_multiple_of(4);
                    (at, header_len, halves)
                })
                .collect()
        };
        let message_bytes = layout.last().map_or(0, |&(at, header, halves)| {
            at + header.next_multiple_of(4) + (2 * halves).next_multiple_of(4)
        });
        let header_slots = headers
            .iter()
            .map(|header| {
                let slot = Arc::new(device.slot(header.len().max(1))?);
                slot.write_bytes(header)?;
                Ok(slot)
            })
            .collect::<Result<Vec<_>, CudaError>>()?;
        let contribution = Contribution {
            values: headers
                .iter()
                .zip(&tensors)
                .map(|(h, t)| (h.clone(), eredu_nn::Tensor::shape(t).to_vec(), t.element()))
                .collect(),
            ..Contribution::default()
        };
        let mut part = Part::new(OP, crate::route::plan);
        part.retained.push(route.retained());
        part.plan = 8;
        if route.is_source() {
            let message = Arc::new(device.alloc(message_bytes as usize)?);
            part.contribution = Contribution {
                input: Some((message.address(), Vec::new())),
                ..contribution
            };
            for ((tensor, slot), &(at, header_len, len)) in
                tensors.iter().zip(&header_slots).zip(&layout)
            {
                part.before.push(Launch::Frame {
                    header: slot.address(),
                    header_len,
                    payload: tensor.address(),
                    len,
                    message: message.address() + at,
                });
            }
            let payload = 2 * layout.iter().map(|&(_, _, halves)| halves).sum::<u64>();
            if device.has(Defect::SeparateHeaderMessage) {
                // The defect: headers and payloads as two messages.
                route.log(&headers, 0);
                route.log(&[], payload);
            } else {
                route.log(&headers, payload);
            }
            part.inputs = tensors.iter().collect();
            part.retained.push(Box::new(Arc::clone(&message)));
            part.device_owned.push(Box::new(header_slots));
            let completion = part.submit(route.sequence(), 0, executor)?.completion;
            Ok(Submission {
                output: tensors,
                completion,
            })
        } else {
            let outputs = tensors
                .iter()
                .map(|t| {
                    CudaTensor::pending(device, t.element(), eredu_nn::Tensor::shape(t).to_vec())
                })
                .collect::<Result<Vec<_>, _>>()?;
            part.contribution = contribution;
            // The receiver's values are inputs too: retained like the
            // sender's (RET-3), though only their shapes are read.
            part.inputs = tensors.iter().collect();
            let receives: Vec<(u64, u64, u64, u64, u64)> = outputs
                .iter()
                .zip(&header_slots)
                .zip(&layout)
                .map(|((out, slot), &(at, header_len, len))| {
                    (at, header_len, slot.address(), out.address(), len)
                })
                .collect();
            part.kernels = Box::new(move |plan| {
                receives
                    .iter()
                    .map(
                        |&(at, header_len, expected, payload, len)| Launch::Receive {
                            plan,
                            offset: at,
                            header_len,
                            expected,
                            payload,
                            len,
                        },
                    )
                    .collect()
            });
            part.outputs = outputs;
            part.device_owned.push(Box::new(header_slots));
            let mut submitted = part.submit(route.sequence(), 1, executor)?;
            if device.has(Defect::PointToPointReversed) {
                submitted.outputs.reverse();
            }
            Ok(Submission {
                output: submitted.outputs,
                completion: submitted.completion,
            })
        }
    }
}

/// The planners on the host, with no GPU: every copy table is run by a host
/// model of `commcheck_copy_segments` over fake device memory, for every
/// element type, and compared with the collective's definition.
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Fake device memory: region `i` starts at `(i + 1) << 32`.
    #[derive(Default)]
    struct Memory {
        regions: HashMap<u64, Vec<u8>>,
    }

    impl Memory {
        fn region(&mut self, bytes: Vec<u8>) -> u64 {
            let base = (self.regions.len() as u64 + 1) << 32;
            self.regions.insert(base, bytes);
            base
        }

        fn half(&mut self, address: u64) -> &mut [u8] {
            let (base, offset) = (address >> 32 << 32, (address & 0xffff_ffff) as usize);
            let region = self.regions.get_mut(&base).expect("an address in a region");
            &mut region[offset..offset + 2]
        }

        /// The host model of `commcheck_copy_segments` (in halves).
        fn run(&mut self, table: &[u8]) {
            let words: Vec<u64> = table
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
                .collect();
            for s in words[1..].chunks_exact(6).take(words[0] as usize) {
                let (source, destination, rows, row_len, from, to) =
                    (s[0], s[1], s[2], s[3], s[4], s[5]);
                for row in 0..rows {
                    for column in 0..row_len {
                        let value = self.half(source + 2 * (row * from + column)).to_vec();
                        self.half(destination + 2 * (row * to + column))
                            .copy_from_slice(&value);
                    }
                }
            }
        }
    }

    /// Member `member`'s input: distinct bytes per (member, byte).
    fn input_bytes(member: usize, len: usize, element: Element) -> Vec<u8> {
        (0..len * element.size())
            .map(|i| (member * 97 + i * 7 + 1) as u8)
            .collect()
    }

    /// Runs `planner` for members with `shapes` and `meta`, outputs of
    /// `output_shapes`; each member's output bytes.
    fn run(
        planner: Planner,
        element: Element,
        shapes: &[Vec<i32>],
        output_shapes: &[Vec<i32>],
        meta: &[Vec<usize>],
        arrival: &[usize],
    ) -> Vec<Vec<u8>> {
        let mut memory = Memory::default();
        let count = |shape: &[i32]| shape.iter().product::<i32>() as usize;
        let all: Vec<Contribution> = (0..shapes.len())
            .map(|member| {
                let input = memory.region(input_bytes(member, count(&shapes[member]), element));
                let output = memory.region(vec![0; count(&output_shapes[member]) * element.size()]);
                Contribution {
                    input: Some((input, shapes[member].clone())),
                    output: Some((output, output_shapes[member].clone())),
                    meta: meta[member].clone(),
                    element,
                    arrival: arrival[member],
                    ..Contribution::default()
                }
            })
            .collect();
        let plans = planner("test", &all);
        for plan in &plans {
            memory.run(plan.as_ref().expect("a plan"));
        }
        all.iter()
            .map(|c| memory.regions[&c.output.as_ref().unwrap().0].clone())
            .collect()
    }

    /// The even gather of `shapes` along `axis`, by definition.
    fn gathered(shape: &[i32], members: usize, axis: usize, element: Element) -> Vec<u8> {
        let (outer, extent, rest) = around(shape, axis);
        let block = (extent * rest) as usize * element.size();
        let len = shape.iter().product::<i32>() as usize;
        let inputs: Vec<Vec<u8>> = (0..members).map(|m| input_bytes(m, len, element)).collect();
        let mut out = Vec::new();
        for row in 0..outer as usize {
            for input in &inputs {
                out.extend_from_slice(&input[row * block..(row + 1) * block]);
            }
        }
        out
    }

    fn even(
        planner: Planner,
        element: Element,
        axis: usize,
        arrival: &[usize],
    ) -> (Vec<Vec<u8>>, Vec<u8>) {
        let shape = vec![2, 3, 5];
        let n = arrival.len();
        let mut out = shape.clone();
        out[axis] *= n as i32;
        let got = run(
            planner,
            element,
            &vec![shape.clone(); n],
            &vec![out; n],
            &vec![vec![axis]; n],
            arrival,
        );
        (got, gathered(&shape, n, axis, element))
    }

    #[test]
    fn even_gathers_every_axis_and_element() {
        for element in Element::ALL {
            for axis in 0..3 {
                let (got, want) = even(even_plan, element, axis, &[0, 1, 2]);
                assert!(got.iter().all(|g| *g == want), "{element} axis {axis}");
            }
        }
    }

    #[test]
    fn gather_defects_differ_only_where_they_should() {
        for element in Element::ALL {
            for axis in 0..3 {
                let (got, want) = even(even_swapped, element, axis, &[0, 1, 2]);
                assert_eq!(
                    got.iter().all(|g| *g == want),
                    axis != 1,
                    "{element} axis {axis}"
                );
            }
            let (got, want) = even(even_by_arrival, element, 1, &[0, 1, 2]);
            assert!(
                got.iter().all(|g| *g == want),
                "{element}: arrival in member order"
            );
            let (got, want) = even(even_by_arrival, element, 1, &[2, 0, 1]);
            assert!(
                got.iter().all(|g| *g != want),
                "{element}: arrival out of order"
            );
        }
    }

    #[test]
    fn uneven_gather_all_to_all_and_broadcast_move_every_element_type() {
        for element in Element::ALL {
            // Uneven gather along the middle axis, counts 1, 3, 2.
            let counts = [1usize, 3, 2];
            let shapes: Vec<Vec<i32>> = counts.iter().map(|&c| vec![2, c as i32, 3]).collect();
            let meta = vec![std::iter::once(1).chain(counts).collect::<Vec<_>>(); 3];
            let got = run(
                uneven_plan,
                element,
                &shapes,
                &vec![vec![2, 6, 3]; 3],
                &meta,
                &[0, 1, 2],
            );
            let size = element.size();
            let mut want = Vec::new();
            for row in 0..2 {
                for (m, &c) in counts.iter().enumerate() {
                    let input = input_bytes(m, 2 * c * 3, element);
                    let block = c * 3 * size;
                    want.extend_from_slice(&input[row * block..(row + 1) * block]);
                }
            }
            assert!(got.iter().all(|g| *g == want), "uneven {element}");

            // All-to-all along axis 0 of [extent, 3]: member p sends
            // sends[p][q] rows to q.
            let sends = [[1usize, 2], [3, 1]];
            let shapes: Vec<Vec<i32>> = sends
                .iter()
                .map(|s| vec![(s[0] + s[1]) as i32, 3])
                .collect();
            let outputs: Vec<Vec<i32>> = (0..2)
                .map(|q| vec![(sends[0][q] + sends[1][q]) as i32, 3])
                .collect();
            let meta: Vec<Vec<usize>> = (0..2)
                .map(|p| vec![0, sends[p][0], sends[p][1], sends[0][p], sends[1][p]])
                .collect();
            let got = run(all_to_all_plan, element, &shapes, &outputs, &meta, &[0, 1]);
            for q in 0..2 {
                let mut want = Vec::new();
                for p in 0..2 {
                    let input = input_bytes(p, (sends[p][0] + sends[p][1]) * 3, element);
                    let before: usize = sends[p][..q].iter().sum();
                    want.extend_from_slice(
                        &input[before * 3 * size..(before + sends[p][q]) * 3 * size],
                    );
                }
                assert_eq!(got[q], want, "all-to-all {element} to {q}");
            }

            // Broadcast of an odd length from the middle member.
            let got = run(
                broadcast_plan,
                element,
                &vec![vec![7]; 3],
                &vec![vec![7]; 3],
                &vec![vec![1]; 3],
                &[0, 1, 2],
            );
            assert!(
                got.iter().all(|g| *g == input_bytes(1, 7, element)),
                "broadcast {element}"
            );
        }
    }

    #[test]
    fn members_of_different_element_types_all_fail() {
        let mut all = vec![Contribution::default(); 2];
        all[1].element = Element::Bf16;
        for c in &mut all {
            c.input = Some((1 << 32, vec![4]));
            c.output = Some((2 << 32, vec![4]));
            c.meta = vec![0];
        }
        for planner in [sum_plan as Planner, even_plan, broadcast_plan] {
            let plans = planner("test", &all);
            assert!(plans
                .iter()
                .all(|p| matches!(p, Err(e) if e.to_string().contains("bf16"))));
        }
    }

    #[test]
    fn the_share_defect_leaves_the_first_share_right() {
        let mut all = vec![Contribution::default(); 2];
        for (m, c) in all.iter_mut().enumerate() {
            c.input = Some(((m as u64 + 1) << 32, vec![600]));
            c.output = Some(((m as u64 + 3) << 32, vec![600]));
        }
        let right = sum_plan("test", &all);
        let wrong = sum_share_repeating("test", &all);
        assert_eq!(right[0].as_ref().unwrap(), wrong[0].as_ref().unwrap());
        assert_ne!(right[1].as_ref().unwrap(), wrong[1].as_ref().unwrap());
        // Member 1's share begins past the first 256 elements only when the
        // message is longer than one share.
        assert_eq!(share(256, 2, 1), (256, 256));
        assert_eq!(share(600, 2, 1), (512, 600));
    }
}
