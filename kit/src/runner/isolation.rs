//! Process isolation: each case in a child process (`COMMCHECK_ISOLATION=process`).
//!
//! The parent re-runs its own test binary with `--exact <case>` and
//! `COMMCHECK_CHILD=1`; the child runs that one case in-process and prints
//! its result on a marked line. A child killed by a signal (abort, segfault)
//! is a `crash`; one that outlives the watchdog is killed and is a `timeout`.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libtest_mimic::Arguments;
use wait_timeout::ChildExt;

use super::execute::{execute, result};
use crate::case::Case;
use crate::catalogue::catalogue;
use crate::harness::Harness;
use crate::results::{CaseResult, Verdict};

const CHILD: &str = "COMMCHECK_CHILD";
const MARK: &str = "commcheck-case-result: ";

pub(super) fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// The child's whole life: run the one case named by the exact filter.
pub(super) fn child_main<H: Harness>(harness: H, args: &Arguments, limit: Duration) -> ! {
    let harness = Arc::new(harness);
    let base = std::env::var(CHILD)
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0);
    let wanted = args.filter.clone().unwrap_or_default();
    for case in catalogue(&*harness) {
        if case.name() == wanted {
            let result = execute(&harness, &case, base, limit, false);
            match serde_json::to_string(&result) {
                Ok(json) => println!("{MARK}{json}"),
                Err(error) => eprintln!("commcheck: cannot encode result: {error}"),
            }
            std::process::exit(0);
        }
    }
    eprintln!("commcheck: no case named {wanted:?}");
    std::process::exit(2);
}

/// Runs `case` in a child process and reads its verdict.
pub(super) fn execute_in_child<H: Harness>(
    case: &Case<H>,
    base: u64,
    limit: Duration,
) -> CaseResult {
    let started = Instant::now();
    let seed = super::execute::case_seed(base, &case.name());
    let end =
        |verdict, message: String| result(case, verdict, Some(message), 1, started.elapsed(), seed);
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            return end(
                Verdict::Crash,
                format!("cannot find the test binary: {error}"),
            )
        }
    };
    let spawned = Command::new(exe)
        .args([
            case.name().as_str(),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, base.to_string())
        .env_remove("COMMCHECK_ISOLATION")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            return end(
                Verdict::Crash,
                format!("cannot start the child process: {error}"),
            )
        }
    };
    // Drain stdout while the child runs, so a full pipe never stalls it.
    let reader = child.stdout.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    });
    // Retries inside the child may take two case limits.
    let deadline = started + limit * 2 + Duration::from_secs(5);
    let status = match child.wait_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return end(
                Verdict::Timeout,
                format!(
                    "the child process did not finish within {:?}",
                    deadline - started
                ),
            );
        }
        Err(error) => {
            return end(
                Verdict::Crash,
                format!("cannot wait for the child: {error}"),
            )
        }
    };
    let stdout = reader
        .and_then(|reader| reader.join().ok())
        .unwrap_or_default();
    if let Some(parsed) = stdout
        .lines()
        .find_map(|line| line.strip_prefix(MARK))
        .and_then(|json| serde_json::from_str::<CaseResult>(json).ok())
    {
        return parsed;
    }
    end(
        Verdict::Crash,
        format!(
            "the child process died without a verdict ({})",
            describe(status)
        ),
    )
}

#[cfg(unix)]
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(signal) => format!("killed by signal {signal}"),
        None => format!("exit status {status}"),
    }
}

#[cfg(not(unix))]
fn describe(status: std::process::ExitStatus) -> String {
    format!("exit status {status}")
}
