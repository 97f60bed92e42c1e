//! The libtest-compatible command line and the run loop: filters, `--list`,
//! `--ignored`, `--format`, one trial per case (libtest-mimic), the run's
//! records and results files, and the closing summary.

use super::admission::Admission;
use super::execute::{case_seed, execute, result, world_runs};
use super::records::Records;
use super::{decided, grid, isolation, level, records, rerun, results};
use crate::case::Case;
use crate::catalogue::catalogue;
use crate::harness::Harness;
use crate::results::{CaseResult, RunResults, Verdict, RESULTS_SCHEMA};
use crate::settings::{Isolation, Reader, Settings, SettingsError};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Runs the cases `select` picks, in this process, `COMMCHECK_JOBS` at a
/// time (default: as the machine has room for, see `admission`), and
/// returns their results in catalogue order. The
/// programmatic entry point (mutant proofs, reports); [`main()`] is the
/// command-line one. A bad `COMMCHECK_*` setting ([`crate::settings`]) is an
/// error, and nothing runs.
pub fn run_cases<H: Harness>(
    harness: H,
    select: impl Fn(&Case<H>) -> bool,
) -> Result<RunResults, SettingsError> {
    run_cases_with(harness, select, |_, _| {})
}

/// [`run_cases`], calling `progress(result, total)` as each case finishes
/// (from the worker threads, in completion order), so callers can stream
/// results to disk and show progress.
pub fn run_cases_with<H: Harness>(
    harness: H,
    select: impl Fn(&Case<H>) -> bool,
    progress: impl Fn(&CaseResult, usize) + Sync,
) -> Result<RunResults, SettingsError> {
    let settings = Settings::read(Reader::CASES)?;
    let (base, limit) = (settings.base_seed(), settings.case_timeout);
    let harness = Arc::new(harness);
    let cases: Vec<Arc<Case<H>>> = catalogue(&*harness)
        .into_iter()
        .filter(|case| select(case))
        .map(Arc::new)
        .collect();
    if !harness.instruments().hold && cases.iter().any(|case| case.script.is_ok()) {
        crate::matrix::lazy::calibrate_alone(&harness, base, limit);
    }
    let order = start_order(&cases);
    let next = Mutex::new(0usize);
    let results = Mutex::new(vec![None; cases.len()]);
    let admission = Admission::new(settings.jobs);
    std::thread::scope(|scope| {
        for _ in 0..admission.workers() {
            scope.spawn(|| loop {
                let index = {
                    let mut next = next.lock().unwrap_or_else(|p| p.into_inner());
                    let index = order.get(*next).copied();
                    *next += 1;
                    index
                };
                let Some(index) = index else { break };
                let case = &cases[index];
                let at_once = settings.jobs.is_none();
                let admitted = admission.enter(if at_once { world_runs(case) } else { 1 });
                let result = execute(&harness, case, base, limit, at_once);
                drop(admitted);
                progress(&result, cases.len());
                results.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(result);
            });
        }
    });
    let cases = results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect();
    Ok(summary(&*harness, base, cases))
}

/// The order in which the cases start: those whose scripts run the most
/// ranks in all (the sweeps over world sizes up to 8, on every backend the
/// longest cases) first, the rest in catalogue order; so that the run does
/// not end waiting on a long case that started last. Results keep the
/// catalogue's order whatever the start order.
fn start_order<H: Harness>(cases: &[Arc<Case<H>>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..cases.len()).collect();
    order.sort_by_key(|&index| std::cmp::Reverse(cases[index].worlds.iter().sum::<usize>()));
    order
}

pub(crate) fn summary<H: Harness>(harness: &H, seed: u64, cases: Vec<CaseResult>) -> RunResults {
    RunResults {
        schema: RESULTS_SCHEMA,
        kit_version: env!("CARGO_PKG_VERSION").to_owned(),
        backend: harness.identity(),
        instruments: harness.instruments(),
        claims: harness.claims().operations(),
        seed,
        cases,
        calibration: crate::matrix::lazy::calibration(harness),
        processes: None,
        incomplete: None,
        data: Some(results::DataCoverage::of(harness)),
        build: Some(crate::build::Build::this()),
        hosts: vec![crate::build::hostname()],
        ranks: Vec::new(),
    }
}

