//! The `COMMCHECK_*` environment variables the runner reads, parsed
//! strictly: a value that is not one of the accepted ones is a
//! [`SettingsError`] naming the variable, the value and what is accepted,
//! never a silent fallback. An unset (or empty) variable takes its default.
//! A variable set for a command that does not read it is an error too
//! ([`Settings::read`], [`Reader`]): it would be silently ignored.
//!
//! | Variable | Read by | Sets; accepted | Default |
//! |---|---|---|---|
//! | `COMMCHECK_CASE_TIMEOUT_MS` | every run | the case watchdog: how long nothing may move in a case; whole milliseconds, 100 to 3600000 | 20000 |
//! | `COMMCHECK_SEED` | every run | the base seed, a decimal u64 (replays a run; every result records it) | under nextest, derived from NEXTEST_RUN_ID; else from the clock |
//! | `COMMCHECK_JOBS` | every run | cases run at once, each case's world sizes in turn; 1 to 256 (cargo test: unless --test-threads) | certify: one world per CPU and more, up to 32, while a CPU is free; cargo test: one per CPU |
//! | `COMMCHECK_ISOLATION` | suites in one process | `thread` (cases in this process) or `process` (each in a child: aborts and segfaults are `crash`) | thread |
//! | `COMMCHECK_RESULTS_DIR` | suites (`cargo test`, nextest) | the records directory, one record per case (`commcheck-report report` merges it) | `commcheck/<backend>` in cargo's target directory |
//! | `COMMCHECK_RESULTS` | suites (`cargo test`, nextest) | also write this process's whole run to this JSON file | not written |
//! | `COMMCHECK_GRACE_MS` | mpirun launches | how long past a world's ceiling a process may take to report; whole milliseconds, 0 to 3600000 | 10000 |
//! | `COMMCHECK_CONNECT_TIMEOUT_MS` | mpirun launches | how long connecting the mesh may take; whole milliseconds, 100 to 3600000 | 60000 |
//! | `COMMCHECK_MESH_ADDRESS` | mpirun launches | the address the mesh binds and advertises: an IP address of this host, an interface or a network (10.0.0.0/24) | loopback |
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
    /// The variable is set where it does not apply: the command never
    /// reads it, so it is rejected rather than silently ignored.
    #[error(
        "{variable}={value:?} does not apply to {reader}: {variable} is read only by {applies}; unset it"
    )]
    DoesNotApply {
        /// The variable.
        variable: &'static str,
        /// Its value (lossily, when not Unicode).
        value: String,
        /// The command that read the environment ([`Reader::name`]).
        reader: &'static str,
        /// Where it applies.
        applies: &'static str,
    },
    /// The results directory (`COMMCHECK_RESULTS_DIR`, or its default)
    /// cannot be written.
    #[error("COMMCHECK_RESULTS_DIR: {reason}")]
    Unwritable {
        /// What failed.
        reason: String,
    },
}

/// One `COMMCHECK_*` variable, as [`TABLE`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// The commands that read it (anywhere else, setting it is an error).
    pub read_by: &'static str,
    /// What it sets, and the values accepted.
    pub accepted: &'static str,
    /// Its value when unset or empty.
    pub default: &'static str,
}

const EVERY_RUN: &str = "every run";
const SUITES: &str = "suites (`cargo test`, nextest)";
const PROCESS_WORLDS: &str = "mpirun launches";

/// Every `COMMCHECK_*` variable the kit reads: the one table the module
/// docs, the README and `commcheck-report certify --help` show (tests keep
/// them equal).
pub const TABLE: &[Variable] = &[
    Variable {
        name: TIMEOUT,
        read_by: EVERY_RUN,
        accepted: "the case watchdog: how long nothing may move in a case; whole milliseconds, 100 to 3600000",
        default: "20000",
    },
    Variable {
        name: SEED,
        read_by: EVERY_RUN,
        accepted: "the base seed, a decimal u64 (replays a run; every result records it)",
        default: "under nextest, derived from NEXTEST_RUN_ID; else from the clock",
    },
    Variable {
        name: JOBS,
        read_by: EVERY_RUN,
        accepted: "cases run at once, each case's world sizes in turn; 1 to 256 (cargo test: unless --test-threads)",
        default: "certify: one world per CPU and more, up to 32, while a CPU is free; cargo test: one per CPU",
    },
    Variable {
        name: ISOLATION,
        read_by: "suites in one process",
        accepted: "`thread` (cases in this process) or `process` (each in a child: aborts and segfaults are `crash`)",
        default: "thread",
    },
    Variable {
        name: RESULTS_DIR,
        read_by: SUITES,
        accepted: "the records directory, one record per case (`commcheck-report report` merges it)",
        default: "`commcheck/<backend>` in cargo's target directory",
    },
    Variable {
        name: RESULTS,
        read_by: SUITES,
        accepted: "also write this process's whole run to this JSON file",
        default: "not written",
    },
    Variable {
        name: GRACE,
        read_by: PROCESS_WORLDS,
        accepted: "how long past a world's ceiling a process may take to report; whole milliseconds, 0 to 3600000",
        default: "10000",
    },
    Variable {
        name: CONNECT_TIMEOUT,
        read_by: PROCESS_WORLDS,
        accepted: "how long connecting the mesh may take; whole milliseconds, 100 to 3600000",
        default: "60000",
    },
    Variable {
        name: MESH_ADDRESS,
        read_by: PROCESS_WORLDS,
        accepted: "the address the mesh binds and advertises: an IP address of this host, an interface or a network (10.0.0.0/24)",
        default: "loopback",
    },
];

