//! Every runner's results add up to the same report: one `cargo test`
//! process, or one process per case as `cargo nextest run` runs them
//! (emulated here with the variables nextest sets: `NEXTEST=1`,
//! `NEXTEST_RUN_ID`), leave records in a results directory that
//! `commcheck-report report` merges into equal reports (same digest: the
//! digest leaves times, attempts and the host out).
//!
//! This binary is also the suite it runs: with `RUNNERS_SUITE` set it is a
//! vendor's `commcheck::main` over the CPU reference backend claiming
//! `all_reduce_sum` and `barrier` with no instrument (so many cases are
//! not-supported before anything runs and are never run by nextest).

use std::path::Path;
use std::process::Command;

use commcheck::{Instruments, Operation};
use commcheck_reference::cpu::CpuHarness;
use commcheck_report::collect::report_from_records;
use commcheck_report::{Expectations, Level};
use libtest_mimic::{Arguments, Failed, Trial};

/// The cases the emulated runs take (a few families, to stay quick).
const FILTERS: [&str; 3] = ["SUM-", "BAR-1", "RET-2::"];
const SEED: &str = "4242";

fn suite() -> CpuHarness {
    // `RUNNERS_DEFECT`: the backend with one planted SUM-1 bug.
    match std::env::var_os("RUNNERS_DEFECT") {
        Some(_) => CpuHarness::with_defect(commcheck_cpu::Defect::SumSkipsLastMember),
        None => CpuHarness::new(),
    }
    .claiming(&[Operation::AllReduceSum, Operation::Barrier])
    .with_instruments(Instruments::default())
}

fn exe() -> Result<std::path::PathBuf, Failed> {
    std::env::current_exe().map_err(|e| Failed::from(e.to_string()))
}

/// The suite binary with `args` and `env`, recording into `dir`, as one
/// `cargo test` process (no nextest, no seed unless `env` sets one).
fn suite_command(args: &[&str], env: &[(&str, &str)], dir: &Path) -> Result<Command, Failed> {
    let mut command = Command::new(exe()?);
    command
        .args(args)
        .env("RUNNERS_SUITE", "1")
        .env("COMMCHECK_RESULTS_DIR", dir)
        .env_remove("NEXTEST")
        .env_remove("NEXTEST_RUN_ID")
        .env_remove("COMMCHECK_SEED");
    for (name, value) in env {
        command.env(name, value);
    }
    Ok(command)
}

/// Runs the suite binary with `args` and `env`; its stdout.
fn run_suite(args: &[&str], env: &[(&str, &str)], dir: &Path) -> Result<String, Failed> {
    let output = suite_command(args, env, dir)?
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(format!(
            "{args:?} failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(stdout)
}

/// The tests a runner lists (`--list`, as nextest does), without the ignored
/// ones (nextest does not run those).
fn listed(dir: &Path) -> Result<Vec<String>, Failed> {
    let mut args = vec!["--list", "--format", "terse"];
    args.extend(FILTERS);
    let all = run_suite(&args, &[], dir)?;
    args.push("--ignored");
    let ignored = run_suite(&args, &[], dir)?;
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|line| line.strip_suffix(": test"))
            .map(str::to_owned)
            .collect()
    };
    let ignored = names(&ignored);
    Ok(names(&all)
        .into_iter()
        .filter(|name| !ignored.contains(name))
        .collect())
}

/// Runs `names` one process each, as nextest does, all of one nextest run.
fn one_process_per_case(names: &[String], dir: &Path, seed: Option<&str>) -> Result<(), Failed> {
    for name in names {
        let mut env = vec![("NEXTEST", "1"), ("NEXTEST_RUN_ID", "runners-test-run")];
        if let Some(seed) = seed {
            env.push(("COMMCHECK_SEED", seed));
        }
        run_suite(&[name.as_str(), "--exact"], &env, dir)?;
    }
    Ok(())
}

fn one_process(dir: &Path) -> Result<(), Failed> {
    let args: Vec<&str> = FILTERS.to_vec();
    run_suite(&args, &[("COMMCHECK_SEED", SEED)], dir).map(drop)
}

