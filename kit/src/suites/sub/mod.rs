//! SUB: the submission backend (`SubmissionBackend` of eredu-runtime):
//! forked executors are independent lanes (SUB-1), `submit` materialises
//! exactly the values it is given (SUB-2), `order_after` orders a consumer
//! after its producer (SUB-3), and a submission that returns `Err` leaves no
//! live native work behind (SUB-4).
//!
//! Files: [`shared`] (operands and the steps every SUB check uses),
//! [`race`] (work on free lanes raced against a blocked lane), then one
//! file per invariant: [`fork`] (SUB-1), [`materialise`] (SUB-2),
//! [`order`] (SUB-3), [`failed`] (SUB-4).

mod failed;
mod fork;
mod materialise;
mod order;
mod race;
mod shared;

use self::failed::{failed_local_dependencies_leave_no_work, failed_submit_leaves_no_work};
use self::fork::forked_lanes_are_independent;
use self::materialise::submit_materialises_the_given_values;
use self::order::order_after_orders_the_consumer;
use crate::case::{Body, Row};
use crate::harness::Harness;
use crate::matrix::Subject;
use crate::suites::common::needs;

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "SUB-1",
            applies: |s| s == Subject::ForkExecutors,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Blocks(forked_lanes_are_independent::<H>),
        },
        Row {
            id: "SUB-2",
            applies: |s| s == Subject::Submit,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 1,
                script: submit_materialises_the_given_values::<H>,
            },
        },
        Row {
            id: "SUB-3",
            applies: |s| s == Subject::OrderAfter,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Blocks(order_after_orders_the_consumer::<H>),
        },
        Row {
            id: "SUB-4",
            applies: |s| s == Subject::Submit,
            requires: SUB_4_NEEDS,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 1,
                script: failed_submit_leaves_no_work::<H>,
            },
        },
        Row {
            id: "SUB-4",
            applies: |s| s == Subject::LocalDependencies,
            requires: SUB_4_NEEDS,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 1,
                script: failed_local_dependencies_leave_no_work::<H>,
            },
        },
    ]
}

/// SUB-4 arms a submission fault, holds the executor so that work a failed
/// submission wrongly queued stays live, and watches probes and the ledger.
const SUB_4_NEEDS: crate::Instruments = needs::SUBMISSION_FAULT
    .and(needs::HOLD)
    .and(needs::PROBE)
    .and(needs::LEDGER);
