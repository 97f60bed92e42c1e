//! The completion matrix: every kind of completion a backend returns, each
//! with a standard submission and a way to keep it pending.
//!
//! Local work (local dependencies, plain submissions) is kept pending with the
//! hold instrument when the harness provides it, and otherwise by submitting
//! the backend's own lazy tensor work ([`crate::lazy`]), which needs no
//! instrument but is pending only for a known while. Communication work is
//! kept pending by a *late peer*: every rank but the subject (rank 0) submits
//! only when the subject releases it, which needs no instrument at all.

use std::time::{Duration, Instant};

use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion};
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, CommunicationBackend, EvenGatherBackend,
    FailureAgreementBackend, PointToPointBackend, SubmissionBackend, SumReductionBackend,
    UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::{
    BoundaryRoleContract, CommunicationPeerCounts, CommunicationRouteId, RoleExactBoundaryContract,
};

use crate::check::{slack, Check, Finding};
use crate::harness::{
    Backend, CommCompletion, CompletionRef, Harness, HoldGuard, PlainCompletion, Probe,
};
use crate::operation::Operation;
use crate::world::{guarded, polled, RankCtx};

/// What a case is about: the kind of completion or submission API.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// `CommunicationBackend::submit_local_dependencies`.
    LocalDependencies,
    /// `SubmissionBackend::submit`.
    Submit,
    /// `SubmissionBackend::fork_executors`.
    ForkExecutors,
    /// `SubmissionBackend::order_after`.
    OrderAfter,
    /// A claimed operation.
    Operation(Operation),
}

impl Subject {
    /// The name used after `::` in case names.
    pub fn name(self) -> &'static str {
        match self {
            Self::LocalDependencies => "local_dependencies",
            Self::Submit => "submit",
            Self::ForkExecutors => "fork_executors",
            Self::OrderAfter => "order_after",
            Self::Operation(operation) => operation.name(),
        }
    }

    /// The operation, when the subject is one.
    pub fn operation(self) -> Option<Operation> {
        match self {
            Self::Operation(operation) => Some(operation),
            _ => None,
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a driver's work is kept pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PendingVia {
    /// The hold instrument on the subject's executor.
    Hold,
    /// The submission evaluates lazy tensor work of the backend's own
    /// (black-box; pending for a known while only, see [`crate::lazy`]).
    Lazy,
    /// Every rank but the subject submits late.
    LatePeer,
    /// Local work (a local subject) on the output of a sum reduction whose
    /// late peer has not joined: black-box, and pending for as long as the
    /// kit keeps the peer out, with no guess of how long any work takes.
    /// Used for local subjects of a harness without the hold that claims
    /// `all_reduce_sum` and builds worlds of two ranks.
    PeerFed,
}

impl PendingVia {
    /// The instruments this way of keeping work pending needs.
    pub(crate) fn needs(self) -> crate::Instruments {
        match self {
            Self::Hold => crate::Instruments {
                hold: true,
                ..crate::Instruments::NONE
            },
            Self::Lazy | Self::LatePeer | Self::PeerFed => crate::Instruments::NONE,
        }
    }

    /// Whether late peers keep the work pending (the subject is an
    /// operation, or local work fed by one).
    pub(crate) fn late_peers(self) -> bool {
        matches!(self, Self::LatePeer | Self::PeerFed)
    }
}

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

/// Either kind of completion, behind one interface.
pub(crate) enum Handle<H: Harness> {
    Plain(PlainCompletion<H>),
    Communication(CommCompletion<H>),
}

impl<H: Harness> Handle<H> {
    /// `is_complete()`, which must not block (EXC-1; see [`guarded`]).
    pub(crate) fn is_complete(&self) -> Result<bool, String> {
        let seen = polled("is_complete()", "EXC-1", slack::BLOCKED, || match self {
            Self::Plain(c) => c.is_complete().map_err(|e| e.to_string()),
            Self::Communication(c) => c.is_complete().map_err(|e| e.to_string()),
        });
        if seen != Ok(false) {
            crate::world::progressed();
        }
        if matches!(seen, Ok(true)) {
            crate::world::note_completion_report::<H>(self.as_ref());
        }
        seen
    }

    /// `wait()` on work that may still be running: bounded only by the
    /// case watchdog. Use [`Handle::wait_on_complete`] where the work is known
    /// to have completed.
    pub(crate) fn wait(&self) -> Result<(), String> {
        crate::world::inside("wait()", || match self {
            Self::Plain(c) => c.wait().map_err(|e| e.to_string()),
            Self::Communication(c) => c.wait().map_err(|e| e.to_string()),
        })
    }

    /// `wait()` on work already reported complete (or terminal): it has
    /// nothing left to wait for, so it must return at once (EXC-4).
    pub(crate) fn wait_on_complete(&self) -> Result<(), String> {
        guarded(
            "wait() on work already reported complete",
            "EXC-4",
            slack::BLOCKED,
            || self.wait(),
        )
    }

    /// `resources_releasable()`, which must not block (EXC-8).
    pub(crate) fn resources_releasable(&self) -> bool {
        let releasable = polled(
            "resources_releasable()",
            "EXC-8",
            slack::BLOCKED,
            || match self {
                Self::Plain(c) => c.resources_releasable(),
                Self::Communication(c) => c.resources_releasable(),
            },
        );
        if releasable {
            crate::world::progressed();
        }
        releasable
    }

    /// `None` for plain completions, which have no bounded wait. Any outcome
    /// but `Ok(Completed)` may leave live work behind: `ctx` notes it (its
    /// `fenced`, see [`failed`]).
    pub(crate) fn wait_bounded(
        self,
        ctx: &RankCtx<'_, H>,
        policy: BoundedCompletionWait,
    ) -> Option<Result<BoundedCompletionOutcome, String>> {
        match self {
            Self::Plain(_) => None,
            Self::Communication(c) => {
                let outcome = crate::world::inside("wait_bounded()", || {
                    c.wait_bounded(policy).map_err(|e| e.to_string())
                });
                if !matches!(outcome, Ok(BoundedCompletionOutcome::Completed)) {
                    ctx.fenced.set(true);
                }
                Some(outcome)
            }
        }
    }

    pub(crate) fn as_ref(&self) -> CompletionRef<'_, H> {
        match self {
            Self::Plain(c) => CompletionRef::Plain(c),
            Self::Communication(c) => CompletionRef::Communication(c),
        }
    }

    /// Whether this completion supports `wait_bounded`.
    pub(crate) fn is_bounded(&self) -> bool {
        matches!(self, Self::Communication(_))
    }
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
}

