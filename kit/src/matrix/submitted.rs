//! Standard submissions: what one submission of the completion matrix holds
//! ([`Submitted`]: its completion, probes and the check of its outputs), the
//! inputs they are built from, and the failures they record (an output's
//! wrong value is its operation's value invariant's, e.g. SUM-1).

use super::handle::Handle;
use crate::check::{slack, Check, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, ClaimVisitor, Claims, CommCompletion, Harness, Probe};
use crate::operation::Operation;
use crate::world::{guarded, RankCtx};
use eredu_runtime::backend::{CommunicationBackend, SumReductionBackend};
use std::time::{Duration, Instant};

/// What a standard submission evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// Small materialised values.
    Light,
    /// Lazy tensor work that keeps the submission pending for a while.
    Heavy,
    /// The output of a sum reduction (local subjects of a
    /// [`PendingVia::PeerFed`] driver).
    Fed,
}

/// Verifies the outputs of a completed submission (and owns them until then).
pub(crate) type Verify<H> = Box<dyn FnOnce(&RankCtx<'_, H>) -> Check>;

/// One submission on one rank.
pub(crate) struct Submitted<H: Harness> {
    pub(crate) completion: Handle<H>,
    /// Probes on inputs whose every caller-side handle is already dropped.
    pub(crate) input_probes: Vec<Probe>,
    /// Probes on outputs.
    pub(crate) output_probes: Vec<Probe>,
    /// Checks the outputs' values after completion; dropping it drops the outputs.
    pub(crate) verify: Option<Verify<H>>,
    /// For lazy work: until when it is certainly pending, and how long it may
    /// take to complete.
    pub(crate) lazy: Option<LazyWindow>,
    /// The harness's observer on the work, when it has one: it tells whether
    /// the work the kit keeps pending really is (a backend may complete an
    /// operation before its late peer joined, which is that operation's own
    /// violation, not one of the check that relied on it).
    pub(crate) watch: Option<crate::harness::Observer>,
    /// Peer-fed local work: the completion of the sum reduction whose output
    /// it evaluates, kept (not dropped) while the kit observes the work, so
    /// that a backend's fault in dropping completions (RET-4) cannot pass for
    /// one of the local work's.
    #[allow(dead_code, reason = "held, never read")]
    pub(crate) feeder: Option<Handle<H>>,
    /// The work may end before its late peer joins (a transfer's sender or
    /// a broadcast's root, which an eager protocol completes as soon as its
    /// own part is done): it is surely pending only
    /// while the backend says so (its observer, or `is_complete()` read
    /// after the observation), and an end before the check looked leaves
    /// nothing to check.
    pub(crate) alone: bool,
}

/// Lazy work's known while: until when it is certainly pending, and about
/// how long it takes.
pub(crate) type LazyWindow = (Instant, Duration);

/// How long released work may take to complete: the release slack, and four
/// times the lazy work's calibrated duration when it evaluates any.
pub(crate) fn completes_within(lazy: Option<LazyWindow>) -> Duration {
    slack::RELEASE + lazy.map_or(Duration::ZERO, |(_, takes)| takes * 4)
}

impl<H: Harness> Submitted<H> {
    /// Whether the work has certainly not ended on its own, as far as the
    /// kit can tell: lazy work within its known while, and never when the
    /// observer reports it completed or failed. (Work the kit itself had torn
    /// down by a NativeCancel deadline did not end on its own.)
    pub(crate) fn surely_pending(&self) -> bool {
        self.lazy.is_none_or(|(until, _)| Instant::now() < until)
            && self.watch.as_ref().is_none_or(|observer| {
                !matches!(
                    observer.state(),
                    crate::harness::WorkState::Completed | crate::harness::WorkState::Failed
                )
            })
            && (!self.alone
                || self.watch.is_some()
                || matches!(self.completion.is_complete(), Ok(false)))
    }

    /// How long released work may take to complete.
    pub(crate) fn completes_within(&self) -> Duration {
        completes_within(self.lazy)
    }
}

// ---------------------------------------------------------------------------
// Standard submissions. Inputs come from (rank, index) so results are exact.

pub(crate) fn values(rank: usize, len: usize) -> Vec<f32> {
    values_in(Dtype::F32, rank, len)
}

/// Rank `rank`'s [`extend_values_in`] values `0..len` in `dtype`.
pub(crate) fn values_in(dtype: Dtype, rank: usize, len: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(len);
    extend_values_in(dtype, &mut out, rank, 0..len);
    out
}

/// Appends elements `indices` of rank `rank`'s values in `dtype` to `out`:
/// element `i` is `16 rank + 1 + i` in `f32` (exact below 2^24, far past any
/// size the matrix submits); in a 16-bit dtype the index repeats every 16
/// (`16 rank + 1 + i % 16`), so that each value, and each sum of up to four
/// ranks' values (at most 256: the matrix's operations run on two or three),
/// is exact in `f16` and `bf16`.
pub(crate) fn extend_values_in(
    dtype: Dtype,
    out: &mut Vec<f32>,
    rank: usize,
    indices: std::ops::Range<usize>,
) {
    // Through i32, which converts to f32 in one vector instruction.
    let first = rank * 16 + 1;
    match dtype {
        Dtype::F32 => out.extend(indices.map(|i| (first + i) as i32 as f32)),
        _ => out.extend(indices.map(|i| (first + i % 16) as i32 as f32)),
    }
}

/// Probes on `tensors` when the harness provides the probe (none otherwise);
/// a declared probe that answers nothing is a harness error.
pub(crate) fn probes<H: Harness>(
    ctx: &RankCtx<'_, H>,
    tensors: &[&crate::harness::Tensor<H>],
) -> Result<Vec<Probe>, Finding> {
    if !ctx.harness().instruments().probe {
        return Ok(Vec::new());
    }
    tensors.iter().map(|t| ctx.probe(t)).collect()
}

/// Verifies that `outputs` read back as `expected` (by the operation's
/// comparison rule, [`Operation::same_values`]). A wrong value is a violation
/// of the operation's value invariant ([`Operation::value_invariant`]), not of
/// the retention or completion invariant whose check found it: it is recorded
/// for that invariant and the verification passes. The outputs are read in
/// the world's matrix dtype ([`RankCtx::large_dtype`]).
pub(crate) fn verify_tensors<H: Harness>(
    operation: Operation,
    outputs: Vec<crate::harness::Tensor<H>>,
    expected: impl FnOnce() -> Vec<Vec<f32>> + 'static,
) -> Verify<H> {
    // The expected values are made only where the outputs are checked (the
    // subject), not on every late peer.
    Box::new(move |ctx: &RankCtx<'_, H>| {
        let expected = expected();
        for (index, (output, expected)) in outputs.iter().zip(&expected).enumerate() {
            let got = ctx.in_dtype(ctx.large_dtype(), || ctx.read(output)).map_err(|finding| {
                let message = format!(
                    "{operation} on rank {}: output {index} cannot be read after its completion was reported: \
                     {finding:?}",
                    ctx.rank()
                );
                ctx.attribute("EXC-2", message.clone());
                crate::check::setup(message)
            })?;
            if !operation.same_values(&got, expected) {
                attribute_value(
                    ctx,
                    operation,
                    format!(
                        "{operation} on rank {}: output {index} {}",
                        ctx.rank(),
                        differs(&got, expected)
                    ),
                );
            }
        }
        Ok(())
    })
}

