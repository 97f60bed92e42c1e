//! What one rank's part of a case finds.

/// Why a rank's script did not pass.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Finding {
    /// The backend broke the invariant under test.
    Violation(String),
    /// An instrument, claim or capability the check needs is missing.
    NotSupported(String),
    /// The harness failed (world, tensor, group, route...). Reported as `fail`
    /// naming the harness error, since nothing was checked.
    Harness(String),
    /// A setup step did not reach the check's precondition (work that should
    /// be pending was not, an executor left stalled by an earlier round...).
    /// Nothing was learnt about the invariant: the case is retried (with more
    /// lazy work), and reported `inconclusive` if it stays so. Never a pass,
    /// never blamed on the case's invariant.
    Inconclusive(String),
    /// The subject's work ended, legitimately, before the check could see it
    /// pending: a send that an eager protocol completes before its receiver
    /// posts, in the world whose subject is the sender
    /// (`crate::case::Large::sender`). That world checked nothing and is
    /// passed over with a note; the case's other worlds decide its verdict.
    /// Never used where the kit itself keeps the work pending.
    NothingToCheck(String),
}

/// An inconclusive setup step, formatted (the message starts with `setup:`).
pub fn setup(message: impl std::fmt::Display) -> Finding {
    Finding::Inconclusive(format!("setup: {message}"))
}

/// The result of one rank's script.
pub type Check = Result<(), Finding>;

/// Returns a violation unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Check {
    if condition {
        Ok(())
    } else {
        Err(Finding::Violation(message()))
    }
}

/// Converts a harness error into a finding.
pub fn harness<T>(result: Result<T, crate::HarnessError>) -> Result<T, Finding> {
    result.map_err(|error| Finding::Harness(error.0))
}

pub use crate::world::eventually;

/// Timing constants every timing-sensitive check uses. They are generous on
/// purpose (a loaded 2-core CI machine must not produce false failures), and a
/// timing check that fails is retried once before it is reported.
pub mod slack {
    use std::time::Duration;

    /// How long pending work is given to (wrongly) complete before a check
    /// asserts it is still pending.
    pub const SETTLE: Duration = Duration::from_millis(30);
    /// The longest a nonblocking call may take (EXC-1, EXC-8, AGR-2).
    pub const PROMPT: Duration = Duration::from_millis(250);
    /// The longest any call the kit expects to return at once (`is_complete`,
    /// `resources_releasable`, `wait` on work already reported complete) may
    /// block before the kit stops waiting for it and fails the call's own
    /// invariant (EXC-1, EXC-8, EXC-4): a hang is seen within about a second,
    /// well before the case watchdog.
    pub const BLOCKED: Duration = Duration::from_secs(1);
    /// How long released work is given to complete.
    pub const RELEASE: Duration = Duration::from_secs(5);
    /// Deadline used for `wait_bounded` while work is pending.
    pub const DEADLINE: Duration = Duration::from_millis(40);
    /// Extra time `wait_bounded` may take beyond its timeout (CAN-2),
    /// excluding NativeCancel teardown, which is measured separately.
    pub const OVERRUN: Duration = Duration::from_millis(500);
    /// Time given to the backend to release resources after completion (RET-7).
    pub const RELEASE_RESOURCES: Duration = Duration::from_secs(2);
}
