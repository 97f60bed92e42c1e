//! The completion matrix: every kind of completion a backend returns, each
//! with a standard submission and a way to keep it pending.
//!
//! Local work (local dependencies, plain submissions) is kept pending with the
//! hold instrument when the harness provides it, and otherwise by submitting
//! the backend's own lazy tensor work ([`crate::matrix::lazy`]), which needs no
//! instrument but is pending only for a known while. Communication work is
//! kept pending by a *late peer*: every rank but the subject (rank 0) submits
//! only when the subject releases it, which needs no instrument at all.
//!
//! Layers, lowest first: [`handle`] (a completion behind one interface),
//! [`submitted`] (standard submissions and their checks), [`driver`] (a row:
//! a submission kept pending), [`operations`] (the eight operations' rows).

mod driver;
mod handle;
pub mod lazy;
mod operations;
mod submitted;

pub use crate::subject::Subject;
pub(crate) use driver::{
    feed_join, local_dependencies_driver, local_pending, local_ranks, next_round,
    part_done_applies, submit_driver, with_late_peers, Driver, Pending, PendingVia,
};
pub(crate) use handle::{wait_within, Handle};
pub(crate) use operations::{verified_agreement, ROUTE};
pub(crate) use submitted::{
    completes_within, probes, values, verify_tensors, LazyWindow, Load, Submitted, Verify,
};
