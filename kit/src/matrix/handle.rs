//! Either kind of completion behind one interface ([`Handle`]), with every
//! call the kit makes on it tracked by the world (EXC-1's block guard on
//! `is_complete()`, progress for the watchdog), and [`wait_within`], the
//! bounded poll the checks wait with.

use crate::check::slack;
use crate::harness::{CommCompletion, CompletionRef, Harness, PlainCompletion};
use crate::world::{guarded, polled, RankCtx};
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion};
use std::time::Duration;

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
