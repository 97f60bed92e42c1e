//! RET: retention. A completion keeps every resource its native work uses
//! alive until exact completion (or safe teardown), whatever the caller drops.
//! These are the safety invariants: the upstream runtime drops completions
//! without waiting.

use std::borrow::Borrow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use eredu_core::{BoundedCompletionOutcome, BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::blocker::Blocker;
use super::common::{
    all_live, any_completion, bounded, complete, completed_value, fork_one_lane, has_tensor_inputs,
    holds_storage, local, must_complete, needs, require_probes, settle, take_completion,
    take_probes, verify_outputs,
};
use crate::case::{Body, Row};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Backend, Harness};
use crate::matrix::{Driver, Handle, Pending, Subject};
use crate::world::RankCtx;

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "RET-1",
            applies: local,
            requires: needs::PROBE,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(inputs_outlive_their_handles::<H>),
        },
        Row {
            id: "RET-2",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(executor_outlives_its_handle::<H>),
        },
        Row {
            id: "RET-3",
            applies: has_tensor_inputs,
            requires: needs::PROBE,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(communication_resources_outlive_their_handles::<H>),
        },
        // Probes decide RET-4 where the work holds storage (the observer,
        // when offered, also sees the work complete); where it holds none,
        // only the observer sees anything.
        Row {
            id: "RET-4",
            applies: holds_storage,
            requires: needs::PROBE,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(dropping_a_completion_frees_nothing_live::<H>),
        },
        Row {
            id: "RET-4",
            applies: |s| any_completion(s) && !holds_storage(s),
            requires: needs::PROBE.and(needs::OBSERVER),
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(dropping_a_completion_frees_nothing_live::<H>),
        },
        Row {
            id: "RET-5",
            applies: has_tensor_inputs,
            requires: needs::PROBE,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(completion_retains_its_output::<H>),
        },
        Row {
            id: "RET-6",
            applies: |s| s == Subject::Submit,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(retained_values_live_until_completion::<H>),
        },
        Row {
            id: "RET-7",
            applies: any_completion,
            requires: needs::PROBE.and(needs::LEDGER),
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(everything_is_released_after_completion::<H>),
        },
        Row {
            id: "RET-8",
            applies: |s| s == Subject::LocalDependencies,
            // The script holds the executor itself (not through a driver).
            requires: needs::HOLD,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 2,
                script: local_dependencies_fence_no_group::<H>,
            },
        },
    ]
}

/// The storages a retention check probes.
#[derive(Clone, Copy)]
enum Storage {
    /// The inputs (the driver drops the caller's handles at submission).
    Inputs,
    /// The outputs (the caller's last handle, the verifier, is dropped here).
    Outputs,
}

