//! SUM mutants.

crate::mutants! {
    sum_1_sum_skips_last_member => SumSkipsLastMember,
    sum_2_lazy_launch => LazyLaunch,
}
