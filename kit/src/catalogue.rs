//! The catalogue: the one place where the suites' rows, the claimed
//! operations and the completion matrix become named cases.
//!
//! It sits above every suite: the rows of the suites that apply to every
//! backend (RET, EXC, CAN, SUB), and those of each claimed operation's own
//! family (SUM, GAT, A2A, P2P, BRD, BAR, AGR), are gathered here and nowhere
//! else.

use std::sync::Arc;

use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, EvenGatherBackend, FailureAgreementBackend,
    PointToPointBackend, SumReductionBackend, UnevenGatherBackend, VariableAllToAllBackend,
};

use crate::case::{Body, Case, Row};
use crate::harness::{Backend, ClaimVisitor, Claims, Harness, Instruments, WorldSizes};
use crate::matrix::{self, Subject};
use crate::operation::Operation;
use crate::results::Evidence;
use crate::spec;
use crate::suites;
use crate::world::Script;

/// The invariants of each operation's own family. Their rows come with the
/// claim (built where the trait bound holds); for an unclaimed operation each
/// of these IDs is reported `not-supported`.
const OPERATION_FAMILIES: &[(&str, Operation)] = &[
    ("SUM-1", Operation::AllReduceSum),
    ("SUM-2", Operation::AllReduceSum),
    ("GAT-1", Operation::AllGatherEven),
    ("GAT-2", Operation::AllGatherUneven),
    ("A2A-1", Operation::VariableAllToAll),
    ("P2P-1", Operation::SendReceive),
    ("P2P-2", Operation::SendReceive),
    ("P2P-3", Operation::SendReceive),
    ("BRD-1", Operation::Broadcast),
    ("BRD-2", Operation::Broadcast),
    ("BAR-1", Operation::Barrier),
    ("AGR-1", Operation::AgreeSuccess),
    ("AGR-2", Operation::AgreeSuccess),
];

/// Every row of the suites that apply to all backends (RET, EXC, CAN, SUB).
fn suite_rows<H: Harness>() -> Vec<Row<H>> {
    let mut rows = suites::ret::rows::<H>();
    rows.extend(suites::exc::rows::<H>());
    rows.extend(suites::can::rows::<H>());
    rows.extend(suites::sub::rows::<H>());
    rows.sort_by_key(|row| {
        spec::INVARIANTS
            .iter()
            .position(|inv| inv.id == row.id)
            .unwrap_or(usize::MAX)
    });
    rows
}

/// The rows of the claimed operations' own families.
fn family_rows<H: Harness>(claims: &Claims<H>) -> Vec<Row<H>> {
    let mut rows = FamilyRows(Vec::new());
    claims.visit(&mut rows);
    rows.0
}

/// Gathers each claimed operation's family rows, built where its trait
/// bound holds.
struct FamilyRows<H: Harness>(Vec<Row<H>>);

impl<H: Harness> ClaimVisitor<H> for FamilyRows<H> {
    fn sum_reduction(&mut self)
    where
        Backend<H>: SumReductionBackend,
    {
        self.0.extend(suites::sum::rows::<H>());
    }
    fn even_gather(&mut self)
    where
        Backend<H>: EvenGatherBackend,
    {
        self.0.extend(suites::gat::even_rows::<H>());
    }
    fn uneven_gather(&mut self)
    where
        Backend<H>: UnevenGatherBackend,
    {
        self.0.extend(suites::gat::uneven_rows::<H>());
    }
    fn variable_all_to_all(&mut self)
    where
        Backend<H>: VariableAllToAllBackend,
    {
        self.0.extend(suites::a2a::rows::<H>());
    }
    fn point_to_point(&mut self)
    where
        Backend<H>: PointToPointBackend,
    {
        self.0.extend(suites::p2p::rows::<H>());
    }
    fn broadcast(&mut self)
    where
        Backend<H>: BroadcastBackend,
    {
        self.0.extend(suites::brd::rows::<H>());
    }
    fn barrier(&mut self)
    where
        Backend<H>: BarrierBackend,
    {
        self.0.extend(suites::bar::rows::<H>());
    }
    fn failure_agreement(&mut self)
    where
        Backend<H>: FailureAgreementBackend,
    {
        self.0.extend(suites::agr::rows::<H>());
    }
}

/// Whether the operation's standard submission carries data (a barrier and
/// an agreement carry none of a size).
fn moves_data(operation: Operation) -> bool {
    !matches!(operation, Operation::Barrier | Operation::AgreeSuccess)
}

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