/// Lazy work's known while: until when it is certainly pending, and about
/// how long it takes.
pub(crate) type LazyWindow = (Instant, Duration);

/// How long released work may take to complete: the release slack, and four
/// times the lazy work's calibrated duration when it evaluates any.
pub(crate) fn completes_within(lazy: Option<LazyWindow>) -> Duration {
    slack::RELEASE + lazy.map_or(Duration::ZERO, |(_, takes)| takes * 4)
}

/// Makes one standard submission on the calling rank, on the given executor.
pub(crate) type Submit<H> =
    fn(&RankCtx<'_, H>, &crate::harness::Executor<H>, Load) -> Result<Submitted<H>, Finding>;

/// One row of the completion matrix.
pub(crate) struct Driver<H: Harness> {
    pub(crate) subject: Subject,
    pub(crate) ranks: usize,
    pub(crate) pending: PendingVia,
    pub(crate) submit: Submit<H>,
}

impl<H: Harness> Clone for Driver<H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: Harness> Copy for Driver<H> {}

/// Work kept pending on the subject rank until [`Pending::release`].
pub(crate) struct Pending<'c, 'w, H: Harness> {
    pub(crate) submitted: Submitted<H>,
    ctx: &'c RankCtx<'w, H>,
    hold: Option<HoldGuard>,
    /// The late-peer round this submission belongs to.
    round: usize,
    released: bool,
}

/// The signal that lets late peers join round `round`.
fn join(round: usize) -> String {
    format!("late-peers-join-{round}")
}

/// The signal by which the subject says it submitted its part of round
/// `round`: an early peer (see [`late_peer_rounds`]) joins then.
fn submitted(round: usize) -> String {
    format!("subject-submitted-{round}")
}

/// Subjects whose matrix cases can also run with the exchange part done
/// ([`crate::case::Body::MatrixPartDone`]): the collectives (a transfer has
/// no third member to join early).
pub(crate) fn part_done_applies(subject: Subject) -> bool {
    subject
        .operation()
        .is_some_and(|operation| operation != Operation::SendReceive)
}

/// Whether this rank joins the subject's rounds early: rank 1 of a world of
/// three or more ranks, running a driver's rounds (see
/// [`crate::case::Body::MatrixPartDone`]).
fn joins_early<H: Harness>(ctx: &RankCtx<'_, H>) -> bool {
    ctx.rank() == 1 && ctx.size() >= 3
}

/// The signals that start round `round` for this peer: the subject's
/// release (or, for an early peer, its submission), a fed blocker's
/// release, and the subject's end.
fn round_signals(round: usize, early: bool) -> [String; 3] {
    let driver = if early { submitted(round) } else { join(round) };
    [driver, feed_join(round), DONE.to_owned()]
}

/// The signal that lets late peers join round `round` as a fed blocker's
/// (see `suites::Blocker`): a sum reduction, whatever the subject.
pub(crate) fn feed_join(round: usize) -> String {
    format!("late-peers-feed-{round}")
}

/// Starts the subject rank's next late-peer round (a driver's, or a fed
/// blocker's): its number, for [`join`] or [`feed_join`].
pub(crate) fn next_round<H: Harness>(ctx: &RankCtx<'_, H>) -> usize {
    let round = ctx.rounds.get();
    ctx.rounds.set(round + 1);
    round
}

/// The late peers' side: join each round when the subject releases it (a
/// round of `driver`'s work, or a fed blocker's sum reduction), until the
/// subject is done. This rank's outcomes are not under test (the subject may
/// have cancelled), only the subject's.
pub(crate) fn late_peer_rounds<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Option<Driver<H>>,
) -> Check {
    let early = driver.is_some() && joins_early(ctx);
    for round in 0.. {
        let starts = round_signals(round, early);
        let starts: Vec<&str> = starts.iter().map(String::as_str).collect();
        let completion = match ctx.await_any_signal(&starts, slack::RELEASE * 4) {
            Some(0) => match driver {
                Some(driver) => (driver.submit)(ctx, ctx.executor(), driver.light())?.completion,
                None => {
                    return Err(Finding::Harness(format!(
                        "late peer {}: round {round} of a script without a driver",
                        ctx.rank()
                    )))
                }
            },
            Some(1) => {
                let feed = ctx.harness().claims().feed().ok_or_else(|| {
                    Finding::Harness("a fed round without a claimed sum reduction".into())
                })?;
                feed(ctx, ctx.executor())?.0
            }
            // Done, or the subject never released: its own script reports why.
            _ => break,
        };
        // Keep this rank's part until it completes, or until the subject
        // moves on (a next round, or done): a round that never completes
        // must not hold up the next one.
        let next = round_signals(round + 1, early);
        let next: Vec<&str> = next.iter().map(String::as_str).collect();
        let start = Instant::now();
        while !matches!(completion.is_complete(), Ok(true) | Err(_))
            && start.elapsed() < slack::RELEASE
            && ctx
                .await_any_signal(&next, Duration::from_millis(1))
                .is_none()
        {}
        ctx.signal(&settled(round, ctx.rank()));
    }
    Ok(())
}

