//! How the ranks of a family suite take turns: the member that joins last,
//! host-side rendezvous, a clean stop for every rank once one of them found
//! a failure, and bounded waits that name what hung. Shared by the SUM, GAT,
//! A2A, BAR, AGR and P2P suites.

use std::fmt::Display;
use std::time::{Duration, Instant};

use eredu_core::{
    BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion,
    CompletionCancellationMode, Submission,
};

use super::common::supported;
use super::scenario::Arrival;
use crate::check::{slack, Check, Finding};
use crate::harness::{CommCompletion, Harness, Tensor};
use crate::world::RankCtx;

/// Raised by a rank that found a failure: the others stop waiting.
const ABORT: &str = "collective-suites/abort";

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

/// Waits (up to [`slack::RELEASE`] for each) until every member but
/// `except` raised `signal(member)`; the first member that stayed silent.
pub(crate) fn await_members<H: Harness>(
    ctx: &RankCtx<'_, H>,
    except: usize,
    signal: impl Fn(usize) -> String,
) -> Result<(), usize> {
    for peer in (0..ctx.size()).filter(|&peer| peer != except) {
        if !ctx.await_signal(&signal(peer), slack::RELEASE) {
            return Err(peer);
        }
    }
    Ok(())
}

/// What a rank says of a peer that stayed silent for [`slack::RELEASE`] of
/// wall time where `what` should have happened: inconclusive. A peer that
/// found a violation, or whose call blocked or hung, fails the case by its
/// own finding (the block guard, the case watchdog), which outranks this;
/// a peer that was only slow (a loaded machine) proves nothing, so a wall
/// clock never fails the case.
pub(crate) fn silent_peer(peer: usize, what: &str) -> Finding {
    Finding::Inconclusive(format!(
        "rank {peer} did not {what} within {:?} of wall time (a finding of its own says why; without one, it \
         was slow, which proves nothing)",
        slack::RELEASE
    ))
}

/// A host-side barrier of the rank threads (no backend work involved).
pub(crate) fn rendezvous<H: Harness>(ctx: &RankCtx<'_, H>, tag: &str) -> Check {
    ctx.signal(&format!("{tag}-{}", ctx.rank()));
    await_members(ctx, ctx.rank(), |peer| format!("{tag}-{peer}"))
        .map_err(|peer| silent_peer(peer, &format!("reach `{tag}`")))
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

/// Submits on this rank as `arrival` says: after the late member's peers
/// ([`in_turn`]), or right after the member before it in the order.
pub(crate) fn arrive<H: Harness, T>(
    ctx: &RankCtx<'_, H>,
    label: &str,
    arrival: &Arrival,
    submit: impl FnOnce() -> T,
) -> Result<T, Stop> {
    let order = match arrival {
        Arrival::Late(late) => return in_turn(ctx, label, *late, submit),
        Arrival::Order(order) => order,
    };
    let position = order.iter().position(|&m| m == ctx.rank());
    if let Some(previous) = position.and_then(|p| p.checked_sub(1)).map(|p| order[p]) {
        let name = said(label, previous);
        if ctx.await_any_signal(&[&name, ABORT], slack::RELEASE) == Some(1) {
            return Err(Stop::Abandoned);
        }
    }
    let submitted = submit();
    ctx.signal(&said(label, ctx.rank()));
    Ok(submitted)
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
enum Outcome {
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
    fn finish(mut self, ctx: &RankCtx<'_, H>, limit: Duration) -> Result<Outcome, Stop> {
        let Some(completion) = self.0.take() else {
            return Ok(Outcome::Failed(
                "the completion was already consumed".into(),
            ));
        };
        let mut clock = crate::world::Stopwatch::start();
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
                Ok(false) if clock.elapsed() >= limit => {
                    dispose::<H>(completion);
                    return Ok(Outcome::Pending(limit));
                }
                Ok(false) => crate::world::pause(Duration::from_millis(1)),
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

fn confirm<H: Harness>(completion: CommCompletion<H>) -> Outcome {
    let mode = [
        CompletionCancellationMode::QuarantineUntilComplete,
        CompletionCancellationMode::NativeCancel,
    ]
    .into_iter()
    .find(|mode| supported::<H>(*mode));
    let Some(policy) = mode.and_then(|mode| BoundedCompletionWait::new(slack::RELEASE, mode).ok())
    else {
        return Outcome::Completed;
    };
    match crate::world::inside("wait_bounded()", || completion.wait_bounded(policy)) {
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
fn dispose<H: Harness>(completion: CommCompletion<H>) {
    let mode = [
        CompletionCancellationMode::NativeCancel,
        CompletionCancellationMode::QuarantineUntilComplete,
    ]
    .into_iter()
    .find(|mode| supported::<H>(*mode));
    if let Some(policy) =
        mode.and_then(|mode| BoundedCompletionWait::new(slack::DEADLINE, mode).ok())
    {
        let _ = crate::world::inside("wait_bounded()", || completion.wait_bounded(policy));
    }
}

/// A submission that must succeed: its output, once its completion
/// completed within [`slack::RELEASE`]. `what` names the operation, the
/// rank and the late member; a refused submission, a failure or a hang is a
/// violation.
pub(crate) fn output_of<H: Harness, E: Display>(
    ctx: &RankCtx<'_, H>,
    what: &dyn Fn() -> String,
    submitted: Result<Submission<Tensor<H>, CommCompletion<H>>, E>,
) -> Result<Tensor<H>, Stop> {
    let submission =
        submitted.map_err(|e| Finding::Violation(format!("{}: submission failed: {e}", what())))?;
    match Owned::new(submission.completion).finish(ctx, slack::RELEASE)? {
        Outcome::Completed => Ok(submission.output),
        Outcome::Failed(error) => Err(Finding::Violation(format!("{}: failed: {error}", what())).into()),
        Outcome::Pending(limit) => Err(Finding::Violation(format!(
            "{}: still pending {limit:?} (counting only time the backend could run) after every member had submitted (a hang)",
            what(),
        ))
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
                return Err(Finding::Violation(format!("{}: failed: {error}", what(index))).into())
            }
            Outcome::Pending(_) => {
                return Err(Finding::Violation(format!(
                    "{}: still pending {limit:?} after every member had submitted the \
                     wave (a hang)",
                    what(index)
                ))
                .into())
            }
        }
    }
    Ok(())
}

/// Bad input: the submission must fail, at submission or from its
/// completion; completing, or neither within [`slack::RELEASE`], is a
/// violation.
pub(crate) fn expect_error<H: Harness, E: Display>(
    ctx: &RankCtx<'_, H>,
    what: &dyn Fn() -> String,
    submitted: Result<Submission<Tensor<H>, CommCompletion<H>>, E>,
) -> Flow {
    let Ok(submission) = submitted else {
        return Ok(());
    };
    match Owned::new(submission.completion).finish(ctx, slack::RELEASE)? {
        Outcome::Failed(_) => Ok(()),
        Outcome::Completed => Err(Finding::Violation(format!(
            "{}: completed successfully; expected an error (at submission or from the completion)",
            what()
        ))
        .into()),
        Outcome::Pending(limit) => Err(Finding::Violation(format!(
            "{}: neither failed nor completed within {limit:?}: a hang instead of an error",
            what(),
        ))
        .into()),
    }
}
