//! SUB mutants.

crate::mutants! {
    sub_1_fork_shares_lane => ForkSharesLane,
    sub_2_submit_skips_evaluation => SubmitSkipsEvaluation,
    sub_3_order_after_ignored => OrderAfterIgnored,
    sub_4_submit_error_leaves_work => SubmitErrorLeavesWork,
}