fn nextest_and_cargo_test_make_equal_reports() -> Result<(), Failed> {
    let (single, per_case) = (tempdir()?, tempdir()?);
    one_process(single.path())?;
    let names = listed(per_case.path())?;
    if names.is_empty() {
        return Err("the filters listed no runnable case".into());
    }
    one_process_per_case(&names, per_case.path(), Some(SEED))?;
    let none = Expectations::none();
    let a = report_from_records(single.path(), &none).map_err(|e| e.to_string())?;
    let b = report_from_records(per_case.path(), &none).map_err(|e| e.to_string())?;
    if a.collected.missing != b.collected.missing || a.report.cases.len() != b.report.cases.len() {
        return Err(format!(
            "the runs cover different cases: {} vs {} results",
            a.report.cases.len(),
            b.report.cases.len()
        )
        .into());
    }
    let static_not_supported = a
        .collected
        .header
        .catalogue
        .iter()
        .filter(|planned| planned.not_supported.is_some())
        .count();
    if static_not_supported == 0 {
        return Err("expected cases not-supported before running (no instrument)".into());
    }
    if a.report.digest != b.report.digest {
        let differ: Vec<String> = a
            .report
            .cases
            .iter()
            .zip(&b.report.cases)
            .filter(|(x, y)| x.fingerprint != y.fingerprint)
            .map(|(x, y)| format!("{}: {} vs {}", x.name, x.status, y.status))
            .collect();
        return Err(format!(
            "one process and one process per case gave different digests ({} vs {}); cases that differ: {differ:?}",
            a.report.digest, b.report.digest
        )
        .into());
    }
    println!(
        "{} runnable cases, {} not-supported before running, {} missing (filtered out): digest {} either way",
        names.len(),
        static_not_supported,
        a.collected.missing.len(),
        a.report.digest
    );
    Ok(())
}

/// Without `COMMCHECK_SEED`, the processes of one nextest run share the seed
/// derived from `NEXTEST_RUN_ID`: their records are one run, none stale.
fn one_nextest_run_is_one_run() -> Result<(), Failed> {
    let dir = tempdir()?;
    let names = listed(dir.path())?;
    let names = &names[..names.len().min(3)];
    one_process_per_case(names, dir.path(), None)?;
    let made = report_from_records(dir.path(), &Expectations::none()).map_err(|e| e.to_string())?;
    let ran = made
        .report
        .cases
        .iter()
        .filter(|case| names.contains(&case.name))
        .count();
    if ran != names.len() || !made.collected.stale.is_empty() {
        return Err(format!(
            "expected the {} cases as one run, got {ran} and stale {:?}",
            names.len(),
            made.collected.stale
        )
        .into());
    }
    Ok(())
}

/// A partial run says it is partial and what is missing; records of an
/// earlier run (another seed) are stale, not mixed in.
fn partial_runs_say_so_and_stale_records_stay_out() -> Result<(), Failed> {
    let dir = tempdir()?;
    run_suite(&["SUM-2"], &[("COMMCHECK_SEED", "1")], dir.path())?;
    // The newest record names the current run: the first run's are dated an
    // hour back, not left to a clock's resolution.
    backdate(dir.path(), std::time::Duration::from_secs(3600))?;
    run_suite(&["BAR-1"], &[("COMMCHECK_SEED", "2")], dir.path())?;
    let made = report_from_records(dir.path(), &Expectations::none()).map_err(|e| e.to_string())?;
    let why = made
        .report
        .provenance
        .incomplete
        .clone()
        .unwrap_or_default();
    let stale: usize = made.collected.stale.iter().map(|(_, n)| n).sum();
    let has_sum = made.report.cases.iter().any(|c| c.invariant == "SUM-2");
    if made.report.level != Level::None
        || !why.starts_with("partial: ")
        || !why.contains(&format!("{} of ", made.collected.missing.len()))
        || !made
            .collected
            .missing
            .iter()
            .any(|name| name.starts_with("SUM-2"))
        || stale == 0
        || has_sum
    {
        return Err(format!(
            "expected a partial report (level none, missing cases named, SUM-2 of the older run stale); \
             got level {}, incomplete {why:?}, {stale} stale, SUM-2 present: {has_sum}",
            made.report.level
        )
        .into());
    }
    Ok(())
}

/// A run whose filters select no case writes nothing and says so: the
/// report made from the directory afterwards is the one made before.
fn a_run_that_selects_nothing_keeps_the_last_run() -> Result<(), Failed> {
    let dir = tempdir()?;
    one_process(dir.path())?;
    let digest = |dir: &Path| -> Result<String, Failed> {
        let made = report_from_records(dir, &Expectations::none()).map_err(|e| e.to_string())?;
        Ok(format!("{} {}", made.report.level, made.report.digest))
    };
    let before = digest(dir.path())?;
    let output = suite_command(&["NOPE-1"], &[("COMMCHECK_SEED", "99")], dir.path())?
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() || !stderr.contains("no case matches the filters given") {
        return Err(format!("NOPE-1: exit {}, stderr:\n{stderr}", output.status).into());
    }
    let after = digest(dir.path())?;
    if after != before {
        return Err(
            format!("the report changed after a run of no case: {before} -> {after}").into(),
        );
    }
    Ok(())
}