/// Runs `subject` on rank 0 and the late-peer role on every other rank
/// (joining `driver`'s rounds, when there is one, and fed blockers'), and
/// tells the late peers when the subject is done.
pub(crate) fn with_late_peers<H: Harness>(
    driver: Option<Driver<H>>,
    subject: impl Fn(&RankCtx<'_, H>) -> Check + Send + Sync + 'static,
) -> crate::world::Script<H> {
    std::sync::Arc::new(move |ctx: &RankCtx<'_, H>| {
        if ctx.rank() == 0 {
            let outcome = subject(ctx);
            ctx.signal(DONE);
            outcome
        } else {
            late_peer_rounds(ctx, driver)
        }
    })
}

/// The signal that tells late peers the subject has finished.
const DONE: &str = "subject-done";

/// The signal by which late peer `rank` tells the subject that its part of
/// round `round` is over (completed, failed, or given up after
/// [`slack::RELEASE`]).
fn settled(round: usize, rank: usize) -> String {
    format!("late-peer-{rank}-settled-{round}")
}

impl<H: Harness> Pending<'_, '_, H> {
    /// Lets the work complete: releases the hold or lets the late peers join.
    pub(crate) fn release(&mut self) {
        if !self.released {
            self.released = true;
            drop(self.hold.take());
            self.ctx.signal(&join(self.round));
        }
    }

