//! How the CUDA test binaries (here and at the repository root) report a
//! test that cannot run on this machine: never as a pass.

use libtest_mimic::{Completion, Failed};

/// Not-supported for `reason`. libtest shows it ignored, with the reason;
/// under nextest (a process per test, where a test that ran cannot be shown
/// skipped) it fails, saying so. Such tests are also listed ignored before
/// anything runs ([`libtest_mimic::Trial::with_ignored_flag`]), so that
/// nextest skips them unless asked to run ignored tests.
pub fn not_supported(reason: &str) -> Result<Completion, Failed> {
    if std::env::var("NEXTEST").is_ok_and(|v| v == "1") {
        return Err(format!(
            "not-supported, found when it ran (nextest cannot show a test that ran as skipped; \
             this is not a pass): {reason}"
        )
        .into());
    }
    Ok(Completion::ignored_with(format!("not-supported: {reason}")))
}
