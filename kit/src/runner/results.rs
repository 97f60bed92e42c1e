//! The result model: what a run found, case by case. The certification
//! report is built from it.

use crate::harness::{Identity, Instruments};
use crate::spec::Class;
use crate::{Operation, Subject};

/// Version of the result-file schema.
pub const RESULTS_SCHEMA: u32 = 1;

/// The outcome of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The invariant held.
    Pass,
    /// The backend broke the invariant (or the harness failed).
    Fail,
    /// The operation is not claimed, or a needed instrument is missing.
    NotSupported,
    /// The watchdog fired; counts as a failure.
    Timeout,
    /// Backend or harness code panicked or aborted; counts as a failure.
    Crash,
    /// A timing check failed, then passed on its retry; never certifies.
    Flaky,
}

impl Verdict {
    /// The verdict's name as reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::NotSupported => "not-supported",
            Self::Timeout => "timeout",
            Self::Crash => "crash",
            Self::Flaky => "flaky",
        }
    }

    /// Whether the verdict counts as a failure of the backend.
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Fail | Self::Timeout | Self::Crash | Self::Flaky)
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CaseResult {
    /// Case name, e.g. `CAN-5::all_reduce_sum`.
    pub name: String,
    /// Invariant ID.
    pub invariant: String,
    /// Invariant family.
    pub family: String,
    /// Observation class of the invariant.
    pub class: Class,
    /// What the case exercised.
    pub subject: Subject,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, for anything but `pass`.
    pub message: Option<String>,
    /// Attempts made (2 when a timing check was retried).
    pub attempts: u32,
    /// Wall time of the case, all attempts.
    pub millis: u64,
    /// Seed of the case's randomness.
    pub seed: u64,
}

/// Everything one run found.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunResults {
    /// [`RESULTS_SCHEMA`].
    pub schema: u32,
    /// Version of the commcheck kit.
    pub kit_version: String,
    /// The backend under test.
    pub backend: Identity,
    /// Instruments the harness provided.
    pub instruments: Instruments,
    /// Operations the backend claimed.
    pub claims: Vec<Operation>,
    /// The run's base seed.
    pub seed: u64,
    /// Case results, in catalogue order.
    pub cases: Vec<CaseResult>,
}

impl RunResults {
    /// One summary line per family: counts by verdict.
    pub fn family_summary(&self) -> Vec<String> {
        crate::spec::FAMILIES
            .iter()
            .filter_map(|family| {
                let cases: Vec<_> = self.cases.iter().filter(|c| c.family == *family).collect();
                if cases.is_empty() {
                    return None;
                }
                let count = |v: Verdict| cases.iter().filter(|c| c.verdict == v).count();
                Some(format!(
                    "{family}: {} cases: {} pass, {} fail, {} not-supported, {} timeout, {} crash, {} flaky",
                    cases.len(),
                    count(Verdict::Pass),
                    count(Verdict::Fail),
                    count(Verdict::NotSupported),
                    count(Verdict::Timeout),
                    count(Verdict::Crash),
                    count(Verdict::Flaky),
                ))
            })
            .collect()
    }
}
