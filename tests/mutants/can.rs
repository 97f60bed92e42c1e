//! CAN mutants: each planted defect of the bounded wait fails its invariant.

crate::mutants! {
    can_1_completed_at_deadline => CompletedAtDeadline,
    can_2_early_deadline => EarlyDeadline,
    can_3_wrong_cancellation_mode => WrongCancellationMode,
    can_4_native_cancel_errors => NativeCancelErrors,
    can_5_native_cancel_no_teardown => NativeCancelNoTeardown,
    can_6_quarantine_drops_live => QuarantineDropsLive,
    can_7_error_drops_live => ErrorDropsLive,
    can_8_deadline_overflow => DeadlineOverflow,
    can_9_failed_is_completed => FailedIsCompleted,
}
