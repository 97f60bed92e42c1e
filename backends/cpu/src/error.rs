//! The backend's one error type, used for tensors, submissions and completions.

/// Every failure the CPU reference backend reports.
///
/// Messages say what was expected and what was got, and name the operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CpuError {
    /// The transport between processes could not be built.
    #[error("transport between processes: {0}")]
    Transport(String),
    /// An argument was rejected before any work was submitted.
    #[error("{operation}: invalid argument: expected {expected}, got {got}")]
    InvalidArgument {
        /// Operation that rejected the argument.
        operation: &'static str,
        /// What the operation required.
        expected: String,
        /// What it was given.
        got: String,
    },
    /// Members of one collective submitted disagreeing arguments.
    #[error("{operation}: members disagree: member {member} {detail}")]
    MemberMismatch {
        /// Operation that detected the disagreement.
        operation: &'static str,
        /// Member index whose contribution disagreed.
        member: usize,
        /// What disagreed.
        detail: String,
    },
    /// A peer of this collective failed or cancelled, so this member cannot complete.
    #[error("{operation}: member {member} failed: {reason}")]
    PeerFailed {
        /// Operation whose rendezvous was aborted.
        operation: &'static str,
        /// Member index that failed first.
        member: usize,
        /// Why it failed.
        reason: String,
    },
    /// The received in-band header differs from the expected header.
    #[error("send_receive on route {route}: header of value {index} differs: expected {expected:02x?}, received {received:02x?}")]
    HeaderMismatch {
        /// Route identity.
        route: u64,
        /// Position of the value in the bundle.
        index: usize,
        /// Header the receiver expected.
        expected: Vec<u8>,
        /// Header bytes actually received.
        received: Vec<u8>,
    },
    /// A fault planted through the fault-injection instrument.
    #[error("{operation}: injected fault on executor {executor}")]
    InjectedFault {
        /// Operation whose work failed.
        operation: &'static str,
        /// Executor identity.
        executor: u64,
    },
    /// The work was cancelled by a `NativeCancel` deadline.
    #[error("{operation}: cancelled by a NativeCancel deadline")]
    Cancelled {
        /// Operation that was cancelled.
        operation: &'static str,
    },
    /// `NativeCancel` was asked of work that cannot be cancelled natively
    /// (a transfer under [`crate::Personality::CollectivesCancel`], where
    /// `supports_cancellation(NativeCancel)` is `false`): the live work was
    /// quarantined instead, and the policy is refused.
    #[error(
        "{operation}: NativeCancel is not supported for this work (supports_cancellation(NativeCancel) is \
         false); the live work was quarantined until it completes"
    )]
    NativeCancelUnsupported {
        /// Operation whose bounded wait was refused.
        operation: &'static str,
    },
    /// The executor was destroyed while work was still queued on it.
    #[error("{operation}: executor {executor} was destroyed with this work still queued")]
    ExecutorGone {
        /// Operation whose work was abandoned.
        operation: &'static str,
        /// Executor identity.
        executor: u64,
    },
    /// Native work found a resource it needed already freed (only planted defects do this).
    #[error("{operation}: native work used a freed {resource} (use after free)")]
    UseAfterFree {
        /// Operation that touched the freed resource.
        operation: &'static str,
        /// Kind of resource.
        resource: &'static str,
    },
    /// A tensor's value is not materialised on the host yet.
    #[error("tensor {storage} is not materialised: {reason}")]
    NotMaterialised {
        /// Storage identity.
        storage: u64,
        /// Why no value is available.
        reason: String,
    },
    /// A backend work body panicked; the panic was contained.
    #[error("{operation}: native work panicked: {message}")]
    Panicked {
        /// Operation whose work panicked.
        operation: &'static str,
        /// Panic payload, when it was a string.
        message: String,
    },
}

impl CpuError {
    pub(crate) fn invalid(
        operation: &'static str,
        expected: impl Into<String>,
        got: impl Into<String>,
    ) -> Self {
        Self::InvalidArgument {
            operation,
            expected: expected.into(),
            got: got.into(),
        }
    }
}

impl From<CpuError> for eredu_nn::Error {
    fn from(error: CpuError) -> Self {
        eredu_nn::Error::backend(error)
    }
}
