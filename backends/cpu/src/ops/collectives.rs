//! Group operations: sum, gathers, all-to-all, broadcast, barrier, agreement.
//!
//! Each member's work deposits its contribution in the group's rendezvous,
//! waits for every member, and computes its own output from the
//! contributions in member order. Disagreeing members fail on every rank with
//! a message naming the member at fault.

use std::sync::{Arc, Weak};
use std::time::Duration;

use eredu_core::Submission;
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, EvenGatherBackend, FailureAgreementBackend,
    SumReductionBackend, UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::CommunicationPeerCounts;

use super::reach;
use crate::completion::CpuCompletion;
use crate::core::Retained;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::{CpuExecutor, Dispatch, WorkKind};
use crate::frame::Contribution;
use crate::group::{CpuGroup, GroupMember};
use crate::layout::{concat_axis, slice_axis, AxisView};
use crate::sync::rt::{Instant, Mutex};
use crate::tensor::{CpuTensor, Element, Storage, Values};
use crate::work::{Abort, Work, WorkCtx};
use crate::CpuBackend;

/// Computes one member's output from every contribution (member order) and its own index.
type Combine = Box<dyn FnOnce(&[Contribution], usize) -> Result<Values, CpuError> + Send>;

/// One collective submission, before it is queued.
struct Collective {
    operation: &'static str,
    input: Option<CpuTensor>,
    meta: Vec<usize>,
    output_shape: Option<Vec<i32>>,
    /// Whether this member waits for its peers (false only under planted defects).
    waits: bool,
    /// Whether every member's output is the same: it is then computed once
    /// and shared instead of once per member.
    symmetric: bool,
    combine: Combine,
}

impl Collective {
    fn new(operation: &'static str, combine: Combine) -> Self {
        Self {
            operation,
            input: None,
            meta: Vec::new(),
            output_shape: None,
            waits: true,
            symmetric: false,
            combine,
        }
    }

    fn symmetric(mut self) -> Self {
        self.symmetric = true;
        self
    }

    /// Queues the collective; returns its output tensor (if any) and completion.
    ///
    /// On a group of one member the rendezvous has no peer to meet: the
    /// member's contribution is all there is (see [`run_collective`]). With
    /// a settled input (or none) such work cannot block either (its input
    /// needs no computing), so it may run inline on an idle lane (see
    /// [`crate::executor`]).
    fn submit(
        self,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<(Option<CpuTensor>, CpuCompletion), CpuError> {
        let Self {
            operation,
            input,
            meta,
            output_shape,
            waits,
            symmetric,
            combine,
        } = self;
        let device = executor.device();
        if let Some(tensor) = &input {
            device.admits(operation, tensor)?;
        }
        // A group of one has no peer to meet, so its rendezvous is skipped;
        // it is kept under the RET-8 defect, the only way a group is ever
        // fenced (the rendezvous fails the collectives of a fenced group),
        // and for members that do not wait for their peers (other planted
        // defects).
        let alone = group.size() == 1 && waits && !device.has(Defect::LocalDepsFenceGroup);
        let settled = input
            .as_ref()
            .is_none_or(|tensor| tensor.storage().is_settled());
        let dispatch = if group.size() == 1 && settled {
            Dispatch::Inline
        } else {
            Dispatch::Queue
        };
        let retain_inputs = !device.has(Defect::CollectiveDropsResources);
        let retain_output = !device.has(Defect::OutputNotRetained);
        let element = input.as_ref().map_or(Element::F32, CpuTensor::element);
        let output =
            output_shape.map(|shape| CpuTensor::pending(executor.ledger(), shape).of(element));
        let held = Held {
            input: input
                .as_ref()
                .filter(|_| retain_inputs)
                .map(|tensor| Arc::clone(tensor.storage())),
            output: output
                .as_ref()
                .filter(|_| retain_output)
                .map(|tensor| Arc::clone(tensor.storage())),
            group: retain_inputs.then(|| Arc::clone(&group.member)),
        };
        let input_storage: Option<(Weak<Storage>, Vec<i32>, Element)> =
            input.as_ref().map(|tensor| {
                (
                    Arc::downgrade(tensor.storage()),
                    tensor.dims().to_vec(),
                    tensor.element(),
                )
            });
        let output_storage = output
            .as_ref()
            .map(|tensor| Arc::downgrade(tensor.storage()));
        let member = Arc::downgrade(&group.member);
        let mut retained: Vec<Retained> = Vec::with_capacity(2);
        retained.push(Box::new(held));
        if device.has(Defect::LocalDepsFenceGroup) {
            if let Ok(mut last) = executor.shared.last_group.lock() {
                *last = Some(Arc::clone(&group.member));
            }
        }
        let group_member = Arc::clone(&group.member);
        let completion = executor.dispatch(
            operation,
            WorkKind::Communication,
            dispatch,
            retained,
            move || {
                // The sequence number is taken only once the submission is admitted.
                let seq = group_member.next_seq();
                let ticket = group_member.ticket();
                let body = Box::new(move |ctx: &WorkCtx<'_>| {
                    let result = run_collective(
                        ctx,
                        operation,
                        (seq, ticket),
                        &member,
                        input_storage,
                        meta,
                        Shape {
                            waits,
                            symmetric,
                            alone,
                        },
                        combine,
                    );
                    if let Some(weak) = &output_storage {
                        let storage = reach(weak, operation, "output storage")?;
                        let published = result.clone().and_then(|values| {
                            values.ok_or_else(|| CpuError::NotMaterialised {
                                storage: storage.id().value(),
                                reason: "the collective produced no value".into(),
                            })
                        });
                        storage.publish(published);
                    }
                    result.map(drop)
                });
                // A member alone has no peer to tell that it never took part.
                let abort = (!alone).then(|| {
                    let (rendezvous, index) = group_member.rendezvous();
                    let abort: Abort =
                        Box::new(move |reason: &str| rendezvous.abort(seq, index, reason));
                    abort
                });
                Work { body, abort }
            },
        )?;
        Ok((output, completion))
    }
}

