//! The `COMMCHECK_*` environment variables the runner reads, parsed
//! strictly: a value that is not one of the accepted ones is a
//! [`SettingsError`] naming the variable, the value and what is accepted,
//! never a silent fallback. An unset (or empty) variable takes its default.
//!
//! | Variable | Accepted | Default |
//! |---|---|---|
//! | `COMMCHECK_CASE_TIMEOUT_MS` | per-case watchdog (how long no rank may make progress), whole milliseconds from 100 to 3 600 000 | 20 000 |
//! | `COMMCHECK_SEED` | base seed, a decimal `u64` (replays a run: the seed is in every result file) | under nextest, derived from `NEXTEST_RUN_ID` (one seed for the run's processes); else from the clock; recorded |
//! | `COMMCHECK_JOBS` | cases run at once, each case's world sizes in turn (so at most this many worlds at a time), 1 to 256: by [`crate::run_cases`] and `commcheck-report certify`, and by a vendor's `cargo test` unless `--test-threads` is given | `run_cases`/`certify`: as many as the machine has room for (each case's world sizes at once, the longest cases first: one world per CPU, and more, up to 32 worlds in the process, while other processes leave a CPU free, since most cases wait); `cargo test`: libtest's default, one per CPU, world sizes in turn |
//! | `COMMCHECK_ISOLATION` | `thread` (cases in this process) or `process` (each case in a child process: aborts and segfaults become `crash`) | `thread` |
//! | `COMMCHECK_RESULTS_DIR` | the results directory: one record per case, merged by `commcheck-report report` (see [`crate::runner::records`]) | `commcheck/<backend>` in cargo's target directory |
//! | `COMMCHECK_RESULTS` | also write this process's whole run to this JSON file (for tools that merge launches) | not written |
//! | `COMMCHECK_GRACE_MS` | process worlds ([`crate::processes`]): how long past a world's ceiling (six case watchdogs) a process may take to report its outcome before it is declared hung, whole milliseconds from 0 to 3 600 000; the leader's value is used by every process | 10 000 |
//! | `COMMCHECK_CONNECT_TIMEOUT_MS` | process worlds: how long connecting the mesh and its first exchanges may take, whole milliseconds from 100 to 3 600 000; read by [`commcheck_mesh::connect_limit`] in each process, before the leader's settings can reach it | 60 000 |
//! | `COMMCHECK_MESH_ADDRESS` | process worlds ([`crate::processes`]): the address the mesh binds and advertises, an IP address of this host, an interface name or a network (`10.0.0.0/24`); read by [`commcheck_mesh::configured_address`] when the mesh is built, a value matching no interface is an error listing them | loopback |
//!
//! ```
//! use commcheck::settings::{Settings, SettingsError};
//!
//! let read = |vars: &'static [(&'static str, &'static str)]| {
//!     Settings::from_vars(|name| {
//!         vars.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
//!     })
//! };
//! assert_eq!(read(&[("COMMCHECK_JOBS", "4")]).unwrap().jobs, Some(4));
//! let error = read(&[("COMMCHECK_CASE_TIMEOUT_MS", "abc")]).unwrap_err();
//! assert!(matches!(error, SettingsError::Invalid { variable: "COMMCHECK_CASE_TIMEOUT_MS", .. }));
//! assert!(error.to_string().contains("100 to 3600000"));
//! ```

use std::path::PathBuf;
use std::time::Duration;

/// Where the runner runs each case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// In this process, on threads (`COMMCHECK_ISOLATION=thread`, the default).
    Thread,
    /// Each case in a child process (`COMMCHECK_ISOLATION=process`).
    Process,
}

/// The runner's settings, from the environment ([`Settings::from_env`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Per-case watchdog (`COMMCHECK_CASE_TIMEOUT_MS`).
    pub case_timeout: Duration,
    /// Base seed (`COMMCHECK_SEED`); `None`: one is taken from the clock.
    pub seed: Option<u64>,
    /// Cases run at once by [`crate::run_cases`] (`COMMCHECK_JOBS`); `None`
    /// when unset: as many as the machine has room for.
    pub jobs: Option<usize>,
    /// Where cases run (`COMMCHECK_ISOLATION`).
    pub isolation: Isolation,
    /// The whole-run result file (`COMMCHECK_RESULTS`); `None`: none.
    pub results: Option<PathBuf>,
    /// The results directory (`COMMCHECK_RESULTS_DIR`); `None`: the
    /// default, [`crate::runner::records::default_dir`].
    pub results_dir: Option<PathBuf>,
    /// How long past a world's ceiling a process of a process world may
    /// take to report its outcome (`COMMCHECK_GRACE_MS`).
    pub grace: Duration,
    /// The nextest run this process belongs to (`NEXTEST_RUN_ID`, set by
    /// nextest): the base seed is derived from it when none is set.
    pub nextest_run: Option<String>,
}