    /// Releases, then waits (bounded) for the work to complete.
    pub(crate) fn release_and_wait(&mut self) -> Result<(), String> {
        self.release();
        wait_within(
            &self.submitted.completion,
            self.submitted.completes_within(),
        )
    }

    /// After [`Pending::release`]: waits (bounded by `limit`) until every
    /// late peer's part of the round is over (every rank but the subject
    /// plays one, see [`late_peer_rounds`]), so that a collective has run on
    /// every member; `false` when one's is not. Immediate in a world of one
    /// rank, or before the release.
    pub(crate) fn await_late_peers(&self, limit: Duration) -> bool {
        if !self.released {
            return true;
        }
        let start = Instant::now();
        (1..self.ctx.size()).all(|peer| {
            let left = limit.saturating_sub(start.elapsed());
            self.ctx.await_signal(&settled(self.round, peer), left)
        })
    }

    /// Whether the work is certainly still pending now: not released (hold,
    /// late peer), and for lazy work, its known pending while not over.
    pub(crate) fn surely_pending(&self) -> bool {
        !self.released && self.submitted.surely_pending()
    }

    /// `Ok` while the work is certainly still pending; otherwise the attempt is
    /// inconclusive (lazy work may have finished before `what`, and the
    /// runner retries it with more work; or the observer saw the work end
    /// although the kit kept it pending, which the operation's own invariant
    /// answers for).
    pub(crate) fn confirm(&self, what: &str) -> Check {
        if self.surely_pending() {
            return Ok(());
        }
        let ended = self
            .submitted
            .watch
            .as_ref()
            .map(|observer| observer.state())
            .filter(|state| {
                matches!(
                    state,
                    crate::harness::WorkState::Completed | crate::harness::WorkState::Failed
                )
            });
        Err(crate::check::setup(match ended {
            Some(state) => format!(
                "the work ended ({state:?}, says the observer) before {what}, although the kit kept it pending: \
                 nothing to check here (the operation's own invariant answers for that)"
            ),
            None => format!(
                "the lazy work that kept the subject pending may have finished before {what}"
            ),
        }))
    }
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
    }

    /// How long released work may take to complete.
    pub(crate) fn completes_within(&self) -> Duration {
        completes_within(self.lazy)
    }
}

impl<H: Harness> Drop for Pending<'_, '_, H> {
    fn drop(&mut self) {
        self.release();
    }
}

/// Waits for `completion` polling `is_complete`, so a backend that never
/// completes yields an error instead of a hang.
pub(crate) fn wait_within<H: Harness>(
    completion: &Handle<H>,
    limit: Duration,
) -> Result<(), String> {
    let mut clock = crate::world::Stopwatch::start();
    loop {
        match completion.is_complete() {
            Ok(true) => return Ok(()),
            Ok(false) if clock.elapsed() >= limit => {
                return Err(format!(
                    "still pending after {limit:?} (counting only time the backend could run)"
                ))
            }
            Ok(false) => crate::world::pause(Duration::from_millis(1)),
            Err(error) => return Err(error),
        }
    }
}

impl<H: Harness> Driver<H> {
    /// The subject's side: submits on the rank's executor, work kept pending.
    pub(crate) fn pending<'c, 'w>(
        &self,
        ctx: &'c RankCtx<'w, H>,
    ) -> Result<Pending<'c, 'w, H>, Finding> {
        self.pending_on(ctx, ctx.executor())
    }

    /// The subject's side on a given executor.
    pub(crate) fn pending_on<'c, 'w>(
        &self,
        ctx: &'c RankCtx<'w, H>,
        executor: &crate::harness::Executor<H>,
    ) -> Result<Pending<'c, 'w, H>, Finding> {
        let load = match self.pending {
            PendingVia::Lazy => Load::Heavy,
            _ => self.light(),
        };
        self.submit_pending(ctx, executor, load)
    }

    /// The load of a submission that need not stay pending on its own: light
    /// values, or (peer-fed local work) the reduction the late peers join.
    fn light(&self) -> Load {
        match self.pending {
            PendingVia::PeerFed => Load::Fed,
            PendingVia::Hold | PendingVia::Lazy | PendingVia::LatePeer => Load::Light,
        }
    }

    /// The subject's side for a check that releases the work at once and
    /// needs it pending only until then: lazy work is not needed (a light
    /// submission), hold and late peers are as in [`Driver::pending`].
    pub(crate) fn about_to_release<'c, 'w>(
        &self,
        ctx: &'c RankCtx<'w, H>,
    ) -> Result<Pending<'c, 'w, H>, Finding> {
        self.submit_pending(ctx, ctx.executor(), self.light())
    }

