//! Helpers every suite shares: the instrument sets rows ask for
//! ([`needs`]), which completion-matrix subjects a row applies to, and the
//! steps of a check that are not about one invariant (setting up completed
//! work, letting pending work settle, checking retention at submission,
//! taking probes and completions out of a submission, polling, and
//! gathering a check's parts). Used by the RET, EXC, CAN and SUB suites and
//! the family suites (SUM, GAT, A2A, BRD, P2P, BAR, AGR).

use std::time::Duration;

use eredu_core::{BoundedCompletion, CompletionCancellationMode, Submission};
use eredu_runtime::backend::SubmissionBackend;

use crate::check::{slack, Check, Finding};
use crate::harness::{Backend, CommCompletion, Executor, Harness, OwnedExecutor, Probe};
use crate::matrix::{wait_within, Handle, Pending, Subject, Submitted};
use crate::world::RankCtx;

/// Instrument sets rows ask for.
pub(crate) mod needs {
    use crate::harness::Instruments;

    pub(crate) const NOTHING: Instruments = Instruments::NONE;
    pub(crate) const HOLD: Instruments = Instruments {
        hold: true,
        ..Instruments::NONE
    };
    pub(crate) const PROBE: Instruments = Instruments {
        probe: true,
        ..Instruments::NONE
    };
    pub(crate) const LEDGER: Instruments = Instruments {
        ledger: true,
        ..Instruments::NONE
    };
    pub(crate) const FAULT: Instruments = Instruments {
        fault: true,
        ..Instruments::NONE
    };
    pub(crate) const SUBMISSION_FAULT: Instruments = Instruments {
        submission_fault: true,
        ..Instruments::NONE
    };
    pub(crate) const OBSERVER: Instruments = Instruments {
        observer: true,
        ..Instruments::NONE
    };
}

/// Local subjects (kept pending by the hold instrument, or by lazy work).
pub(crate) fn local(subject: Subject) -> bool {
    matches!(subject, Subject::LocalDependencies | Subject::Submit)
}

/// Operations that take input tensors (all but barrier and agreement).
pub(crate) fn has_tensor_inputs(subject: Subject) -> bool {
    matches!(
        subject.operation(),
        Some(op) if op != crate::Operation::Barrier && op != crate::Operation::AgreeSuccess
    )
}

/// Subjects whose work holds tensor storage a liveness probe can watch.
pub(crate) fn holds_storage(subject: Subject) -> bool {
    local(subject) || has_tensor_inputs(subject)
}

/// Every completion-matrix subject.
pub(crate) fn any_completion(subject: Subject) -> bool {
    local(subject) || subject.operation().is_some()
}

/// Completion-matrix subjects with a bounded wait (all but plain submissions).
pub(crate) fn bounded(subject: Subject) -> bool {
    subject == Subject::LocalDependencies || subject.operation().is_some()
}

/// Submits one materialised value on the rank's executor and waits (bounded
/// by `limit`) until it completed: a setup step, inconclusive when it fails.
pub(crate) fn completed_value<H: Harness>(
    ctx: &RankCtx<'_, H>,
    limit: Duration,
    what: impl Fn() -> String,
) -> Result<Handle<H>, Finding> {
    let value = ctx.tensor(&[1.0], &[1])?;
    let completion = Backend::<H>::submit(ctx.executor(), [&value])
        .map(Handle::Plain)
        .map_err(|error| {
            crate::check::setup(format!(
                "{}: submit of one materialised value failed: {error}",
                what()
            ))
        })?;
    wait_within(&completion, limit).map_err(|error| {
        crate::check::setup(format!(
            "{}: submit of one materialised value did not complete: {error}",
            what()
        ))
    })?;
    Ok(completion)
}

/// Lets pending work try to (wrongly) complete.
pub(crate) fn settle() {
    crate::world::pause(slack::SETTLE);
}

/// `NotSupported` when a subject yields no probes to check.
pub(crate) fn require_probes(probes: &[Probe], what: &str) -> Check {
    if probes.is_empty() {
        Err(Finding::NotSupported(format!(
            "no {what} to probe on this subject"
        )))
    } else {
        Ok(())
    }
}