/// A run that finds a violation ends with one line per invariant and case
/// that recorded it (not one per observation), and with the command that
/// reruns what the fix must clear: the failing cases and those that
/// recorded another invariant's violation, under the run's seed.
/// `commcheck-report report` prints the same command from the records.
fn a_failing_run_prints_the_rerun_that_clears_it() -> Result<(), Failed> {
    let dir = tempdir()?;
    let env = [("RUNNERS_DEFECT", "1"), ("COMMCHECK_SEED", "42")];
    let output = suite_command(&["SUM-", "RET-2::"], &env, dir.path())?
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let command = |text: &str| {
        text.lines()
            .map(str::trim)
            .find(|line| line.starts_with("COMMCHECK_SEED="))
            .map(str::to_owned)
    };
    let Some(printed) = command(&stderr) else {
        return Err(format!("no rerun command printed; stderr:\n{stderr}").into());
    };
    let made = report_from_records(dir.path(), &Expectations::none()).map_err(|e| e.to_string())?;
    let expected: Vec<&str> = commcheck::runner::rerun::to_rerun(&made.report.cases);
    let seen = commcheck::runner::rerun::seen_by(&made.report.cases);
    let grouped = stderr
        .lines()
        .filter(|line| line.starts_with("  - ") && line.contains(" seen by "))
        .count();
    if output.status.success()
        || !printed.starts_with("COMMCHECK_SEED=42 cargo test --test runners -- --exact ")
        || !expected.contains(&"SUM-1::all_reduce_sum")
        || seen.is_empty()
        || grouped != seen.len()
        || printed.split_whitespace().skip(7).collect::<Vec<_>>() != expected
    {
        return Err(format!(
            "expected a failing run naming SUM-1::all_reduce_sum and the {} case(s) that saw SUM-1 \
             in one rerun command, with {} grouped line(s); got exit {}, {grouped} grouped line(s), \
             command {printed:?}; stderr:\n{stderr}",
            expected.len(),
            seen.len(),
            output.status
        )
        .into());
    }
    let report = Command::new(env!("CARGO_BIN_EXE_commcheck-report"))
        .arg("report")
        .arg(dir.path())
        .arg("--out")
        .arg(dir.path().join("report"))
        .output()
        .map_err(|e| e.to_string())?;
    let from_records = command(&String::from_utf8_lossy(&report.stderr));
    if from_records.as_deref() != Some(printed.as_str()) {
        return Err(format!(
            "`commcheck-report report` printed {from_records:?}, the run {printed:?}; stderr:\n{}",
            String::from_utf8_lossy(&report.stderr)
        )
        .into());
    }
    Ok(())
}

/// A run whose records cannot be written fails, in every runner (one
/// process for all cases, one per case as nextest runs them), and the first
/// line it prints says why.
fn a_run_that_cannot_record_fails() -> Result<(), Failed> {
    let dir = tempdir()?;
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "not a directory").map_err(|e| e.to_string())?;
    let unwritable = blocker.join("results");
    for (args, nextest) in [
        (vec!["BAR-1"], false),
        (vec!["BAR-1::barrier", "--exact"], true),
    ] {
        let mut command = suite_command(&args, &[], &unwritable)?;
        if nextest {
            command
                .env("NEXTEST", "1")
                .env("NEXTEST_RUN_ID", "runners-unwritable");
        }
        let output = command.output().map_err(|e| e.to_string())?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        if output.status.success() || !first.contains("cannot write results to") {
            return Err(format!(
                "{args:?} (nextest: {nextest}) with an unwritable results directory: exit {}, stderr:\n{stderr}",
                output.status
            )
            .into());
        }
    }
    Ok(())
}

/// Sets the modification time of every file under `dir` to `by` ago.
fn backdate(dir: &Path, by: std::time::Duration) -> Result<(), Failed> {
    let then = std::time::SystemTime::now() - by;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            backdate(&path, by)?;
        } else {
            std::fs::File::options()
                .write(true)
                .open(&path)?
                .set_modified(then)?;
        }
    }
    Ok(())
}

fn tempdir() -> Result<tempfile::TempDir, Failed> {
    tempfile::tempdir().map_err(|e| Failed::from(e.to_string()))
}

fn main() {
    if std::env::var_os("RUNNERS_SUITE").is_some() {
        commcheck::main(suite());
    }
    let args = Arguments::from_args();
    let trials = vec![
        Trial::test(
            "nextest_and_cargo_test_make_equal_reports",
            nextest_and_cargo_test_make_equal_reports,
        ),
        Trial::test("one_nextest_run_is_one_run", one_nextest_run_is_one_run),
        Trial::test(
            "partial_runs_say_so_and_stale_records_stay_out",
            partial_runs_say_so_and_stale_records_stay_out,
        ),
        Trial::test(
            "a_run_that_selects_nothing_keeps_the_last_run",
            a_run_that_selects_nothing_keeps_the_last_run,
        ),
        Trial::test(
            "a_failing_run_prints_the_rerun_that_clears_it",
            a_failing_run_prints_the_rerun_that_clears_it,
        ),
        Trial::test(
            "a_run_that_cannot_record_fails",
            a_run_that_cannot_record_fails,
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}
