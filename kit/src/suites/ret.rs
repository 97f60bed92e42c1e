//! RET: retention. A completion keeps every resource its native work uses
//! alive until exact completion (or safe teardown), whatever the caller drops.
//! These are the safety invariants: the upstream runtime drops completions
//! without waiting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use eredu_core::{BoundedCompletionOutcome, BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::{
    all_live, any_completion, bounded, complete, fork_one_lane, local, must_complete, needs,
    require_probes, settle, take_completion, take_probes, verify_outputs,
};
use crate::case::{Body, Row};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Backend, Harness};
use crate::matrix::{Driver, Handle, Pending, Subject};
use crate::world::RankCtx;

/// Operations that take input tensors (all but barrier and agreement).
fn has_tensor_inputs(subject: Subject) -> bool {
    matches!(
        subject.operation(),
        Some(op) if op != crate::Operation::Barrier && op != crate::Operation::AgreeSuccess
    )
}

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "RET-1",
            applies: local,
            requires: needs::PROBE,
            timing: false,
            body: Body::Matrix(inputs_outlive_their_handles::<H>),
        },
        Row {
            id: "RET-2",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            body: Body::Matrix(executor_outlives_its_handle::<H>),
        },
        Row {
            id: "RET-3",
            applies: has_tensor_inputs,
            requires: needs::PROBE,
            timing: false,
            body: Body::Matrix(communication_resources_outlive_their_handles::<H>),
        },
        Row {
            id: "RET-4",
            applies: any_completion,
            requires: needs::PROBE.and(needs::OBSERVER),
            timing: false,
            body: Body::Matrix(dropping_a_completion_frees_nothing_live::<H>),
        },
        Row {
            id: "RET-5",
            applies: has_tensor_inputs,
            requires: needs::PROBE,
            timing: false,
            body: Body::Matrix(completion_retains_its_output::<H>),
        },
        Row {
            id: "RET-6",
            applies: |s| s == Subject::Submit,
            requires: needs::NOTHING,
            timing: false,
            body: Body::Matrix(retained_values_live_until_completion::<H>),
        },
        Row {
            id: "RET-7",
            applies: any_completion,
            requires: needs::PROBE.and(needs::LEDGER),
            timing: false,
            body: Body::Matrix(everything_is_released_after_completion::<H>),
        },
        Row {
            id: "RET-8",
            applies: |s| s == Subject::LocalDependencies,
            requires: needs::NOTHING,
            timing: false,
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
/// subject, what a freed one means. The pending work, for the caller to
/// complete.
fn storage_stays_allocated<'c, 'w, H: Harness>(
    ctx: &'c RankCtx<'w, H>,
    driver: Driver<H>,
    storage: Storage,
    freed: &str,
) -> Result<Pending<'c, 'w, H>, Finding> {
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
    ensure(all_live(probes), || format!("{}: {freed}", driver.subject))?;
    Ok(pending)
}

/// RET-1: inputs stay allocated while local work is pending, although the
/// caller dropped every handle (the driver drops its handles at submission).
fn inputs_outlive_their_handles<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let freed =
        "an input's storage was freed while the work was pending and the caller held no handle";
    let mut pending = storage_stays_allocated(ctx, driver, Storage::Inputs, freed)?;
    complete(&mut pending, "RET-1")
}

