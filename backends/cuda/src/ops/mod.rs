//! The eredu traits on the CUDA backend: submission, local dependencies, and
//! the eight communication operations over stream-ranks (see
//! [`crate::group`] for how a collective is laid out on the streams).
//!
//! One child per operation family, over two shared layers:
//!
//! - `part`: one member's part of a collective, enqueued on its stream and
//!   joined to its instance (and `Copying`, the part of every copy
//!   collective);
//! - `plan`: the checks and copy-table layout the planners share;
//! - `submission`: `SubmissionBackend` and `CommunicationBackend`;
//! - `sum`, `gather`, `all_to_all`, `broadcast`, `barrier`, `agreement`,
//!   `point_to_point`: each operation's planner and trait implementation.

mod agreement;
mod all_to_all;
mod barrier;
mod broadcast;
mod gather;
mod part;
mod plan;
mod point_to_point;
mod submission;
mod sum;
#[cfg(test)]
mod tests;

pub use agreement::CudaAgreement;
