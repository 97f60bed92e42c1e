//! EXC mutants: one proof per planted exact-completion defect.

crate::mutants! {
    exc_1_blocking_is_complete => BlockingIsComplete,
    exc_2_early_completion => EarlyCompletion,
    exc_3_non_monotonic_completion => NonMonotonicCompletion,
    exc_4_wait_for_device => WaitForDevice,
    exc_5_stale_completion_query => StaleCompletionQuery,
    exc_6_non_sticky_error => NonStickyError,
    exc_7_error_releases => ErrorReleases,
    exc_8_releasable_early => ReleasableEarly,
    exc_8_releasable_runs_destructors => ReleasableRunsDestructors,
    exc_8_releasable_after_deadline => ReleasableAfterDeadline,
    exc_9_releasable_never_true => ReleasableNeverTrue,
    exc_10_empty_local_deps_hang => EmptyLocalDepsHang,
}
