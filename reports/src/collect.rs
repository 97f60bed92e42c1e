//! Reports from a results directory: what a vendor's own `cargo test` or
//! `cargo nextest run` left behind ([`commcheck::runner::records`]), merged
//! and written as a certification, the same files [`crate::certify()`] writes.
//!
//! ```no_run
//! use commcheck_report::{collect, Expectations};
//!
//! let made = collect::report_from_records(
//!     "target/commcheck/minimal".as_ref(),
//!     &Expectations::none(),
//! )?;
//! if !made.collected.is_whole() {
//!     eprintln!("partial run: {}", made.collected.missing.join(", "));
//! }
//! commcheck_report::write_report(&made.report, "certification".as_ref())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::Path;

use commcheck::runner::records::{self, Collected};

use crate::certify::CertifyError;
use crate::expectations::Expectations;
use crate::model::{is_claimed, Report};
use crate::provenance::Environment;

/// A report made from records, and what the merge found.
#[derive(Debug, Clone)]
pub struct FromRecords {
    /// The report: level `none`, and `provenance.incomplete` saying what is
    /// missing, when the records do not cover the run's catalogue.
    pub report: Report,
    /// The merge: missing and unfinished cases, stale records.
    pub collected: Collected,
}

/// Merges the records in `dir` and builds their report. The must-pass list is
/// the run's catalogue, minus what its backend did not claim (operations,
/// and the cancellation mode of CAN-5 or CAN-6), as
/// for [`crate::certify()`]; a case with no record is missing from the
/// report, whose level is then `none`.
pub fn report_from_records(
    dir: &Path,
    expectations: &Expectations,
) -> Result<FromRecords, CertifyError> {
    let collected = records::collect(dir).map_err(|error| CertifyError(error.to_string()))?;
    let header = &collected.header;
    let must_pass = header
        .catalogue
        .iter()
        .filter(|planned| !planned.unclaimed && is_claimed(planned.subject, &header.claims))
        .map(|planned| planned.name.clone())
        .collect();
    let report = Report::build(
        &collected.results,
        must_pass,
        expectations,
        Environment::detect(),
    );
    Ok(FromRecords { report, collected })
}