/// Runs the suite with a libtest-compatible command line and exits.
///
/// This is the whole body of a vendor's `harness = false` test file
/// (`fn main() { commcheck::main(MyHarness::new()) }`); see the crate docs.
/// A bad `COMMCHECK_*` setting ends it at once with status 2, naming the
/// variable.
pub fn main<H: Harness>(harness: H) -> ! {
    let (mut args, filters) = command_line();
    let settings = settings_or_exit(Reader::SUITE);
    // COMMCHECK_JOBS applies here too, unless libtest's --test-threads says.
    if args.test_threads.is_none() {
        args.test_threads = settings.jobs;
    }
    if isolation::is_child() {
        isolation::child_main(harness, &args, settings.case_timeout);
    }
    let must_pass = level::must_pass(&harness);
    let (conclusion, results, records) =
        match run_with_settings(harness, &args, &filters, &settings) {
            Ok(ran) => ran,
            Err(error) => {
                eprintln!("commcheck: {error}");
                std::process::exit(1)
            }
        };
    if !args.list {
        if let Some(results) = results {
            report(&results, records.as_deref(), &settings, &args, &must_pass);
        }
    }
    if let Some(records) = records.filter(|records| records.write_failed()) {
        eprintln!(
            "commcheck: some results of this run could not be recorded in {} (see above): the run fails, \
             since a report made from that directory would not hold them",
            records.dir().display()
        );
        std::process::exit(1)
    }
    conclusion.exit()
}

/// The whole body of a vendor's `harness = false` test file: a `main` that
/// runs the suite on a harness ([`main()`]), and a guard for a forgotten
/// `harness = false`.
///
/// Without `harness = false` in `Cargo.toml`, cargo builds the file with
/// libtest's harness: `main` never runs, and `cargo test` would say
/// `running 0 tests ... ok`. The guard is a `#[test]`, compiled only in
/// that case, that fails saying what to add.
///
/// ```text
/// // tests/commcheck.rs, with `[[test]] name = "commcheck"` and
/// // `harness = false` in Cargo.toml
/// commcheck::main!(MyHarness::new());
/// ```
///
/// The crate docs' minimal harness ends with it, compiled.
#[macro_export]
macro_rules! main {
    ($harness:expr) => {
        #[allow(dead_code)]
        fn main() {
            $crate::main($harness)
        }

        #[test]
        fn commcheck_test_file_needs_harness_false() {
            panic!(
                "{} was built with libtest's harness, so none of commcheck's cases ran: add \
                 `harness = false` to its [[test]] section in Cargo.toml, e.g.\n\n[[test]]\n\
                 name = \"{}\"\nharness = false\n",
                file!(),
                ::std::path::Path::new(file!())
                    .file_stem()
                    .and_then(|stem| stem.to_str())
                    .unwrap_or("commcheck"),
            )
        }
    };
}

/// libtest's command line, parsed by libtest-mimic's own definition
/// (`Arguments`, a clap parser) with the filters after its one: libtest
/// takes any number (a test runs when its name matches one of them),
/// libtest-mimic one.
#[derive(clap::Parser)]
#[command(help_template = "USAGE: [OPTIONS] [FILTER]...\n\n{all-args}")]
struct Libtest {
    #[command(flatten)]
    arguments: Arguments,
    /// More filters: a test runs when its name matches any of them.
    #[arg(value_name = "FILTER")]
    more: Vec<String>,
}

/// libtest's command line. With two or more filters, they are taken out of
/// the arguments and returned, to be applied to the catalogue ([`picked`]);
/// with one or none, libtest-mimic applies it.
pub(crate) fn command_line() -> (Arguments, Vec<String>) {
    let Libtest {
        mut arguments,
        more,
    } = <Libtest as clap::Parser>::parse();
    if more.is_empty() {
        return (arguments, Vec::new());
    }
    let filters = arguments.filter.take().into_iter().chain(more).collect();
    (arguments, filters)
}

/// Whether the filters taken out by [`command_line`] pick `name` (all do
/// when there are none): a substring match, or with `--exact` an equal one.
pub(crate) fn picked(filters: &[String], exact: bool, name: &str) -> bool {
    filters.is_empty() || filters.iter().any(|filter| matches(filter, exact, name))
}

/// libtest's match of one filter: a substring, or with `--exact` the name.
fn matches(filter: &str, exact: bool, name: &str) -> bool {
    if exact {
        name == filter
    } else {
        name.contains(filter)
    }
}

/// The settings, or (on a bad one) a message naming it and exit status 2.
pub(crate) fn settings_or_exit(reader: Reader) -> Settings {
    Settings::read(reader).unwrap_or_else(|error| {
        eprintln!("commcheck: {error}");
        std::process::exit(2)
    })
}

