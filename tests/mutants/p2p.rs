//! P2P mutants.

crate::mutants! {
    p2p_1_point_to_point_reversed => PointToPointReversed,
    p2p_2_skip_header_check => SkipHeaderCheck,
    p2p_3_separate_header_message => SeparateHeaderMessage,
}