    /// [`Driver::about_to_release`] on a given executor.
    pub(crate) fn about_to_release_on<'c, 'w>(
        &self,
        ctx: &'c RankCtx<'w, H>,
        executor: &crate::harness::Executor<H>,
    ) -> Result<Pending<'c, 'w, H>, Finding> {
        self.submit_pending(ctx, executor, self.light())
    }

    fn submit_pending<'c, 'w>(
        &self,
        ctx: &'c RankCtx<'w, H>,
        executor: &crate::harness::Executor<H>,
        load: Load,
    ) -> Result<Pending<'c, 'w, H>, Finding> {
        let submit = self.submit;
        self.pending_with(ctx, executor, |ctx, executor| submit(ctx, executor, load))
    }

    /// The subject's side on `executor`, kept pending as this row's work is,
    /// but submitted by `submit` (a parameterised submission of the same
    /// operation).
    pub(crate) fn pending_with<'c, 'w>(
        &self,
        ctx: &'c RankCtx<'w, H>,
        executor: &crate::harness::Executor<H>,
        submit: impl FnOnce(
            &RankCtx<'_, H>,
            &crate::harness::Executor<H>,
        ) -> Result<Submitted<H>, Finding>,
    ) -> Result<Pending<'c, 'w, H>, Finding> {
        let hold = match self.pending {
            PendingVia::Hold => Some(ctx.hold(executor)?),
            PendingVia::Lazy | PendingVia::LatePeer | PendingVia::PeerFed => None,
        };
        let round = next_round(ctx);
        let submitted = submit(ctx, executor);
        // An early peer joins now. When the submission failed it joins too
        // (its part then waits alone), so that the round is never left
        // unstarted: the failed check ends the case, and `DONE` lets it go.
        ctx.signal(&self::submitted(round));
        let mut submitted = submitted?;
        submitted.watch = ctx.optional_observer(submitted.completion.as_ref());
        Ok(Pending {
            submitted,
            ctx,
            hold,
            round,
            released: false,
        })
    }

    /// Submits on the rank's executor without keeping anything pending
    /// (operation subjects: every rank submits).
    pub(crate) fn submit(&self, ctx: &RankCtx<'_, H>) -> Result<Submitted<H>, Finding> {
        (self.submit)(ctx, ctx.executor(), self.light())
    }

    /// Runs `subject` on rank 0 and the late-peer role on every other rank.
    pub(crate) fn script(
        self,
        subject: impl Fn(&RankCtx<'_, H>, Driver<H>) -> Check + Send + Sync + 'static,
    ) -> crate::world::Script<H> {
        with_late_peers(Some(self), move |ctx| subject(ctx, self))
    }
}

// ---------------------------------------------------------------------------
// Standard submissions. Inputs come from (rank, index) so results are exact.

pub(crate) fn values(rank: usize, len: usize) -> Vec<f32> {
    (0..len).map(|i| (rank * 16 + i + 1) as f32).collect()
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
/// for that invariant and the verification passes.
pub(crate) fn verify_tensors<H: Harness>(
    operation: Operation,
    outputs: Vec<crate::harness::Tensor<H>>,
    expected: Vec<Vec<f32>>,
) -> Verify<H> {
    Box::new(move |ctx: &RankCtx<'_, H>| {
        for (index, (output, expected)) in outputs.iter().zip(&expected).enumerate() {
            let got = ctx.read(output).map_err(|finding| {
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
                        "{operation} on rank {}: output {index} is {got:?}, expected {expected:?}",
                        ctx.rank()
                    ),
                );
            }
        }
        Ok(())
    })
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

/// The input of a local submission: small materialised values, lazy work
/// (with until when it is certainly pending, and how long it takes), or the
/// output of a sum reduction (with its completion, kept until the local
/// work is done with).
#[allow(clippy::type_complexity)]
fn local_input<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &crate::harness::Executor<H>,
    load: Load,
) -> Result<
    (
        crate::harness::Tensor<H>,
        Option<LazyWindow>,
        Option<Handle<H>>,
    ),
    Finding,
