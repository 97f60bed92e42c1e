//! Bad input: every misuse yields a `CpuError` that names what was expected
//! and what was got, never a panic or a hang (all waits are bounded), and a
//! failing rank never corrupts another rank.
//!
//! One module per kind of misuse: disagreeing [`members`], [`counts`] and
//! axes, group and route [`endpoints`], [`point_to_point`] bundles, and the
//! [`isolation`] of a failure; the checks they share are here.

#[path = "../common/mod.rs"]
mod common;
mod counts;
mod endpoints;
mod isolation;
mod members;
mod point_to_point;

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError};
use eredu_runtime::backend::SumReductionBackend;
use eredu_runtime::CommunicationPeerCounts;

use crate::common::*;

/// Asserts that `error`'s message contains every fragment.
#[track_caller]
pub(crate) fn names(error: &CpuError, fragments: &[&str]) {
    let message = error.to_string();
    for fragment in fragments {
        assert!(
            message.contains(fragment),
            "{message:?} does not mention {fragment:?}"
        );
    }
}

/// The submission-time error of `result` (a submission that must be refused).
#[track_caller]
pub(crate) fn refused<T: std::fmt::Debug>(result: Result<T, CpuError>) -> CpuError {
    match result {
        Err(error @ CpuError::InvalidArgument { .. }) => error,
        other => panic!("expected a refused submission, got {other:?}"),
    }
}

pub(crate) fn peer_counts(send: &[usize], receive: &[usize]) -> CommunicationPeerCounts {
    CommunicationPeerCounts::new(send.to_vec(), receive.to_vec(), send.len()).unwrap()
}

/// A sum of a fresh group on `device` (checks the device still works).
pub(crate) fn fresh_sum_works(device: &CpuDevice, n: usize) {
    let results = on_ranks(device, n, |rank, group, executor| {
        read(&settle(
            CpuBackend::all_reduce_sum(ranked(device, rank, &[2]), &group, &executor).unwrap(),
        ))
    });
    let expected: Vec<f32> = (0..2).map(|i| (0..n).map(|r| value(r, i)).sum()).collect();
    assert_eq!(results, vec![expected; n]);
}