/// Prints the family summary, where the records are, and writes the
/// whole-run file when `COMMCHECK_RESULTS` asks for one.
/// With `--format json` the lines go to stderr, so that stdout stays the
/// JSON event stream.
pub(crate) fn report(
    results: &RunResults,
    records: Option<&Records>,
    settings: &Settings,
    args: &Arguments,
    must_pass: &[String],
) {
    let json = matches!(args.format, Some(libtest_mimic::FormatSetting::Json));
    let say = |line: String| {
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    say(format!("commcheck {}", results.decided()));
    for line in results.family_summary() {
        say(format!("commcheck {line}"));
    }
    let across = results
        .processes
        .map(|n| format!(" ({n} processes)"))
        .unwrap_or_default();
    if let Some(records) = records {
        say(format!(
            "commcheck records{across}: {} ({} case(s) recorded by this process; \
             `commcheck-report report {}` merges every run's records into a report)",
            records.dir().display(),
            results.cases.iter().filter(|c| c.attempts > 0).count(),
            records.dir().display(),
        ));
    }
    match write_results(results, settings) {
        Some(Ok(path)) => say(format!("commcheck results{across}: {}", path.display())),
        Some(Err(error)) => eprintln!("commcheck: {error}"),
        None => {}
    }
    eprint!("{}", closing(results, must_pass));
}

/// The closing summary of a run, for stderr: the level this run reaches
/// and what blocks the next one, the not-supported cases grouped by reason
/// and the inconclusive ones by setup reason (libtest lists a case found
/// not-supported before it runs as a bare `ignored`: libtest-mimic cannot
/// carry a reason for it), and the invariant × subject grid.
pub fn closing(results: &RunResults, must_pass: &[String]) -> String {
    let mut text = String::new();
    let ran: std::collections::HashSet<&str> =
        results.cases.iter().map(|c| c.name.as_str()).collect();
    let absent = must_pass
        .iter()
        .filter(|n| !ran.contains(n.as_str()))
        .count();
    if absent > 0 {
        text.push_str(&format!(
            "commcheck level: not assessed: this run has {} of the {} must-pass cases (a filtered \
             run, or one shard); `commcheck-report report` merges the records of every run with \
             one COMMCHECK_SEED into one certification\n",
            must_pass.len() - absent,
            must_pass.len()
        ));
    } else {
        let reached = level::Level::reached(must_pass, &results.cases);
        text.push_str(&format!(
            "commcheck level: {reached} ({} must-pass cases; `commcheck-report report` makes the \
             signed certification)\n",
            must_pass.len()
        ));
        let blockers = level::blockers(must_pass, &results.cases);
        if !blockers.is_empty() {
            let next = if reached == level::Level::None {
                "core"
            } else {
                "full"
            };
            text.push_str(&format!("commcheck: {next} is blocked by:\n"));
            for line in blockers {
                text.push_str(&format!("  - {line}\n"));
            }
        }
    }
    let groups = rerun::seen_by(&results.cases);
    if !groups.is_empty() {
        text.push_str(
            "commcheck: violations recorded by cases of other invariants (each case's record keeps \
             them until it runs again):\n",
        );
        for group in &groups {
            text.push_str(&format!("  - {}\n", rerun::describe(group)));
        }
    }
    let again = rerun::to_rerun(&results.cases);
    if !again.is_empty() {
        text.push_str(&format!(
            "commcheck: once fixed, rerun the failing and inconclusive cases and those that recorded \
             another invariant's violation, under this run's seed (their records replace these):\n  {}\n",
            rerun::command(
                results.seed,
                rerun::this_suite().as_deref(),
                &again
            )
        ));
    }
    for (verdict, what) in [
        (Verdict::NotSupported, "not-supported, by reason"),
        (Verdict::Inconclusive, "inconclusive, by setup reason"),
    ] {
        let mut groups: Vec<(String, usize)> = Vec::new();
        for case in results.cases.iter().filter(|c| c.verdict == verdict) {
            let message = case.message.as_deref().unwrap_or("(no reason given)");
            let key = if verdict == Verdict::Inconclusive {
                decided::inconclusive_reason(message).to_owned()
            } else {
                message.to_owned()
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, count)) => *count += 1,
                None => groups.push((key, 1)),
            }
        }
        if groups.is_empty() {
            continue;
        }
        groups.sort_by_key(|g| std::cmp::Reverse(g.1));
        let total: usize = groups.iter().map(|g| g.1).sum();
        text.push_str(&format!(
            "commcheck {what} ({}):\n",
            crate::results::cases(total)
        ));
        for (reason, count) in groups {
            text.push_str(&format!("  {count:>4}  {reason}\n"));
        }
    }
    text.push_str("commcheck grid (invariant x subject):\n");
    for line in grid::Grid::of_results(results).to_text().lines() {
        text.push_str(&format!("  {line}\n"));
    }
    text
}