/// A `COMMCHECK_*` variable with a value the runner does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// The value is not one of the accepted ones.
    #[error("{variable}={value:?} is not accepted: expected {expected}")]
    Invalid {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// The value is not valid Unicode.
    #[error("{variable} is not valid Unicode: expected {expected}")]
    NotUnicode {
        /// The variable.
        variable: &'static str,
        /// What is accepted.
        expected: &'static str,
    },
    /// The results directory (`COMMCHECK_RESULTS_DIR`, or its default)
    /// cannot be written.
    #[error("COMMCHECK_RESULTS_DIR: {reason}")]
    Unwritable {
        /// What failed.
        reason: String,
    },
}

const TIMEOUT: &str = "COMMCHECK_CASE_TIMEOUT_MS";
const TIMEOUT_EXPECTED: &str = "whole milliseconds from 100 to 3600000 (default 20000)";
const SEED: &str = "COMMCHECK_SEED";
const SEED_EXPECTED: &str = "a decimal integer from 0 to 18446744073709551615";
const JOBS: &str = "COMMCHECK_JOBS";
const JOBS_EXPECTED: &str =
    "a whole number of cases from 1 to 256 (default: as many as the machine has room for)";
const ISOLATION: &str = "COMMCHECK_ISOLATION";
const ISOLATION_EXPECTED: &str = "`thread` (the default) or `process`";
const GRACE: &str = "COMMCHECK_GRACE_MS";
const GRACE_EXPECTED: &str = "whole milliseconds from 0 to 3600000 (default 10000)";
const RESULTS: &str = "COMMCHECK_RESULTS";
const RESULTS_DIR: &str = "COMMCHECK_RESULTS_DIR";
const NEXTEST_RUN: &str = "NEXTEST_RUN_ID";

/// Every variable, with what it accepts.
const VARIABLES: &[(&str, &str)] = &[
    (TIMEOUT, TIMEOUT_EXPECTED),
    (SEED, SEED_EXPECTED),
    (JOBS, JOBS_EXPECTED),
    (ISOLATION, ISOLATION_EXPECTED),
    (GRACE, GRACE_EXPECTED),
];

impl Settings {
    /// The settings from this process's environment.
    pub fn from_env() -> Result<Self, SettingsError> {
        let mut not_unicode = None;
        let settings = Self::from_vars(|name| match std::env::var(name) {
            Ok(value) => Some(value),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                // Paths need not be Unicode (read below).
                if name != RESULTS && name != RESULTS_DIR {
                    not_unicode = not_unicode.or(VARIABLES.iter().find(|(v, _)| *v == name));
                }
                None
            }
        });
        if let Some(&(variable, expected)) = not_unicode {
            return Err(SettingsError::NotUnicode { variable, expected });
        }
        let mut settings = settings?;
        let path = |name| {
            std::env::var_os(name)
                .filter(|path| !path.is_empty())
                .map(PathBuf::from)
        };
        settings.results = path(RESULTS);
        settings.results_dir = path(RESULTS_DIR);
        Ok(settings)
    }

    /// The settings from `get`, which gives a variable's value (`None`
    /// when unset).
    pub fn from_vars(get: impl FnMut(&str) -> Option<String>) -> Result<Self, SettingsError> {
        let mut get = get;
        let mut value = |name: &str| get(name).filter(|value| !value.is_empty());
        let case_timeout = match value(TIMEOUT) {
            None => Duration::from_secs(20),
            Some(text) => text
                .parse::<u64>()
                .ok()
                .filter(|ms| (100..=3_600_000).contains(ms))
                .map(Duration::from_millis)
                .ok_or_else(|| invalid(TIMEOUT, text, TIMEOUT_EXPECTED))?,
        };
        let seed = match value(SEED) {
            None => None,
            Some(text) => Some(
                text.parse::<u64>()
                    .map_err(|_| invalid(SEED, text, SEED_EXPECTED))?,
            ),
        };
        let jobs = match value(JOBS) {
            None => None,
            Some(text) => Some(
                text.parse::<usize>()
                    .ok()
                    .filter(|jobs| (1..=256).contains(jobs))
                    .ok_or_else(|| invalid(JOBS, text, JOBS_EXPECTED))?,
            ),
        };
        let isolation = match value(ISOLATION).as_deref() {
            None | Some("thread") => Isolation::Thread,
            Some("process") => Isolation::Process,
            Some(other) => return Err(invalid(ISOLATION, other.to_owned(), ISOLATION_EXPECTED)),
        };
        let grace = match value(GRACE) {
            None => Duration::from_secs(10),
            Some(text) => text
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms <= 3_600_000)
                .map(Duration::from_millis)
                .ok_or_else(|| invalid(GRACE, text, GRACE_EXPECTED))?,
        };
        let results = value(RESULTS).map(PathBuf::from);
        let results_dir = value(RESULTS_DIR).map(PathBuf::from);
        let nextest_run = value(NEXTEST_RUN);
        Ok(Self {
            case_timeout,
            seed,
            jobs,
            isolation,
            results,
            results_dir,
            grace,
            nextest_run,
        })
    }

    /// The base seed: [`Settings::seed`]; else, under nextest, one derived
    /// from the run's ID, so that every process of one `cargo nextest run`
    /// has the same; else one from the clock.
    pub fn base_seed(&self) -> u64 {
        if let Some(seed) = self.seed {
            return seed;
        }
        if let Some(run) = &self.nextest_run {
            return run.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            });
        }
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5eed)
    }
}

