//! SUM: sum reduction (`SumReductionBackend::all_reduce_sum`).
//!
//! - SUM-1: every member's output is the elementwise sum of every member's
//!   input, with the input's shape; on a singleton group that is the
//!   identity. Members that disagree on the shape get an error on every rank
//!   (at submission or from the completion), never a result and never a hang.
//! - SUM-2: a wave of reductions that every member submits before waiting
//!   for any of them completes, whatever order each member then waits in
//!   (here: rank 0 in submission order, every other rank in reverse). This is
//!   what `all_reduce_sum_wave` of eredu-runtime relies on; a backend that
//!   starts collectives only when they are first observed deadlocks there.
//!
//! Inputs are small integers derived from (seed, step, rank, index) (see
//! [`exact::value`]), so every sum is exact in `f32` in any summation order
//! and outputs are compared bit for bit. Each step picks, from the case's
//! seed, the member that joins last; every wait is bounded, so a hang is a
//! failure that names the operation and the late member.
//!
//! [`exact`] holds the pieces the SUM, GAT and A2A suites share.

use std::time::Duration;

use eredu_runtime::backend::SumReductionBackend;

use self::exact::{
    check_output, expect_error, finish_within, in_turn, pick, run, settle_all, value, values, Flow,
    Owned, LATE,
};
use super::needs;
use crate::case::{Body, Row};
use crate::check::{slack, Check};
use crate::claims::Operation;
use crate::harness::{Backend, Harness};
use crate::matrix::Subject;
use crate::violation;
use crate::world::RankCtx;

/// World sizes every SUM case runs on.
const SIZES: &[usize] = &[1, 2, 3, 4, 8];

/// SUM-1 shapes: plain, 2-D, a scalar, empty ones, a single element, 3-D.
const SHAPES: &[&[usize]] = &[&[4], &[2, 3], &[], &[0], &[1], &[3, 0, 2], &[2, 1, 3]];

/// The SUM-2 wave: one reduction per shape, in submission order.
const WAVE: &[&[usize]] = &[&[3], &[2, 2], &[0], &[1], &[2, 1, 2], &[]];

/// How long the whole SUM-2 wave may take once every member submitted it:
/// half of [`slack::RELEASE`], still thousands of times what six reductions
/// of at most six elements need, so that a deadlock is this case's own
/// `fail` (naming the reduction and the wait order) before a watchdog of
/// [`slack::RELEASE`] fires. The row is a timing row: a failure is retried.
const WAVE_LIMIT: Duration = Duration::from_millis(slack::RELEASE.as_millis() as u64 / 2);

fn is_sum(subject: Subject) -> bool {
    subject == Subject::Operation(Operation::AllReduceSum)
}

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: SumReductionBackend,
{
    vec![
        Row {
            id: "SUM-1",
            applies: is_sum,
            requires: needs::NOTHING,
            timing: false,
            body: Body::Sizes {
                sizes: SIZES,
                script: sums_are_exact::<H>,
            },
        },
        Row {
            id: "SUM-2",
            applies: is_sum,
            requires: needs::NOTHING,
            timing: true,
            body: Body::Sizes {
                sizes: SIZES,
                script: waves_complete_in_any_wait_order::<H>,
            },
        },
    ]
}

/// SUM-1: exact sums of every shape; then, alone, the bitwise identity, or,
/// with peers, disagreeing shapes (same and different element counts) fail
/// on every rank.
fn sums_are_exact<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: SumReductionBackend,
{
    run(ctx, || {
        for (step, shape) in (0u64..).zip(SHAPES) {
            reduce_once(ctx, step, shape)?;
        }
        if ctx.size() == 1 {
            singleton_is_the_identity(ctx)?;
        } else {
            disagreeing_shapes_fail(ctx, 100, &[2, 3], &[3, 2])?;
            disagreeing_shapes_fail(ctx, 101, &[4], &[5])?;
        }
        Ok(())
    })
}