/// Writes the whole-run file `COMMCHECK_RESULTS` names, if it names one;
/// its path, or what went wrong.
pub(crate) fn write_results(
    results: &RunResults,
    settings: &Settings,
) -> Option<Result<std::path::PathBuf, String>> {
    let path = settings.results.clone()?;
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            let json = serde_json::to_string_pretty(results)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            std::fs::write(&path, json)
        });
    Some(match written {
        Ok(()) => Ok(path),
        Err(error) => Err(format!("could not write {}: {error}", path.display())),
    })
}

/// Opens the results directory for a run over `catalogue`, the whole
/// catalogue however narrowed the run is: none when only listing, or when
/// the run selects no case (`picks` and libtest's filters, skips and
/// `--ignored`: such a run changes no records, and says so). A directory that cannot be written is an error:
/// the run would certify nothing.
pub(crate) fn open_records<H: Harness>(
    harness: &Arc<H>,
    catalogue: &[Case<H>],
    picks: &dyn Fn(&Case<H>) -> bool,
    base: u64,
    processes: Option<usize>,
    settings: &Settings,
    args: &Arguments,
) -> Result<Option<Arc<Records>>, String> {
    if args.list {
        return Ok(None);
    }
    let ignored_only = args.ignored && !args.include_ignored;
    let runs = |case: &Case<H>| {
        picks(case)
            && selected(args, &case.name())
            && (!ignored_only || case.not_supported_before_running().is_some())
    };
    if !catalogue.iter().any(runs) {
        eprintln!(
            "commcheck: no case matches the filters given; no records were written (the results \
             directory keeps its last run)"
        );
        return Ok(None);
    }
    let dir = settings
        .results_dir
        .clone()
        .unwrap_or_else(|| records::default_dir(&harness.identity().name));
    let planned = records::planned(catalogue, |name| case_seed(base, name));
    Records::open(dir, harness, base, processes, planned)
        .map(|records| Some(Arc::new(records)))
        .map_err(|error| {
            format!(
                "{error}: the run's records cannot be written, so nothing would be certified \
                 (COMMCHECK_RESULTS_DIR names where they go)"
            )
        })
}

/// Runs the libtest-mimic trials; returns the conclusion and (unless
/// listing) the results. A bad `COMMCHECK_*` setting ([`crate::settings`])
/// is an error, and nothing runs.
pub fn run_with<H: Harness>(
    harness: H,
    args: &Arguments,
) -> Result<(libtest_mimic::Conclusion, Option<RunResults>), SettingsError> {
    let settings = Settings::read(Reader::SUITE)?;
    let (conclusion, results, _) = run_with_settings(harness, args, &[], &settings)
        .map_err(|reason| SettingsError::Unwritable { reason })?;
    Ok((conclusion, results))
}

/// What a run gives: libtest's conclusion, the results (unless listing), and
/// the records it wrote (none when listing or when it selected no case).
type Ran = (
    libtest_mimic::Conclusion,
    Option<RunResults>,
    Option<Arc<Records>>,
);

/// [`run_with`], the catalogue narrowed to what `filters` pick ([`picked`]).
/// The results directory cannot be written: an error.
fn run_with_settings<H: Harness>(
    harness: H,
    args: &Arguments,
    filters: &[String],
    settings: &Settings,
) -> Result<Ran, String> {
    let harness = Arc::new(harness);
    let (base, limit) = (settings.base_seed(), settings.case_timeout);
    let isolate = settings.isolation == Isolation::Process;
    let all = catalogue(&*harness);
    let picks = |case: &Case<H>| picked(filters, args.exact, &case.name());
    let records = open_records(&harness, &all, &picks, base, None, settings, args)?;
    let cases: Vec<Case<H>> = all.into_iter().filter(|case| picks(case)).collect();
    let running = Arc::clone(&harness);
    let exec = move |case: &Case<H>| {
        if isolate && case.script.is_ok() {
            isolation::execute_in_child(case, base, limit)
        } else {
            execute(&running, case, base, limit, false)
        }
    };
    let (conclusion, cases) = run_trials(cases, base, args, records.clone(), exec, |_| {});
    Ok((
        conclusion,
        cases.map(|cases| summary(&*harness, base, cases)),
        records,
    ))
}