/// What a collective's completion retains (RET-3, RET-5): its input and
/// output storages and its group member, in one allocation. A planted defect
/// leaves some out; the body reaches them only through weak references.
struct Held {
    #[allow(dead_code, reason = "held for its lifetime")]
    input: Option<Arc<Storage>>,
    #[allow(dead_code, reason = "held for its lifetime")]
    output: Option<Arc<Storage>>,
    #[allow(dead_code, reason = "held for its lifetime")]
    group: Option<Arc<GroupMember>>,
}

/// How one member takes part in a collective.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// Whether the member waits for its peers (false only under planted defects).
    waits: bool,
    /// Whether every member's output is the same (computed once, shared).
    symmetric: bool,
    /// The group has this member only, and no planted defect needs its
    /// rendezvous: the contributions are this member's alone.
    alone: bool,
}

/// One member's part of a collective: evaluate the input, meet the peers,
/// combine. A member `alone` in its group meets nobody: the rendezvous of
/// one member would gather its own contribution at once (an injected fault
/// fails it all the same, and there is no peer to tell).
#[allow(
    clippy::too_many_arguments,
    reason = "the pieces of one queued collective"
)]
fn run_collective(
    ctx: &WorkCtx<'_>,
    operation: &'static str,
    (seq, ticket): (u64, u64),
    member: &Weak<GroupMember>,
    input: Option<(Weak<Storage>, Vec<i32>, Element)>,
    meta: Vec<usize>,
    Shape {
        waits,
        symmetric,
        alone,
    }: Shape,
    combine: Combine,
) -> Result<Option<Values>, CpuError> {
    let member = reach(member, operation, "communication group")?;
    let (values, shape, element) = match input {
        Some((weak, shape, element)) => {
            let input = reach(&weak, operation, "input storage")?;
            // Evaluating a lazy input can fail, or be aborted by this work's
            // NativeCancel: this member then never takes part, so its peers
            // must fail instead of waiting for it.
            let values = input.force().inspect_err(|error| {
                let (rendezvous, index) = member.rendezvous();
                rendezvous.abort(seq, index, &error.to_string());
            })?;
            (values, shape, element)
        }
        None => (Values::default(), Vec::new(), Element::F32),
    };
    let contribution = Contribution {
        operation,
        values,
        shape,
        element,
        meta,
        arrival: ticket,
    };
    if alone {
        if let Some(fault) = ctx.fault() {
            return Err(fault.clone());
        }
        return combine(std::slice::from_ref(&contribution), member.member()).map(Some);
    }
    let all = member.exchange(seq, contribution, ctx, operation, waits)?;
    if let Some(odd) = all
        .contributions
        .iter()
        .position(|c| c.operation != operation)
    {
        return Err(CpuError::MemberMismatch {
            operation,
            member: odd,
            detail: format!(
                "submitted {} where this member submitted {operation} (collectives matched out of order)",
                all.contributions[odd].operation
            ),
        });
    }
    agree(operation, &all.contributions, "element type", |c| c.element)?;
    if !waits {
        // Planted defects only: a member that left without its peers has
        // nothing to combine (its outputs are empty by construction).
        return Ok(Some(Values::default()));
    }
    let me = member.member();
    if symmetric {
        return all
            .shared
            .get_or_init(|| combine(&all.contributions, me))
            .clone()
            .map(Some);
    }
    combine(&all.contributions, me).map(Some)
}

