//! The invariant suites, one module per SPEC family. Each module exposes
//! `rows()`: its invariants, which subjects they apply to, which instruments
//! they need, and the script that checks them.
//!
//! The files form a one-way stack: the family suites (and RET, EXC, CAN,
//! SUB) use the shared layers below them, never the reverse, and none of
//! them uses this file. From the bottom: [`seeds`] (seeded draws and the
//! suites' historical data), [`scenario`] (the value checks' data and their
//! one verifier), `exact` (outputs read back and compared), `choreography`
//! (how ranks take turns), `values` (running scenarios on a backend);
//! beside them `common` (helpers of every suite) and `blocker` (work that
//! keeps a lane busy).

pub(crate) mod a2a;
pub(crate) mod agr;
pub(crate) mod bar;
mod blocker;
pub(crate) mod brd;
mod can;
pub(crate) use can::unclaimed_mode;
mod choreography;
mod common;
mod exact;
mod exc;
pub(crate) mod gat;
pub(crate) mod p2p;
mod ret;
pub(crate) mod scenario;
mod seeds;
mod sub;
pub(crate) mod sum;
mod values;

use crate::case::Row;
use crate::harness::Harness;

/// The invariants of each operation's own family. Their rows come with the
/// claim (built where the trait bound holds); for an unclaimed operation each
/// of these IDs is reported `not-supported`.
pub(crate) const OPERATION_FAMILIES: &[(&str, crate::Operation)] = &[
    ("SUM-1", crate::Operation::AllReduceSum),
    ("SUM-2", crate::Operation::AllReduceSum),
    ("GAT-1", crate::Operation::AllGatherEven),
    ("GAT-2", crate::Operation::AllGatherUneven),
    ("A2A-1", crate::Operation::VariableAllToAll),
    ("P2P-1", crate::Operation::SendReceive),
    ("P2P-2", crate::Operation::SendReceive),
    ("P2P-3", crate::Operation::SendReceive),
    ("BRD-1", crate::Operation::Broadcast),
    ("BRD-2", crate::Operation::Broadcast),
    ("BAR-1", crate::Operation::Barrier),
    ("AGR-1", crate::Operation::AgreeSuccess),
    ("AGR-2", crate::Operation::AgreeSuccess),
];

/// Every row of the suites that apply to all backends (RET, EXC, CAN, SUB).
pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    let mut rows = ret::rows::<H>();
    rows.extend(exc::rows::<H>());
    rows.extend(can::rows::<H>());
    rows.extend(sub::rows::<H>());
    rows.sort_by_key(|row| {
        crate::spec::INVARIANTS
            .iter()
            .position(|inv| inv.id == row.id)
            .unwrap_or(usize::MAX)
    });
    rows
}