/// How `got` differs from `expected`, for a message: both in full when they
/// are short, else their lengths and the first element that differs.
pub(crate) fn differs(got: &[f32], expected: &[f32]) -> String {
    const SHORT: usize = 16;
    if got.len() <= SHORT && expected.len() <= SHORT {
        return format!("is {got:?}, expected {expected:?}");
    }
    let first = got
        .iter()
        .zip(expected)
        .position(|(g, e)| g.to_bits() != e.to_bits() && !(g.is_nan() && e.is_nan()));
    match first {
        Some(at) => format!(
            "of {} elements (expected {}) first differs at element {at}: {:?}, expected {:?}",
            got.len(),
            expected.len(),
            got[at],
            expected[at]
        ),
        None => format!(
            "has {} elements, expected {} (the common part matches)",
            got.len(),
            expected.len()
        ),
    }
}

/// Records a wrong output value of `operation` against its value invariant.
pub(crate) fn attribute_value<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    message: String,
) {
    if let Some(id) = operation.value_invariant() {
        ctx.attribute(id, message);
    }
}

/// Submits a sum reduction of standard values on `executor`: its
/// completion and its output (the input of peer-fed local work).
pub(crate) type Feed<H> = fn(
    &RankCtx<'_, H>,
    &crate::harness::Executor<H>,
) -> Result<(Handle<H>, crate::harness::Tensor<H>), Finding>;

/// The [`Feed`] of a backend that implements sum reduction.
pub(crate) fn sum_feed<H: Harness>() -> Feed<H>
where
    Backend<H>: SumReductionBackend,
{
    |ctx, executor| {
        let input = ctx.tensor(&values(ctx.rank(), 4), &[4])?;
        let submission = waits_for_peers(Operation::AllReduceSum, || {
            Backend::<H>::all_reduce_sum(input, ctx.group(), executor)
        })
        .map_err(|e| failed(ctx, Operation::AllReduceSum, e))?;
        Ok((
            Handle::Communication(submission.completion),
            submission.output,
        ))
    }
}

