//! The late peer: rank 1 follows rank 0's collective rounds.
//!
//! This is the completion matrix's late-peer protocol (`matrix::Driver::late_peer`:
//! rounds in order, each joined only when the subject releases it) extended
//! to a sequence that mixes operations: the release signal names the driver
//! (by claim order) rank 1 must submit, and a round rank 0 gave up on
//! (natively cancelled, or after the group was poisoned) is *skipped*, so the
//! peer never joins work nobody will meet. Rank 1's own outcomes are not
//! under test; it only tears its work down when rank 0 is done.

use std::time::Duration;

use eredu_core::{BoundedCompletion, BoundedCompletionWait, CompletionCancellationMode};

use crate::check::{slack, Check, Finding};
use crate::harness::{CommCompletion, Harness};
use crate::matrix::{Driver, Handle};
use crate::world::RankCtx;

/// Rank 1 submits its side of `round` with driver `driver`.
pub(crate) fn join(round: usize, driver: usize) -> String {
    format!("commcheck-model-round-{round}-join-{driver}")
}

/// Rank 1 never joins `round`.
pub(crate) fn skip(round: usize) -> String {
    format!("commcheck-model-round-{round}-skip")
}

/// Rank 0 gave up on `round` after rank 1 may have joined it: rank 1 tears
/// its side down at once instead of waiting for it.
pub(crate) fn abandon(round: usize) -> String {
    format!("commcheck-model-round-{round}-abandon")
}

/// Rank 0 has released or skipped every round it will ever use.
pub(crate) const DONE: &str = "commcheck-model-done";

/// Rank 1 has torn down and dropped all of its work.
pub(crate) const FINISHED: &str = "commcheck-model-peer-finished";

/// How long rank 1 waits for a round's fate before giving up.
const IDLE: Duration = Duration::from_secs(60);

/// Deadline for rank 1's own work at the end: short for abandoned rounds.
const ABANDONED: Duration = Duration::from_millis(1);

/// A cancellation mode the backend supports (teardown of rank 1's work).
pub(crate) fn teardown_mode<H: Harness>() -> CompletionCancellationMode {
    if <CommCompletion<H> as BoundedCompletion>::supports_cancellation(
        CompletionCancellationMode::NativeCancel,
    ) {
        CompletionCancellationMode::NativeCancel
    } else {
        CompletionCancellationMode::QuarantineUntilComplete
    }
}

/// Rank 1's script: join each round when told, in order, until rank 0 is done.
pub(crate) fn late_peer<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    let drivers: Vec<Driver<H>> = ctx.harness().claims().drivers();
    let mut joined: Vec<(usize, Handle<H>)> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for round in 0.. {
        let mut names = vec![skip(round)];
        names.extend((0..drivers.len()).map(|driver| join(round, driver)));
        names.push(DONE.to_owned());
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        match ctx.await_any_signal(&refs, IDLE) {
            Some(0) => {}
            Some(index) if index <= drivers.len() => {
                match (drivers[index - 1].submit)(ctx, ctx.executor(), crate::matrix::Load::Light) {
                    Ok(mut submitted) => {
                        drop(submitted.verify.take());
                        joined.push((round, submitted.completion));
                    }
                    Err(finding) => failures.push(format!("round {round}: {finding:?}")),
                }
            }
            _ => break,
        }
    }
    tear_down(ctx, joined);
    ctx.signal(FINISHED);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Finding::Harness(format!(
            "the late peer could not submit its side: {}",
            failures.join("; ")
        )))
    }
}

/// Ends rank 1's work: rounds rank 0 completed finish promptly; abandoned
/// ones are torn down at once.
fn tear_down<H: Harness>(ctx: &RankCtx<'_, H>, joined: Vec<(usize, Handle<H>)>) {
    for (round, completion) in joined {
        let abandoned = ctx.await_signal(&abandon(round), Duration::ZERO);
        let timeout = if abandoned { ABANDONED } else { slack::RELEASE };
        if let Ok(policy) = BoundedCompletionWait::new(timeout, teardown_mode::<H>()) {
            let _ = completion.wait_bounded(ctx, policy);
        }
    }
}