/// RET-1, RET-3, RET-5: keeps the subject's work pending with no
/// caller-side handle on the probed `storage`, lets it settle, and checks
/// that every probed storage is still allocated; `freed` says, after the
/// subject, what a freed one means. The observation only counts while the
/// work is certainly pending (lazy work is so for a known while only):
/// otherwise the attempt is inconclusive. Communication work is queued behind
/// a [`Blocker`] on the same executor while it is checked, so that it cannot
/// start (and end, releasing what it held) before the storages are seen. The
/// pending work, for the caller to complete.
fn storage_stays_allocated<'c, 'w, H: Harness>(
    ctx: &'c RankCtx<'w, H>,
    driver: Driver<H>,
    storage: Storage,
    freed: &str,
) -> Result<Pending<'c, 'w, H>, Finding> {
    let blocker = if local(driver.subject) {
        None
    } else {
        Some(Blocker::block(ctx, ctx.executor(), 1)?)
    };
    let mut pending = driver.pending(ctx)?;
    let submitted = &mut pending.submitted;
    let (probes, what) = match storage {
        Storage::Inputs => (&submitted.input_probes, "input"),
        Storage::Outputs => (&submitted.output_probes, "output"),
    };
    require_probes(probes, what)?;
    if let Storage::Outputs = storage {
        drop(submitted.verify.take());
    }
    settle();
    let live = probes.iter().filter(|p| p.is_live()).count();
    let total = probes.len();
    if live < total {
        // An output's last caller handle is dropped here, after submission:
        // work that had already ended (failed) may release it. The free
        // counts only if the work still reports pending after it was seen.
        let state = pending.submitted.completion.is_complete();
        let ended = matches!(storage, Storage::Outputs) && !matches!(state, Ok(false));
        if ended {
            return Err(crate::check::setup(format!(
                "{}: {total_freed} of {total} {what} storage(s) freed, but the work had already \
                 ended when checked (is_complete: {state:?}), and storage may be released after \
                 the end",
                driver.subject,
                total_freed = total - live,
            )));
        }
        if pending.surely_pending() {
            return Err(Finding::Violation(format!(
                "{}: {freed} ({} of {total} {what} storage(s) freed {:?} after submission; \
                 expected all allocated until completion)",
                driver.subject,
                total - live,
                slack::SETTLE
            )));
        }
    }
    pending.confirm(&format!("the {what} storages were checked"))?;
    if let Some(blocker) = blocker {
        blocker
            .release_and_finish(|| {
                "the work blocking the executor ahead of the subject did not complete once released"
                    .into()
            })
            .map_err(|finding| match finding {
                Finding::Violation(message) => crate::check::setup(message),
                other => other,
            })?;
        // Now the subject's work runs, and waits for its late peer (a
        // collective's member, a receiver, a rendezvous send): a backend
        // that keeps a reference only while work is queued frees it here.
        settle();
        let probes = match storage {
            Storage::Inputs => &pending.submitted.input_probes,
            Storage::Outputs => &pending.submitted.output_probes,
        };
        let live = probes.iter().filter(|p| p.is_live()).count();
        if live < total && pending.surely_pending() {
            return Err(Finding::Violation(format!(
                "{}: {freed} ({} of {total} {what} storage(s) freed once the work ahead of it on the executor \
                 had finished, while it still waited for its late peer; expected all allocated until completion)",
                driver.subject,
                total - live,
            )));
        }
        pending.confirm(&format!(
            "the {what} storages were checked once the work started"
        ))?;
    }
    Ok(pending)
}

/// Releases pending work and waits for it where its completing is only a
/// precondition of `id`'s check: a failure is an inconclusive setup finding.
fn complete_for<H: Harness>(pending: &mut Pending<'_, '_, H>, subject: Subject, id: &str) -> Check {
    pending.release_and_wait().map_err(|error| {
        crate::check::setup(format!(
            "{subject}: the released work did not complete, so {id} cannot be checked to the end: \
             {error}"
        ))
    })
}

/// The finding for a failure seen by a check that dropped one handle
/// (`dropped`): a violation if a `control` run, identical but keeping that
/// handle, succeeded; otherwise inconclusive (the work fails anyway, for a
/// reason that is not the check's).
fn blame(control: Result<(), String>, dropped: &str, violation: String) -> Finding {
    match control {
        Ok(()) => Finding::Violation(violation),
        Err(error) => crate::check::setup(format!(
            "{violation}; but the same work fails with its {dropped} kept too ({error}), so the \
             failure is not the drop's"
        )),
    }
}

/// A finding as text, for controls.
fn text(finding: Finding) -> String {
    match finding {
        Finding::Violation(m)
        | Finding::NotSupported(m)
        | Finding::Harness(m)
        | Finding::Inconclusive(m)
        | Finding::NothingToCheck(m) => m,
    }
}

/// RET-1: inputs stay allocated while local work is pending, although the
/// caller dropped every handle (the driver drops its handles at submission).
fn inputs_outlive_their_handles<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let freed =
        "an input's storage was freed while the work was pending and the caller held no handle";
    let mut pending = storage_stays_allocated(ctx, driver, Storage::Inputs, freed)?;
    complete_for(&mut pending, driver.subject, "RET-1")
}

