//! One row of the completion matrix ([`Driver`]): a standard submission of
//! one subject and the way its work is kept pending ([`PendingVia`]): the
//! hold instrument, the backend's own lazy work, or late peers, whose rounds
//! the subject rank releases ([`Pending`]).

use super::handle::{wait_within, Handle};
use super::submitted::{probes, values, LazyWindow, Load, Submitted};
use crate::check::{slack, Check, Finding};
use crate::harness::{Backend, Harness, HoldGuard};
use crate::operation::Operation;
use crate::subject::Subject;
use crate::world::RankCtx;
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};
use std::time::{Duration, Instant};

/// How a driver's work is kept pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PendingVia {
    /// The hold instrument on the subject's executor.
    Hold,
    /// The submission evaluates lazy tensor work of the backend's own
    /// (black-box; pending for a known while only, see [`crate::matrix::lazy`]).
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
        if self.submitted.alone && !self.released {
            return Err(crate::check::Finding::NothingToCheck(format!(
                "the subject's part (a send, a broadcast's root) ended before its late peer joined (an eager \
                 protocol at this size), before {what}: no work was left pending to check on its side"
            )));
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

impl<H: Harness> Drop for Pending<'_, '_, H> {
    fn drop(&mut self) {
        self.release();
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
            let heavy = crate::matrix::lazy::heavy(ctx, executor)?;
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
        alone: false,
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
        alone: false,
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

pub(super) fn operation_driver<H: Harness>(operation: Operation, submit: Submit<H>) -> Driver<H> {
    Driver {
        subject: Subject::Operation(operation),
        ranks: 2,
        pending: PendingVia::LatePeer,
        submit,
    }
}
