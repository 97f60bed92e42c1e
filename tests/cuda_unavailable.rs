//! Without a usable GPU, the CUDA harness says so through
//! `Harness::unavailable`, and every case of the catalogue is
//! `not-supported` with that reason before anything runs: nothing unchecked
//! is `pass`. (On a machine with a GPU there is nothing to check here: the
//! proof is ignored, saying so.)

use commcheck::{catalogue, run_cases, Harness, Verdict};
use commcheck_reference::cuda::CudaHarness;
use libtest_mimic::{Arguments, Completion, Failed, Trial};

#[path = "../backends/cuda/tests/support/mod.rs"]
mod support;

/// Why there is nothing to check here, if so.
fn nothing_to_check(harness: &CudaHarness) -> Option<&'static str> {
    if harness.usable().is_ok() {
        return Some("a CUDA device is usable here: nothing is unavailable");
    }
    if commcheck_cuda::cuda_required().unwrap_or(true) {
        return Some(
            "COMMCHECK_REQUIRE_CUDA is set: the harness fails instead (tests/certify_cuda.rs)",
        );
    }
    None
}

fn every_case_not_supported_with_the_reason() -> Result<Completion, Failed> {
    let harness = CudaHarness::new();
    if let Some(why) = nothing_to_check(&harness) {
        return support::not_supported(why);
    }
    let reason = harness
        .unavailable()
        .ok_or("no GPU, and the harness does not say it is unavailable")?;
    if !reason.contains("libcuda") && !reason.contains("device") {
        return Err(format!(
            "the reason names neither the driver library nor the device: {reason}"
        )
        .into());
    }
    for case in catalogue(&harness) {
        if case.not_supported_before_running().is_none() {
            return Err(format!("{} would run without a GPU", case.name()).into());
        }
    }
    let results = run_cases(harness, |_| true).map_err(|e| Failed::from(e.to_string()))?;
    for case in &results.cases {
        if case.verdict != Verdict::NotSupported {
            return Err(format!("{}: {} without a GPU", case.name, case.verdict).into());
        }
    }
    // The summaries group them under their own reason, not "other".
    let decided = results.decided().to_string();
    if !decided.contains(&format!(
        "(backend unavailable here {})",
        results.cases.len()
    )) {
        return Err(format!("the run's summary does not say why: {decided}").into());
    }
    Ok(Completion::Completed)
}

fn main() {
    let args = Arguments::from_args();
    let skipped = nothing_to_check(&CudaHarness::new()).is_some();
    let trials = vec![Trial::ignorable_test(
        "cuda::unavailable_means_not_supported",
        every_case_not_supported_with_the_reason,
    )
    .with_ignored_flag(skipped)];
    libtest_mimic::run(&args, trials).exit();
}