/// Whether libtest's filter and `--skip`s in `args` select `name` (ignored
/// or not).
fn selected(args: &Arguments, name: &str) -> bool {
    picked(args.filter.as_slice(), args.exact, name)
        && !args.skip.iter().any(|skip| matches(skip, args.exact, name))
}

/// Runs `cases` as libtest-mimic trials, each by `exec`, calling `done` with
/// every result as it finishes; returns the conclusion and (unless listing)
/// the results in catalogue order.
pub(crate) fn run_trials<H: Harness>(
    cases: Vec<Case<H>>,
    base: u64,
    args: &Arguments,
    records: Option<Arc<Records>>,
    exec: impl Fn(&Case<H>) -> CaseResult + Send + Sync + 'static,
    done: impl Fn(&CaseResult) + Send + Sync + 'static,
) -> (libtest_mimic::Conclusion, Option<Vec<CaseResult>>) {
    let names: Vec<String> = cases.iter().map(Case::name).collect();
    // Cases not-supported before anything runs (an unclaimed operation, a
    // missing instrument, an unbuilt world size) are ignored when the test
    // list is made, so every runner shows them skipped: `cargo test`,
    // nextest (which lists ignored tests apart and reports them skipped),
    // IDE runners. Their results are recorded without running them.
    let unsupported: Vec<CaseResult> = cases
        .iter()
        .filter_map(|case| {
            let reason = case.not_supported_before_running()?;
            let matched = selected(args, &case.name());
            matched.then(|| {
                let seed = case_seed(base, &case.name());
                result(
                    case,
                    Verdict::NotSupported,
                    Some(reason.to_owned()),
                    0,
                    Duration::ZERO,
                    seed,
                )
            })
        })
        .collect();
    // Under nextest, every test runs in a process of its own, and a test
    // that ran cannot be shown skipped: one found not-supported when it ran
    // (at run time, or an ignored one run with --run-ignored) fails there,
    // saying why, rather than pass.
    let nextest = std::env::var("NEXTEST").is_ok_and(|v| v == "1");
    let sink: Arc<Mutex<Vec<CaseResult>>> = Arc::new(Mutex::new(Vec::new()));
    let exec = Arc::new(exec);
    let done = Arc::new(done);
    let trials = cases
        .into_iter()
        .map(|case| {
            let name = case.name();
            let ignored = case.not_supported_before_running().is_some();
            let (exec, done) = (Arc::clone(&exec), Arc::clone(&done));
            let sink = Arc::clone(&sink);
            let records = records.clone();
            Trial::ignorable_test(name, move || {
                if let Some(records) = &records {
                    records.start(&case.name());
                }
                let result = exec(&case);
                if let Some(records) = &records {
                    records.finish(&result);
                }
                done(&result);
                let outcome = match result.verdict {
                    Verdict::Pass => Ok(Completion::Completed),
                    Verdict::NotSupported if nextest => Err(Failed::from(format!(
                        "not-supported, found when it ran (nextest cannot show a test that ran as skipped; \
                         this is not a pass): {}",
                        result.message.clone().unwrap_or_default()
                    ))),
                    Verdict::NotSupported => Ok(Completion::ignored_with(format!(
                        "not-supported: {}",
                        result.message.clone().unwrap_or_default()
                    ))),
                    Verdict::Inconclusive => Err(Failed::from(format!(
                        "inconclusive (not a pass, not a failure of the invariant): {}\n(case seed {}; replay the run with COMMCHECK_SEED={base})",
                        result.message.clone().unwrap_or_default(),
                        result.seed
                    ))),
                    verdict => Err(Failed::from(format!(
                        "{verdict}: {}\n(case seed {}; replay the run with COMMCHECK_SEED={base})",
                        result.message.clone().unwrap_or_default(),
                        result.seed
                    ))),
                };
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(result);
                outcome
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    let conclusion = libtest_mimic::run(args, trials);
    if args.list {
        return (conclusion, None);
    }
    let mut cases = std::mem::take(&mut *sink.lock().unwrap_or_else(|p| p.into_inner()));
    for static_result in unsupported {
        if !cases.iter().any(|case| case.name == static_result.name) {
            cases.push(static_result);
        }
    }
    cases.sort_by_key(|c| names.iter().position(|n| *n == c.name));
    (conclusion, Some(cases))
}
