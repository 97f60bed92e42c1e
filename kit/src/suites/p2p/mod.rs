//! P2P: point-to-point transfers of ordered, role-exact bundles on a directed
//! route (`PointToPointBackend::send_receive`, `RoleExactBoundaryValue`).
//!
//! - P2P-1: the destination receives the exact ordered bundle (values bit for
//!   bit, shapes), and the direction follows this rank's endpoint: the
//!   sender's output is what it sent, the receiver's is what arrived.
//! - P2P-2: a received header that differs from the receiver's expected
//!   `header()` never yields success, and that failure is sticky.
//! - P2P-3: header and payload travel in one native message whose header
//!   bytes are exactly `header()` (wire-log instrument).
//!
//! Every header is built with eredu-runtime's public framing
//! (`RoleExactBoundaryContract::frame_values`). That framing admits no zero
//! extent and no scalar, so bundles use one-element tensors as their
//! smallest values: an empty tensor cannot be framed.
//!
//! Every rank opens all of its route endpoints before any rank sends (a
//! message must never reach a route whose destination has not opened it),
//! and every rank submits its side of the routes in one global order, so
//! FIFO executors cannot deadlock.
//!
//! Files: [`routes`] (seeded routes, bundle shapes and payloads: data, no
//! backend), [`bundle`] (framing, opening routes, submitting and checking a
//! bundle), then one file per invariant: [`delivery`] (P2P-1), [`headers`]
//! (P2P-2), [`natural`] (EXC-6 and CAN-9 through an error P2P-2 provokes),
//! [`wire`] (P2P-3).

mod bundle;
mod delivery;
mod headers;
mod natural;
mod routes;
mod wire;

pub(crate) use delivery::{p2p1_first_id, p2p1_links};
pub(crate) use routes::{payload, placeholder};

use eredu_runtime::backend::PointToPointBackend;

use self::delivery::bundles_arrive_exact_and_in_order;
use self::headers::mismatching_headers_never_succeed;
use self::natural::{a_provoked_error_is_sticky, provoked_failure_is_an_error};
use self::wire::header_and_payload_travel_together;
use crate::case::{Body, Row};
use crate::harness::{Backend, Harness, Instruments};
use crate::matrix::Subject;
use crate::operation::Operation;
use crate::suites::common::needs;

/// P2P-3 reads what travelled on the wire.
const WIRE_LOG: Instruments = Instruments {
    wire_log: true,
    ..Instruments::NONE
};

fn send_receive(subject: Subject) -> bool {
    subject == Subject::Operation(Operation::SendReceive)
}

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: PointToPointBackend,
{
    vec![
        Row {
            id: "P2P-1",
            applies: send_receive,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[2, 3, 4, 8],
                script: bundles_arrive_exact_and_in_order::<H>,
            },
        },
        Row {
            id: "P2P-2",
            applies: send_receive,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[2, 3],
                script: mismatching_headers_never_succeed::<H>,
            },
        },
        // EXC-6's natural form: the error a header mismatch provokes through
        // the public API, for a harness without fault injection (the
        // catalogue prefers the suites' own EXC-6 row where it can run).
        Row {
            id: "EXC-6",
            applies: send_receive,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 2,
                script: a_provoked_error_is_sticky::<H>,
            },
        },
        // CAN-9's natural form, as EXC-6's above.
        Row {
            id: "CAN-9",
            applies: send_receive,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 2,
                script: provoked_failure_is_an_error::<H>,
            },
        },
        Row {
            id: "P2P-3",
            applies: send_receive,
            requires: WIRE_LOG,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[2, 3, 4],
                script: header_and_payload_travel_together::<H>,
            },
        },
    ]
}