/// Checks that every member submitted the same shape as member 0.
fn same_shapes(operation: &'static str, all: &[Contribution]) -> Result<(), CpuError> {
    agree(operation, all, "shape", |c| c.shape.clone())
}

/// Checks that every member agrees with member 0 on `key` (named `what`).
/// All members see the same contributions, so all of them fail alike, and
/// the message names the first member that differs.
fn agree<T: PartialEq + std::fmt::Debug>(
    operation: &'static str,
    all: &[Contribution],
    what: &str,
    key: impl Fn(&Contribution) -> T,
) -> Result<(), CpuError> {
    // No member, or a lone one that agrees with itself: nothing to compute.
    if all.len() < 2 {
        return Ok(());
    }
    let first = key(&all[0]);
    match all.iter().position(|c| key(c) != first) {
        Some(member) => Err(CpuError::MemberMismatch {
            operation,
            member,
            detail: format!(
                "submitted {what} {:?}, member 0 submitted {first:?}",
                key(&all[member])
            ),
        }),
        None => Ok(()),
    }
}

/// Elementwise sum of the members' values, in member order (so results are
/// reproducible bit for bit), written into `recycled` when nobody else holds
/// that buffer any more (a previous result whose outputs were all dropped).
///
/// The sum is fused and blocked (each block of the output is summed over all
/// members while it is in cache), and large outputs are split between two
/// threads: the other members wait for this result, so their cores are idle.
fn sum(members: &[Contribution], recycled: Option<Values>, kernel: Kernel) -> Values {
    let len = members.first().map_or(0, |first| first.values.len());
    let mut total = recycled
        .filter(|buffer| buffer.len() == len)
        .unwrap_or_default();
    if total.len() != len || Arc::get_mut(&mut total).is_none() {
        total = Arc::new(vec![0.0f32; len]);
    }
    let Some(buffer) = Arc::get_mut(&mut total) else {
        return total; // unreachable: a fresh Arc is unique
    };
    // `available_parallelism` reads the scheduler's and cgroup's limits (a
    // few system calls): only large outputs ask.
    if len < PARALLEL_FROM || std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        sum_into(buffer, 0, members, kernel);
        return total;
    }
    let (low, high) = buffer.split_at_mut(len / 2);
    std::thread::scope(|scope| {
        scope.spawn(|| sum_into(high, len / 2, members, kernel));
        sum_into(low, 0, members, kernel);
    });
    total
}

/// The sum's cache block, in elements: each block of the output is summed
/// over every member while it is in cache. A boundary of the data path (the
/// harness names it, so the kit's size sweep goes past it).
pub const SUM_BLOCK: usize = 4096;

/// Outputs of at least this many elements are summed by two threads, each
/// taking half: a second boundary of the data path.
pub const PARALLEL_FROM: usize = 1 << 18;

/// How one sum is computed: its element type (the result is rounded to it
/// once, block by block) and the planted defects of the kernel.
#[derive(Debug, Clone, Copy)]
struct Kernel {
    element: Element,
    /// SUM-1 defect: a last, partial block past [`PARALLEL_FROM`] keeps
    /// member 0's values.
    tail_untouched: bool,
    /// SUM-1 defect: `bf16` inputs are decoded as `f16` bits.
    bf16_as_f16: bool,
}