> {
    match load {
        Load::Light => Ok((ctx.tensor(&values(ctx.rank(), 4), &[4])?, None, None)),
        Load::Heavy => {
            let heavy = crate::lazy::heavy(ctx, executor)?;
            Ok((heavy.tensor, Some((heavy.pending_until, heavy.takes)), None))
        }
        Load::Fed => {
            let feed = ctx.harness().claims().feed().ok_or_else(|| {
                Finding::Harness("a peer-fed local driver without a claimed sum reduction".into())
            })?;
            let (completion, output) = feed(ctx, executor)?;
            Ok((output, None, Some(completion)))
        }
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

fn local_dependencies<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &crate::harness::Executor<H>,
    load: Load,
) -> Result<Submitted<H>, Finding> {
    let (input, lazy, feeder) = local_input(ctx, executor, load)?;
    let input_probes = probes(ctx, &[&input])?;
    let submission = Backend::<H>::submit_local_dependencies([&input], executor)
        .map_err(|e| crate::check::setup(format!("submit_local_dependencies failed: {e}")))?;
    Ok(Submitted {
        completion: Handle::Communication(submission.completion),
        input_probes,
        output_probes: Vec::new(),
        verify: None,
        lazy,
        watch: None,
        feeder,
    })
}

fn plain_submit<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &crate::harness::Executor<H>,
    load: Load,
) -> Result<Submitted<H>, Finding> {
    let (input, lazy, feeder) = local_input(ctx, executor, load)?;
    let input_probes = probes(ctx, &[&input])?;
    let completion = Backend::<H>::submit(executor, [&input])
        .map_err(|e| crate::check::setup(format!("submit failed: {e}")))?;
    Ok(Submitted {
        completion: Handle::Plain(completion),
        input_probes,
        output_probes: Vec::new(),
        verify: None,
        lazy,
        watch: None,
        feeder,
    })
}

/// How local work is kept pending for a harness: its hold; else the output
/// of a sum reduction whose late peer the kit keeps out, when the backend
/// claims `all_reduce_sum` and worlds of two ranks are built (`peer_fed`);
/// else lazy work, the one way that rests on how long work takes.
pub(crate) fn local_pending(instruments: crate::Instruments, peer_fed: bool) -> PendingVia {
    if instruments.hold {
        PendingVia::Hold
    } else if peer_fed {
        PendingVia::PeerFed
    } else {
        PendingVia::Lazy
    }
}

/// Ranks of a local driver: two when a late peer feeds the work.
pub(crate) fn local_ranks(pending: PendingVia) -> usize {
    if pending == PendingVia::PeerFed {
        2
    } else {
        1
    }
}

/// The local-dependencies row.
pub(crate) fn local_dependencies_driver<H: Harness>(pending: PendingVia) -> Driver<H> {
    Driver {
        subject: Subject::LocalDependencies,
        ranks: local_ranks(pending),
        pending,
        submit: local_dependencies::<H>,
    }
}

/// The plain-submission row.
pub(crate) fn submit_driver<H: Harness>(pending: PendingVia) -> Driver<H> {
    Driver {
        subject: Subject::Submit,
        ranks: local_ranks(pending),
        pending,
        submit: plain_submit::<H>,
    }
}

fn operation_driver<H: Harness>(operation: Operation, submit: Submit<H>) -> Driver<H> {
    Driver {
        subject: Subject::Operation(operation),
        ranks: 2,
        pending: PendingVia::LatePeer,
        submit,
    }
}

/// A standard submission the backend refused: the kit's inputs are valid, so
/// this is the operation's value invariant's business (recorded there), and
/// the case could not set up its check. Not so after a bounded wait left
/// this rank's work unfinished earlier in the case ([`RankCtx`]'s `fenced`):
/// a backend may refuse work on a group whose earlier work is still
/// quarantined, and eredu neither requires nor forbids that, so the refusal
/// is recorded for no invariant.
fn failed<H: Harness>(
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
fn one_to_one<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    input: crate::harness::Tensor<H>,
    expected: Vec<f32>,
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
            vec![expected],
        )),
        lazy: None,
        watch: None,
        feeder: None,
    })
}

pub(crate) fn all_reduce_sum<H: Harness>() -> Driver<H>
where
    Backend<H>: SumReductionBackend,
{
    operation_driver(Operation::AllReduceSum, |ctx, executor, _| {
        let input = ctx.tensor(&values(ctx.rank(), 4), &[4])?;
        let expected = (0..4)
            .map(|i| (0..ctx.size()).map(|r| values(r, 4)[i]).sum())
            .collect();
        one_to_one(ctx, Operation::AllReduceSum, input, expected, |input| {
            Backend::<H>::all_reduce_sum(input, ctx.group(), executor)
        })
    })
}

