//! Mutant proofs on the CUDA backend: for every planted [`Defect`] of
//! `commcheck-cuda`, the kit reports `fail` for at least one case of the
//! invariant the defect breaks (the cases of that invariant only: the whole
//! catalogue per defect is the CPU precision matrix's job, `tests/mutants`).
//! Without a usable GPU every proof is ignored with the reason (never a
//! pass); `COMMCHECK_REQUIRE_CUDA=1` makes that a failure.

use commcheck::{run_cases, Verdict};
use commcheck_cuda::Defect;
use commcheck_reference::cuda::CudaHarness;
use libtest_mimic::{Arguments, Completion, Failed, Trial};

#[path = "../backends/cuda/tests/support/mod.rs"]
mod support;

/// How long one proof may take before it is reported hung (the kit's
/// watchdog bounds each case; this bounds what it cannot see, such as a
/// device's teardown).
const PROOF_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// [`proof`] on a thread of its own, so that a hung proof fails alone and
/// the next ones still run.
fn bounded_proof(defect: Defect) -> Result<Completion, Failed> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send
            .send(proof(defect).map_err(|failed| failed.message().unwrap_or("failed").to_string()));
    });
    match receive.recv_timeout(PROOF_LIMIT) {
        Ok(outcome) => outcome.map_err(Failed::from),
        Err(_) => Err(format!(
            "the proof for {defect} did not finish within {PROOF_LIMIT:?} (a hang the kit's case watchdog does not cover)"
        )
        .into()),
    }
}

fn proof(defect: Defect) -> Result<Completion, Failed> {
    let harness = CudaHarness::with_defect(defect);
    if let Err(reason) = harness.usable() {
        return match commcheck_cuda::cuda_required() {
            Ok(false) => support::not_supported(&reason),
            Ok(true) => {
                Err(format!("COMMCHECK_REQUIRE_CUDA=1 and CUDA is not usable: {reason}").into())
            }
            Err(setting) => Err(setting.to_string().into()),
        };
    }
    let results = run_cases(harness, |case| case.invariant().id == defect.invariant())
        .map_err(|e| Failed::from(e.to_string()))?;
    let verdicts: Vec<String> = results
        .cases
        .iter()
        .map(|case| {
            format!(
                "{} {}: {}",
                case.name,
                case.verdict,
                case.message.clone().unwrap_or_default()
            )
        })
        .collect();
    // A violation of the defect's own invariant (not a harness error).
    let violated = format!("{} violated", defect.invariant());
    if results.cases.iter().any(|case| {
        case.verdict == Verdict::Fail
            && case
                .message
                .as_deref()
                .is_some_and(|m| m.contains(&violated))
    }) {
        for line in &verdicts {
            println!("{defect}: {line}");
        }
        return Ok(Completion::Completed);
    }
    Err(format!(
        "the defect {defect} ({}) breaks {}, but no case of {} reported it violated:\n{}",
        defect.describe(),
        defect.invariant(),
        defect.invariant(),
        verdicts.join("\n")
    )
    .into())
}

fn main() {
    // Some defects hang work on purpose: a hang is proven when the watchdog
    // fires, so the watchdog is short (longer than twice the kit's release
    // slack, so that checks bounding their own waits report first).
    std::env::set_var("COMMCHECK_CASE_TIMEOUT_MS", "11000");
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    // Defects that free memory a kernel still uses run last: should one
    // fault the device despite the backend's pool (which keeps freed memory
    // mapped), it takes down only the proofs after it.
    let frees_live = |d: &&Defect| {
        matches!(
            d,
            Defect::CollectiveDropsResources
                | Defect::OutputNotRetained
                | Defect::DropReleasesPending
                | Defect::ErrorReleases
                | Defect::QuarantineDropsLive
                | Defect::ErrorDropsLive
        )
    };
    // Listed ignored when CUDA is not usable here and not required.
    let skipped =
        CudaHarness::new().usable().is_err() && !commcheck_cuda::cuda_required().unwrap_or(true);
    let trials = Defect::ALL
        .iter()
        .filter(|d| !frees_live(d))
        .chain(Defect::ALL.iter().filter(frees_live))
        .map(|&defect| {
            Trial::ignorable_test(format!("{}::{defect}", defect.invariant()), move || {
                bounded_proof(defect)
            })
            .with_ignored_flag(skipped)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
