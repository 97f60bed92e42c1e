//! The report model: one event model that every sink renders.
//!
//! A [`Report`] is built ([`Report::build`]) from the kit's
//! [`RunResults`](commcheck::RunResults), the must-pass list of the kit
//! version ([`must_pass`]), an [`Expectations`](crate::Expectations) file and
//! the [`Environment`](crate::Environment) of the run. Its JSON form (schema
//! [`REPORT_SCHEMA`]) is the source of truth; JUnit and Markdown are views of
//! it.
//!
//! This is the bottom layer of the crate's report code: it names no other
//! module but [`crate::canonical`]. Building a report from a run (which
//! needs the expectations and the environment) lives in a layer above.

use std::collections::{BTreeMap, HashMap};

use commcheck::spec::Class;
use commcheck::{
    Attributed, Calibration, CaseResult, Evidence, Identity, Instruments, Operation, Subject,
    Verdict,
};
use serde::{Deserialize, Serialize};

use crate::canonical;

/// Value of [`Report::format`].
pub const REPORT_FORMAT: &str = "commcheck-report";

/// Version of the report schema this crate writes and verifies.
pub const REPORT_SCHEMA: u32 = 1;

/// The status a report gives a case: the kit's verdict, adjusted by the
/// expectations file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The invariant held.
    Pass,
    /// The backend broke the invariant (or the harness failed).
    Fail,
    /// Operation not claimed, or a needed instrument missing.
    NotSupported,
    /// The watchdog fired.
    Timeout,
    /// Backend or harness code panicked or aborted.
    Crash,
    /// A timing check failed, then passed on its retry.
    Flaky,
    /// The check could not establish its precondition; nothing was learnt.
    Inconclusive,
    /// A failure listed in the expectations file (with a reason and a link).
    Waived,
    /// A case listed in the expectations file that passed.
    UnexpectedPass,
}

impl Status {
    /// Every status, in report order.
    pub const ALL: [Status; 9] = [
        Self::Pass,
        Self::Fail,
        Self::NotSupported,
        Self::Timeout,
        Self::Crash,
        Self::Flaky,
        Self::Inconclusive,
        Self::Waived,
        Self::UnexpectedPass,
    ];

    /// The status of a case with `verdict`, `waived` when the expectations
    /// file lists it: a waived failure is `waived`, a waived pass is an
    /// `unexpected-pass`, and a waiver never changes `not-supported`.
    pub fn of(verdict: Verdict, waived: bool) -> Self {
        match (verdict, waived) {
            (Verdict::Pass, true) => Self::UnexpectedPass,
            (Verdict::Pass, false) => Self::Pass,
            (Verdict::NotSupported, _) => Self::NotSupported,
            (Verdict::Inconclusive, _) => Self::Inconclusive,
            (_, true) => Self::Waived,
            (Verdict::Fail, false) => Self::Fail,
            (Verdict::Timeout, false) => Self::Timeout,
            (Verdict::Crash, false) => Self::Crash,
            (Verdict::Flaky, false) => Self::Flaky,
        }
    }

