//! Loom models of the CPU completion core (see the crate docs for what each
//! model covers, what is not modelled, and how to run deeper).
//!
//! Every model runs twice: on the shipped core, where loom must find no
//! failing interleaving, and with a mutant planted, where loom must find
//! one and the failure must name the invariant the mutant breaks.
//!
//! The exploration machinery is in [`explore`], the mirrors of the backend's
//! side of each race in [`mirrors`], what model threads hold in
//! [`harness`], and the models, by what they race, in [`waiting`],
//! [`deadlines`] and [`retention`]; the tests are declared here.
#![cfg(commcheck_loom)]

mod deadlines;
mod explore;
mod harness;
mod mirrors;
mod retention;
mod waiting;

use commcheck_cpu::loom_core::Mutant;
use commcheck_cpu::Defect;

use deadlines::*;
use explore::*;
use retention::*;
use waiting::*;

// ---------------------------------------------------------------------------
// Tests: every model on the shipped core, and with each of its mutants
// ---------------------------------------------------------------------------

macro_rules! clean_tests {
    ($($test:ident: $model:ident;)*) => {
        /// Every model, once.
        const MODELS: &[&Model] = &[$(&$model,)*];
        $(
            #[test]
            fn $test() {
                clean(&$model);
            }
        )*
    };
}

macro_rules! mutant_tests {
    ($($test:ident: $model:ident, $variant:expr;)*) => {
        /// Every mutant run: a model and the variant planted in it.
        const MUTANT_RUNS: &[(&Model, Variant)] = &[$((&$model, $variant),)*];
        $(
            #[test]
            fn $test() {
                mutant(&$model, $variant);
            }
        )*
    };
}

clean_tests! {
    waiters_are_woken_by_every_change: WAITERS;
    observers_race_completion: OBSERVERS;
    last_handle_races_completion: LAST_HANDLE;
    finish_races_cancel: FINISH_RACES_CANCEL;
    quarantine_races_completion: QUARANTINE;
    published_errors_stay: PUBLISHED_ERRORS;
    retain_races_finish: RETAIN_RACES_FINISH;
    completed_at_birth: COMPLETED_AT_BIRTH;
}

mutant_tests! {
    mutant_waiters_stale_wait_check: WAITERS, Variant::Core(Mutant::StaleWaitCheck);
    mutant_observers_cancel_check_then_act: OBSERVERS, Variant::Core(Mutant::CancelCheckThenAct);
    mutant_last_handle_drop_releases_pending:
        LAST_HANDLE, Variant::Backend(Defect::DropReleasesPending);
    mutant_finish_races_cancel_start_check_then_act:
        FINISH_RACES_CANCEL, Variant::Core(Mutant::StartCheckThenAct);
    mutant_quarantine_releases: QUARANTINE, Variant::Core(Mutant::QuarantineReleases);
    mutant_quarantine_cancels: QUARANTINE, Variant::Core(Mutant::QuarantineCancels);
    mutant_published_errors_report_error_once:
        PUBLISHED_ERRORS, Variant::Core(Mutant::ReportErrorOnce);
    mutant_retain_rejects_running: RETAIN_RACES_FINISH, Variant::Core(Mutant::RetainRejectsRunning);
    mutant_completed_at_birth_born_unreleased:
        COMPLETED_AT_BIRTH, Variant::Core(Mutant::BornUnreleased);
}

/// Every model has a mutant run, and every core mutant is planted in a model.
#[test]
fn every_model_and_mutant_is_exercised() {
    for model in MODELS {
        assert!(
            MUTANT_RUNS.iter().any(|(run, _)| run.name == model.name),
            "model {} has no mutant run",
            model.name
        );
    }
    for mutant in Mutant::ALL {
        assert!(
            MUTANT_RUNS
                .iter()
                .any(|(_, variant)| *variant == Variant::Core(*mutant)),
            "mutant {mutant:?} is planted in no model"
        );
    }
}