/// Checks, right after a submission whose work the kit keeps from running,
/// that every probed storage is still allocated (`probes`: the first
/// `inputs` are the inputs', the rest the outputs'). One that is already
/// freed was never retained: a check about what happens *later* (an error, a
/// deadline, a drop) has nothing to say, so the attempt is inconclusive. When
/// the work was `certainly_pending` (held, or waiting for a late peer: seen,
/// not guessed), the free is a violation of the retention invariant, recorded
/// for it (RET-1 for local inputs, RET-3 for an operation's inputs, RET-5 for
/// outputs), so it is never lost. Work that may end alone
/// ([`Submitted::alone`]: a sender, a root) and that the backend reports
/// complete by then ended on its own (an eager protocol, or a transport
/// that buffered the whole message): nothing to check.
pub(crate) fn retained_at_submission<H: Harness>(
    ctx: &RankCtx<'_, H>,
    submitted: &Submitted<H>,
    (probes, inputs): (&[Probe], usize),
    subject: Subject,
    certainly_pending: bool,
) -> Check {
    let (input_probes, output_probes) = probes.split_at(inputs.min(probes.len()));
    let freed = |probes: &[Probe]| probes.iter().filter(|probe| !probe.is_live()).count();
    let (freed_inputs, freed_outputs) = (freed(input_probes), freed(output_probes));
    if freed_inputs + freed_outputs == 0 {
        return Ok(());
    }
    if submitted.alone && matches!(submitted.completion.is_complete(), Ok(true)) {
        return Err(Finding::NothingToCheck(format!(
            "{subject}: {} of {} probed storages were freed right after submission, and the backend reports the \
             work complete: the sender's (root's) part ended on its own before its late peer joined (an eager \
             protocol, or a transport that took the whole message): nothing to check on its side",
            freed_inputs + freed_outputs,
            probes.len(),
        )));
    }
    if certainly_pending {
        let input_id = if local(subject) { "RET-1" } else { "RET-3" };
        for (id, count, total, what) in [
            (input_id, freed_inputs, input_probes.len(), "input"),
            ("RET-5", freed_outputs, output_probes.len(), "output"),
        ] {
            if count > 0 {
                ctx.attribute(
                    id,
                    format!(
                        "{subject}: {count} of {total} {what} storage(s) were freed right after submission, while \
                         the work was still pending (held, or waiting for a late peer) and the caller held no handle"
                    ),
                );
            }
        }
    }
    Err(crate::check::setup(format!(
        "{subject}: {} of {} probed storages were already freed right after submission, before anything \
         this check provokes (retention at submission is RET-1/RET-3/RET-5's business{})",
        freed_inputs + freed_outputs,
        probes.len(),
        if certainly_pending {
            ", and it is recorded for them"
        } else {
            ""
        }
    )))
}

/// Whether every probe reports live storage.
pub(crate) fn all_live(probes: &[Probe]) -> bool {
    probes.iter().all(Probe::is_live)
}

/// Releases pending work and waits for it. Healthy work that then fails or
/// never completes says nothing about `id` (the kit cannot tell which
/// obligation the backend broke: a retention defect, a lazy launch...), so it
/// is an inconclusive setup step, never a violation of `id`.
pub(crate) fn complete<H: Harness>(pending: &mut Pending<'_, '_, H>, id: &str) -> Check {
    pending.release_and_wait().map_err(|error| {
        crate::check::setup(format!(
            "released healthy work did not complete, so {id} could not be checked: {error}"
        ))
    })
}

/// Verifies the outputs of completed work (the weak form of retention checks).
pub(crate) fn verify_outputs<H: Harness>(
    pending: &mut Pending<'_, '_, H>,
    ctx: &RankCtx<'_, H>,
) -> Check {
    match pending.submitted.verify.take() {
        Some(verify) => verify(ctx),
        None => Ok(()),
    }
}

/// Takes every probe (inputs, then outputs) out of a submission.
pub(crate) fn take_probes<H: Harness>(submitted: &mut Submitted<H>) -> Vec<Probe> {
    let mut probes = std::mem::take(&mut submitted.input_probes);
    probes.append(&mut submitted.output_probes);
    probes
}

/// Takes the completion out of a pending submission (to drop it, or to
/// consume it with `wait_bounded`), leaving a completed, resource-free
/// stand-in.
pub(crate) fn take_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    pending: &mut Pending<'_, '_, H>,
) -> Result<Handle<H>, Finding> {
    let stand_in = Backend::<H>::submit(ctx.executor(), std::iter::empty())
        .map(Handle::Plain)
        .map_err(|e| crate::check::setup(format!("submit with no values failed: {e}")))?;
    Ok(std::mem::replace(
        &mut pending.submitted.completion,
        stand_in,
    ))
}