/// RET-2: dropping the owned executor right after submitting leaves the work
/// able to complete correctly (the completion retains the executor). The
/// work is queued behind a [`Blocker`] on that executor, so it has not even
/// started when the executor is dropped. The drop counts only if the lane was
/// then certainly busy and the work certainly pending (lazy work is so for a
/// known while only); otherwise the attempt is inconclusive. A failure is
/// blamed on RET-2 only if the same work completes with its executor kept.
fn executor_outlives_its_handle<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let lane = fork_one_lane(ctx)?;
    let (blocker, mut pending) = queued_behind_a_blocker(ctx, driver, lane.borrow())?;
    drop(lane);
    let dropped_while_queued = blocker.surely_busy() && pending.surely_pending();
    settle();
    // The subject's own hold (if any) goes first: the blocker's work may be
    // held by it too.
    pending.release();
    let blocker_finished = blocker.release_and_finish(|| {
        "the work blocking the dropped executor ahead of the subject did not complete once \
         released"
            .into()
    });
    if let Err(error) = pending.release_and_wait() {
        let violation = format!(
            "{}: after its owned executor was dropped while the work was queued on it, the work \
             did not complete (expected the completion to keep the executor alive): {error}",
            driver.subject
        );
        return Err(blame(
            completes_with_its_executor_kept(ctx, driver),
            "executor",
            violation,
        ));
    }
    blocker_finished.map_err(|finding| match finding {
        Finding::Violation(message) => crate::check::setup(message),
        other => other,
    })?;
    verify_outputs(&mut pending, ctx)?;
    if dropped_while_queued {
        Ok(())
    } else {
        Err(crate::check::setup(
            "the lazy work that kept the executor busy may have finished before the executor was \
             dropped",
        ))
    }
}

/// The subject's pending work on `executor`, queued behind a [`Blocker`].
fn queued_behind_a_blocker<'c, 'w, H: Harness>(
    ctx: &'c RankCtx<'w, H>,
    driver: Driver<H>,
    executor: &crate::harness::Executor<H>,
) -> Result<(Blocker<'c, 'w, H>, Pending<'c, 'w, H>), Finding> {
    let blocker = Blocker::block(ctx, executor, 1)?;
    let pending = driver.pending_on(ctx, executor)?;
    Ok((blocker, pending))
}

/// Control for RET-2: the same work, queued the same way on a fresh forked
/// executor that the caller keeps until the work completed, completes.
fn completes_with_its_executor_kept<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Result<(), String> {
    let lane = fork_one_lane(ctx).map_err(text)?;
    let (blocker, mut pending) =
        queued_behind_a_blocker(ctx, driver, lane.borrow()).map_err(text)?;
    settle();
    pending.release();
    let _ = blocker.release_and_finish(String::new);
    let outcome = pending.release_and_wait();
    drop(lane);
    outcome
}

/// RET-3: a communication completion retains inputs (and the route, which the
/// driver drops at submission); the result stays correct.
fn communication_resources_outlive_their_handles<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let freed = "an input's storage was freed while the communication was pending";
    let mut pending = storage_stays_allocated(ctx, driver, Storage::Inputs, freed)?;
    complete(&mut pending, "RET-3")?;
    verify_outputs(&mut pending, ctx)
}

