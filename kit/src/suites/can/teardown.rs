//! The two dispositions of a deadline: CAN-5 (`NativeCancel` returns once
//! teardown has finished) and CAN-6 (`QuarantineUntilComplete` retains
//! everything the live work holds, and releases it once it completed).

use eredu_core::CompletionCancellationMode::{NativeCancel, QuarantineUntilComplete as Quarantine};

use super::disposition::{after_native_cancel, released_after_completion, retained, torn_down};
use super::outcome::{exceeded, nothing_to_dispose};
use super::round::{Round, Setup};
use crate::check::{slack, Check};
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
    retained(
        &round.seen()?,
        driver.subject,
        &format!("right after {after}"),
    )?;
    settle();
    retained(
        &round.seen()?,
        driver.subject,
        &format!("{:?} after {after}", slack::SETTLE),
    )?;
    round.release();
    released_after_completion(&round)
}