    /// The status as reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::NotSupported => "not-supported",
            Self::Timeout => "timeout",
            Self::Crash => "crash",
            Self::Flaky => "flaky",
            Self::Inconclusive => "inconclusive",
            Self::Waived => "waived",
            Self::UnexpectedPass => "unexpected-pass",
        }
    }

    /// A failure of the backend: `fail`, `timeout`, `crash`, `flaky`.
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Fail | Self::Timeout | Self::Crash | Self::Flaky)
    }

    /// The case ran and the invariant held: `pass` or `unexpected-pass`.
    pub fn is_pass(self) -> bool {
        matches!(self, Self::Pass | Self::UnexpectedPass)
    }

    /// The status counts towards a certification level: a pass. A waived
    /// failure never does; it counts only towards the level a report
    /// reaches *with waivers* ([`Report::with_waivers`]).
    pub fn certifies(self) -> bool {
        self.is_pass()
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

use commcheck::runner::level::Graded;
pub use commcheck::runner::level::{is_claimed, must_pass, Level};

/// A report's case as a level sees it: a pass or an unexpected pass
/// certifies ([`Status::certifies`]); a failure or a waived one fails.
impl Graded for ReportCase {
    fn name(&self) -> &str {
        &self.name
    }
    fn invariant(&self) -> &str {
        &self.invariant
    }
    fn class(&self) -> Class {
        self.class
    }
    fn certifies(&self) -> bool {
        self.status.certifies()
    }
    fn fails(&self) -> bool {
        self.status.is_failure() || self.status == Status::Waived
    }
    fn attributed(&self) -> &[Attributed] {
        &self.attributed
    }
    fn verdict(&self) -> Verdict {
        self.verdict
    }
    fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

/// The violations `cases` recorded for another invariant (`attributed`)
/// whose invariant has no failing (or waived) case among them: observed
/// with certainty, yet failing nothing. A report with any reaches level
/// `none` ([`Level::reached`]), whatever its cases' statuses: each is
/// `(case name, attributed invariant, message)`.
pub fn unresolved_attributions(cases: &[ReportCase]) -> Vec<(&str, &str, &str)> {
    commcheck::runner::level::unresolved(cases)
        .into_iter()
        .map(|(name, seen)| (name, seen.invariant.as_str(), seen.message.as_str()))
        .collect()
}

/// Each case name of `cases` with its result: `Some` for a name with
/// exactly one result, `None` for a name with several.
pub(crate) fn sole_results(cases: &[ReportCase]) -> HashMap<&str, Option<&ReportCase>> {
    commcheck::runner::level::sole_results(cases)
}

/// A waiver as a report records it on the case it applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Waiver {
    /// Why the failure is accepted (required; `verify` rejects an empty one).
    #[serde(default)]
    pub reason: String,
    /// Where it is tracked (required; `verify` rejects an empty one).
    #[serde(default)]
    pub link: String,
}

/// One waiver of an expectations file, as [`crate::Expectations`] reads it
/// and as a report lists it in [`Report::unused_waivers`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// Invariant ID, e.g. `CAN-2`.
    #[serde(default)]
    pub invariant: String,
    /// Subject name (as after `::` in case names), or `*`.
    #[serde(default)]
    pub subject: String,
    /// Why the failure is accepted.
    #[serde(default)]
    pub reason: String,
    /// Where it is tracked.
    #[serde(default)]
    pub link: String,
}

/// One case of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportCase {
    /// Case name, `<invariant>::<subject>`.
    pub name: String,
    /// Invariant ID.
    pub invariant: String,
    /// Invariant family.
    pub family: String,
    /// Observation class of the invariant.
    pub class: Class,
    /// What the case exercised.
    pub subject: Subject,
    /// The kit's verdict.
    pub verdict: Verdict,
    /// The reported status ([`Status::of`] the verdict and the waiver).
    pub status: Status,
    /// Why, for anything but `pass`.
    pub message: Option<String>,
    /// Attempts made (2 when a timing check was retried).
    pub attempts: u32,
    /// Wall time of the case, all attempts.
    pub millis: u64,
    /// Seed of the case's randomness.
    pub seed: u64,
    /// The expectations-file entry that applies to the case, if any.
    #[serde(default)]
    pub waiver: Option<Waiver>,
    /// What the verdict rests on: `black-box` or `instrumented`.
    #[serde(default)]
    pub evidence: Evidence,
    /// The world sizes the case ran on.
    #[serde(default)]
    pub worlds: Vec<usize>,
    /// Notes on the verdict (e.g. why an invariant holds by design).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Violations of other invariants seen while the case ran; they belong to
    /// those invariants and never change this case's status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributed: Vec<Attributed>,
    /// See [`crate::canonical`].
    #[serde(default)]
    pub fingerprint: String,
}

impl ReportCase {
    /// The report's view of a kit result, with the waiver that applies.
    pub fn from_result(result: &CaseResult, waiver: Option<&Expectation>) -> Self {
        let mut case = Self {
            name: result.name.clone(),
            invariant: result.invariant.clone(),
            family: result.family.clone(),
            class: result.class,
            subject: result.subject,
            verdict: result.verdict,
            status: Status::of(result.verdict, waiver.is_some()),
            message: result.message.clone(),
            attempts: result.attempts,
            millis: result.millis,
            seed: result.seed,
            waiver: waiver.map(|w| Waiver {
                reason: w.reason.clone(),
                link: w.link.clone(),
            }),
            evidence: result.evidence,
            worlds: result.worlds.clone(),
            notes: result.notes.clone(),
            attributed: result.attributed.clone(),
            fingerprint: String::new(),
        };
        case.fingerprint = serde_json::to_value(&case)
            .map(|value| canonical::case_fingerprint(&value))
            .unwrap_or_default();
        case
    }
}

/// The host a report was produced on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Host name (`unknown` when it cannot be read).
    pub hostname: String,
    /// `std::env::consts::OS`.
    pub os: String,
    /// `std::env::consts::ARCH`.
    pub arch: String,
    /// Available parallelism.
    pub cpus: usize,
}