/// One reduction of `shape`, the seed's member joining last.
fn reduce_once<H: Harness>(ctx: &RankCtx<'_, H>, step: u64, shape: &[usize]) -> Flow
where
    Backend<H>: SumReductionBackend,
{
    let (seed, size, rank) = (ctx.seed(), ctx.size(), ctx.rank());
    let len = shape.iter().product();
    let late = pick(seed, &[step, LATE], size);
    let input = ctx.tensor(&values(seed, step, rank, len), shape)?;
    // The caller keeps a handle: retention is RET-3's subject, not this one's.
    let kept = input.clone();
    let what = || {
        format!("all_reduce_sum of shape {shape:?} on rank {rank} of {size} (member {late} joined last)")
    };
    let submitted = in_turn(ctx, &format!("sum-1/{step}"), late, || {
        Backend::<H>::all_reduce_sum(input, ctx.group(), ctx.executor())
    })?;
    let submission = submitted.map_err(|e| violation!("{}: submission failed: {e}", what()))?;
    finish_within(ctx, &what, Owned::new(submission.completion))?;
    let expected: Vec<f32> = (0..len)
        .map(|index| {
            (0..size)
                .map(|member| value(seed, step, member, index))
                .sum()
        })
        .collect();
    let claim = if size == 1 {
        "the identity on a singleton group"
    } else {
        "the elementwise sum over members"
    };
    check_output(
        ctx,
        || format!("{} should be {claim}", what()),
        &submission.output,
        shape,
        &expected,
    )?;
    drop(kept);
    Ok(())
}

/// On a singleton group the sum is the identity, bit for bit: a negative
/// zero, fractions, a huge value and the smallest normal one come back as
/// given.
fn singleton_is_the_identity<H: Harness>(ctx: &RankCtx<'_, H>) -> Flow
where
    Backend<H>: SumReductionBackend,
{
    let input = [-0.0, 0.5, -3.25, 1.0e30, f32::MIN_POSITIVE];
    let tensor = ctx.tensor(&input, &[input.len()])?;
    let kept = tensor.clone();
    let what = || "all_reduce_sum on a singleton group".to_owned();
    let submission = Backend::<H>::all_reduce_sum(tensor, ctx.group(), ctx.executor())
        .map_err(|e| violation!("{}: submission failed: {e}", what()))?;
    finish_within(ctx, &what, Owned::new(submission.completion))?;
    check_output(
        ctx,
        || format!("{} should be the identity (bit for bit)", what()),
        &submission.output,
        &[input.len()],
        &input,
    )?;
    drop(kept);
    Ok(())
}

/// Bad input: one member (the last to join) submits `odd`, the others
/// `shape`. Every rank must see an error, none a result or a hang.
fn disagreeing_shapes_fail<H: Harness>(
    ctx: &RankCtx<'_, H>,
    step: u64,
    shape: &[usize],
    odd: &[usize],
) -> Flow
where
    Backend<H>: SumReductionBackend,
{
    let (seed, size, rank) = (ctx.seed(), ctx.size(), ctx.rank());
    let late = pick(seed, &[step, LATE], size);
    let mine = if rank == late { odd } else { shape };
    let input = ctx.tensor(&values(seed, step, rank, mine.iter().product()), mine)?;
    let kept = input.clone();
    let submitted = in_turn(ctx, &format!("sum-1/{step}"), late, || {
        Backend::<H>::all_reduce_sum(input, ctx.group(), ctx.executor())
    })?;
    expect_error(
        ctx,
        &|| {
            format!(
                "all_reduce_sum with disagreeing shapes (member {late}, joining last, submitted \
                 {odd:?}; the others {shape:?}) on rank {rank} of {size}"
            )
        },
        submitted,
    )?;
    drop(kept);
    Ok(())
}

/// SUM-2: every member submits the whole wave, then waits for it in its own
/// order; every reduction must complete with its exact sum.
fn waves_complete_in_any_wait_order<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: SumReductionBackend,
{
    run(ctx, || {
        let (seed, size, rank) = (ctx.seed(), ctx.size(), ctx.rank());
        let mut kept = Vec::new();
        let mut outputs = Vec::new();
        let mut completions = Vec::new();
        for (index, step) in (0..WAVE.len()).zip(200u64..) {
            let shape = WAVE[index];
            let input = ctx.tensor(&values(seed, step, rank, shape.iter().product()), shape)?;
            kept.push(input.clone());
            let submission = Backend::<H>::all_reduce_sum(input, ctx.group(), ctx.executor())
                .map_err(|e| {
                    violation!(
                        "all_reduce_sum wave on rank {rank} of {size}: submitting reduction \
                         {index} of {} failed: {e}",
                        WAVE.len()
                    )
                })?;
            outputs.push(submission.output);
            completions.push(Owned::new(submission.completion));
        }
        let order: Vec<usize> = if rank == 0 {
            (0..WAVE.len()).collect()
        } else {
            (0..WAVE.len()).rev().collect()
        };
        settle_all(
            ctx,
            "sum-2/wave-submitted",
            completions,
            &order,
            WAVE_LIMIT,
            |index| {
                format!(
                    "all_reduce_sum wave of {} on rank {rank} of {size}, every member having \
                 submitted the whole wave before waiting: reduction {index} (shape {:?}), this \
                 rank waiting in the order {order:?} (rank 0 waits in submission order, the \
                 others in reverse; a wave must complete whatever the wait order)",
                    WAVE.len(),
                    WAVE[index],
                )
            },
        )?;
        for ((index, step), output) in (0..WAVE.len()).zip(200u64..).zip(&outputs) {
            let shape = WAVE[index];
            let expected: Vec<f32> = (0..shape.iter().product())
                .map(|i| (0..size).map(|member| value(seed, step, member, i)).sum())
                .collect();
            let what = || {
                format!(
                    "all_reduce_sum wave on rank {rank} of {size}: reduction {index} (shape \
                     {shape:?}) should be the elementwise sum over members"
                )
            };
            check_output(ctx, what, output, shape, &expected)?;
        }
        drop(kept);
        Ok(())
    })
}

/// Pieces shared by the SUM, GAT and A2A suites: exact inputs, a reference
/// layout, the late-member choreography, bounded waits that name what hung,
/// and a clean stop for every rank once one of them found a failure.
pub(crate) mod exact {
    use std::time::{Duration, Instant};

    use eredu_core::{
        BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion,
        CompletionCancellationMode, Submission,
    };

    use crate::check::{slack, Check, Finding};
    use crate::harness::{CommCompletion, Harness, Tensor};
    use crate::violation;
    use crate::world::RankCtx;

    /// Raised by a rank that found a failure: the others stop waiting.
    const ABORT: &str = "collective-suites/abort";

    /// Seed path component for the late member's choice.
    pub(crate) const LATE: u64 = 0x1a7e;

    /// Why a rank's script stopped early.
    pub(crate) enum Stop {
        /// This rank found something.
        Found(Finding),
        /// Another rank found a failure first and reports it; this rank
        /// stopped waiting for work that rank abandoned.
        Abandoned,
    }

    impl From<Finding> for Stop {
        fn from(finding: Finding) -> Self {
            Self::Found(finding)
        }
    }

    /// The result of a step.
    pub(crate) type Flow = Result<(), Stop>;

    /// Runs one rank's script. A rank that finds a violation tells the others,
    /// which stop (their waits would only time out) and leave the report to it:
    /// the case fails with that rank's finding.
    pub(crate) fn run<H: Harness>(ctx: &RankCtx<'_, H>, script: impl FnOnce() -> Flow) -> Check {
        match script() {
            Ok(()) | Err(Stop::Abandoned) => Ok(()),
            Err(Stop::Found(finding)) => {
                if !matches!(finding, Finding::NotSupported(_)) {
                    ctx.signal(ABORT);
                }
                Err(finding)
            }
        }
    }

    fn aborted<H: Harness>(ctx: &RankCtx<'_, H>) -> bool {
        ctx.await_signal(ABORT, Duration::ZERO)
    }

    /// splitmix64 of the case seed and a path of integers.
    pub(crate) fn mix(seed: u64, path: &[u64]) -> u64 {
        path.iter().fold(seed, |state, part| {
            let mut z = (state ^ part.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
    }

    /// A number below `n` (which must be positive) chosen by the seed and `path`.
    pub(crate) fn pick(seed: u64, path: &[u64], n: usize) -> usize {
        (mix(seed, path) % n.max(1) as u64) as usize
    }

    /// Input value of member `rank` at flat `index` in step `step`: an integer
    /// of magnitude `(rank + 1) * 1024 - 512 + k` with `k < 1024`, negative
    /// on odd ranks. Members' ranges are disjoint (a block in the wrong place
    /// shows), the values of one member are distinct over any 1024
    /// consecutive indexes (`37 * index` permutes residues mod 1024), and a
    /// sum over up to eight members stays far below 2^24, so it is exact in
    /// `f32` in any order.
    pub(crate) fn value(seed: u64, step: u64, rank: usize, index: usize) -> f32 {
        let offset = mix(seed, &[step, rank as u64]) % 1024;
        let k = (index as u64 % 1024 * 37 + offset) % 1024;
        let magnitude = ((rank as u64 + 1) * 1024 - 512 + k) as f32;
        if rank % 2 == 1 {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The first `len` input values of member `rank` in step `step`.
    pub(crate) fn values(seed: u64, step: u64, rank: usize, len: usize) -> Vec<f32> {
        (0..len)
            .map(|index| value(seed, step, rank, index))
            .collect()
    }

    /// `shape` seen from `axis`: (elements before it, its extent, elements after it).
    fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
        let outer = shape.iter().take(axis).product();
        let extent = shape.get(axis).copied().unwrap_or(0);
        let inner = shape.iter().skip(axis + 1).product();
        (outer, extent, inner)
    }

    /// `shape` with its extent along `axis` replaced.
    pub(crate) fn with_extent(shape: &[usize], axis: usize, extent: usize) -> Vec<usize> {
        let mut out = shape.to_vec();
        if let Some(slot) = out.get_mut(axis) {
            *slot = extent;
        }
        out
    }

    /// Reference concatenation along `axis` of row-major blocks, each given
    /// with its extent along the axis; every block has `shape` off the axis.
    pub(crate) fn concat(shape: &[usize], axis: usize, blocks: &[(Vec<f32>, usize)]) -> Vec<f32> {
        let (outer, _, inner) = around(shape, axis);
        let mut out = Vec::new();
        for row in 0..outer {
            for (data, extent) in blocks {
                let run = extent * inner;
                out.extend(data.iter().skip(row * run).take(run));
            }
        }
        out
    }

    /// Reference slice: positions `start..start + len` along `axis` of a
    /// row-major tensor of `shape`.
    pub(crate) fn slice(
        data: &[f32],
        shape: &[usize],
        axis: usize,
        start: usize,
        len: usize,
    ) -> Vec<f32> {
        let (outer, extent, inner) = around(shape, axis);
        (0..outer)
            .flat_map(|row| {
                data.iter()
                    .skip((row * extent + start) * inner)
                    .take(len * inner)
            })
            .copied()
            .collect()
    }

    fn said(label: &str, rank: usize) -> String {
        format!("{label}/{rank}")
    }

    /// Waits until every other rank raised `label`; stops when one found a
    /// failure. A rank that stays silent past [`slack::RELEASE`] is not waited
    /// for any longer (its own script reports why it is stuck).
    fn hear_everyone<H: Harness>(ctx: &RankCtx<'_, H>, label: &str) -> Flow {
        let deadline = Instant::now() + slack::RELEASE;
        for rank in (0..ctx.size()).filter(|r| *r != ctx.rank()) {
            let name = said(label, rank);
            let remaining = deadline.saturating_duration_since(Instant::now());
            if ctx.await_any_signal(&[&name, ABORT], remaining) == Some(1) {
                return Err(Stop::Abandoned);
            }
        }
        Ok(())
    }

    /// Submits on this rank in turn: the `late` member only once every other
    /// member has submitted (whatever its submission returned), so it joins
    /// last.
    pub(crate) fn in_turn<H: Harness, T>(
        ctx: &RankCtx<'_, H>,
        label: &str,
        late: usize,
        submit: impl FnOnce() -> T,
    ) -> Result<T, Stop> {
        in_turn_then(ctx, label, late, submit, |_| Ok(()))
    }

    /// [`in_turn`], with a check that every member but the late one runs on
    /// its submission before letting the late member join.
    pub(crate) fn in_turn_then<H: Harness, T>(
        ctx: &RankCtx<'_, H>,
        label: &str,
        late: usize,
        submit: impl FnOnce() -> T,
        before_the_late_member: impl FnOnce(&T) -> Flow,
    ) -> Result<T, Stop> {
        if ctx.rank() == late {
            hear_everyone(ctx, label)?;
            return Ok(submit());
        }
        let submitted = submit();
        let checked = before_the_late_member(&submitted);
        ctx.signal(&said(label, ctx.rank()));
        checked.map(|()| submitted)
    }

    /// How a bounded wait ended.
    pub(crate) enum Outcome {
        /// Completed, confirmed by `wait_bounded`.
        Completed,
        /// The backend reported an error.
        Failed(String),
        /// Still pending when the bound passed.
        Pending(Duration),
    }

    /// A communication completion that is put in a safe disposition if it is
    /// abandoned (see [`dispose`]).
    pub(crate) struct Owned<H: Harness>(Option<CommCompletion<H>>);

    impl<H: Harness> Owned<H> {
        pub(crate) fn new(completion: CommCompletion<H>) -> Self {
            Self(Some(completion))
        }

        /// Waits, bounded by `limit`: polls `is_complete` and, once it says
        /// `true`, confirms with `wait_bounded` (which must then report
        /// `Completed`) so outputs are ready whatever `is_complete` does wrong
        /// (that is EXC-2's subject, not this one's).
        pub(crate) fn finish(
            mut self,
            ctx: &RankCtx<'_, H>,
            limit: Duration,
        ) -> Result<Outcome, Stop> {
            let Some(completion) = self.0.take() else {
                return Ok(Outcome::Failed(
                    "the completion was already consumed".into(),
                ));
            };
            let start = Instant::now();
            loop {
                match completion.is_complete() {
                    Ok(true) => return Ok(confirm::<H>(completion)),
                    Err(error) => {
                        dispose::<H>(completion);
                        return Ok(Outcome::Failed(error.to_string()));
                    }
                    Ok(false) if aborted(ctx) => {
                        dispose::<H>(completion);
                        return Err(Stop::Abandoned);
                    }
                    Ok(false) if start.elapsed() >= limit => {
                        dispose::<H>(completion);
                        return Ok(Outcome::Pending(limit));
                    }
                    Ok(false) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        }
    }

    impl<H: Harness> Drop for Owned<H> {
        fn drop(&mut self) {
            if let Some(completion) = self.0.take() {
                dispose::<H>(completion);
            }
        }
    }

    fn supported<H: Harness>(mode: CompletionCancellationMode) -> bool {
        <CommCompletion<H> as BoundedCompletion>::supports_cancellation(mode)
    }

    fn confirm<H: Harness>(completion: CommCompletion<H>) -> Outcome {
        let mode = [
            CompletionCancellationMode::QuarantineUntilComplete,
            CompletionCancellationMode::NativeCancel,
        ]
        .into_iter()
        .find(|mode| supported::<H>(*mode));
        let Some(policy) =
            mode.and_then(|mode| BoundedCompletionWait::new(slack::RELEASE, mode).ok())
        else {
            return Outcome::Completed;
        };
        match completion.wait_bounded(policy) {
            Ok(BoundedCompletionOutcome::Completed) => Outcome::Completed,
            Ok(BoundedCompletionOutcome::DeadlineExceeded { .. }) => Outcome::Failed(format!(
                "is_complete reported Ok(true), yet wait_bounded then gave up after {:?}",
                slack::RELEASE
            )),
            Err(error) => Outcome::Failed(format!(
                "is_complete reported Ok(true), then wait_bounded failed: {error}"
            )),
        }
    }

    /// Puts abandoned work in a safe disposition, preferring native
    /// cancellation so peers blocked on it are released too. Its outcome is
    /// not under test here.
    pub(crate) fn dispose<H: Harness>(completion: CommCompletion<H>) {
        let mode = [
            CompletionCancellationMode::NativeCancel,
            CompletionCancellationMode::QuarantineUntilComplete,
        ]
        .into_iter()
        .find(|mode| supported::<H>(*mode));
        if let Some(policy) =
            mode.and_then(|mode| BoundedCompletionWait::new(slack::DEADLINE, mode).ok())
        {
            let _ = completion.wait_bounded(policy);
        }
    }

    /// Waits for one completion that must succeed, at most
    /// [`slack::RELEASE`]; `what` names the operation, the rank and the late
    /// member.
    pub(crate) fn finish_within<H: Harness>(
        ctx: &RankCtx<'_, H>,
        what: &dyn Fn() -> String,
        completion: Owned<H>,
    ) -> Flow {
        finish_by(ctx, what, completion, slack::RELEASE)
    }

    fn finish_by<H: Harness>(
        ctx: &RankCtx<'_, H>,
        what: &dyn Fn() -> String,
        completion: Owned<H>,
        limit: Duration,
    ) -> Flow {
        match completion.finish(ctx, limit)? {
            Outcome::Completed => Ok(()),
            Outcome::Failed(error) => Err(violation!("{}: failed: {error}", what()).into()),
            Outcome::Pending(limit) => Err(violation!(
                "{}: still pending {limit:?} after every member had submitted (a hang)",
                what(),
            )
            .into()),
        }
    }

    /// Raises `label` for this rank, hears every other rank's, then waits
    /// for `completions` in `order`, all within `limit`; the first that fails
    /// or hangs is named by `what(index)`, and the rest are disposed of.
    pub(crate) fn settle_all<H: Harness>(
        ctx: &RankCtx<'_, H>,
        label: &str,
        completions: Vec<Owned<H>>,
        order: &[usize],
        limit: Duration,
        what: impl Fn(usize) -> String,
    ) -> Flow {
        ctx.signal(&said(label, ctx.rank()));
        hear_everyone(ctx, label)?;
        let deadline = Instant::now() + limit;
        let mut completions: Vec<Option<Owned<H>>> = completions.into_iter().map(Some).collect();
        for &index in order {
            let Some(completion) = completions.get_mut(index).and_then(Option::take) else {
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            match completion.finish(ctx, left.max(Duration::from_millis(1)))? {
                Outcome::Completed => {}
                Outcome::Failed(error) => {
                    return Err(violation!("{}: failed: {error}", what(index)).into())
                }
                Outcome::Pending(_) => {
                    return Err(violation!(
                        "{}: still pending {limit:?} after every member had submitted the \
                         wave (a hang)",
                        what(index)
                    )
                    .into())
                }
            }
        }
        Ok(())
    }

    /// Bad input: the submission must fail, at submission or from its
    /// completion; completing, or neither within [`slack::RELEASE`], is a
    /// violation.
    pub(crate) fn expect_error<H: Harness, E: std::fmt::Display>(
        ctx: &RankCtx<'_, H>,
        what: &dyn Fn() -> String,
        submitted: Result<Submission<Tensor<H>, CommCompletion<H>>, E>,
    ) -> Flow {
        let Ok(submission) = submitted else {
            return Ok(());
        };
        match Owned::new(submission.completion).finish(ctx, slack::RELEASE)? {
            Outcome::Failed(_) => Ok(()),
            Outcome::Completed => Err(violation!(
                "{}: completed successfully; expected an error (at submission or from the completion)",
                what()
            )
            .into()),
            Outcome::Pending(limit) => Err(violation!(
                "{}: neither failed nor completed within {limit:?}: a hang instead of an error",
                what(),
            )
            .into()),
        }
    }

    /// Checks an output's shape and (bit for bit) values.
    pub(crate) fn check_output<H: Harness>(
        ctx: &RankCtx<'_, H>,
        what: impl Fn() -> String,
        output: &Tensor<H>,
        shape: &[usize],
        expected: &[f32],
    ) -> Flow {
        let got_shape = eredu_nn::Tensor::shape(output);
        let same_shape = got_shape.len() == shape.len()
            && got_shape
                .iter()
                .zip(shape)
                .all(|(got, want)| usize::try_from(*got).ok() == Some(*want));
        if !same_shape {
            return Err(
                violation!("{}: output shape {got_shape:?}, expected {shape:?}", what()).into(),
            );
        }
        let got = ctx.read(output)?;
        let mismatch = got
            .iter()
            .zip(expected)
            .position(|(got, want)| got.to_bits() != want.to_bits());
        check_values(&got, expected, mismatch)
            .map_err(|detail| violation!("{}: {detail}", what()).into())
    }

    fn check_values(got: &[f32], expected: &[f32], mismatch: Option<usize>) -> Result<(), String> {
        if got.len() != expected.len() {
            return Err(format!(
                "output holds {} values, expected {} ({got:?} instead of {expected:?})",
                got.len(),
                expected.len()
            ));
        }
        match mismatch {
            None => Ok(()),
            Some(at) => Err(format!(
                "output element {at} is {}, expected {} (output {got:?}, expected {expected:?})",
                got[at], expected[at]
            )),
        }
    }
}
