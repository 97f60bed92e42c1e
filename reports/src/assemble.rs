//! Building a report: the one place where a run's results, an expectations
//! file and the environment of the run meet.
//!
//! [`Report::build`] lives here, not in [`crate::model`], so that the model
//! stays the bottom layer: the model knows reports, [`crate::provenance`]
//! and [`crate::expectations`] know the model, and this file knows all
//! three.

use commcheck::RunResults;

use crate::expectations::Expectations;
use crate::model::{failing_invariants, Level, Report, ReportCase, REPORT_FORMAT, REPORT_SCHEMA};
use crate::provenance::Environment;

impl Report {
    /// Builds and seals the report of `results`.
    pub fn build(
        results: &RunResults,
        must_pass: Vec<String>,
        expectations: &Expectations,
        environment: Environment,
    ) -> Self {
        let cases: Vec<ReportCase> = results
            .cases
            .iter()
            .map(|r| ReportCase::from_result(r, expectations.waiver_for(&r.invariant, r.subject)))
            .collect();
        let mut report = Self {
            format: REPORT_FORMAT.to_owned(),
            schema: REPORT_SCHEMA,
            level: Level::reached(&must_pass, &cases),
            provenance: environment.provenance(results),
            must_pass,
            unused_waivers: expectations.unused(&cases),
            invariants: failing_invariants(&cases),
            cases,
            digest: String::new(),
        };
        report.seal();
        report
    }
}
