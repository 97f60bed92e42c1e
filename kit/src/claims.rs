//! Claims: which operation traits a backend implements.
//!
//! Each claim method carries the trait bound of its operation, so claiming an
//! operation the backend does not implement is a compile error, and an
//! unclaimed operation is reported `not-supported`, never `pass`.

use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, EvenGatherBackend, FailureAgreementBackend,
    PointToPointBackend, SumReductionBackend, UnevenGatherBackend, VariableAllToAllBackend,
};

use crate::harness::{Backend, Harness};
use crate::matrix::{self, Driver};

/// An operation trait of `eredu_runtime::backend`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// `SumReductionBackend::all_reduce_sum`.
    AllReduceSum,
    /// `EvenGatherBackend::all_gather_even`.
    AllGatherEven,
    /// `UnevenGatherBackend::all_gather_uneven`.
    AllGatherUneven,
    /// `VariableAllToAllBackend::variable_all_to_all`.
    VariableAllToAll,
    /// `PointToPointBackend::send_receive`.
    SendReceive,
    /// `BroadcastBackend::broadcast`.
    Broadcast,
    /// `BarrierBackend::barrier`.
    Barrier,
    /// `FailureAgreementBackend::agree_success`.
    AgreeSuccess,
}

impl Operation {
    /// Every operation, in SPEC order.
    pub const ALL: [Operation; 8] = [
        Self::AllReduceSum,
        Self::AllGatherEven,
        Self::AllGatherUneven,
        Self::VariableAllToAll,
        Self::SendReceive,
        Self::Broadcast,
        Self::Barrier,
        Self::AgreeSuccess,
    ];

    /// The method name, as used in case names.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AllReduceSum => "all_reduce_sum",
            Self::AllGatherEven => "all_gather_even",
            Self::AllGatherUneven => "all_gather_uneven",
            Self::VariableAllToAll => "variable_all_to_all",
            Self::SendReceive => "send_receive",
            Self::Broadcast => "broadcast",
            Self::Barrier => "barrier",
            Self::AgreeSuccess => "agree_success",
        }
    }

    /// The SPEC family of this operation's value semantics.
    pub const fn family(self) -> &'static str {
        match self {
            Self::AllReduceSum => "SUM",
            Self::AllGatherEven | Self::AllGatherUneven => "GAT",
            Self::VariableAllToAll => "A2A",
            Self::SendReceive => "P2P",
            Self::Broadcast => "BRD",
            Self::Barrier => "BAR",
            Self::AgreeSuccess => "AGR",
        }
    }
}

impl Operation {
    /// The invariant a wrong output value of this operation violates (`None`
    /// for `barrier`, which has no output).
    pub const fn value_invariant(self) -> Option<&'static str> {
        match self {
            Self::AllReduceSum => Some("SUM-1"),
            Self::AllGatherEven => Some("GAT-1"),
            Self::AllGatherUneven => Some("GAT-2"),
            Self::VariableAllToAll => Some("A2A-1"),
            Self::SendReceive => Some("P2P-1"),
            Self::Broadcast => Some("BRD-1"),
            Self::Barrier => None,
            Self::AgreeSuccess => Some("AGR-1"),
        }
    }

    /// The comparison rule of this operation's outputs. Data movement
    /// (gathers, all-to-all, broadcast, point-to-point) is compared bit for
    /// bit, NaN payloads and signed zeros included. Sums are compared by
    /// numeric equality: a sum that starts from `+0.0` turns a singleton's
    /// `-0.0` into `+0.0`, and that is a correct elementwise sum (NaN equals
    /// NaN here).
    pub fn same_values(self, got: &[f32], expected: &[f32]) -> bool {
        got.len() == expected.len()
            && got.iter().zip(expected).all(|(a, b)| match self {
                Self::AllReduceSum => a == b || (a.is_nan() && b.is_nan()),
                _ => a.to_bits() == b.to_bits(),
            })
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The operations a backend claims, with what the kit needs to drive them.
pub struct Claims<H: Harness> {
    pub(crate) drivers: Vec<Driver<H>>,
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
            drivers: Vec::new(),
        }
    }

    fn with(mut self, driver: Driver<H>) -> Self {
        self.drivers.retain(|d| d.subject != driver.subject);
        self.drivers.push(driver);
        self
    }

    /// Claims `SumReductionBackend`.
    pub fn sum_reduction(self) -> Self
    where
        Backend<H>: SumReductionBackend,
    {
        self.with(matrix::all_reduce_sum::<H>())
    }

    /// Claims `EvenGatherBackend`.
    pub fn even_gather(self) -> Self
    where
        Backend<H>: EvenGatherBackend,
    {
        self.with(matrix::all_gather_even::<H>())
    }

    /// Claims `UnevenGatherBackend`.
    pub fn uneven_gather(self) -> Self
    where
        Backend<H>: UnevenGatherBackend,
    {
        self.with(matrix::all_gather_uneven::<H>())
    }

    /// Claims `VariableAllToAllBackend`.
    pub fn variable_all_to_all(self) -> Self
    where
        Backend<H>: VariableAllToAllBackend,
    {
        self.with(matrix::variable_all_to_all::<H>())
    }

    /// Claims `PointToPointBackend`.
    pub fn point_to_point(self) -> Self
    where
        Backend<H>: PointToPointBackend,
    {
        self.with(matrix::send_receive::<H>())
    }

    /// Claims `BroadcastBackend`.
    pub fn broadcast(self) -> Self
    where
        Backend<H>: BroadcastBackend,
    {
        self.with(matrix::broadcast::<H>())
    }

    /// Claims `BarrierBackend`.
    pub fn barrier(self) -> Self
    where
        Backend<H>: BarrierBackend,
    {
        self.with(matrix::barrier::<H>())
    }

    /// Claims `FailureAgreementBackend`.
    pub fn failure_agreement(self) -> Self
    where
        Backend<H>: FailureAgreementBackend,
    {
        self.with(matrix::agree_success::<H>())
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
            .drivers
            .iter()
            .filter_map(|driver| driver.subject.operation())
            .collect();
        operations.sort();
        operations
    }

    /// Whether `operation` is claimed.
    pub fn claims(&self, operation: Operation) -> bool {
        self.operations().contains(&operation)
    }
}