fn invalid(variable: &'static str, value: String, expected: &'static str) -> SettingsError {
    SettingsError::Invalid {
        variable,
        value,
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        Settings::from_vars(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn unset_variables_take_their_defaults() {
        let settings = read(&[]).unwrap();
        assert_eq!(settings.case_timeout, Duration::from_secs(20));
        assert_eq!(settings.seed, None);
        assert_eq!(settings.jobs, None);
        assert_eq!(settings.isolation, Isolation::Thread);
        assert_eq!(settings.results, None);
        assert_eq!(settings.results_dir, None);
        assert_eq!(settings.grace, Duration::from_secs(10));
        assert_eq!(read(&[(JOBS, "")]).unwrap().jobs, None);
    }

    #[test]
    fn the_processes_of_one_nextest_run_share_a_seed() {
        let one = read(&[(NEXTEST_RUN, "0b4d7c1e")]).unwrap();
        let same = read(&[(NEXTEST_RUN, "0b4d7c1e")]).unwrap();
        let other = read(&[(NEXTEST_RUN, "9f00aa21")]).unwrap();
        assert_eq!(one.base_seed(), same.base_seed());
        assert_ne!(one.base_seed(), other.base_seed());
        let set = read(&[(NEXTEST_RUN, "0b4d7c1e"), (SEED, "7")]).unwrap();
        assert_eq!(set.base_seed(), 7, "COMMCHECK_SEED wins");
    }

    #[test]
    fn accepted_values_are_taken() {
        let settings = read(&[
            (TIMEOUT, "1500"),
            (SEED, "18446744073709551615"),
            (JOBS, "4"),
            (ISOLATION, "process"),
            (RESULTS, "out/r.json"),
            (RESULTS_DIR, "out/records"),
            (GRACE, "0"),
        ])
        .unwrap();
        assert_eq!(settings.grace, Duration::ZERO);
        assert_eq!(settings.case_timeout, Duration::from_millis(1500));
        assert_eq!(settings.seed, Some(u64::MAX));
        assert_eq!(settings.base_seed(), u64::MAX);
        assert_eq!(settings.jobs, Some(4));
        assert_eq!(settings.isolation, Isolation::Process);
        assert_eq!(settings.results, Some(PathBuf::from("out/r.json")));
        assert_eq!(settings.results_dir, Some(PathBuf::from("out/records")));
    }

    #[test]
    fn every_bad_value_is_an_error_naming_the_variable() {
        for (variable, value) in [
            (TIMEOUT, "abc"),
            (TIMEOUT, "0"),
            (TIMEOUT, "99"),
            (GRACE, "3600001"),
            (GRACE, "-1"),
            (TIMEOUT, "3600001"),
            (TIMEOUT, "-5"),
            (TIMEOUT, "1e3"),
            (SEED, "xyz"),
            (SEED, "-1"),
            (SEED, "18446744073709551616"),
            (JOBS, "0"),
            (JOBS, "257"),
            (JOBS, "two"),
            (ISOLATION, "proces"),
            (ISOLATION, "Process"),
        ] {
            let error = read(&[(variable, value)]).unwrap_err();
            let SettingsError::Invalid {
                variable: named,
                value: seen,
                ..
            } = &error
            else {
                panic!("{variable}={value}: unexpected error {error:?}");
            };
            assert_eq!((*named, seen.as_str()), (variable, value));
            let message = error.to_string();
            assert!(
                message.starts_with(&format!(
                    "{variable}=\"{value}\" is not accepted: expected "
                )),
                "{message}"
            );
        }
    }
}