/// RET-4: dropping a pending completion frees nothing native work still
/// uses: probed storages stay allocated, and (seen by the observer, when the
/// harness offers one) the work still runs to a clean completion (for
/// subjects without tensors, that is all there is to see).
/// The caller's other handles (outputs) are dropped first, and the storages
/// must be allocated then, so that only the completion's drop is blamed; a
/// work that does not complete is blamed on RET-4 only if the same work,
/// completion kept (and never asked), completes.
fn dropping_a_completion_frees_nothing_live<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut pending = driver.pending(ctx)?;
    let probes = take_probes(&mut pending.submitted);
    let observer = ctx.optional_observer(pending.submitted.completion.as_ref());
    drop(pending.submitted.verify.take());
    settle();
    if !all_live(&probes) {
        // Work that may end by itself (a send) and did: nothing to check.
        pending.confirm("the completion was dropped")?;
        return Err(crate::check::setup(format!(
            "{}: {} of {} probed storage(s) were freed before the completion was dropped (with \
             the caller's handles gone): that is RET-1/RET-3/RET-5's business, and RET-4 cannot \
             be checked",
            driver.subject,
            probes.iter().filter(|p| !p.is_live()).count(),
            probes.len()
        )));
    }
    drop(take_completion(ctx, &mut pending)?);
    settle();
    if !all_live(&probes) && pending.surely_pending() {
        return Err(Finding::Violation(format!(
            "{}: dropping the pending completion freed storage that native work still uses \
             ({} of {} probed storage(s) freed {:?} after the drop, the work still pending; \
             all were allocated before it)",
            driver.subject,
            probes.iter().filter(|p| !p.is_live()).count(),
            probes.len(),
            slack::SETTLE
        )));
    }
    pending.confirm("the probed storages were checked after the completion was dropped")?;
    let limit = pending.submitted.completes_within();
    pending.release();
    let Some(observer) = observer else {
        // The probes decided RET-4; with no observer and no completion left,
        // nothing shows whether the released work then completed.
        ctx.note(format!(
            "{}: whether the work completed after its completion was dropped is not observed (the harness \
             offers no observer)",
            driver.subject
        ));
        return Ok(());
    };
    let state = if eventually(limit, || observer.state().is_terminal()) {
        observer.state()
    } else {
        let violation = format!(
            "{}: the work never finished ({limit:?} after release) after its completion was \
             dropped",
            driver.subject
        );
        return Err(blame(
            completes_with_its_completion_kept(ctx, driver),
            "completion",
            violation,
        ));
    };
    if state == crate::harness::WorkState::Completed {
        return Ok(());
    }
    let violation = format!(
        "{}: after its completion was dropped, the work ended {state:?} instead of completing",
        driver.subject
    );
    Err(blame(
        completes_with_its_completion_kept(ctx, driver),
        "completion",
        violation,
    ))
}

/// Control for RET-4: the same work, the caller's outputs dropped as in the
/// check but the completion kept (and never asked, so nothing is driven by
/// observing it), completes.
fn completes_with_its_completion_kept<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Result<(), String> {
    let mut pending = driver.pending(ctx).map_err(text)?;
    let observer = ctx
        .observer(pending.submitted.completion.as_ref())
        .map_err(text)?;
    drop(pending.submitted.verify.take());
    settle();
    // Half the check's bound: the control follows a check that may have
    // waited its whole bound, within one case's watchdog.
    let limit = pending.submitted.completes_within() / 2;
    pending.release();
    if !eventually(limit, || observer.state().is_terminal()) {
        return Err(format!("it never finished ({limit:?} after release)"));
    }
    match observer.state() {
        crate::harness::WorkState::Completed => Ok(()),
        state => Err(format!("it ended {state:?}")),
    }
}

/// RET-5: the completion itself retains the output's storage
/// (`Submission::wait_bounded` drops `output` right after the completion returns).
fn completion_retains_its_output<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let freed = "the output's storage was freed while the work was pending and only the completion remained";
    let mut pending = storage_stays_allocated(ctx, driver, Storage::Outputs, freed)?;
    complete_for(&mut pending, driver.subject, "RET-5")
}