pub(crate) fn all_gather_even<H: Harness>() -> Driver<H>
where
    Backend<H>: EvenGatherBackend,
{
    operation_driver(Operation::AllGatherEven, |ctx, executor, _| {
        let input = ctx.tensor(&values(ctx.rank(), 2), &[2])?;
        let expected = (0..ctx.size()).flat_map(|r| values(r, 2)).collect();
        one_to_one(ctx, Operation::AllGatherEven, input, expected, |input| {
            Backend::<H>::all_gather_even(input, 0, ctx.group(), executor)
        })
    })
}

pub(crate) fn all_gather_uneven<H: Harness>() -> Driver<H>
where
    Backend<H>: UnevenGatherBackend,
{
    operation_driver(Operation::AllGatherUneven, |ctx, executor, _| {
        let counts: Vec<usize> = (0..ctx.size()).map(|r| r + 1).collect();
        let own = counts[ctx.rank()];
        let input = ctx.tensor(&values(ctx.rank(), own), &[own])?;
        let expected = (0..ctx.size()).flat_map(|r| values(r, counts[r])).collect();
        one_to_one(ctx, Operation::AllGatherUneven, input, expected, |input| {
            Backend::<H>::all_gather_uneven(input, &counts, 0, ctx.group(), executor)
        })
    })
}

pub(crate) fn variable_all_to_all<H: Harness>() -> Driver<H>
where
    Backend<H>: VariableAllToAllBackend,
{
    operation_driver(Operation::VariableAllToAll, |ctx, executor, _| {
        let n = ctx.size();
        let me = ctx.rank();
        let input = ctx.tensor(&values(me, n), &[n])?;
        let counts = CommunicationPeerCounts::new(vec![1; n], vec![1; n], n)
            .map_err(|e| Finding::Harness(e.to_string()))?;
        let expected = (0..n).map(|peer| values(peer, n)[me]).collect();
        one_to_one(ctx, Operation::VariableAllToAll, input, expected, |input| {
            Backend::<H>::variable_all_to_all(input, &counts, 0, ctx.group(), executor)
        })
    })
}

pub(crate) fn broadcast<H: Harness>() -> Driver<H>
where
    Backend<H>: BroadcastBackend,
{
    operation_driver(Operation::Broadcast, |ctx, executor, _| {
        // The root is the last rank: the subject (rank 0) waits for a late root.
        let root = ctx.size() - 1;
        let input = if ctx.rank() == root {
            ctx.tensor(&values(root, 4), &[4])?
        } else {
            ctx.tensor(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0], &[4])?
        };
        one_to_one(ctx, Operation::Broadcast, input, values(root, 4), |input| {
            Backend::<H>::broadcast(input, root, ctx.group(), executor)
        })
    })
}

pub(crate) fn barrier<H: Harness>() -> Driver<H>
where
    Backend<H>: BarrierBackend,
{
    operation_driver(Operation::Barrier, |ctx, executor, _| {
        let completion = waits_for_peers(Operation::Barrier, || {
            Backend::<H>::barrier(ctx.group(), executor)
        })
        .map_err(|e| failed(ctx, Operation::Barrier, e))?;
        Ok(Submitted {
            completion: Handle::Communication(completion),
            input_probes: Vec::new(),
            output_probes: Vec::new(),
            verify: None,
            lazy: None,
            watch: None,
            feeder: None,
        })
    })
}

pub(crate) fn agree_success<H: Harness>() -> Driver<H>
where
    Backend<H>: FailureAgreementBackend,
{
    operation_driver(Operation::AgreeSuccess, |ctx, executor, _| {
        // agree_success must not block on its peers (AGR-2): a late peer
        // would otherwise wait for this rank until the case watchdog.
        let submission = guarded(
            "agree_success() while a peer had not submitted",
            "AGR-2",
            slack::BLOCKED,
            || Backend::<H>::agree_success(true, ctx.group(), executor),
        )
        .map_err(|e| failed(ctx, Operation::AgreeSuccess, e))?;
        Ok(verified_agreement(
            submission,
            true,
            "every member voted true".to_owned(),
        ))
    })
}

