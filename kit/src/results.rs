//! The result model: what a run found, case by case. The certification
//! report is built from it.

use crate::harness::{Identity, Instruments};
use crate::spec::Class;
use crate::{Operation, Subject};

/// Version of the result-file schema.
pub const RESULTS_SCHEMA: u32 = 1;

/// `1 case`, `0 cases`, `2 cases`.
pub fn cases(n: usize) -> String {
    if n == 1 {
        "1 case".to_owned()
    } else {
        format!("{n} cases")
    }
}

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
    /// The check could not establish its precondition (e.g. work that should
    /// be pending finished first), even on retries with more work. Nothing was
    /// learnt about the invariant: never certifies, never blames it.
    Inconclusive,
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
            Self::Inconclusive => "inconclusive",
        }
    }

    /// Whether the verdict counts as a failure of the backend (`inconclusive`
    /// does not: it never certifies, but blames nothing).
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
    /// What the verdict rests on: `instrumented` when the case used an
    /// instrument of the harness, `black-box` when it used the public API only.
    #[serde(default)]
    pub evidence: Evidence,
    /// The world sizes the case ran on (empty when it did not run).
    #[serde(default)]
    pub worlds: Vec<usize>,
    /// Remarks on a verdict, e.g. why an invariant holds by the backend's
    /// design although the situation the check provokes never arose.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Violations of *other* invariants seen while this case ran (a wrong
    /// output value found by a retention check belongs to the operation's
    /// value invariant, e.g. `SUM-1`). They never change this case's verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributed: Vec<Attributed>,
}

/// What a case's verdict rests on.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// The public API of the backend only (late peers, lazy tensor work,
    /// second handles the backend's own types offer).
    #[default]
    BlackBox,
    /// At least one instrument of the harness.
    Instrumented,
}

impl Evidence {
    /// The evidence as results spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BlackBox => "black-box",
            Self::Instrumented => "instrumented",
        }
    }
}

/// A violation of another invariant than the case's own, seen during the case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Attributed {
    /// The invariant the observation violates, e.g. `SUM-1`.
    pub invariant: String,
    /// What was seen.
    pub message: String,
}

/// How the kit made local work pending without the hold instrument: lazy
/// tensor work of the backend's own, sized once per run (see
/// [`crate::matrix::lazy`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Calibration {
    /// The operation chained, e.g. `matmul`.
    pub operation: String,
    /// Side of the square matrices.
    pub size: usize,
    /// Operations in the chain.
    pub chain: usize,
    /// Measured duration of building, submitting and completing one chain
    /// (the fastest of the calibration runs), in milliseconds.
    pub millis: u64,
    /// Or why no such work could be made (an eager backend, tensor
    /// operations that fail...): local subjects then need the hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
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
    /// The lazy-work calibration of this run, when a case needed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// The number of processes of the launch whose processes were the
    /// ranks (`mpirun -n N`); `None` for worlds of threads in one process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    /// Why the run stopped before every selected case ran (a rank's process
    /// died or hung, or the run is still going); `None` once it finished.
    /// A file with this set is never a whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// The data the value checks ran on: dtypes and the size sweep (absent
    /// in results of kits before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataCoverage>,
    /// The build of the binary that ran the cases (absent in results of
    /// kits before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::build::Build>,
    /// The hosts that ran the cases (several for shards of one run; empty
    /// in results of kits before they were recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Where each rank ran, for a run across the processes of a launch
    /// (empty for worlds of threads in one process).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankPlace>,
}

/// Where one rank of a launch ran: its host name and the address of its
/// process on the kit's mesh (`COMMCHECK_MESH_ADDRESS` picks it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RankPlace {
    pub rank: usize,
    pub host: String,
    pub address: String,
}

/// What data the value checks (SUM-1, GAT-1, GAT-2, A2A-1, BRD-1, P2P-1)
/// ran on, from the harness's declarations.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DataCoverage {
    /// The dtypes every value check ran in.
    pub dtypes: Vec<crate::Dtype>,
    /// The world sizes the size sweep runs on.
    pub sweep_worlds: Vec<usize>,
    /// The size sweep of each dtype.
    pub sweeps: Vec<Sweep>,
}

/// The size sweep of one dtype.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sweep {
    pub dtype: crate::Dtype,
    /// The boundaries the harness named, in bytes per rank.
    pub boundaries: Vec<usize>,
    /// The element counts per rank that ran.
    pub elements: Vec<usize>,
    /// The element counts skipped for the harness's limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<usize>,
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
                    "{family}: {}: {} pass, {} fail, {} not-supported, {} timeout, {} crash, {} flaky, {} inconclusive",
                    self::cases(cases.len()),
                    count(Verdict::Pass),
                    count(Verdict::Fail),
                    count(Verdict::NotSupported),
                    count(Verdict::Timeout),
                    count(Verdict::Crash),
                    count(Verdict::Flaky),
                    count(Verdict::Inconclusive),
                ))
            })
            .collect()
    }
}
