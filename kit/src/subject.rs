//! What a case is about: a submission API or a claimed operation ([`Subject`]),
//! the name after `::` in every case name.

use crate::operation::Operation;

/// What a case is about: the kind of completion or submission API.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// `CommunicationBackend::submit_local_dependencies`.
    LocalDependencies,
    /// `SubmissionBackend::submit`.
    Submit,
    /// `SubmissionBackend::fork_executors`.
    ForkExecutors,
    /// `SubmissionBackend::order_after`.
    OrderAfter,
    /// A claimed operation.
    Operation(Operation),
}

impl Subject {
    /// The name used after `::` in case names.
    pub fn name(self) -> &'static str {
        match self {
            Self::LocalDependencies => "local_dependencies",
            Self::Submit => "submit",
            Self::ForkExecutors => "fork_executors",
            Self::OrderAfter => "order_after",
            Self::Operation(operation) => operation.name(),
        }
    }

    /// The operation, when the subject is one.
    pub fn operation(self) -> Option<Operation> {
        match self {
            Self::Operation(operation) => Some(operation),
            _ => None,
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
