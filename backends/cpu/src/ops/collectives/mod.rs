//! Group operations: sum, gathers, all-to-all, broadcast, barrier, agreement.
//!
//! Each member's work deposits its contribution in the group's rendezvous,
//! waits for every member, and computes its own output from the
//! contributions in member order. Disagreeing members fail on every rank with
//! a message naming the member at fault.
//!
//! [`collective`] is the submission every operation goes through; each
//! other file holds one family of operations on it.

mod agreement;
mod all_to_all;
mod along_axis;
mod broadcast;
mod collective;
mod gather;
mod sum;

pub use agreement::CpuAgreement;
pub use collective::PARALLEL_FROM;
pub use sum::SUM_BLOCK;
