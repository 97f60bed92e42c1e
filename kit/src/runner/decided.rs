//! The decided share of a run: how many cases reached a verdict about their
//! invariant (pass, or a failure), and why the others did not: not-supported
//! counted by reason, inconclusive by setup reason. Reports and the run's
//! closing summary lead with it.
//!
//! ```
//! use commcheck::runner::decided::Tally;
//! use commcheck::Verdict;
//!
//! let tally = Tally::of([
//!     (Verdict::Pass, None),
//!     (Verdict::Fail, Some("SUM-1 violated on rank 0: ...")),
//!     (Verdict::NotSupported, Some("needs the hold instrument, which the harness does not provide")),
//!     (Verdict::NotSupported, Some("broadcast is not claimed by this backend")),
//! ]);
//! assert_eq!((tally.decided(), tally.cases), (2, 4));
//! assert_eq!(
//!     tally.to_string(),
//!     "decided 2 of 4 cases (50%: 1 pass, 1 failing); not-supported 2 (instrument 1, unclaimed 1)"
//! );
//! ```

use std::collections::BTreeMap;

use crate::results::{cases, RunResults, Verdict};

/// Why a case is not-supported, as the kit's own messages say it.
pub fn not_supported_reason(message: &str) -> &'static str {
    if message.contains("is not claimed by this backend") {
        "unclaimed"
    } else if message.contains("needs a world of") {
        "world size"
    } else if message.starts_with("the backend is unavailable on this machine") {
        "backend unavailable here"
    } else if message.contains("instrument") {
        "instrument"
    } else {
        "other"
    }
}

/// Why a case is inconclusive, as the kit's own messages say it.
pub fn inconclusive_reason(message: &str) -> &'static str {
    if message.contains("(EXC-2)") {
        "rests on an early completion report (EXC-2)"
    } else if message.contains("violated while checking") || message.contains("recorded for") {
        "another invariant's violation"
    } else if message.contains("lazy work") {
        "lazy work may have finished (pending window)"
    } else if message.contains("had not returned after") {
        "a setup call blocked"
    } else if message.contains("did not complete") {
        "healthy work did not complete"
    } else {
        "other setup"
    }
}

/// Counts of a set of case results.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Every case counted.
    pub cases: usize,
    /// `pass`.
    pub pass: usize,
    /// `fail`, `timeout`, `crash`, `flaky`.
    pub failing: usize,
    /// `not-supported`, by [`not_supported_reason`].
    pub not_supported: BTreeMap<&'static str, usize>,
    /// `inconclusive`, by [`inconclusive_reason`].
    pub inconclusive: BTreeMap<&'static str, usize>,
}

impl Tally {
    /// Counts `(verdict, message)` pairs.
    pub fn of<'a>(results: impl IntoIterator<Item = (Verdict, Option<&'a str>)>) -> Self {
        let mut tally = Self::default();
        for (verdict, message) in results {
            let message = message.unwrap_or("");
            tally.cases += 1;
            match verdict {
                Verdict::Pass => tally.pass += 1,
                Verdict::NotSupported => {
                    *tally
                        .not_supported
                        .entry(not_supported_reason(message))
                        .or_default() += 1;
                }
                Verdict::Inconclusive => {
                    *tally
                        .inconclusive
                        .entry(inconclusive_reason(message))
                        .or_default() += 1;
                }
                Verdict::Fail | Verdict::Timeout | Verdict::Crash | Verdict::Flaky => {
                    tally.failing += 1;
                }
            }
        }
        tally
    }

    /// Cases with a verdict about their invariant: pass or failing.
    pub fn decided(&self) -> usize {
        self.pass + self.failing
    }

    /// The decided share in whole percent (0 for no case).
    pub fn percent(&self) -> usize {
        (self.decided() * 100).checked_div(self.cases).unwrap_or(0)
    }
}

fn by_reason(counts: &BTreeMap<&'static str, usize>) -> String {
    counts
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "decided {} of {} ({}%: {} pass, {} failing)",
            self.decided(),
            cases(self.cases),
            self.percent(),
            self.pass,
            self.failing
        )?;
        for (verdict, counts) in [
            ("not-supported", &self.not_supported),
            ("inconclusive", &self.inconclusive),
        ] {
            let total: usize = counts.values().sum();
            if total > 0 {
                write!(f, "; {verdict} {total} ({})", by_reason(counts))?;
            }
        }
        Ok(())
    }
}

impl RunResults {
    /// The decided share: cases with a verdict about their invariant, and
    /// why the others have none (see [`crate::runner::decided`]).
    pub fn decided(&self) -> Tally {
        Tally::of(
            self.cases
                .iter()
                .map(|case| (case.verdict, case.message.as_deref())),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogues_reasons_are_told_apart() {
        for (message, reason) in [
            ("broadcast is not claimed by this backend", "unclaimed"),
            (
                "NativeCancel is not claimed by this backend (supports_cancellation(NativeCancel) is false)",
                "unclaimed",
            ),
            (
                "needs a world of 8 rank(s); the harness builds up to 1 in one process",
                "world size",
            ),
            (
                "needs the hold and liveness probe instruments, which the harness does not provide",
                "instrument",
            ),
            ("the harness provides no observer instrument", "instrument"),
            (
                "the backend is unavailable on this machine: no usable CUDA device here (no libcuda)",
                "backend unavailable here",
            ),
            ("a reason the kit does not know", "other"),
        ] {
            assert_eq!(not_supported_reason(message), reason, "{message}");
        }
    }

    #[test]
    fn one_case_is_singular() {
        assert_eq!(
            Tally::of([(Verdict::Pass, None)]).to_string(),
            "decided 1 of 1 case (100%: 1 pass, 0 failing)"
        );
    }

    #[test]
    fn an_empty_run_decides_nothing() {
        let tally = Tally::of([]);
        assert_eq!((tally.decided(), tally.percent()), (0, 0));
        assert_eq!(
            tally.to_string(),
            "decided 0 of 0 cases (0%: 0 pass, 0 failing)"
        );
    }

    #[test]
    fn inconclusive_cases_are_counted_by_setup_reason() {
        let tally = Tally::of([
            (
                Verdict::Inconclusive,
                Some("x: inconclusive, CAN-1 not checked: setup: the lazy work may have finished"),
            ),
            (
                Verdict::Inconclusive,
                Some("EXC-1 violated while checking CAN-2 (recorded for EXC-1): ..."),
            ),
            (Verdict::Timeout, None),
        ]);
        assert_eq!(tally.failing, 1);
        assert_eq!(
            tally.to_string(),
            "decided 1 of 3 cases (33%: 0 pass, 1 failing); inconclusive 2 (another invariant's violation 1, \
             lazy work may have finished (pending window) 1)"
        );
    }
}
