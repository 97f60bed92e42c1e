//! Cases: one named test per (invariant, subject) pair, such as `CAN-5::all_reduce_sum`.

use std::sync::Arc;

use crate::check::Check;
use crate::harness::{Harness, Instruments};
use crate::matrix::{self, Driver, Subject};
use crate::runner::results::Evidence;
use crate::spec::{self, Invariant};
use crate::world::{RankCtx, Script};

/// How a suite row runs.
pub(crate) enum Body<H: Harness> {
    /// On the completion matrix: the subject script runs on rank 0 with the
    /// subject's driver, the late-peer role on the other ranks.
    Matrix(fn(&RankCtx<'_, H>, Driver<H>) -> Check),
    /// A script of its own, on `ranks` ranks.
    Direct {
        ranks: usize,
        script: fn(&RankCtx<'_, H>) -> Check,
    },
    /// A script of its own, run on a fresh world of each size in turn
    /// (the case fails at the first size that fails).
    Sizes {
        sizes: &'static [usize],
        script: fn(&RankCtx<'_, H>) -> Check,
    },
}

/// One row of a suite: an invariant checked on every subject it applies to.
pub(crate) struct Row<H: Harness> {
    pub(crate) id: &'static str,
    pub(crate) applies: fn(Subject) -> bool,
    pub(crate) requires: Instruments,
    /// Timing-sensitive: a failure is retried once; fail-then-pass is `flaky`.
    pub(crate) timing: bool,
    pub(crate) body: Body<H>,
}

/// One named case.
pub struct Case<H: Harness> {
    pub(crate) invariant: &'static Invariant,
    pub(crate) subject: Subject,
    /// World sizes to run the script on, in turn.
    pub(crate) worlds: Vec<usize>,
    pub(crate) timing: bool,
    /// What the verdict rests on.
    pub(crate) evidence: Evidence,
    /// The instruments the case needs on this subject.
    pub(crate) needs: Instruments,
    /// `Err(reason)`: the case is not supported and will not run.
    pub(crate) script: Result<Script<H>, String>,
}

impl<H: Harness> Case<H> {
    /// The case's name, e.g. `RET-3::all_reduce_sum`.
    pub fn name(&self) -> String {
        format!("{}::{}", self.invariant.id, self.subject)
    }

    /// The invariant under test.
    pub fn invariant(&self) -> &'static Invariant {
        self.invariant
    }

    /// What the case exercises.
    pub fn subject(&self) -> Subject {
        self.subject
    }

    /// Why the case cannot run, when it cannot.
    pub fn unsupported(&self) -> Option<&str> {
        self.script.as_ref().err().map(String::as_str)
    }

    /// What the verdict rests on: `instrumented` when the case needs an
    /// instrument of the harness, `black-box` otherwise.
    pub fn evidence(&self) -> Evidence {
        self.evidence
    }

    /// The instruments the case needs on its subject (its row's own, and
    /// what keeps the subject's work pending: the hold for local subjects of
    /// a harness that has one, nothing for late peers and lazy work).
    pub fn needs(&self) -> Instruments {
        self.needs
    }

    /// The world sizes the case runs on, in turn.
    pub fn worlds(&self) -> &[usize] {
        &self.worlds
    }
}

/// Every subject a row may apply to, in report order.
fn subjects() -> Vec<Subject> {
    let mut subjects = vec![
        Subject::LocalDependencies,
        Subject::Submit,
        Subject::ForkExecutors,
        Subject::OrderAfter,
    ];
    subjects.extend(crate::Operation::ALL.map(Subject::Operation));
    subjects
}

/// Builds every case for `harness`: each row on each subject it applies to;
/// rows whose subject is unclaimed or whose instruments are missing become
/// `not-supported` cases.
pub fn catalogue<H: Harness>(harness: &H) -> Vec<Case<H>> {
    let claims = harness.claims();
    let instruments = harness.instruments();
    let sizes = harness.world_sizes();
    let local = matrix::local_pending(instruments);
    let mut drivers = vec![
        matrix::local_dependencies_driver::<H>(local),
        matrix::submit_driver::<H>(local),
    ];
    drivers.extend(claims.drivers.iter().copied());
    let mut rows = crate::suites::rows::<H>();
    for driver in &drivers {
        rows.extend((driver.family)());
    }
    rows.sort_by_key(|row| spec::INVARIANTS.iter().position(|inv| inv.id == row.id));
    let mut cases = Vec::new();
    // Families of unclaimed operations: every one of their IDs is not-supported.
    for (id, operation) in crate::suites::OPERATION_FAMILIES {
        if let (false, Some(invariant)) = (claims.claims(*operation), spec::invariant(id)) {
            cases.push(Case {
                invariant,
                subject: Subject::Operation(*operation),
                worlds: Vec::new(),
                timing: false,
                evidence: Evidence::BlackBox,
                needs: Instruments::NONE,
                script: Err(format!("{operation} is not claimed by this backend")),
            });
        }
    }
    for row in rows {
        let Some(invariant) = spec::invariant(row.id) else {
            continue;
        };
        for subject in subjects().into_iter().filter(|s| (row.applies)(*s)) {
            let driver = drivers.iter().find(|d| d.subject == subject).copied();
            let runnable = subject.operation().is_none() || driver.is_some();
            let (worlds, script) = match (&row.body, driver) {
                (Body::Direct { ranks, script }, _) if runnable => {
                    (vec![*ranks], Ok(Arc::new(*script) as Script<H>))
                }
                (Body::Sizes { sizes, script }, _) if runnable => {
                    (sizes.to_vec(), Ok(Arc::new(*script) as Script<H>))
                }
                (Body::Matrix(run), Some(driver)) => (vec![driver.ranks], Ok(driver.script(*run))),
                _ => (
                    Vec::new(),
                    Err(format!("{subject} is not claimed by this backend")),
                ),
            };
            // What this row needs on this subject: its own instruments, and
            // what keeps the subject's work pending (matrix rows only).
            let needed = match (&row.body, driver) {
                (Body::Matrix(_), Some(driver)) => row.requires.and(driver.pending.needs()),
                _ => row.requires,
            };
            let missing = instruments.missing(needed);
            let built: Vec<usize> = worlds
                .iter()
                .copied()
                .filter(|n| sizes.contains(*n))
                .collect();
            let script = match script {
                Ok(_) if !missing.is_empty() => Err(format!(
                    "needs the {} instrument, which the harness does not provide",
                    missing.join(", ")
                )),
                Ok(_) if built.is_empty() => Err(format!(
                    "needs a world of {} rank(s); the harness builds {sizes} in one process",
                    worlds
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(" or ")
                )),
                other => other,
            };
            let evidence = if needed == Instruments::NONE {
                Evidence::BlackBox
            } else {
                Evidence::Instrumented
            };
            cases.push(Case {
                invariant,
                subject,
                worlds: if script.is_ok() { built } else { Vec::new() },
                timing: row.timing,
                evidence,
                needs: needed,
                script,
            });
        }
    }
    cases.sort_by_key(|case| {
        spec::INVARIANTS
            .iter()
            .position(|inv| inv.id == case.invariant.id)
    });
    cases
}