/// RET-2: dropping the owned executor right after submitting leaves the work
/// able to complete correctly (the completion retains the executor).
fn executor_outlives_its_handle<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let lane = fork_one_lane(ctx)?;
    let mut pending = driver.pending_on(ctx, std::borrow::Borrow::borrow(&lane))?;
    drop(lane);
    settle();
    pending.release();
    must_complete(&pending.submitted.completion, || {
        format!(
            "{}: after its owned executor was dropped, the work did not complete",
            driver.subject
        )
    })?;
    verify_outputs(&mut pending, ctx)
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
/// uses: probed storages stay allocated, and the work still runs to a clean
/// completion (for subjects without tensors, that is all there is to see).
fn dropping_a_completion_frees_nothing_live<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut pending = driver.pending(ctx)?;
    let probes = take_probes(&mut pending.submitted);
    let observer = ctx.observer(pending.submitted.completion.as_ref())?;
    drop(take_completion(ctx, &mut pending)?);
    drop(pending.submitted.verify.take());
    settle();
    ensure(all_live(&probes), || {
        format!(
            "{}: dropping the pending completion freed storage that native work still uses",
            driver.subject
        )
    })?;
    pending.release();
    ensure(
        eventually(slack::RELEASE, || observer.state().is_terminal()),
        || {
            format!(
                "{}: the work never finished after its completion was dropped",
                driver.subject
            )
        },
    )?;
    ensure(
        observer.state() == crate::harness::WorkState::Completed,
        || {
            format!(
                "{}: after its completion was dropped, the work ended {:?} instead of completing",
                driver.subject,
                observer.state()
            )
        },
    )
}

/// RET-5: the completion itself retains the output's storage
/// (`Submission::wait_bounded` drops `output` right after the completion returns).
fn completion_retains_its_output<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let freed = "the output's storage was freed while the work was pending and only the completion remained";
    let mut pending = storage_stays_allocated(ctx, driver, Storage::Outputs, freed)?;
    complete(&mut pending, "RET-5")
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
        .map_err(|e| Finding::Violation(format!("retain_until_complete failed: {e}")))?;
    settle();
    ensure(!dropped.load(Ordering::SeqCst), || {
        "a value given to retain_until_complete was dropped before its work completed".into()
    })?;
    complete(&mut pending, "RET-6")?;
    drop(pending);
    ensure(
        eventually(slack::RELEASE_RESOURCES, || dropped.load(Ordering::SeqCst)),
        || {
            format!("the retained value was still alive {:?} after completion and the completion's drop", slack::RELEASE_RESOURCES)
        },
    )
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
    complete(&mut pending, "RET-7")?;
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
    let outcome = completion.wait_bounded(policy);
    pending.release();
    drop(pending);
    match outcome {
        Some(Ok(BoundedCompletionOutcome::DeadlineExceeded { .. }))
        | Some(Ok(BoundedCompletionOutcome::Completed)) => {}
        Some(Err(error)) => {
            return Err(Finding::Violation(format!(
                "wait_bounded on pending work failed: {error}"
            )))
        }
        None => return Ok(()),
    }
    released(ctx, &probes, driver.subject, "quarantine release")
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
        .drivers
        .iter()
        .find(|d| d.subject != Subject::Operation(crate::Operation::SendReceive))
        .copied()
    else {
        return Err(Finding::NotSupported(
            "RET-8 needs a claimed group operation".into(),
        ));
    };
    let use_group = |round: &str| -> Check {
        let submitted = collective.submit(ctx)?;
        must_complete(&submitted.completion, || {
            format!(
                "{} {round} local-dependency deadline failed",
                collective.subject
            )
        })
    };
    use_group("before the")?;
    if ctx.rank() == 0 {
        let hold = ctx.hold(ctx.executor())?;
        let input = ctx.tensor(&[1.0], &[1])?;
        let submission = Backend::<H>::submit_local_dependencies([&input], ctx.executor())
            .map_err(|e| Finding::Violation(format!("submit_local_dependencies failed: {e}")))?;
        let policy =
            BoundedCompletionWait::new(slack::DEADLINE, CompletionCancellationMode::NativeCancel)
                .map_err(|e| Finding::Harness(e.to_string()))?;
        let _ = Handle::<H>::Communication(submission.completion).wait_bounded(policy);
        hold.release();
        ctx.signal("ret8-deadline-passed");
    } else if !ctx.await_signal("ret8-deadline-passed", slack::RELEASE) {
        return Ok(());
    }
    use_group("after a")
}
