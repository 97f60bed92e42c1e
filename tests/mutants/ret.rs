//! RET mutants.

crate::mutants! {
    ret_1_local_work_drops_inputs => LocalWorkDropsInputs,
    ret_2_executor_not_retained => ExecutorNotRetained,
    ret_3_collective_drops_resources => CollectiveDropsResources,
    ret_4_drop_releases_pending => DropReleasesPending,
    ret_5_output_not_retained => OutputNotRetained,
    ret_6_retain_drops_early => RetainDropsEarly,
    ret_7_leak_retained => LeakRetained,
    ret_8_local_deps_fence_group => LocalDepsFenceGroup,
}