/// A standard submission the backend refused: the kit's inputs are valid, so
/// this is the operation's value invariant's business (recorded there), and
/// the case could not set up its check. Not so after a bounded wait left
/// this rank's work unfinished earlier in the case ([`RankCtx`]'s `fenced`):
/// a backend may refuse work on a group whose earlier work is still
/// quarantined, and eredu neither requires nor forbids that, so the refusal
/// is recorded for no invariant.
pub(super) fn failed<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    error: impl std::fmt::Display,
) -> Finding {
    let message = format!("the standard {operation} submission failed: {error}");
    if ctx.fenced.get() {
        return crate::check::setup(format!(
            "{message} (after a bounded wait earlier in the case left this rank's work \
             unfinished: a backend may refuse new work until it completes)"
        ));
    }
    attribute_value(ctx, operation, message.clone());
    crate::check::setup(message)
}

/// A collective's submission call, made before its late peers joined, under
/// the block guard: a backend whose submission waits for its peers (a
/// synchronous collective) never returns there. eredu bounds no submission
/// (no SPEC invariant says it must return at once), so after
/// [`slack::BLOCKED`] the case ends inconclusive, naming the call, instead of
/// a watchdog `timeout`.
pub(crate) fn waits_for_peers<T>(operation: Operation, call: impl FnOnce() -> T) -> T {
    let what = match operation {
        Operation::AllReduceSum => "all_reduce_sum() before its late peers joined (a submission that waits for its peers)",
        Operation::AllGatherEven => "all_gather_even() before its late peers joined (a submission that waits for its peers)",
        Operation::AllGatherUneven => "all_gather_uneven() before its late peers joined (a submission that waits for its peers)",
        Operation::VariableAllToAll => "variable_all_to_all() before its late peers joined (a submission that waits for its peers)",
        Operation::SendReceive => "send_receive() before its peer joined (a submission that waits for its peer)",
        Operation::Broadcast => "broadcast() before its late peers joined (a submission that waits for its peers)",
        Operation::Barrier => "barrier() before its late peers joined (a submission that waits for its peers)",
        Operation::AgreeSuccess => "agree_success() before its late peers joined (a submission that waits for its peers)",
    };
    guarded(what, crate::world::SETUP, slack::BLOCKED, call)
}

/// Communication submission with one input and one output tensor.
pub(super) fn one_to_one<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    input: crate::harness::Tensor<H>,
    expected: impl FnOnce() -> Vec<f32> + 'static,
    submit: impl FnOnce(
        crate::harness::Tensor<H>,
    ) -> Result<
        eredu_core::Submission<crate::harness::Tensor<H>, CommCompletion<H>>,
        <Backend<H> as CommunicationBackend>::CommunicationError,
    >,
) -> Result<Submitted<H>, Finding> {
    let input_probes = probes(ctx, &[&input])?;
    let submission =
        waits_for_peers(operation, || submit(input)).map_err(|e| failed(ctx, operation, e))?;
    let output_probes = probes(ctx, &[&submission.output])?;
    Ok(Submitted {
        completion: Handle::Communication(submission.completion),
        input_probes,
        output_probes,
        verify: Some(verify_tensors(
            operation,
            vec![submission.output],
            move || vec![expected()],
        )),
        lazy: None,
        watch: None,
        feeder: None,
        alone: false,
    })
}

/// The sum reduction that feeds peer-fed local work ([`PendingVia::PeerFed`]),
/// when the harness claims `all_reduce_sum`.
///
/// [`PendingVia::PeerFed`]: super::PendingVia::PeerFed
impl<H: Harness> Claims<H> {
    pub(crate) fn feed(&self) -> Option<Feed<H>> {
        let mut feed = FeedOf(None);
        self.visit(&mut feed);
        feed.0
    }
}

/// Finds the claimed sum reduction's [`Feed`].
struct FeedOf<H: Harness>(Option<Feed<H>>);

impl<H: Harness> ClaimVisitor<H> for FeedOf<H> {
    fn sum_reduction(&mut self)
    where
        Backend<H>: SumReductionBackend,
    {
        self.0 = Some(sum_feed::<H>());
    }
    fn even_gather(&mut self) {}
    fn uneven_gather(&mut self) {}
    fn variable_all_to_all(&mut self) {}
    fn point_to_point(&mut self) {}
    fn broadcast(&mut self) {}
    fn barrier(&mut self) {}
    fn failure_agreement(&mut self) {}
}
