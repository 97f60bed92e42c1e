//! `proptest` strategies over operations and sequences.
//!
//! Shrinking removes operations and moves every choice towards its simplest
//! form (submission 0, lane 0, no fault, the first alternative), so a
//! failure shrinks to a short sequence that still names small indices.

use std::time::Duration;

use proptest::prelude::*;

use super::op::{Header, Mode, Op, Sequence, Timeout, Work};

/// Indices of submissions (taken modulo the number made so far).
const SUBS: std::ops::Range<u8> = 0..8;
/// Indices of lanes (taken modulo the number of lanes).
const LANES: std::ops::Range<u8> = 0..4;

/// What a submission submits: local work, claimed operations' standard
/// submissions, and their parameterised forms (counts, roots, votes, headers).
pub fn work_strategy() -> impl Strategy<Value = Work> {
    prop_oneof![
        3 => Just(Work::LocalDependencies),
        5 => Just(Work::Submit),
        4 => (0u8..8).prop_map(Work::Operation),
        1 => ([0u8..4, 0u8..4], 0u8..3)
            .prop_map(|(counts, width)| Work::UnevenGather { counts, width }),
        1 => ([[0u8..3, 0u8..3], [0u8..3, 0u8..3]], 0u8..3)
            .prop_map(|(sends, width)| Work::AllToAll { sends, width }),
        1 => (0u8..3).prop_map(|root| Work::Broadcast { root }),
        1 => [any::<bool>(), any::<bool>()].prop_map(|votes| Work::Agree { votes }),
        1 => (0u8..2, header_strategy())
            .prop_map(|(values, header)| Work::SendReceive { values, header }),
    ]
}

fn header_strategy() -> impl Strategy<Value = Header> {
    prop_oneof![
        3 => Just(Header::Matching),
        1 => proptest::sample::select(&Header::ALL[1..]),
    ]
}

fn timeout_strategy() -> impl Strategy<Value = Timeout> {
    prop_oneof![
        Just(Timeout::Nanosecond),
        Just(Timeout::Short),
        Just(Timeout::Long),
        Just(Timeout::Unbounded),
        (1u64..20_000_000).prop_map(|nanos| Timeout::Exact(Duration::from_nanos(nanos))),
    ]
}

fn mode_strategy() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::NativeCancel), Just(Mode::Quarantine)]
}

/// One operation, weighted towards submissions, releases and observations.
pub fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        9 => (work_strategy(), LANES, prop::bool::weighted(0.15))
            .prop_map(|(work, lane, fault)| Op::Submit { work, lane, fault }),
        5 => SUBS.prop_map(|sub| Op::Release { sub }),
        1 => (SUBS, any::<u8>()).prop_map(|(sub, delay)| Op::LateRelease { sub, delay }),
        3 => SUBS.prop_map(|sub| Op::IsComplete { sub }),
        3 => SUBS.prop_map(|sub| Op::Wait { sub }),
        3 => (SUBS, timeout_strategy(), mode_strategy())
            .prop_map(|(sub, timeout, mode)| Op::WaitBounded { sub, timeout, mode }),
        1 => SUBS.prop_map(|sub| Op::DropOutputs { sub }),
        2 => SUBS.prop_map(|sub| Op::DropCompletion { sub }),
        2 => (0u8..3).prop_map(|count| Op::Fork { count }),
        3 => (SUBS, LANES).prop_map(|(sub, lane)| Op::OrderAfter { sub, lane }),
        1 => SUBS.prop_map(|sub| Op::Retain { sub }),
    ]
}

/// Sequences of 1 to `max_len` operations.
pub fn sequence_strategy(max_len: usize) -> impl Strategy<Value = Sequence> {
    prop::collection::vec(op_strategy(), 1..=max_len.max(1)).prop_map(Sequence)
}