/// One executor forked off the rank's executor.
pub(crate) fn fork_one_lane<H: Harness>(ctx: &RankCtx<'_, H>) -> Result<OwnedExecutor<H>, Finding> {
    let mut lanes = Backend::<H>::fork_executors(ctx.executor(), 1)
        .map_err(|e| crate::check::setup(format!("fork_executors(1) failed: {e}")))?;
    lanes
        .pop()
        .ok_or_else(|| crate::check::setup("fork_executors(1) returned no executor (see SUB-1)"))
}

/// Submits plain work of one value on each of `lanes` (a submission may be
/// refused on a lane whose work failed: nothing is asked of it), for a check
/// that re-observes an error after the rank submitted new work.
pub(crate) fn new_work<H: Harness>(
    ctx: &RankCtx<'_, H>,
    lanes: &[&Executor<H>],
) -> Result<Vec<crate::harness::PlainCompletion<H>>, Finding> {
    let mut completions = Vec::new();
    for lane in lanes {
        let value = ctx.tensor(&[1.0], &[1])?;
        if let Ok(completion) = Backend::<H>::submit(lane, [&value]) {
            completions.push(completion);
        }
    }
    Ok(completions)
}

/// `supports_cancellation` of the backend's communication completion.
pub(crate) fn supported<H: Harness>(mode: CompletionCancellationMode) -> bool {
    <CommCompletion<H> as BoundedCompletion>::supports_cancellation(mode)
}

/// A communication submission as its completion handle and its output.
pub(crate) fn handle_and_output<H: Harness, T>(
    submission: Submission<T, CommCompletion<H>>,
) -> (Handle<H>, T) {
    (
        Handle::Communication(submission.completion),
        submission.output,
    )
}

/// Waits (bounded by [`slack::RELEASE`]) for work that must complete: a
/// failure or a hang is a violation, described by `what` and then the error.
pub(crate) fn must_complete<H: Harness>(
    completion: &Handle<H>,
    what: impl FnOnce() -> String,
) -> Check {
    wait_within(completion, slack::RELEASE)
        .map_err(|error| Finding::Violation(format!("{}: {error}", what())))
}

/// What polling `is_complete` saw.
pub(crate) enum Polled {
    /// `Ok(true)` before any error.
    Complete,
    /// The first error, as reported.
    Error(String),
    /// Only `Ok(false)` until the limit.
    Pending,
}

/// Polls `is_complete` (never blocking) until it reports success or an
/// error, or `limit` passes.
pub(crate) fn poll<H: Harness>(completion: &Handle<H>, limit: Duration) -> Polled {
    let mut clock = crate::world::Stopwatch::start();
    loop {
        match completion.is_complete() {
            Ok(true) => return Polled::Complete,
            Err(error) => return Polled::Error(error),
            Ok(false) if clock.elapsed() >= limit => return Polled::Pending,
            Ok(false) => crate::world::pause(Duration::from_millis(1)),
        }
    }
}

/// The parts of a check, run in turn. A violation (or any finding but
/// not-supported) ends the check at once; a part that could not run is
/// remembered, and makes the whole check not-supported once every other part
/// passed: never a pass for something unchecked.
#[derive(Default)]
pub(crate) struct Parts(Vec<String>);

impl Parts {
    /// Records a part's outcome; `Err` for anything but a pass or not-supported.
    pub(crate) fn run(&mut self, part: Check) -> Check {
        match part {
            Err(Finding::NotSupported(reason)) => {
                self.0.push(reason);
                Ok(())
            }
            other => other,
        }
    }

    /// The check's outcome once every part ran.
    pub(crate) fn end(self) -> Check {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Finding::NotSupported(format!(
                "part not checked: {}",
                self.0.join("; ")
            )))
        }
    }
}

/// Every violation a script recorded while it went on (so no peer was left
/// waiting), joined; none is a pass.
pub(crate) fn violations(found: Vec<String>) -> Check {
    if found.is_empty() {
        Ok(())
    } else {
        Err(Finding::Violation(found.join("; ")))
    }
}
