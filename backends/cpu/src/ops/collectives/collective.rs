//! One collective submission, the pattern every group operation follows:
//! admission (the device refuses an element type; SUB-4), what the
//! completion retains (inputs, output, group member: RET-3, RET-5), the body
//! that evaluates the input, meets the peers in the group's rendezvous and
//! combines their contributions in member order, and the abort that fails
//! the peers when the body never runs. Disagreeing members fail on every
//! rank with a message naming the member at fault.

use std::sync::{Arc, Weak};

use eredu_core::Submission;

use super::super::reach;
use crate::completion::CpuCompletion;
use crate::core::Retained;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::{CpuExecutor, Dispatch, WorkKind};
use crate::frame::Contribution;
use crate::group::{CpuGroup, GroupMember};
use crate::tensor::{CpuTensor, Element, Storage, Values};
use crate::work::{Abort, Work, WorkCtx};

/// Outputs of at least this many elements are summed by two threads, each
/// taking half: a second boundary of the data path (and where the
/// `LargeInputNotRetained` defect's collectives stop retaining their input).
pub const PARALLEL_FROM: usize = 1 << 18;

/// Computes one member's output from every contribution (member order) and its own index.
pub(super) type Combine =
    Box<dyn FnOnce(&[Contribution], usize) -> Result<Values, CpuError> + Send>;

/// One collective submission, before it is queued.
pub(super) struct Collective {
    operation: &'static str,
    /// This member's input, if the operation has one.
    pub(super) input: Option<CpuTensor>,
    /// Scalars every member must agree on or exchange (see `Contribution::meta`).
    pub(super) meta: Vec<usize>,
    /// The output's shape, if the operation has a tensor output.
    pub(super) output_shape: Option<Vec<i32>>,
    /// Whether this member waits for its peers (false only under planted defects).
    pub(super) waits: bool,
    /// Whether every member's output is the same: it is then computed once
    /// and shared instead of once per member.
    symmetric: bool,
    combine: Combine,
}

impl Collective {
    pub(super) fn new(operation: &'static str, combine: Combine) -> Self {
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

    pub(super) fn symmetric(mut self) -> Self {
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
    pub(super) fn submit(
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
        // Not broadcasts: a non-root's freed input can leave the broadcast
        // never ending, a hang other checks would report first.
        let large = operation != "broadcast"
            && input
                .as_ref()
                .is_some_and(|tensor| tensor.len() >= PARALLEL_FROM);
        let half = input
            .as_ref()
            .is_some_and(|tensor| tensor.element() != Element::F32);
        let weak_large = device.has(Defect::LargeInputNotRetained)
            || (half && device.has(Defect::LargeHalfInputNotRetained));
        let retain_input = retain_inputs && !(large && weak_large);
        let retain_output = !device.has(Defect::OutputNotRetained);
        let element = input.as_ref().map_or(Element::F32, CpuTensor::element);
        let output =
            output_shape.map(|shape| CpuTensor::pending(executor.ledger(), shape).of(element));
        let held = Held {
            input: input
                .as_ref()
                .filter(|_| retain_input)
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
pub(super) fn same_shapes(operation: &'static str, all: &[Contribution]) -> Result<(), CpuError> {
    agree(operation, all, "shape", |c| c.shape.clone())
}

/// Checks that every member agrees with member 0 on `key` (named `what`).
/// All members see the same contributions, so all of them fail alike, and
/// the message names the first member that differs.
pub(super) fn agree<T: PartialEq + std::fmt::Debug>(
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

pub(super) fn submission(
    (output, completion): (Option<CpuTensor>, CpuCompletion),
    operation: &'static str,
) -> Result<Submission<CpuTensor, CpuCompletion>, CpuError> {
    let output = output.ok_or_else(|| CpuError::invalid(operation, "an output", "none"))?;
    Ok(Submission { output, completion })
}
