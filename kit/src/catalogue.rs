//! The catalogue: the one place where the suites' rows, the claimed
//! operations and the completion matrix become named cases.

use std::sync::Arc;

use crate::case::{Body, Case};
use crate::harness::{Harness, Instruments, WorldSizes};
use crate::matrix::{self, Subject};
use crate::operation::Operation;
use crate::runner::results::Evidence;
use crate::spec;
use crate::world::Script;

/// Every subject a row may apply to, in report order.
fn subjects() -> Vec<Subject> {
    let mut subjects = vec![
        Subject::LocalDependencies,
        Subject::Submit,
        Subject::ForkExecutors,
        Subject::OrderAfter,
    ];
    subjects.extend(Operation::ALL.map(Subject::Operation));
    subjects
}

/// Builds every case for `harness`: each row on each subject it applies to;
/// rows whose subject is unclaimed or whose instruments are missing become
/// `not-supported` cases.
pub fn catalogue<H: Harness>(harness: &H) -> Vec<Case<H>> {
    catalogue_within(harness, None)
}

/// [`catalogue`] for a run whose ranks are the `processes` processes of a
/// launch, when given: worlds larger than the launch are not built.
pub(crate) fn catalogue_within<H: Harness>(harness: &H, processes: Option<usize>) -> Vec<Case<H>> {
    let claims = harness.claims();
    let instruments = harness.instruments();
    let unavailable = harness.unavailable();
    let sizes = match (harness.world_sizes(), processes) {
        (sizes, None) => sizes,
        (WorldSizes::Any, Some(n)) => WorldSizes::UpTo(n),
        (WorldSizes::UpTo(m), Some(n)) => WorldSizes::UpTo(m.min(n)),
    };
    let built_where = match processes {
        None => "in one process".to_owned(),
        Some(n) => format!("across the launcher's {n} process(es)"),
    };
    let peer_fed = claims.feed().is_some() && sizes.contains(2);
    let local = matrix::local_pending(instruments, peer_fed);
    let mut drivers = vec![
        matrix::local_dependencies_driver::<H>(local),
        matrix::submit_driver::<H>(local),
    ];
    drivers.extend(claims.drivers());
    let mut rows = crate::suites::rows::<H>();
    rows.extend(claims.family_rows());
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
                capped: None,
                unclaimed: true,
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
                (Body::Blocks(script), _) if runnable => (
                    vec![matrix::local_ranks(local)],
                    Ok(matrix::with_late_peers(None, *script)),
                ),
                (Body::Sizes { sizes, script }, _) if runnable => {
                    (sizes.to_vec(), Ok(Arc::new(*script) as Script<H>))
                }
                (Body::Matrix(run), Some(driver)) => (vec![driver.ranks], Ok(driver.script(*run))),
                (Body::MatrixPartDone(run), Some(driver)) => {
                    let mut worlds = vec![driver.ranks];
                    if matrix::part_done_applies(subject) {
                        worlds.push(driver.ranks + 1);
                    }
                    (worlds, Ok(driver.script(*run)))
                }
                _ => (
                    Vec::new(),
                    Err(format!("{subject} is not claimed by this backend")),
                ),
            };
            // What this row needs on this subject: its own instruments, and
            // what keeps the subject's work pending (matrix rows only).
            let needed = match (&row.body, driver) {
                (Body::Matrix(_) | Body::MatrixPartDone(_), Some(driver)) => {
                    row.requires.and(driver.pending.needs())
                }
                _ => row.requires,
            };
            let missing = instruments.missing(needed);
            let built: Vec<usize> = worlds
                .iter()
                .copied()
                .filter(|n| sizes.contains(*n))
                .collect();
            let unclaimed_mode = crate::suites::unclaimed_mode::<H>(row.id);
            let unclaimed = script.is_err() || unclaimed_mode.is_some();
            let script = match script {
                Ok(_) if unclaimed_mode.is_some() => Err(unclaimed_mode.unwrap_or_default()),
                Ok(_) if unavailable.is_some() => Err(unavailable.clone().unwrap_or_default()),
                Ok(_) if !missing.is_empty() => Err(format!(
                    "needs the {} instrument, which the harness does not provide",
                    missing.join(", ")
                )),
                Ok(_) if built.is_empty() => Err(format!(
                    "needs a world of {} rank(s); the harness builds {sizes} {built_where}",
                    worlds
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(" or ")
                )),
                other => other,
            };
            let short = instruments.missing(row.pass_needs);
            let capped = (script.is_ok() && !short.is_empty()).then(|| {
                format!(
                    "a part of the check needs the {} instrument, which the harness does not provide, so the case \
                     can fail but never pass (run it with --include-ignored to check the other parts)",
                    short.join(", ")
                )
            });
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
                capped,
                unclaimed,
            });
        }
    }
    // Rows of one ID on one subject are alternatives, in row order (the
    // suites' rows before the families'): the first that can run is kept,
    // else the first (e.g. EXC-6's fault-injection form, then the form
    // that provokes an error through the public API).
    let mut chosen: Vec<Case<H>> = Vec::with_capacity(cases.len());
    for case in cases {
        match chosen.iter().position(|c| c.name() == case.name()) {
            Some(at) if chosen[at].script.is_err() && case.script.is_ok() => chosen[at] = case,
            Some(_) => {}
            None => chosen.push(case),
        }
    }
    let mut cases = chosen;
    cases.sort_by_key(|case| {
        spec::INVARIANTS
            .iter()
            .position(|inv| inv.id == case.invariant.id)
    });
    cases
}
