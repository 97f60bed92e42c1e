//! The two dispositions of a deadline: CAN-5 (`NativeCancel` returns once
//! teardown has finished) and CAN-6 (`QuarantineUntilComplete` retains
//! everything the live work holds, and releases it once it completed).

use eredu_core::CompletionCancellationMode::{NativeCancel, QuarantineUntilComplete as Quarantine};

use super::disposition::{after_native_cancel, released_after_completion, retained, torn_down};
use super::outcome::{ended_early, exceeded, nothing_to_dispose, why_pending};
use super::round::{Round, Setup};
use crate::check::{ensure, eventually, slack, Check};
use crate::harness::Harness;
use crate::matrix::Driver;
use crate::suites::common::settle;
use crate::world::RankCtx;

/// CAN-5: when `DeadlineExceeded{NativeCancel}` returns, teardown is finished:
/// the work is terminal, its retained storages are freed (the caller holds
/// no handle), the ledger counts it no more, and the executor completes new work.
/// Runs only where NativeCancel is claimed ([`unclaimed_mode`](super::modes::unclaimed_mode) gates it).
pub(super) fn native_cancel_finishes_teardown<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut kept = Vec::new();
    let mut round = Round::start(ctx, driver, Setup::default())?;
    let waited = round.wait_bounded(slack::DEADLINE, NativeCancel)?;
    let seen = round.seen()?;
    let call = format!(
        "wait_bounded({:?}, NativeCancel) on pending work",
        slack::DEADLINE
    );
    if !exceeded(&waited.outcome, NativeCancel) {
        round.dispose(NativeCancel, &mut kept)?;
        return Err(nothing_to_dispose(
            driver,
            NativeCancel,
            &call,
            &waited,
            "teardown",
        ));
    }
    let after = format!(
        "wait_bounded({:?}, NativeCancel) -> DeadlineExceeded",
        slack::DEADLINE
    );
    torn_down(&seen, driver.subject, &after)?;
    after_native_cancel(round, &mut kept)
}

/// CAN-6: after `DeadlineExceeded{QuarantineUntilComplete}` everything the work
/// retains stays alive while it is live, and is released once it completed.
pub(super) fn quarantine_retains_until_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut round = Round::start(ctx, driver, Setup::default())?;
    let waited = round.wait_bounded(slack::DEADLINE, Quarantine)?;
    if !exceeded(&waited.outcome, Quarantine) {
        round.drain()?;
        let call = format!(
            "wait_bounded({:?}, QuarantineUntilComplete) on pending work",
            slack::DEADLINE
        );
        return Err(nothing_to_dispose(
            driver,
            Quarantine,
            &call,
            &waited,
            "quarantine",
        ));
    }
    let after = "DeadlineExceeded{QuarantineUntilComplete} returned";
    // With the observer and the ledger, the work's state and the quarantine
    // count are read too; with probes alone, the storages are, while the
    // kit still keeps the work pending (see `kept_by_probes`).
    let full = round.observer.is_some() && round.before.is_some();
    for when in [
        format!("right after {after}"),
        format!("{:?} after {after}", slack::SETTLE),
    ] {
        if full {
            retained(&round.seen()?, driver.subject, &when)?;
        } else {
            kept_by_probes(&round, &when)?;
        }
        settle();
    }
    round.release();
    if full {
        released_after_completion(&round)
    } else {
        freed_after_release(&round)
    }
}

/// CAN-6 with liveness probes alone: every probed storage is allocated while
/// the kit keeps the quarantined work pending (hold or late peer); read
/// first, so that pending afterwards means pending while they were read.
fn kept_by_probes<H: Harness>(round: &Round<'_, '_, H>, when: &str) -> Check {
    let live = round.probes.iter().filter(|probe| probe.is_live()).count();
    if !round.surely_pending() {
        return Err(crate::check::setup(format!(
            "{}: {}, {when}",
            round.subject,
            ended_early(round.via)
        )));
    }
    ensure(live == round.probes.len(), || {
        format!(
            "{}: {} of {} probed storages were freed {when}, while the quarantined work could not have \
             completed ({})",
            round.subject,
            round.probes.len() - live,
            round.probes.len(),
            why_pending(round.via)
        )
    })
}

/// CAN-6 with liveness probes alone: once the work is let complete, every
/// probed storage is freed. Storages still allocated then are inconclusive:
/// with no observer, nothing tells work that never finished from a leak
/// (RET-7 judges leaks where the ledger is offered).
fn freed_after_release<H: Harness>(round: &Round<'_, '_, H>) -> Check {
    let limit = round.completes_within() + slack::RELEASE_RESOURCES;
    if eventually(limit, || round.probes.iter().all(|probe| !probe.is_live())) {
        return Ok(());
    }
    Err(crate::check::setup(format!(
        "{}: probed storages were still allocated {limit:?} after the quarantined work was let complete; with \
         no observer, the kit cannot tell work that never finished from storage never released",
        round.subject
    )))
}