impl Kernel {
    /// A member's value as the kernel reads it.
    fn load(self, value: f32) -> f32 {
        if self.bf16_as_f16 && self.element == Element::Bf16 {
            half::f16::from_bits(half::bf16::from_f32(value).to_bits()).to_f32()
        } else {
            value
        }
    }
}

/// Writes `out[i] = Σ members[m].values[offset + i]`, block by block, in
/// `f32`, each block then rounded to the element type.
fn sum_into(out: &mut [f32], offset: usize, members: &[Contribution], kernel: Kernel) {
    for (index, block) in out.chunks_mut(SUM_BLOCK).enumerate() {
        let start = offset + index * SUM_BLOCK;
        let end = start + block.len();
        let skipped = kernel.tail_untouched && start >= PARALLEL_FROM && block.len() < SUM_BLOCK;
        for (m, member) in members.iter().enumerate() {
            let Some(values) = member.values.get(start..end) else {
                continue;
            };
            if m == 0 {
                for (acc, &value) in block.iter_mut().zip(values) {
                    *acc = kernel.load(value);
                }
            } else if !skipped {
                for (acc, &value) in block.iter_mut().zip(values) {
                    *acc += kernel.load(value);
                }
            }
        }
        if kernel.element != Element::F32 {
            for value in block.iter_mut() {
                *value = kernel.element.round(*value);
            }
        }
    }
}

fn extents(shape: &[i32]) -> Vec<usize> {
    shape.iter().map(|&d| d.max(0) as usize).collect()
}

fn check_axis(operation: &'static str, tensor: &CpuTensor, axis: usize) -> Result<(), CpuError> {
    if axis >= tensor.dims().len() {
        return Err(CpuError::invalid(
            operation,
            format!("an axis below the input's rank {}", tensor.dims().len()),
            format!("axis {axis}"),
        ));
    }
    Ok(())
}

fn with_axis(shape: &[i32], axis: usize, extent: usize) -> Result<Vec<i32>, CpuError> {
    let mut out = shape.to_vec();
    out[axis] = i32::try_from(extent).map_err(|_| {
        CpuError::invalid(
            "output shape",
            "an extent that fits in i32",
            extent.to_string(),
        )
    })?;
    Ok(out)
}

/// Checks that members agree on every extent but `axis`, and returns their views.
fn axis_views(
    operation: &'static str,
    all: &[Contribution],
    axis: usize,
) -> Result<Vec<AxisView>, CpuError> {
    let first = extents(&all[0].shape);
    all.iter()
        .enumerate()
        .map(|(member, c)| {
            let shape = extents(&c.shape);
            let agrees = shape.len() == first.len()
                && shape
                    .iter()
                    .zip(&first)
                    .enumerate()
                    .all(|(i, (a, b))| i == axis || a == b);
            match AxisView::new(&shape, axis) {
                Some(view) if agrees => Ok(view),
                _ => Err(CpuError::MemberMismatch {
                    operation,
                    member,
                    detail: format!(
                        "submitted shape {:?}, which differs from member 0's {:?} off axis {axis}",
                        c.shape, all[0].shape
                    ),
                }),
            }
        })
        .collect()
}

fn submission(
    (output, completion): (Option<CpuTensor>, CpuCompletion),
    operation: &'static str,
) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
    let output = output.ok_or_else(|| CpuError::invalid(operation, "an output", "none"))?;
    Ok(Submission { output, completion })
}

