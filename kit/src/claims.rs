//! Claims: which operation traits a backend implements.
//!
//! Each claim method carries the trait bound of its operation, so claiming an
//! operation the backend does not implement is a compile error, and an
//! unclaimed operation is reported `not-supported`, never `pass`.

use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, EvenGatherBackend, FailureAgreementBackend,
    PointToPointBackend, SumReductionBackend, UnevenGatherBackend, VariableAllToAllBackend,
};

use crate::case::Row;
use crate::harness::{Backend, Harness};
use crate::matrix::{self, Driver};
use crate::model::variant::{self, Vary};
use crate::operation::Operation;
use crate::suites;

/// The operations a backend claims, with what the kit needs to drive them.
pub struct Claims<H: Harness> {
    claimed: Vec<Claimed<H>>,
}

/// One claimed operation: its completion-matrix driver and the rows of its
/// own family (value semantics), both built where the trait bound holds.
struct Claimed<H: Harness> {
    driver: Driver<H>,
    rows: fn() -> Vec<Row<H>>,
    /// The sequence model's parameterised submission, for the operations
    /// that have parameters worth varying.
    vary: Option<Vary<H>>,
    /// The sum reduction's feed (the `all_reduce_sum` claim only).
    feed: Option<matrix::Feed<H>>,
}

impl<H: Harness> std::fmt::Debug for Claims<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.operations()).finish()
    }
}

impl<H: Harness> Default for Claims<H> {
    fn default() -> Self {
        Self::none()
    }
}

impl<H: Harness> Claims<H> {
    /// No operation claimed: only local dependencies and plain submissions are certified.
    pub fn none() -> Self {
        Self {
            claimed: Vec::new(),
        }
    }

    fn with(self, driver: Driver<H>, rows: fn() -> Vec<Row<H>>) -> Self {
        self.with_vary(driver, rows, None)
    }

    fn with_vary(
        mut self,
        driver: Driver<H>,
        rows: fn() -> Vec<Row<H>>,
        vary: Option<Vary<H>>,
    ) -> Self {
        self.claimed.retain(|c| c.driver.subject != driver.subject);
        self.claimed.push(Claimed {
            driver,
            rows,
            vary,
            feed: None,
        });
        self
    }

    /// The sum reduction that feeds peer-fed local work
    /// ([`matrix::PendingVia::PeerFed`]), when `all_reduce_sum` is claimed.
    pub(crate) fn feed(&self) -> Option<matrix::Feed<H>> {
        self.claimed.iter().find_map(|c| c.feed)
    }

    /// The completion-matrix drivers of the claimed operations.
    pub(crate) fn drivers(&self) -> Vec<Driver<H>> {
        self.claimed.iter().map(|c| c.driver).collect()
    }

    /// The claimed operation's driver and parameterised submission, when it
    /// is claimed and has one.
    pub(crate) fn varied(&self, operation: Operation) -> Option<(Driver<H>, Vary<H>)> {
        self.claimed
            .iter()
            .find(|c| c.driver.subject.operation() == Some(operation))
            .and_then(|c| Some((c.driver, c.vary?)))
    }

    /// The rows of the claimed operations' own families.
    pub(crate) fn family_rows(&self) -> Vec<Row<H>> {
        self.claimed.iter().flat_map(|c| (c.rows)()).collect()
    }

    /// Claims `SumReductionBackend`.
    pub fn sum_reduction(self) -> Self
    where
        Backend<H>: SumReductionBackend,
    {
        let mut claims = self.with(matrix::all_reduce_sum::<H>(), suites::sum::rows::<H>);
        if let Some(sum) = claims.claimed.last_mut() {
            sum.feed = Some(matrix::sum_feed::<H>());
        }
        claims
    }

    /// Claims `EvenGatherBackend`.
    pub fn even_gather(self) -> Self
    where
        Backend<H>: EvenGatherBackend,
    {
        self.with(matrix::all_gather_even::<H>(), suites::gat::even_rows::<H>)
    }

    /// Claims `UnevenGatherBackend`.
    pub fn uneven_gather(self) -> Self
    where
        Backend<H>: UnevenGatherBackend,
    {
        self.with_vary(
            matrix::all_gather_uneven::<H>(),
            suites::gat::uneven_rows::<H>,
            Some(variant::uneven_gather::<H>),
        )
    }

    /// Claims `VariableAllToAllBackend`.
    pub fn variable_all_to_all(self) -> Self
    where
        Backend<H>: VariableAllToAllBackend,
    {
        self.with_vary(
            matrix::variable_all_to_all::<H>(),
            suites::a2a::rows::<H>,
            Some(variant::all_to_all::<H>),
        )
    }

    /// Claims `PointToPointBackend`.
    pub fn point_to_point(self) -> Self
    where
        Backend<H>: PointToPointBackend,
    {
        self.with_vary(
            matrix::send_receive::<H>(),
            suites::p2p::rows::<H>,
            Some(variant::send_receive::<H>),
        )
    }

    /// Claims `BroadcastBackend`.
    pub fn broadcast(self) -> Self
    where
        Backend<H>: BroadcastBackend,
    {
        self.with_vary(
            matrix::broadcast::<H>(),
            suites::brd::rows::<H>,
            Some(variant::broadcast::<H>),
        )
    }

    /// Claims `BarrierBackend`.
    pub fn barrier(self) -> Self
    where
        Backend<H>: BarrierBackend,
    {
        self.with(matrix::barrier::<H>(), suites::bar::rows::<H>)
    }

    /// Claims `FailureAgreementBackend`.
    pub fn failure_agreement(self) -> Self
    where
        Backend<H>: FailureAgreementBackend,
    {
        self.with_vary(
            matrix::agree_success::<H>(),
            suites::agr::rows::<H>,
            Some(variant::agree::<H>),
        )
    }

    /// Claims all eight operation traits.
    pub fn all(self) -> Self
    where
        Backend<H>: SumReductionBackend
            + EvenGatherBackend
            + UnevenGatherBackend
            + VariableAllToAllBackend
            + PointToPointBackend
            + BroadcastBackend
            + BarrierBackend
            + FailureAgreementBackend,
    {
        self.sum_reduction()
            .even_gather()
            .uneven_gather()
            .variable_all_to_all()
            .point_to_point()
            .broadcast()
            .barrier()
            .failure_agreement()
    }

    /// The claimed operations.
    pub fn operations(&self) -> Vec<Operation> {
        let mut operations: Vec<_> = self
            .claimed
            .iter()
            .filter_map(|claimed| claimed.driver.subject.operation())
            .collect();
        operations.sort();
        operations
    }

    /// Whether `operation` is claimed.
    pub fn claims(&self, operation: Operation) -> bool {
        self.operations().contains(&operation)
    }
}
