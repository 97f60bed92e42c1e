//! BRD mutants.

crate::mutants! {
    brd_1_broadcast_sums => BroadcastSums,
    brd_2_broadcast_root_wraps => BroadcastRootWraps,
}