/// Where a report comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// Version of the commcheck kit that ran the cases.
    pub kit_version: String,
    /// Schema of the kit's result model the cases came from.
    pub results_schema: u32,
    /// `commcheck-report <version>` that wrote the report.
    pub tool: String,
    /// Resolved versions of `eredu-core`, `eredu-runtime`, `eredu-nn` in the
    /// build of the binary that ran the cases.
    pub eredu: BTreeMap<String, String>,
    /// `rustc -V` of the compiler that built the binary that ran the cases
    /// (the tool's own for results that do not say).
    pub rustc: String,
    /// The target triple of that binary (absent in reports made from
    /// results that do not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The hosts that ran the cases, as their records say (several for
    /// shards; absent when the results do not say). `host` is where the
    /// report was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ran_on: Vec<String>,
    /// `git rev-parse HEAD` of the working directory, when it is a checkout.
    pub git_revision: Option<String>,
    /// Where the run happened.
    pub host: Host,
    /// The backend under test.
    pub backend: Identity,
    /// Instruments the harness provided.
    pub instruments: Instruments,
    /// Operations the backend claimed.
    pub claims: Vec<Operation>,
    /// The run's base seed (each case records its own derived seed).
    pub seed: u64,
    /// The lazy-work calibration of the run, when a case needed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// The number of processes whose processes were the ranks (`mpirun -n
    /// N`); absent for worlds of threads in one process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    /// Where each rank ran (host name, mesh address), for a run across the
    /// processes of a launch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<commcheck::RankPlace>,
    /// Why the run stopped early (a rank's process died or hung); absent
    /// for a whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// The data the value checks ran on: dtypes and the size sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<commcheck::DataCoverage>,
    /// When the report was written, in seconds since the Unix epoch.
    pub generated_unix: u64,
}

/// A certification report. See the crate docs for the JSON schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Always [`REPORT_FORMAT`].
    pub format: String,
    /// [`REPORT_SCHEMA`].
    pub schema: u32,
    /// The level the results reach ([`Level::reached`]).
    pub level: Level,
    /// Where the report comes from.
    pub provenance: Provenance,
    /// Every case that must have a result: each SPEC invariant on each
    /// claimed subject of the kit version, in catalogue order.
    pub must_pass: Vec<String>,
    /// The results, in catalogue order (unclaimed operations' cases
    /// included, as `not-supported`).
    pub cases: Vec<ReportCase>,
    /// Expectations-file entries that matched no case.
    pub unused_waivers: Vec<Expectation>,
    /// The text of every invariant a case fails (a failure status), by ID
    /// ([`failing_invariants`]), so that the report alone says what was
    /// broken; absent when nothing fails. `commcheck-report explain ID` says
    /// more.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub invariants: BTreeMap<String, String>,
    /// See [`crate::canonical`].
    pub digest: String,
}

/// The kit's text of every invariant one of `cases` fails (its status is a
/// failure), by ID.
pub fn failing_invariants(cases: &[ReportCase]) -> BTreeMap<String, String> {
    cases
        .iter()
        .filter(|case| case.status.is_failure())
        .filter_map(|case| {
            commcheck::spec::invariant(&case.invariant)
                .map(|invariant| (invariant.id.to_owned(), invariant.text.to_owned()))
        })
        .collect()
}

impl Report {
    /// The level the report would reach if its waived failures passed, and
    /// how many waivers that takes, when that is above [`Report::level`]:
    /// shown as `full-with-waivers (8)`, never as `full`.
    pub fn with_waivers(&self) -> Option<(Level, usize)> {
        let waived = self.count(Status::Waived);
        let level = Level::reached_by(&self.must_pass, &self.cases, |case| {
            case.status.certifies() || case.status == Status::Waived
        });
        (waived > 0 && level > self.level).then_some((level, waived))
    }

    /// The outcome as tools print it: the level, followed by the level with
    /// waivers when they raise it (`none; full-with-waivers (8)`).
    pub fn outcome(&self) -> String {
        match self.with_waivers() {
            Some((level, waived)) => format!("{}; {level}-with-waivers ({waived})", self.level),
            None => self.level.to_string(),
        }
    }
}

impl Report {
    /// Recomputes [`Report::digest`] after a change.
    pub fn seal(&mut self) {
        self.digest = serde_json::to_value(&*self)
            .map(|value| canonical::report_digest(&value))
            .unwrap_or_default();
    }

    /// The report as pretty-printed JSON (the digest does not depend on the layout).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self).map(|mut json| {
            json.push('\n');
            json
        })
    }

    /// The decided share of the report's cases (pass or failing), with the
    /// others counted by reason ([`commcheck::runner::decided`]).
    pub fn decided(&self) -> commcheck::runner::decided::Tally {
        commcheck::runner::decided::Tally::of(
            self.cases
                .iter()
                .map(|case| (case.verdict, case.message.as_deref())),
        )
    }

    /// How many cases have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.cases.iter().filter(|c| c.status == status).count()
    }
}