/// RET-6: a value given to `retain_until_complete` lives until exact completion
/// and is dropped once the completion is gone.
fn retained_values_live_until_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut pending = driver.pending(ctx)?;
    let dropped = Arc::new(AtomicBool::new(false));
    let Handle::Plain(completion) = &pending.submitted.completion else {
        return Err(Finding::NotSupported(
            "retain_until_complete takes plain completions".into(),
        ));
    };
    Backend::<H>::retain_until_complete(ctx.executor(), completion, DropFlag(Arc::clone(&dropped)))
        .map_err(|e| {
            Finding::Violation(format!(
                "{}: retain_until_complete on a pending completion failed: {e}",
                driver.subject
            ))
        })?;
    settle();
    // Dropping the value is a violation only while the work is certainly
    // pending (lazy work is so for a known while only).
    if dropped.load(Ordering::SeqCst) && pending.surely_pending() {
        return Err(Finding::Violation(format!(
            "{}: a value given to retain_until_complete was dropped (seen {:?} later) while its \
             work was still pending; expected it kept until exact completion",
            driver.subject,
            slack::SETTLE
        )));
    }
    pending.confirm("the retained value was checked")?;
    complete_for(&mut pending, driver.subject, "RET-6")?;
    drop(pending);
    if eventually(slack::RELEASE_RESOURCES, || dropped.load(Ordering::SeqCst)) {
        return Ok(());
    }
    // eredu bounds the retention from below only, and forbids running
    // application destructors in `resources_releasable`: a backend may defer
    // the drop to its next call on the thread (eredu-backend-mlx does). One
    // ordinary submission gives it that call.
    let next = completed_value(ctx, slack::RELEASE, || {
        format!(
            "{}: the retained value was still alive {:?} after completion and the completion's \
             drop; the submission that would let a deferring backend drop it",
            driver.subject,
            slack::RELEASE_RESOURCES
        )
    })?;
    drop(next);
    ensure(
        eventually(slack::RELEASE_RESOURCES, || dropped.load(Ordering::SeqCst)),
        || {
            format!(
                "{}: the retained value was still alive {:?} after completion and the \
                 completion's drop, and {:?} after a later submission on the same thread \
                 completed; expected it dropped once the completion is gone",
                driver.subject,
                slack::RELEASE_RESOURCES,
                slack::RELEASE_RESOURCES
            )
        },
    )?;
    ctx.note(format!(
        "RET-6: {}: the retained value was dropped only after a later submission on the same \
         thread, not once the completion was gone (deferred reclamation; a thread that exits \
         first may never drop it)",
        driver.subject
    ));
    Ok(())
}

struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// RET-7: after completion (or quarantine release) and every handle dropped,
/// every native resource is released within a bounded time.
fn everything_is_released_after_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut pending = driver.pending(ctx)?;
    let probes = take_probes(&mut pending.submitted);
    complete_for(&mut pending, driver.subject, "RET-7")?;
    drop(pending);
    released(ctx, &probes, driver.subject, "completion")?;
    if !bounded(driver.subject) {
        return Ok(());
    }
    // The quarantine path: the deadline passes, the work completes later.
    let mut pending = driver.pending(ctx)?;
    let probes = take_probes(&mut pending.submitted);
    let completion = take_completion(ctx, &mut pending)?;
    drop(pending.submitted.verify.take());
    let policy = BoundedCompletionWait::new(
        slack::DEADLINE,
        CompletionCancellationMode::QuarantineUntilComplete,
    )
    .map_err(|e| Finding::Harness(e.to_string()))?;
    let outcome = completion.wait_bounded(ctx, policy);
    let watch = pending.submitted.watch.take();
    pending.release();
    drop(pending);
    match outcome {
        Some(Ok(BoundedCompletionOutcome::DeadlineExceeded { .. }))
        | Some(Ok(BoundedCompletionOutcome::Completed)) => {}
        // Not RET-7's business (see CAN-4, CAN-7): nothing to release-check.
        Some(Err(error)) => {
            return Err(crate::check::setup(format!(
                "{}: wait_bounded(QuarantineUntilComplete) on pending work failed, so the \
                 quarantine release cannot be checked: {error}",
                driver.subject
            )))
        }
        None => return Ok(()),
    }
    // Healthy work that failed once released (no fault was injected), or
    // that never ended, says nothing about RET-7 (resources released after
    // completion): some other obligation broke first.
    if let Some(observer) = &watch {
        eventually(slack::RELEASE, || observer.state().is_terminal());
        let unchecked = match observer.state() {
            crate::harness::WorkState::Failed => Some("failed once released"),
            crate::harness::WorkState::Live => Some("had not ended once released"),
            _ => None,
        };
        if let Some(ended) = unchecked {
            return Err(crate::check::setup(format!(
                "{}: the quarantined healthy work {ended} (observer, after {:?}), so its release cannot be checked",
                driver.subject,
                slack::RELEASE
            )));
        }
    }
    let seen = watch.as_ref().map_or(String::new(), |observer| {
        format!(" (the observer then said {:?})", observer.state())
    });
    released(
        ctx,
        &probes,
        driver.subject,
        &format!("quarantine release{seen}"),
    )
}

