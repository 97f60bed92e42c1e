//! Pieces the EXC checks share: how the driver keeps work pending (for
//! messages), bounded waits on healthy work that must complete (a setup
//! step, never a verdict), a bounded-wait policy in a supported mode, and
//! [`Faulted`]: work with an injected fault held on its executor, so that
//! its error is published while it is live (EXC-6, EXC-7, EXC-8).

use eredu_core::{BoundedCompletionWait, CompletionCancellationMode};

use crate::check::{eventually, slack, Check, Finding};
use crate::harness::{Executor, Harness, HoldGuard, Observer};
use crate::matrix::{Driver, Handle, Pending, PendingVia, Subject};
use crate::suites::common::{poll, supported, Polled};
use crate::world::{guarded, RankCtx};

/// How many extra observations a stickiness or monotonicity check makes.
pub(super) const REPEAT: usize = 64;

/// How the driver keeps the subject's work pending, for messages.
pub(super) fn kept_pending(driver: Driver<impl Harness>) -> &'static str {
    match driver.pending {
        PendingVia::Hold => "its executor was held",
        PendingVia::Lazy => "it was evaluating lazy work known to take longer",
        PendingVia::LatePeer => "a peer had not joined yet",
        PendingVia::PeerFed => "the sum reduction it reads had a peer that had not joined yet",
    }
}

/// An observer when the harness provides one (optional extra evidence).
pub(super) fn optional_observer<H: Harness>(
    ctx: &RankCtx<'_, H>,
    completion: &Handle<H>,
) -> Option<Observer> {
    ctx.optional_observer(completion.as_ref())
}

/// Waits (bounded) until the observer reports terminal work, polling
/// `completion` meanwhile when there is one (a backend may launch work only
/// once it is observed). Work that never ends is an inconclusive setup step:
/// it is not what the calling check is about.
pub(super) fn finished<H: Harness>(
    observer: Option<&Observer>,
    completion: Option<&Handle<H>>,
    subject: Subject,
    after: &str,
) -> Check {
    // Without an observer, the backend's own answer: an error, or complete.
    let ended = eventually(slack::RELEASE, || {
        let answer = completion.map(|completion| completion.is_complete());
        match observer {
            Some(observer) => observer.state().is_terminal(),
            None => !matches!(answer, None | Some(Ok(false))),
        }
    });
    if ended {
        Ok(())
    } else {
        Err(crate::check::setup(format!(
            "{subject}: the work was still live {:?} after {after} ({})",
            slack::RELEASE,
            match observer {
                Some(observer) => format!("observer: {:?}", observer.state()),
                None => "is_complete() said Ok(false) throughout".to_owned(),
            }
        )))
    }
}

/// Calls `wait()` on healthy work that must complete (released, or already
/// reported complete), so it cannot hang on a correct backend; expects success.
pub(super) fn wait_succeeds<H: Harness>(
    completion: &Handle<H>,
    subject: Subject,
    when: &str,
) -> Check {
    let limit = slack::RELEASE;
    guarded(
        "wait() on released healthy work",
        crate::world::SETUP,
        limit,
        || completion.wait(),
    )
    .map_err(|error| {
        crate::check::setup(format!(
            "{subject}: wait() {when} on healthy work failed: {error}"
        ))
    })
}

/// [`wait_succeeds`] on work already reported complete: `wait()` has nothing
/// left to wait for and must return at once (a hang fails EXC-4 within
/// [`slack::BLOCKED`]).
pub(super) fn wait_on_complete_succeeds<H: Harness>(
    completion: &Handle<H>,
    subject: Subject,
    when: &str,
) -> Check {
    completion.wait_on_complete().map_err(|error| {
        crate::check::setup(format!(
            "{subject}: wait() {when} on healthy work failed: {error}"
        ))
    })
}

/// A short bounded-wait policy in a mode the completion type supports (used
/// on terminal work, where the mode does not matter, and for teardown).
pub(super) fn supported_policy<H: Harness>() -> Result<BoundedCompletionWait, Finding> {
    let mode = if supported::<H>(CompletionCancellationMode::NativeCancel) {
        CompletionCancellationMode::NativeCancel
    } else {
        CompletionCancellationMode::QuarantineUntilComplete
    };
    BoundedCompletionWait::new(slack::DEADLINE, mode).map_err(|e| Finding::Harness(e.to_string()))
}

/// The subject's work with an injected fault, held on its executor when the
/// harness offers the hold (so the fault's error is published while the work
/// is still live); operations are also kept pending by their late peer. The
/// observer is there when the harness offers one: checks that must know
/// whether the work is live ask for it ([`Faulted::observer`]).
pub(super) struct Faulted<'c, 'w, H: Harness> {
    pub(super) pending: Pending<'c, 'w, H>,
    pub(super) hold: Option<HoldGuard>,
    observer: Option<Observer>,
    /// Whether the harness declares the observer.
    declared: bool,
}

impl<'c, 'w, H: Harness> Faulted<'c, 'w, H> {
    /// Holds `executor` (where the harness can, or must: work kept pending
    /// by the hold), injects a fault into its next work item, and submits.
    pub(super) fn submit(
        ctx: &'c RankCtx<'w, H>,
        driver: Driver<H>,
        executor: &Executor<H>,
    ) -> Result<Self, Finding> {
        let hold = if ctx.harness().instruments().hold || driver.pending == PendingVia::Hold {
            Some(ctx.hold(executor)?)
        } else {
            None
        };
        ctx.inject_fault(executor)?;
        let pending = driver.pending_on(ctx, executor)?;
        let observer = ctx.optional_observer(pending.submitted.completion.as_ref());
        Ok(Self {
            pending,
            hold,
            observer,
            declared: ctx.harness().instruments().observer,
        })
    }

    /// The observer, for checks that must know whether the work is live.
    pub(super) fn observer(&self) -> Result<&Observer, Finding> {
        self.observer.as_ref().ok_or_else(|| {
            let what = "the observer, which the harness does not provide".to_owned();
            if self.declared {
                Finding::Harness(format!("{what} (declared, but observer() answered None)"))
            } else {
                Finding::NotSupported(format!("needs {what}"))
            }
        })
    }

    /// The observer's state, for messages (`None` without one).
    pub(super) fn state(&self) -> Option<crate::harness::WorkState> {
        self.observer.as_ref().map(Observer::state)
    }

    pub(super) fn completion(&self) -> &Handle<H> {
        &self.pending.submitted.completion
    }

    /// Lets the faulted work run to its (failed) end.
    pub(super) fn release(&mut self) {
        self.pending.release();
        drop(self.hold.take());
    }

    /// Releases and waits (bounded) until the work is terminal.
    pub(super) fn release_and_finish(&mut self, subject: Subject) -> Check {
        self.release();
        finished(
            self.observer.as_ref(),
            Some(self.completion()),
            subject,
            "the faulted work was released",
        )
    }

    /// Polls for the injected error while the work is held; `None` when the
    /// backend reports none while held (it may publish it only at the end).
    pub(super) fn error_while_held(&self, subject: Subject) -> Result<Option<String>, Finding> {
        match poll(self.completion(), slack::PROMPT) {
            Polled::Error(error) => Ok(Some(error)),
            Polled::Pending => Ok(None),
            Polled::Complete if self.hold.is_some() => Err(Finding::Violation(format!(
                "{subject}: is_complete() returned Ok(true) for faulted work that was still held (observer: {:?})",
                self.state()
            ))),
            // Not held: a late peer kept it pending, which the fault may
            // have cut short; whether it failed is for the end to say.
            Polled::Complete => Ok(None),
        }
    }
}
