//! The runner: watchdog, verdicts, retries, process isolation, and a
//! libtest-compatible command line (any number of filters, `--exact`,
//! `--skip`, `--list`, `--ignored`, `--include-ignored`, `--format`), so
//! `cargo test`, `cargo nextest run` and IDE runners work.
//!
//! Environment: the `COMMCHECK_*` variables of [`crate::settings`], read
//! strictly when a run starts (a bad value is an error naming the variable).
//!
//! Cases not-supported before anything runs (an unclaimed operation, a
//! missing instrument for the whole check or for a part of it, an unbuilt
//! world size) are listed ignored, so every runner shows them skipped; a
//! case found not-supported while it runs is ignored with its reason.
//! libtest-mimic (0.8) cannot attach a reason to a test ignored before it
//! runs, so `cargo test` prints those as a bare `ignored`: the run's
//! closing summary on stderr ([`closing`]) gives every reason, grouped, with
//! the level the run reaches, what blocks the next one, and the invariant ×
//! subject grid ([`grid`]). Each case that runs writes its record to the
//! results directory ([`records`]), so that the records of any runner merge
//! into one run.
//!
//! Layers, lowest first: [`results`] (what a run reports), `execute` (one
//! case to its verdict), [`records`] (one file per case that ran), `cli`
//! (the command line and the run loop).

mod admission;
mod cli;
mod coverage;
pub mod decided;
mod execute;
pub mod grid;
mod isolation;
pub mod level;
pub mod records;
pub mod rerun;
/// The results model, at its old path (now [`crate::results`]).
pub use crate::results;

pub use cli::{closing, main, run_cases, run_cases_with, run_with};
pub(crate) use cli::{
    command_line, open_records, picked, report, run_trials, settings_or_exit, summary,
    write_results,
};
pub(crate) use execute::{execute_with, Worlds};