/// [`TABLE`] as a Markdown table (the README's and the module docs').
pub fn markdown_table() -> String {
    let mut text =
        String::from("| Variable | Read by | Sets; accepted | Default |\n|---|---|---|---|\n");
    for v in TABLE {
        text.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            v.name, v.read_by, v.accepted, v.default
        ));
    }
    text
}

/// [`TABLE`] as plain text for `--help`: the variable and who reads it on
/// one line, what it sets and its default below, wrapped at 80 columns.
pub fn help_text() -> String {
    let mut text = String::new();
    for v in TABLE {
        text.push_str(&format!("  {}  [read by: {}]\n", v.name, v.read_by));
        for paragraph in [v.accepted.to_owned(), format!("default: {}", v.default)] {
            let mut line = String::from("     ");
            for word in paragraph.split_whitespace() {
                if line.len() + 1 + word.len() > 80 && line.len() > 5 {
                    text.push_str(&line);
                    text.push('\n');
                    line = String::from("     ");
                }
                line.push(' ');
                line.push_str(word);
            }
            text.push_str(&line);
            text.push('\n');
        }
    }
    text
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

/// A command that reads the `COMMCHECK_*` variables, and which of them it
/// reads: any other one set in its environment (even empty) is rejected
/// ([`SettingsError::DoesNotApply`]), never ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reader {
    /// The command, as errors name it.
    pub name: &'static str,
    /// Whether it is a suite run by `cargo test` or nextest (it writes
    /// records and may isolate cases in child processes).
    pub suite: bool,
    /// Whether its ranks are the processes of an `mpirun` launch.
    pub processes: bool,
}

impl Reader {
    /// A suite run by `cargo test` or nextest (`commcheck::main`).
    pub const SUITE: Self = Self {
        name: "a suite run by cargo test or nextest",
        suite: true,
        processes: false,
    };
    /// A suite launched by `mpirun`, one rank per process
    /// (`commcheck::processes::main_across`).
    pub const SUITE_ACROSS: Self = Self {
        name: "a suite launched by mpirun",
        suite: true,
        processes: true,
    };
    /// `commcheck-report certify`, or [`crate::run_cases`]: results
    /// returned, no records.
    pub const CASES: Self = Self {
        name: "commcheck-report certify (or commcheck::run_cases)",
        suite: false,
        processes: false,
    };
    /// `commcheck-report certify` under `mpirun`, or
    /// `commcheck::processes::run_cases_across`.
    pub const CASES_ACROSS: Self = Self {
        name: "commcheck-report certify under mpirun (or run_cases_across)",
        suite: false,
        processes: true,
    };

    /// Where `variable` applies, unless this reader reads it.
    fn does_not_read(self, variable: &str) -> Option<&'static str> {
        match variable {
            RESULTS | RESULTS_DIR if !self.suite => Some("suites run by cargo test or nextest"),
            ISOLATION if !self.suite || self.processes => {
                Some("suites run by cargo test or nextest in one process (an mpirun launch's ranks are processes already)")
            }
            GRACE | CONNECT_TIMEOUT | MESH_ADDRESS if !self.processes => {
                Some("process worlds (a suite or certify launched by mpirun)")
            }
            _ => None,
        }
    }
}

/// Read by `commcheck_mesh` where it connects (process worlds only).
const CONNECT_TIMEOUT: &str = commcheck_mesh::CONNECT_SETTING;
const MESH_ADDRESS: &str = commcheck_mesh::ADDRESS_SETTING;

impl Settings {
    /// The settings `reader` reads from this process's environment: an
    /// error for a bad value, and for a variable set that `reader` does not
    /// read.
    pub fn read(reader: Reader) -> Result<Self, SettingsError> {
        for variable in TABLE.iter().map(|v| v.name) {
            if let (Some(value), Some(applies)) =
                (std::env::var_os(variable), reader.does_not_read(variable))
            {
                return Err(SettingsError::DoesNotApply {
                    variable,
                    value: value.to_string_lossy().into_owned(),
                    reader: reader.name,
                    applies,
                });
            }
        }
        Self::from_env()
    }

    /// The settings from this process's environment (every variable, for
    /// any reader; see [`Settings::read`]).
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

    /// The module docs show [`TABLE`] as it is (the README's is checked by
    /// the workspace's `tests/spec_doc.rs`).
    #[test]
    fn the_docs_show_the_table() {
        let table = markdown_table();
        let docs: String = include_str!("settings.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//! ").or(line.strip_prefix("//!")))
            .map(|line| format!("{line}\n"))
            .collect();
        assert!(
            docs.contains(&table),
            "the module docs do not show the settings table as it is; paste:\n{table}"
        );
    }

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
