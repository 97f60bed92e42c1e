//! The case loop of a process world: rank 0 leads (it picks the cases and
//! writes the results), the others follow its lead case by case.

use super::say::say;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::agree::{agree, Agreed};
use super::control::{Control, Message, Stop};
use super::world::run_world_across;
use super::{ProcessError, Processes};
use crate::case::Case;
use crate::catalogue::catalogue_within;
use crate::harness::Harness;
use crate::results::{CaseResult, RankPlace, RunResults};
use crate::runner::{
    command_line, execute_with, open_records, picked, report, run_trials, settings_or_exit,
    summary, write_results, Worlds,
};
use crate::settings::{Reader, Settings};

/// Runs `case` with every world across the processes.
fn execute_across<H: Harness>(
    control: &Arc<Control>,
    harness: &Arc<H>,
    case: &Case<H>,
    base: u64,
    agreed: Agreed,
) -> CaseResult {
    execute_with(
        case,
        base,
        agreed.limit,
        Worlds::InTurn(&|ranks, seed, limit, script, run| {
            run_world_across(
                control,
                Arc::clone(harness),
                ranks,
                seed,
                (limit, agreed.grace),
                script,
                run,
            )
        }),
    )
}

/// The leader's side of one case: tells the followers, then runs it.
fn lead<H: Harness>(
    control: &Arc<Control>,
    harness: &Arc<H>,
    case: &Case<H>,
    agreed: Agreed,
) -> CaseResult {
    control.broadcast(&Message::Case {
        name: case.name(),
        base: agreed.base,
    });
    execute_across(control, harness, case, agreed.base, agreed)
}

/// A follower's whole run: every case the leader names, until it is done.
fn follow<H: Harness>(
    control: &Arc<Control>,
    harness: &Arc<H>,
    agreed: Agreed,
) -> Result<(), ProcessError> {
    let cases = catalogue_within(&**harness, Some(control.size()));
    // The leader names the next case as soon as the last one ended; the
    // longest it can be busy meanwhile is one world it runs without this
    // process (a smaller world): the ceiling plus the grace. A leader
    // silent for longer is lost (a link that went down closes nothing).
    let silence = crate::world::overrun(agreed.limit) + agreed.grace + agreed.limit;
    loop {
        let next = control.wait(0, Instant::now() + silence, |message| {
            matches!(message, Message::Case { .. } | Message::Done)
        });
        match next {
            Ok(Message::Case { name, base }) => {
                let Some(case) = cases.iter().find(|case| case.name() == name) else {
                    return Err(ProcessError::Launcher(format!(
                        "rank {} has no case named {name:?}: every process must run the same \
                         harness configuration",
                        control.rank()
                    )));
                };
                execute_across(control, harness, case, base, agreed);
                if let Some(broken) = control.broken() {
                    // The leader reports a broken world (it says why and
                    // marks the result file incomplete): until its link
                    // closes, or a watchdog and a grace pass, leave it the
                    // time to. Exiting first, with a non-zero status, lets
                    // mpirun end the job before the leader has said a word.
                    let _ =
                        control.wait(0, Instant::now() + agreed.limit + agreed.grace, |_| false);
                    return Err(ProcessError::Lost(broken));
                }
            }
            Ok(_) => return Ok(()),
            Err(Stop::Timeout) => {
                let why = format!(
                    "the leader (rank 0, at {}) sent nothing for {silence:?}: lost, or its link is down",
                    control.addresses().first().map_or("?", String::as_str)
                );
                control.break_with(why.clone());
                return Err(ProcessError::Lost(why));
            }
            Err(Stop::Lost(reason)) => {
                return Err(ProcessError::Lost(format!(
                    "the leader (rank 0) was lost: {reason}"
                )))
            }
        }
    }
}

