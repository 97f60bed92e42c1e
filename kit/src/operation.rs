//! The operation traits of `eredu_runtime::backend` a backend may claim.

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
