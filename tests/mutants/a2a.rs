//! A2A mutants.

crate::mutants! {
    a2a_1_all_to_all_zero_skips => AllToAllZeroSkips,
}