/// Checks that probes go dead and the ledger drains.
fn released<H: Harness>(
    ctx: &RankCtx<'_, H>,
    probes: &[crate::harness::Probe],
    subject: Subject,
    after: &str,
) -> Check {
    ensure(
        eventually(slack::RELEASE_RESOURCES, || {
            probes.iter().all(|p| !p.is_live())
        }),
        || {
            format!("{subject}: storage still allocated {:?} after {after} with every handle dropped (leak)", slack::RELEASE_RESOURCES)
        },
    )?;
    let mut last = ctx.ledger()?;
    ensure(
        eventually(slack::RELEASE_RESOURCES, || {
            last = ctx.ledger().unwrap_or(last);
            last.pending_work == 0 && last.quarantined == 0
        }),
        || format!("{subject}: after {after}, the ledger still shows live work: {last:?}"),
    )
}

/// RET-8: local dependencies select no group: a deadline on them never fences
/// the group (a collective on it still works afterwards). Needs a claimed
/// operation to exercise the group.
fn local_dependencies_fence_no_group<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    let claims = ctx.harness().claims();
    let Some(collective) = claims
        .drivers()
        .into_iter()
        .find(|d| d.subject != Subject::Operation(crate::Operation::SendReceive))
    else {
        return Err(Finding::NotSupported(
            "RET-8 needs a claimed group operation".into(),
        ));
    };
    let use_group = |round: &str| -> Check {
        let submitted = collective.submit(ctx)?;
        must_complete(&submitted.completion, || {
            format!(
                "{} on the group {round} local-dependency deadline did not complete",
                collective.subject
            )
        })
    };
    // The group must work before anything: otherwise nothing can be learnt.
    use_group("before the").map_err(|finding| match finding {
        Finding::Violation(message) => crate::check::setup(message),
        other => other,
    })?;
    if ctx.rank() == 0 {
        let hold = ctx.hold(ctx.executor())?;
        let input = ctx.tensor(&[1.0], &[1])?;
        let submission = Backend::<H>::submit_local_dependencies([&input], ctx.executor())
            .map_err(|e| {
                crate::check::setup(format!(
                    "submit_local_dependencies on the held executor failed: {e}"
                ))
            })?;
        let policy =
            BoundedCompletionWait::new(slack::DEADLINE, CompletionCancellationMode::NativeCancel)
                .map_err(|e| Finding::Harness(e.to_string()))?;
        let _ = Handle::<H>::Communication(submission.completion).wait_bounded(ctx, policy);
        hold.release();
        ctx.signal("ret8-deadline-passed");
    } else if !ctx.await_signal("ret8-deadline-passed", slack::RELEASE) {
        return Ok(());
    }
    use_group("after a")
}