impl SumReductionBackend for CpuBackend {
    fn all_reduce_sum(
        value: CpuTensor,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "all_reduce_sum";
        executor.device().admits(OP, &value)?;
        if group.size() == 1 {
            if let Some(values) = value.storage().ready_values() {
                // The sum over one member of a value on the host is that
                // value, bit for bit: nothing to do, so on an idle lane it is
                // complete at once (see `crate::executor`), its output a new
                // storage sharing the (immutable) values.
                if let Some(completion) = executor.complete_at_once(OP) {
                    // Numbered like any collective on the group, whichever
                    // path it takes.
                    group.member.next_seq();
                    let output =
                        CpuTensor::sharing(executor.ledger(), value.dims().to_vec(), values)
                            .of(value.element());
                    return Ok(Submission { output, completion });
                }
            }
        }
        let shape = value.dims().to_vec();
        let device = executor.device();
        let skip_last = device.has(Defect::SumSkipsLastMember);
        let kernel = Kernel {
            element: value.element(),
            tail_untouched: device.has(Defect::SumTailBlockUntouched),
            bf16_as_f16: device.has(Defect::SumBf16AsF16),
        };
        let recycle = group.member.rendezvous().0;
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, _| {
                same_shapes(OP, all)?;
                if let [alone] = all {
                    // The sum over one member is its input, bit for bit:
                    // share the (immutable) values instead of copying them.
                    return Ok(Arc::clone(&alone.values));
                }
                let members = if skip_last && all.len() > 1 {
                    &all[..all.len() - 1]
                } else {
                    all
                };
                let total = sum(members, recycle.take(), kernel);
                recycle.keep(&total);
                Ok(total)
            }),
        )
        .symmetric();
        collective.input = Some(value);
        collective.output_shape = Some(shape);
        submission(collective.submit(group, executor)?, OP)
    }
}

impl EvenGatherBackend for CpuBackend {
    fn all_gather_even(
        value: CpuTensor,
        axis: usize,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "all_gather_even";
        check_axis(OP, &value, axis)?;
        let shape = value.dims().to_vec();
        let width = value.extents()[axis] * group.size();
        let device = executor.device();
        let reversed = device.has(Defect::GatherReversed);
        let by_arrival = device.has(Defect::GatherByArrival);
        let middle_swapped =
            device.has(Defect::GatherMiddleAxisSwapped) && axis > 0 && axis + 1 < shape.len();
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, _| {
                agree(OP, all, "axis", |c| c.meta.clone())?;
                same_shapes(OP, all)?;
                let views = axis_views(OP, all, axis)?;
                let mut blocks: Vec<(&[f32], usize, u64)> = all
                    .iter()
                    .zip(&views)
                    .map(|(c, v)| (c.values.as_slice(), v.extent, c.arrival))
                    .collect();
                if reversed {
                    blocks.reverse();
                }
                if by_arrival {
                    blocks.sort_by_key(|&(_, _, arrival)| arrival);
                }
                let blocks: Vec<(&[f32], usize)> = blocks
                    .into_iter()
                    .map(|(data, extent, _)| (data, extent))
                    .collect();
                let (outer, inner) = if middle_swapped {
                    (views[0].inner, views[0].outer)
                } else {
                    (views[0].outer, views[0].inner)
                };
                Ok(Arc::new(concat_axis(outer, inner, &blocks)))
            }),
        )
        .symmetric();
        collective.meta = vec![axis];
        collective.output_shape = Some(with_axis(&shape, axis, width)?);
        collective.input = Some(value);
        submission(collective.submit(group, executor)?, OP)
    }
}

impl UnevenGatherBackend for CpuBackend {
    fn all_gather_uneven(
        value: CpuTensor,
        counts: &[usize],
        axis: usize,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "all_gather_uneven";
        check_axis(OP, &value, axis)?;
        if counts.len() != group.size() {
            return Err(CpuError::invalid(
                OP,
                format!("one count per member ({})", group.size()),
                format!("{} counts", counts.len()),
            ));
        }
        let own = value.extents()[axis];
        if counts[group.member()] != own {
            return Err(CpuError::invalid(
                OP,
                format!(
                    "member {}'s count {} to equal its extent along axis {axis}",
                    group.member(),
                    counts[group.member()]
                ),
                format!("extent {own}"),
            ));
        }
        let total = counts
            .iter()
            .try_fold(0usize, |sum, c| sum.checked_add(*c))
            .ok_or_else(|| {
                CpuError::invalid(OP, "counts whose sum fits in usize", format!("{counts:?}"))
            })?;
        let shape = value.dims().to_vec();
        let flat_counts = executor.device().has(Defect::UnevenCountsAsElements);
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, _| {
                // meta = [axis, counts...]: every member must name the same ones.
                agree(OP, all, "axis and counts", |c| c.meta.clone())?;
                let counts = &all[0].meta[1..];
                let views = axis_views(OP, all, axis)?;
                if let Some(member) = views.iter().zip(counts).position(|(v, c)| v.extent != *c) {
                    return Err(CpuError::MemberMismatch {
                        operation: OP,
                        member,
                        detail: format!(
                            "has extent {} along axis {axis}, counts say {}",
                            views[member].extent, counts[member]
                        ),
                    });
                }
                if flat_counts {
                    let mut out: Vec<f32> = all
                        .iter()
                        .zip(counts)
                        .flat_map(|(c, n)| c.values.iter().take(*n).copied())
                        .collect();
                    out.resize(views[0].outer * total * views[0].inner, 0.0);
                    return Ok(Arc::new(out));
                }
                let blocks: Vec<(&[f32], usize)> = all
                    .iter()
                    .zip(&views)
                    .map(|(c, v)| (c.values.as_slice(), v.extent))
                    .collect();
                Ok(Arc::new(concat_axis(
                    views[0].outer,
                    views[0].inner,
                    &blocks,
                )))
            }),
        )
        .symmetric();
        collective.meta = std::iter::once(axis)
            .chain(counts.iter().copied())
            .collect();
        collective.output_shape = Some(with_axis(&shape, axis, total)?);
        collective.input = Some(value);
        submission(collective.submit(group, executor)?, OP)
    }
}