/// `the hold instrument`, `the hold and ledger instruments`, `the hold,
/// liveness probe and ledger instruments`.
fn the_instruments<S: AsRef<str>>(names: &[S]) -> String {
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    match names.as_slice() {
        [] => "no instrument".to_owned(),
        [one] => format!("the {one} instrument"),
        [init @ .., last] => format!("the {} and {last} instruments", init.join(", ")),
    }
}

/// [`catalogue`] for a run whose ranks are the `processes` processes of a
/// launch, when given: worlds larger than the launch are not built.
pub(crate) fn catalogue_within<H: Harness>(harness: &H, processes: Option<usize>) -> Vec<Case<H>> {
    let claims = harness.claims();
    let instruments = harness.instruments();
    // The kit's own words lead, so that the reason is grouped as such
    // (`runner::decided::not_supported_reason`).
    let unavailable = harness
        .unavailable()
        .map(|reason| format!("the backend is unavailable on this machine: {reason}"));
    let sizes = match (harness.world_sizes(), processes) {
        (sizes, None) => sizes,
        (WorldSizes::Any, Some(n)) => WorldSizes::UpTo(n),
        (WorldSizes::UpTo(m), Some(n)) => WorldSizes::UpTo(m.min(n)),
    };
    let built_where = match processes {
        None => "in one process".to_owned(),
        Some(n) => format!("across the launcher's {n} process(es)"),
    };
    let large = suites::scenario::past_boundaries(harness);
    let peer_fed = claims.feed().is_some() && sizes.contains(2);
    let local = matrix::local_pending(instruments, peer_fed);
    let mut drivers = vec![
        matrix::local_dependencies_driver::<H>(local),
        matrix::submit_driver::<H>(local),
    ];
    drivers.extend(claims.drivers());
    let mut rows = suite_rows::<H>();
    rows.extend(family_rows(&claims));
    rows.sort_by_key(|row| spec::INVARIANTS.iter().position(|inv| inv.id == row.id));
    let mut cases = Vec::new();
    // Families of unclaimed operations: every one of their IDs is not-supported.
    for (id, operation) in OPERATION_FAMILIES {
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
                large: None,
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
            let unclaimed_mode = suites::can::unclaimed_mode::<H>(row.id);
            let unclaimed = script.is_err() || unclaimed_mode.is_some();
            let script = match script {
                Ok(_) if unclaimed_mode.is_some() => Err(unclaimed_mode.unwrap_or_default()),
                Ok(_) if unavailable.is_some() => Err(unavailable.clone().unwrap_or_default()),
                Ok(_) if !missing.is_empty() => Err(format!(
                    "needs {}, which the harness does not provide",
                    the_instruments(&missing)
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
                    "a part of the check needs {}, which the harness does not provide, so the case \
                     can fail but never pass (run it with --include-ignored to check the other parts)",
                    the_instruments(&short)
                )
            });
            let evidence = if needed == Instruments::NONE {
                Evidence::BlackBox
            } else {
                Evidence::Instrumented
            };
            let matrix = matches!(row.body, Body::Matrix(_) | Body::MatrixPartDone(_));
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
                large: large
                    .clone()
                    .filter(|_| matrix && subject.operation().is_some_and(moves_data))
                    .map(|large| crate::case::Large {
                        sender: sender_world(subject, row.id),
                        // Retention is where a dtype's own path differs
                        // (conversion and staging buffers that hold, or
                        // drop, the caller's storage): the other dtypes'
                        // regimes run for RET cases, which keeps the
                        // catalogue's wall time in check.
                        dtypes: if row.id.starts_with("RET-") {
                            large.dtypes
                        } else {
                            Vec::new()
                        },
                        ..large
                    }),
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

/// Whether a matrix case past the boundaries also runs a world whose subject
/// is the member whose part needs no peer (a transfer's sender, a
/// broadcast's root): such a member may complete before its late peers join
/// (an eager protocol), or stay pending until they do (rendezvous), and
/// must retain what it reads (RET), never block a poll (EXC-1) or report
/// completion before its own part is done (EXC-2), and keep every
/// cancellation obligation (CAN) either way. Not CAN-7: its fault fails the
/// send before its receiver posts, and a receive of a message never sent is
/// legitimately pending for good (as under MPI), so each round would spend
/// the late peer's whole bounded wait ([`crate::check::slack::RELEASE`]) for
/// nothing the sender's side can show.
fn sender_world(subject: Subject, id: &str) -> bool {
    matches!(
        subject.operation(),
        Some(Operation::SendReceive | Operation::Broadcast)
    ) && (id.starts_with("RET-")
        || (id.starts_with("CAN-") && id != "CAN-7")
        || ["EXC-1", "EXC-2"].contains(&id))
}
