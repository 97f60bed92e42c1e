//! Mutant proofs and the precision matrix of the CUDA backend: for every
//! planted [`Defect`] of `commcheck-cuda`, the whole catalogue runs with
//! every instrument, and the kit must fail at least one case of the
//! invariant the defect breaks (a `fail`, `timeout` or `crash` of that ID:
//! a panic the defect causes, named on its own ID, is detection), and no
//! case of any other invariant but the overlaps declared for the CPU defect
//! of the same name (`tests/mutants/matrix.rs`, the same rules as the CPU
//! precision matrix). Each trial prints its matrix row.
//!
//! Each defect runs in a child process of its own (this binary, re-run for
//! that one trial): a hung proof, or a device poisoned by one, ends with its
//! process and takes no later proof down. Without a usable GPU every proof
//! is ignored with the reason (never a pass); `COMMCHECK_REQUIRE_CUDA=1`
//! makes that a failure.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use commcheck::{run_cases, RunResults};
use commcheck_cuda::Defect;
use commcheck_reference::cuda::CudaHarness;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use wait_timeout::ChildExt;

#[path = "mutants/matrix.rs"]
#[allow(dead_code, reason = "the CPU matrix's helpers")]
mod matrix;
#[path = "../backends/cuda/tests/support/mod.rs"]
mod support;

use matrix::{Planted, Row};

impl Planted for Defect {
    fn name(self) -> &'static str {
        Defect::name(self)
    }
    fn invariant(self) -> &'static str {
        Defect::invariant(self)
    }
}

/// Set in a child: the file its run's results go to.
const CHILD_RESULTS: &str = "COMMCHECK_CUDA_MUTANT_RESULTS";

/// How long one defect's child may take before it is killed and its proof
/// fails as hung (the kit's watchdog bounds each case; this bounds what it
/// cannot see, such as a device's teardown).
const PROOF_LIMIT: Duration = Duration::from_secs(300);

/// The trial's name: `ID::Defect`.
fn trial_name(defect: Defect) -> String {
    format!("{}::{defect}", defect.invariant())
}

/// In the child: the whole catalogue against `defect`, its results written
/// to the file `CHILD_RESULTS` names.
fn child(defect: Defect, path: &str) -> Result<Completion, Failed> {
    let results = run_cases(CudaHarness::with_defect(defect), |_| true)
        .map_err(|e| Failed::from(e.to_string()))?;
    let json = serde_json::to_vec(&results).map_err(|e| Failed::from(e.to_string()))?;
    std::fs::write(path, json).map_err(|e| Failed::from(format!("{path}: {e}")))?;
    Ok(Completion::Completed)
}

/// In the parent: runs `defect`'s child and judges its row.
fn proof(defect: Defect) -> Result<Completion, Failed> {
    let harness = CudaHarness::new();
    if let Err(reason) = harness.usable() {
        return match commcheck_cuda::cuda_required() {
            Ok(false) => support::not_supported(&reason),
            Ok(true) => {
                Err(format!("COMMCHECK_REQUIRE_CUDA=1 and CUDA is not usable: {reason}").into())
            }
            Err(setting) => Err(setting.to_string().into()),
        };
    }
    drop(harness);
    let file = tempfile::NamedTempFile::new().map_err(|e| Failed::from(e.to_string()))?;
    let path = file.path().to_string_lossy().into_owned();
    let exe = std::env::current_exe().map_err(|e| Failed::from(e.to_string()))?;
    let started = Instant::now();
    let mut process = Command::new(exe)
        .args(["--exact", &trial_name(defect), "--test-threads", "1"])
        .env(CHILD_RESULTS, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Failed::from(format!("could not start the proof's process: {e}")))?;
    let mut stderr = process.stderr.take();
    let drain = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(stderr) = stderr.as_mut() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });
    let status = match process.wait_timeout(PROOF_LIMIT) {
        Ok(Some(status)) => status,
        Ok(None) | Err(_) => {
            let _ = process.kill();
            let _ = process.wait();
            return Err(format!(
                "{defect}: its process did not finish within {PROOF_LIMIT:?} and was killed (a hang the kit's case \
                 watchdog does not cover)"
            )
            .into());
        }
    };
    let stderr = drain.join().unwrap_or_default();
    let results: RunResults = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| {
            Failed::from(format!(
                "{defect}: its process ended ({status}) without results; its stderr ends:\n{}",
                tail(&stderr)
            ))
        })?;
    let row = Row {
        defect,
        results,
        wall: started.elapsed(),
    };
    println!("precision matrix: {}", row.line());
    let problems = row.problems();
    if problems.is_empty() {
        Ok(Completion::Completed)
    } else {
        Err(problems.join("\n").into())
    }
}

/// The last lines of a child's stderr.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn main() {
    // Some defects hang work on purpose: a hang is proven when the watchdog
    // fires, so the watchdog is short (longer than twice the kit's release
    // slack, so that checks bounding their own waits report first); each
    // child runs four cases at a time (each world has a context of its own).
    std::env::set_var("COMMCHECK_CASE_TIMEOUT_MS", "11000");
    std::env::set_var("COMMCHECK_JOBS", "4");
    let mut args = Arguments::from_args();
    // One defect at a time: each child has the device to itself.
    args.test_threads = Some(1);
    let in_child = std::env::var(CHILD_RESULTS).ok();
    // Listed ignored when CUDA is not usable here and not required.
    let skipped = in_child.is_none()
        && CudaHarness::new().usable().is_err()
        && !commcheck_cuda::cuda_required().unwrap_or(true);
    let trials = Defect::ALL
        .iter()
        .map(|&defect| {
            let in_child = in_child.clone();
            Trial::ignorable_test(trial_name(defect), move || match &in_child {
                Some(path) => child(defect, path),
                None => proof(defect),
            })
            .with_ignored_flag(skipped)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