/// The results so far, marked incomplete with `why` when given; `ranks`
/// says where each rank ran.
fn results<H: Harness>(
    harness: &H,
    ranks: &[RankPlace],
    base: u64,
    cases: Vec<CaseResult>,
    incomplete: Option<String>,
) -> RunResults {
    let mut results = summary(harness, base, cases);
    results.processes = Some(ranks.len());
    results.incomplete = incomplete;
    let mut hosts: Vec<String> = ranks.iter().map(|r| r.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    results.hosts = hosts;
    results.ranks = ranks.to_vec();
    results
}

/// Where every rank runs: each process's host name, exchanged, beside its
/// mesh address (every process calls this at the start of a run).
fn places(control: &Control) -> Result<Vec<RankPlace>, ProcessError> {
    let hosts = control.all_gather(crate::build::hostname().as_bytes())?;
    Ok(hosts
        .into_iter()
        .zip(control.addresses())
        .enumerate()
        .map(|(rank, (host, address))| RankPlace {
            rank,
            host: String::from_utf8_lossy(&host).into_owned(),
            address: address.clone(),
        })
        .collect())
}

/// Runs the cases `select` picks across the processes of the launch, one at
/// a time, calling `progress(result, total)` on rank 0 as each finishes.
/// Rank 0 gets `Ok(Some(results))`; the others `Ok(None)` once rank 0 is
/// done. A lost process ends the run early: rank 0's results then say why in
/// [`RunResults::incomplete`], the others get the error.
pub fn run_cases_across<H: Harness>(
    processes: &Processes,
    harness: H,
    select: impl Fn(&Case<H>) -> bool,
    progress: impl Fn(&CaseResult, usize),
) -> Result<Option<RunResults>, ProcessError> {
    let settings = Settings::read(Reader::CASES_ACROSS)?;
    let control = &processes.control;
    let harness = Arc::new(harness);
    let ranks = places(control)?;
    let agreed = agree(control, &settings)?;
    let base = agreed.base;
    if control.rank() != 0 {
        return follow(control, &harness, agreed).map(|()| None);
    }
    let cases: Vec<Case<H>> = catalogue_within(&*harness, Some(control.size()))
        .into_iter()
        .filter(|case| select(case))
        .collect();
    let mut done = Vec::with_capacity(cases.len());
    for case in &cases {
        if control.broken().is_some() {
            break;
        }
        let result = lead(control, &harness, case, agreed);
        progress(&result, cases.len());
        done.push(result);
    }
    control.broadcast(&Message::Done);
    let incomplete = control.broken().map(|broken| {
        format!(
            "{broken}; {} of {} selected cases ran",
            done.len(),
            cases.len()
        )
    });
    Ok(Some(results(&*harness, &ranks, base, done, incomplete)))
}

/// [`crate::main()`] across the processes of a launch: run by every process
/// of `mpirun -n N <test binary>`. Rank 0 takes the libtest command line
/// (filters, `--exact`, `--list`, `--format`), runs the cases one at a time,
/// prints the verdicts and writes the records (and the result file
/// `COMMCHECK_RESULTS` names, rewritten after every case and marked
/// incomplete until the run ends). The other ranks print
/// nothing unless they fail. A lost process stops the run with a message
/// naming it, and a non-zero exit status.
pub fn main_across<H: Harness>(processes: Processes, harness: H) -> ! {
    // COMMCHECK_ISOLATION does not apply: every rank has its own process.
    let settings = settings_or_exit(Reader::SUITE_ACROSS);
    let control = Arc::clone(&processes.control);
    let harness = Arc::new(harness);
    let started = places(&control).and_then(|ranks| Ok((ranks, agree(&control, &settings)?)));
    let (ranks, agreed) = match started {
        Ok((ranks, agreed)) => (Arc::new(ranks), agreed),
        Err(error) => {
            say(format!("commcheck (rank {}): {error}", control.rank()));
            processes.exit(1);
        }
    };
    let base = agreed.base;
    if control.rank() != 0 {
        let code = match follow(&control, &harness, agreed) {
            Ok(()) => 0,
            Err(error) => {
                say(format!("commcheck (rank {}): {error}", control.rank()));
                1
            }
        };
        processes.exit(code);
    }
    let (mut args, filters) = command_line();
    // One case at a time: every process takes part in every world.
    args.test_threads = Some(1);
    let size = control.size();
    let all = catalogue_within(&*harness, Some(size));
    let picks = |case: &Case<H>| picked(&filters, args.exact, &case.name());
    let records = match open_records(&harness, &all, &picks, base, Some(size), &settings, &args) {
        Ok(records) => records,
        Err(error) => {
            say(format!("commcheck: {error}"));
            processes.exit(1)
        }
    };
    let cases: Vec<Case<H>> = all.into_iter().filter(|case| picks(case)).collect();
    let total = cases.len();
    let ran: Arc<Mutex<Vec<CaseResult>>> = Arc::default();
    let exec = {
        let (control, harness) = (Arc::clone(&control), Arc::clone(&harness));
        move |case: &Case<H>| lead(&control, &harness, case, agreed)
    };
    let done = {
        let (control, harness, ran, ranks) = (
            Arc::clone(&control),
            Arc::clone(&harness),
            Arc::clone(&ran),
            Arc::clone(&ranks),
        );
        let settings = settings.clone();
        move |result: &CaseResult| {
            let mut ran = ran.lock().unwrap_or_else(|p| p.into_inner());
            ran.push(result.clone());
            let why = control.broken().unwrap_or_else(|| {
                format!("the run has not finished: {} case(s) ran so far", ran.len())
            });
            let snapshot = results(&*harness, &ranks, base, ran.clone(), Some(why));
            let written = write_results(&snapshot, &settings);
            if let Some(broken) = control.broken() {
                say(format!(
                    "commcheck: stopping after {}: {broken}",
                    result.name
                ));
                match written {
                    Some(Ok(path)) => say(format!(
                        "commcheck: the result file {} is marked incomplete ({} of {total} cases ran)",
                        path.display(),
                        ran.len()
                    )),
                    Some(Err(error)) => say(format!("commcheck: {error}")),
                    None => say(format!(
                        "commcheck: {} of {total} cases ran; the records say which have no result",
                        ran.len()
                    )),
                }
                // Finalising MPI with a dead peer would hang: exit directly.
                std::process::exit(1);
            }
        }
    };
    let must_pass = crate::runner::level::must_pass(&*harness);
    let (conclusion, cases) = run_trials(cases, base, &args, records.clone(), exec, done);
    control.broadcast(&Message::Done);
    if let Some(cases) = cases {
        report(
            &results(&*harness, &ranks, base, cases, None),
            records.as_deref(),
            &settings,
            &args,
            &must_pass,
        );
    }
    processes.exit(if conclusion.has_failed() { 101 } else { 0 })
}
