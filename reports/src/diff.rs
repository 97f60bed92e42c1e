//! Comparison of two reports, case by case.
//!
//! - *regression*: a case that was not failing in the old report is a
//!   failure in the new one (`fail`, `timeout`, `crash`, `flaky`), e.g.
//!   `pass` → `timeout` or `not-supported` → `fail`;
//! - *fix*: a failure or `waived` case of the old report passes in the new one;
//! - *newly not-supported*: a case that had another status is `not-supported`
//!   (an instrument or a claim was dropped, or a world size is no longer built);
//! - *new* / *removed*: a case only in the new / old report;
//! - *other change*: any other status change (e.g. `fail` → `waived`).
//!
//! [`Diff::regressed`] lists what makes the new report worse: a lower
//! level, a regression, a new case that fails, a removed case, a newly
//! not-supported case, or another backend (name or device; a new version of
//! the same backend is what a diff is for). `commcheck-report diff` exits 1
//! when that list is not empty.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::model::{Level, Report, ReportCase, Status};
use commcheck::Identity;

/// One case whose status changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Case name.
    pub name: String,
    /// Status in the old report.
    pub before: Status,
    /// Status in the new report.
    pub after: Status,
    /// The new report's message for the case.
    pub message: Option<String>,
}

/// What changed between two reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diff {
    /// Levels of the old and new report, when they differ.
    pub level: Option<(Level, Level)>,
    /// The old and new report's backends, when their name or device differ.
    pub backend: Option<(String, String)>,
    /// Not failing before, failing now.
    pub regressions: Vec<Change>,
    /// Failing or waived, now passing.
    pub fixes: Vec<Change>,
    /// Another status before, `not-supported` now.
    pub unsupported: Vec<Change>,
    /// Any other status change.
    pub other: Vec<Change>,
    /// Only in the new report, with their status.
    pub new: Vec<(String, Status)>,
    /// Only in the old report, with their status.
    pub removed: Vec<(String, Status)>,
}

/// Compares `old` with `new`.
pub fn diff(old: &Report, new: &Report) -> Diff {
    let (was, is) = (&old.provenance.backend, &new.provenance.backend);
    let mut diff = Diff {
        level: (old.level != new.level).then_some((old.level, new.level)),
        backend: (was.name != is.name || was.device != is.device)
            .then(|| (describe(was), describe(is))),
        ..Diff::default()
    };
    // The first result of each name (`diff` does not verify: a name may
    // repeat), looked up in one pass rather than a scan per case.
    let mut old_by_name: HashMap<&str, &ReportCase> = HashMap::with_capacity(old.cases.len());
    for case in &old.cases {
        old_by_name.entry(case.name.as_str()).or_insert(case);
    }
    let new_names: HashSet<&str> = new.cases.iter().map(|c| c.name.as_str()).collect();
    for case in &new.cases {
        let Some(before) = old_by_name.get(case.name.as_str()) else {
            diff.new.push((case.name.clone(), case.status));
            continue;
        };
        if before.status == case.status {
            continue;
        }
        let change = Change {
            name: case.name.clone(),
            before: before.status,
            after: case.status,
            message: case.message.clone(),
        };
        if case.status.is_failure() && !before.status.is_failure() {
            diff.regressions.push(change);
        } else if (before.status.is_failure() || before.status == Status::Waived)
            && case.status.is_pass()
        {
            diff.fixes.push(change);
        } else if case.status == Status::NotSupported {
            diff.unsupported.push(change);
        } else {
            diff.other.push(change);
        }
    }
    diff.removed = old
        .cases
        .iter()
        .filter(|c| !new_names.contains(c.name.as_str()))
        .map(|c| (c.name.clone(), c.status))
        .collect();
    diff
}

fn describe(identity: &Identity) -> String {
    format!(
        "{} {} ({})",
        identity.name, identity.version, identity.device
    )
}

impl Diff {
    /// What makes the new report worse than the old one, one reason per
    /// line; empty when nothing does.
    pub fn regressed(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        if let Some((before, after)) = self.level.filter(|(before, after)| after < before) {
            reasons.push(format!("the level fell: {before} -> {after}"));
        }
        if let Some((before, after)) = &self.backend {
            reasons.push(format!("another backend: {before} -> {after}"));
        }
        let failing_new = self
            .new
            .iter()
            .filter(|(_, status)| status.is_failure())
            .count();
        for (count, what) in [
            (self.regressions.len(), "case(s) newly failing"),
            (failing_new, "new case(s) failing"),
            (self.removed.len(), "case(s) removed"),
            (self.unsupported.len(), "case(s) newly not-supported"),
        ] {
            if count > 0 {
                reasons.push(format!("{count} {what}"));
            }
        }
        reasons
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.level.is_none()
            && self.backend.is_none()
            && self.regressions.is_empty()
            && self.fixes.is_empty()
            && self.unsupported.is_empty()
            && self.other.is_empty()
            && self.new.is_empty()
            && self.removed.is_empty()
    }

    /// A plain-text account, one line per change.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Some((before, after)) = self.level {
            let _ = writeln!(out, "level: {before} -> {after}");
        }
        if let Some((before, after)) = &self.backend {
            let _ = writeln!(out, "backend: {before} -> {after}");
        }
        let changes = |out: &mut String, title: &str, changes: &[Change]| {
            if changes.is_empty() {
                return;
            }
            let _ = writeln!(out, "{title} ({}):", changes.len());
            for c in changes {
                let message = c
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                let _ = writeln!(out, "  {}: {} -> {}{message}", c.name, c.before, c.after);
            }
        };
        changes(&mut out, "regressions", &self.regressions);
        changes(&mut out, "fixes", &self.fixes);
        changes(&mut out, "newly not-supported", &self.unsupported);
        changes(&mut out, "other changes", &self.other);
        for (title, cases) in [("new cases", &self.new), ("removed cases", &self.removed)] {
            if !cases.is_empty() {
                let _ = writeln!(out, "{title} ({}):", cases.len());
                for (name, status) in cases {
                    let _ = writeln!(out, "  {name}: {status}");
                }
            }
        }
        if self.is_empty() {
            out.push_str("no changes\n");
        }
        out
    }
}