impl VariableAllToAllBackend for CpuBackend {
    fn variable_all_to_all(
        value: CpuTensor,
        counts: &CommunicationPeerCounts,
        axis: usize,
        group: &CpuGroup,
        executor: &CpuExecutor,
    ) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
        const OP: &str = "variable_all_to_all";
        check_axis(OP, &value, axis)?;
        let n = group.size();
        if counts.group_size() != n {
            return Err(CpuError::invalid(
                OP,
                format!("counts for {n} peers"),
                format!("counts for {} peers", counts.group_size()),
            ));
        }
        let sum = |c: &[usize]| c.iter().try_fold(0usize, |s, n| s.checked_add(*n));
        let overflow =
            || CpuError::invalid(OP, "counts whose sum fits in usize", "an overflowing sum");
        let sent = sum(counts.send()).ok_or_else(overflow)?;
        let received = sum(counts.receive()).ok_or_else(overflow)?;
        let own = value.extents()[axis];
        if sent != own {
            return Err(CpuError::invalid(
                OP,
                format!("send counts summing to the input's extent {own} along axis {axis}"),
                format!("send counts {:?} summing to {sent}", counts.send()),
            ));
        }
        let zero = sent == 0 && received == 0;
        let shape = value.dims().to_vec();
        let mut collective = Collective::new(
            OP,
            Box::new(move |all, me| {
                // meta = [axis, send[0..n], receive[0..n]].
                agree(OP, all, "axis", |c| c.meta.first().copied())?;
                let sends = |p: usize| &all[p].meta[1..=n];
                let receives = |p: usize| &all[p].meta[1 + n..];
                for p in 0..n {
                    for q in 0..n {
                        if sends(p)[q] != receives(q)[p] {
                            return Err(CpuError::MemberMismatch {
                                operation: OP,
                                member: p,
                                detail: format!(
                                    "sends {} to member {q}, which expects {} from it",
                                    sends(p)[q],
                                    receives(q)[p]
                                ),
                            });
                        }
                    }
                }
                let views = axis_views(OP, all, axis)?;
                let blocks: Vec<(Vec<f32>, usize)> = (0..n)
                    .map(|p| {
                        let offset: usize = sends(p)[..me].iter().sum();
                        let len = sends(p)[me];
                        (slice_axis(&all[p].values, views[p], offset, len), len)
                    })
                    .collect();
                let blocks: Vec<(&[f32], usize)> =
                    blocks.iter().map(|(d, n)| (d.as_slice(), *n)).collect();
                Ok(Arc::new(concat_axis(
                    views[me].outer,
                    views[me].inner,
                    &blocks,
                )))
            }),
        );
        collective.meta = std::iter::once(axis)
            .chain(counts.send().iter().copied())
            .chain(counts.receive().iter().copied())
            .collect();
        collective.waits = !(zero && executor.device().has(Defect::AllToAllZeroSkips));
        collective.output_shape = Some(with_axis(&shape, axis, received)?);
        collective.input = Some(value);
        submission(collective.submit(group, executor)?, OP)
    }
}

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
        submission(collective.submit(group, executor)?, OP)
    }
}

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