/// A submitted agreement whose output, once complete, must resolve to
/// `expected` (`votes` says what the members submitted); a wrong value is
/// attributed to AGR-1 by [`attribute_value`].
pub(crate) fn verified_agreement<H: Harness>(
    submission: eredu_core::Submission<
        <Backend<H> as FailureAgreementBackend>::FailureAgreementOutput,
        crate::harness::CommCompletion<H>,
    >,
    expected: bool,
    votes: String,
) -> Submitted<H>
where
    Backend<H>: FailureAgreementBackend,
{
    let output = submission.output;
    let verify: Verify<H> = Box::new(move |ctx: &RankCtx<'_, H>| {
        let wrong = match Backend::<H>::resolve_failure_agreement(output) {
            Ok(agreed) if agreed == expected => return Ok(()),
            Ok(agreed) => format!("{votes}, the agreement resolved to {agreed}"),
            Err(error) => format!("resolve_failure_agreement after completion failed: {error}"),
        };
        attribute_value(
            ctx,
            Operation::AgreeSuccess,
            format!("agree_success on rank {}: {wrong}", ctx.rank()),
        );
        Ok(())
    });
    Submitted {
        completion: Handle::Communication(submission.completion),
        input_probes: Vec::new(),
        output_probes: Vec::new(),
        verify: Some(verify),
        lazy: None,
        watch: None,
        feeder: None,
    }
}

/// Route id of the standard point-to-point route (late rank 1 → subject 0).
pub(crate) const ROUTE: u64 = 7;

/// Frames `tensors` for the standard route with eredu-runtime's public framing.
pub(crate) fn frame<T>(
    route: u64,
    schema: &str,
    shapes: &[Vec<usize>],
    tensors: Vec<T>,
) -> Result<Vec<eredu_runtime::RoleExactBoundaryValue<T>>, Finding> {
    let roles = shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            BoundaryRoleContract::new(
                format!("value-{i}"),
                eredu_core::checkpoint::TensorDtype::F32,
                shape.clone(),
            )
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Finding::Harness(format!("boundary role: {e}")))?;
    let contract = RoleExactBoundaryContract::new(schema, roles.clone())
        .map_err(|e| Finding::Harness(format!("boundary contract: {e}")))?;
    contract
        .frame_values(CommunicationRouteId::new(route), &roles, tensors)
        .map_err(|e| Finding::Harness(format!("framing: {e}")))
}

pub(crate) fn send_receive<H: Harness>() -> Driver<H>
where
    Backend<H>: PointToPointBackend,
{
    operation_driver(Operation::SendReceive, |ctx, executor, _| {
        // The late peer (last rank) sends; the subject (rank 0) receives.
        let source = ctx.size() - 1;
        let route = ctx.route(ROUTE, source, 0)?;
        let payload = if ctx.rank() == source {
            values(source, 4)
        } else {
            vec![0.0; 4]
        };
        let input = ctx.tensor(&payload, &[4])?;
        let input_probes = probes(ctx, &[&input])?;
        let framed = frame(ROUTE, "commcheck.matrix", &[vec![4]], vec![input])?;
        let submit =
            || Backend::<H>::send_receive(framed, std::borrow::Borrow::borrow(&route), executor);
        // The subject receives before its late sender submits. A backend
        // whose submission waits for the peer never returns here; no SPEC
        // invariant bounds a submission (eredu says nothing), so that ends
        // the case inconclusive after a second instead of a watchdog's
        // timeout blamed on the case's invariant.
        let submitted = if ctx.rank() == source {
            submit()
        } else {
            crate::world::guarded(
                "send_receive() submitted by the receiver before its sender (a submission that waits for its peer)",
                crate::world::SETUP,
                slack::BLOCKED,
                submit,
            )
        };
        let submission = submitted.map_err(|e| failed(ctx, Operation::SendReceive, e))?;
        let outputs: Vec<_> = submission.output.iter().collect();
        let output_probes = probes(ctx, &outputs)?;
        let verify = verify_tensors(
            Operation::SendReceive,
            submission.output,
            vec![values(source, 4)],
        );
        // The route endpoint must outlive nothing: the completion retains it (RET-3).
        drop(route);
        Ok(Submitted {
            completion: Handle::Communication(submission.completion),
            input_probes,
            output_probes,
            verify: Some(verify),
            lazy: None,
            watch: None,
            feeder: None,
        })
    })
}
