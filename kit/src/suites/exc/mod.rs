//! EXC: exact completion. `is_complete` is a nonblocking, exact and monotonic
//! observation of one submission; `wait` blocks on that submission only;
//! errors are sticky and are never release; `resources_releasable` is a
//! nonblocking, conservative proof of release that runs no application code.
//!
//! Every row runs on the whole completion matrix (local dependencies, plain
//! submissions and every claimed operation) except EXC-10, which is about
//! local dependencies only. Pending work is kept pending by the driver (hold
//! or late peer); faulted work is additionally held on the subject's own
//! executor, so its injected error is published while the work is still live.
//!
//! Files: [`shared`] (pieces every EXC check uses: waits on healthy work,
//! faulted held work), then one file per invariant group: [`observing`]
//! (EXC-1, EXC-2, EXC-3, EXC-5), [`wait`] (EXC-4), [`errors`] (EXC-6,
//! EXC-7), [`releasable`] (EXC-8, EXC-9), [`empty`] (EXC-10).

mod empty;
mod errors;
mod observing;
mod releasable;
mod shared;
mod wait;

use self::empty::empty_local_dependencies_complete;
use self::errors::{an_error_is_not_release, errors_are_sticky};
use self::observing::{
    complete_after_wait, completion_is_monotonic, is_complete_is_prompt_while_pending,
    never_complete_before_the_work,
};
use self::releasable::{
    releasable_agrees_with_completion, releasable_is_prompt_conservative_and_inert,
};
use self::wait::wait_waits_for_this_work_only;
use crate::case::{Body, Row};
use crate::harness::Harness;
use crate::matrix::Subject;
use crate::suites::common::{any_completion, needs};

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    vec![
        Row {
            id: "EXC-1",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(is_complete_is_prompt_while_pending::<H>),
        },
        Row {
            id: "EXC-2",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(never_complete_before_the_work::<H>),
        },
        Row {
            id: "EXC-3",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(completion_is_monotonic::<H>),
        },
        Row {
            id: "EXC-4",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(wait_waits_for_this_work_only::<H>),
        },
        Row {
            id: "EXC-5",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(complete_after_wait::<H>),
        },
        Row {
            id: "EXC-6",
            applies: any_completion,
            // Work kept pending by the hold (local subjects) asks for the hold
            // through its driver; late peers keep the rest pending.
            requires: needs::FAULT,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(errors_are_sticky::<H>),
        },
        Row {
            id: "EXC-7",
            applies: any_completion,
            requires: needs::FAULT
                .and(needs::HOLD)
                .and(needs::OBSERVER)
                .and(needs::PROBE)
                .and(needs::LEDGER),
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(an_error_is_not_release::<H>),
        },
        Row {
            id: "EXC-8",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: true,
            // The error clause (releasable_is_false_after_an_error_while_live).
            pass_needs: needs::FAULT.and(needs::HOLD).and(needs::OBSERVER),
            body: Body::Matrix(releasable_is_prompt_conservative_and_inert::<H>),
        },
        Row {
            id: "EXC-9",
            applies: any_completion,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Matrix(releasable_agrees_with_completion::<H>),
        },
        Row {
            id: "EXC-10",
            applies: |s| s == Subject::LocalDependencies,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 1,
                script: empty_local_dependencies_complete::<H>,
            },
        },
    ]
}
