//! CAN-1..9 run once per cancellation mode the backend claims
//! (`supports_cancellation`), quarantine first ([`each_mode`]); an unclaimed
//! mode is a part that does not apply, noted, never a missing instrument.
//! CAN-5 (NativeCancel only) and CAN-6 (quarantine only) are not-supported
//! when their one mode is unclaimed ([`unclaimed_mode`]). Also the bounded
//! wait policies the rounds use ([`policy`]).

use std::time::Duration;

use eredu_core::CompletionCancellationMode::{NativeCancel, QuarantineUntilComplete as Quarantine};
use eredu_core::{BoundedCompletionWait, CompletionCancellationMode};

use crate::check::{Check, Finding};
use crate::harness::Harness;
use crate::suites::common::{supported, Parts};
use crate::world::RankCtx;

/// Both modes, quarantine first: its rounds need late peers to join, and
/// natively cancelled rounds are kept unreleased until the case ends.
const MODES: [CompletionCancellationMode; 2] = [Quarantine, NativeCancel];

pub(super) fn policy(
    timeout: Duration,
    mode: CompletionCancellationMode,
) -> Result<BoundedCompletionWait, Finding> {
    BoundedCompletionWait::new(timeout, mode)
        .map_err(|error| Finding::Harness(format!("bounded wait policy of {timeout:?}: {error}")))
}

/// Runs `part` for each mode the backend supports, quarantine first. A
/// violation (or an inconclusive part) ends the case; a part with nothing to
/// check makes the case not-supported once every other part passed. A mode
/// the backend does not claim (`supports_cancellation` is false) is no
/// missing instrument: its part does not apply, and a case whose claimed
/// parts all passed is a pass with a note naming the part that did not
/// apply. Only a backend that claims no mode at all leaves nothing to check.
pub(super) fn each_mode<H: Harness>(
    ctx: &RankCtx<'_, H>,
    part: impl FnMut(CompletionCancellationMode) -> Check,
) -> Check {
    each_claimed_mode(supported::<H>, |note| ctx.note(note), part)
}

/// [`each_mode`] with the claim and the note taken as arguments.
fn each_claimed_mode(
    claimed: impl Fn(CompletionCancellationMode) -> bool,
    mut note: impl FnMut(String),
    mut part: impl FnMut(CompletionCancellationMode) -> Check,
) -> Check {
    let mut parts = Parts::default();
    let mut unclaimed = Vec::new();
    let mut not_applied = Vec::new();
    for mode in MODES {
        if !claimed(mode) {
            unclaimed.push(mode);
            continue;
        }
        match part(mode) {
            Err(Finding::NotSupported(reason)) if reason.starts_with(DID_NOT_APPLY) => {
                not_applied.push(reason);
            }
            outcome => parts.run(outcome)?,
        }
    }
    if unclaimed.len() == MODES.len() {
        return Err(Finding::NotSupported(
            "supports_cancellation is false for both QuarantineUntilComplete and NativeCancel: no bounded wait to check"
                .into(),
        ));
    }
    if unclaimed.len() + not_applied.len() == MODES.len() {
        return Err(crate::check::setup(format!(
            "no claimed mode could be decided: {}",
            not_applied.join("; ")
        )));
    }
    parts.end()?;
    for mode in unclaimed {
        note(format!(
            "the {mode:?} part did not apply: supports_cancellation({mode:?}) is false; every claimed mode was checked"
        ));
    }
    for reason in not_applied {
        note(format!("the NativeCancel {reason}"));
    }
    Ok(())
}

/// Why the cases of `id` are not-supported on this backend before they run:
/// CAN-5 is all NativeCancel and CAN-6 all quarantine, so a backend that
/// does not claim that mode (`supports_cancellation` is false) leaves them
/// nothing to check, as an unclaimed operation does. `None` for every other
/// ID (their unclaimed modes only make parts not apply, see [`each_mode`]).
pub(crate) fn unclaimed_mode<H: Harness>(id: &str) -> Option<String> {
    let mode = match id {
        "CAN-5" => NativeCancel,
        "CAN-6" => Quarantine,
        _ => return None,
    };
    (!supported::<H>(mode)).then(|| {
        format!(
            "{mode:?} is not claimed by this backend (supports_cancellation({mode:?}) is false)"
        )
    })
}

/// Marks a part's finding as a part that did not apply (see [`each_mode`]).
const DID_NOT_APPLY: &str = "part did not apply: ";

/// The finding of a part that did not apply: noted, never a verdict.
pub(super) fn did_not_apply(reason: String) -> Finding {
    Finding::NotSupported(format!("{DID_NOT_APPLY}{reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        claimed: impl Fn(CompletionCancellationMode) -> bool,
        part: impl FnMut(CompletionCancellationMode) -> Check,
    ) -> (Check, Vec<String>) {
        let mut notes = Vec::new();
        let outcome = each_claimed_mode(claimed, |note| notes.push(note), part);
        (outcome, notes)
    }

    #[test]
    fn an_unclaimed_mode_is_a_note_not_a_missing_instrument() {
        let mut ran = Vec::new();
        let (outcome, notes) = run(
            |mode| mode == Quarantine,
            |mode| {
                ran.push(mode);
                Ok(())
            },
        );
        assert_eq!(outcome, Ok(()));
        assert_eq!(ran, [Quarantine]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("NativeCancel part did not apply"),
            "{notes:?}"
        );
    }

    #[test]
    fn a_claimed_part_still_decides() {
        let (outcome, notes) = run(
            |mode| mode == Quarantine,
            |_| Err(Finding::Violation("broken".into())),
        );
        assert_eq!(outcome, Err(Finding::Violation("broken".into())));
        assert!(notes.is_empty());
        // A claimed part that could not be checked is still not-supported:
        // an unclaimed mode never turns a missing instrument into a pass.
        let (outcome, _) = run(
            |mode| mode == NativeCancel,
            |_| Err(Finding::NotSupported("no probe".into())),
        );
        assert!(
            matches!(outcome, Err(Finding::NotSupported(_))),
            "{outcome:?}"
        );
    }

    #[test]
    fn no_claimed_mode_leaves_nothing_to_check() {
        let (outcome, notes) = run(|_| false, |_| Ok(()));
        assert!(
            matches!(outcome, Err(Finding::NotSupported(_))),
            "{outcome:?}"
        );
        assert!(notes.is_empty());
    }

    #[test]
    fn every_claimed_mode_runs_without_a_note() {
        let mut ran = Vec::new();
        let (outcome, notes) = run(
            |_| true,
            |mode| {
                ran.push(mode);
                Ok(())
            },
        );
        assert_eq!(outcome, Ok(()));
        assert_eq!(ran, MODES);
        assert!(notes.is_empty());
    }
}
