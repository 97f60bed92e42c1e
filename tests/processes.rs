//! Process-per-rank worlds under `mpirun` (the `mpi` feature): the CPU
//! reference backend with one rank per process.
//!
//! Run by `cargo test --features mpi`, this binary is the driver: each test
//! starts `mpirun` on this same binary, which then plays one scenario
//! (`COMMCHECK_PROCESS_SCENARIO`) in every rank process:
//! - `mutants`: every defect whose invariant is of class M, against the
//!   M-class cases across the processes; a defect must fail its own
//!   invariant and otherwise only its declared overlaps (the rules of the
//!   in-process precision matrix, `tests/mutants/matrix.rs`); six launches
//!   at once take the defects one by one (`COMMCHECK_PROCESS_CLAIMS`);
//! - `kill`: the whole suite, while rank 1's process is killed (SIGKILL)
//!   mid-run; the survivors must name it, stop, and leave a result file
//!   marked incomplete;
//! - `hang`: the same, but rank 1's process is stopped (SIGSTOP): it never
//!   answers again, and the others must name it as timed out.
//!
//! The whole certification under `mpirun -n 2` and `-n 3` is `.ci/run`'s
//! job (`commcheck-report certify cpu`).

#[path = "mutants/matrix.rs"]
mod matrix;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use commcheck::processes::{main_across, run_cases_across, Processes};
use commcheck::spec::{invariant, Class};
use commcheck_cpu::Defect;
use commcheck_reference::cpu::{CpuHarness, CpuProcesses};
use libtest_mimic::{Arguments, Failed, Trial};
use matrix::Row;

const SCENARIO: &str = "COMMCHECK_PROCESS_SCENARIO";

/// The folder through which the `mutants` launches share out the M-class
/// defects: a launch's rank 0 takes the next defect no launch has taken by
/// creating the file named by its index (`create_new`), so every defect runs
/// once, in whichever launch is free first. Without it, a launch runs them
/// all.
const CLAIMS: &str = "COMMCHECK_PROCESS_CLAIMS";

/// The launches the M-class defects are shared across. Each runs its
/// defects one case at a time and mostly waits (late peers, watchdogs):
/// together they use under one CPU, so six run at once. A defect whose
/// calls block takes several times as long as most, so the defects are
/// taken one at a time, not split in advance.
const PARTS: usize = 6;

fn main() {
    match std::env::var(SCENARIO) {
        Ok(scenario) if Processes::launched() => rank_process(&scenario),
        _ => {
            let mut args = Arguments::from_args();
            // Every trial is a launch that mostly waits (one case at a time,
            // late peers): they all run at once unless --test-threads says.
            args.test_threads = args.test_threads.or(Some(PARTS + 2));
            // The launches of this run share one claims folder.
            let claims = scenarios_folder().join("claims");
            let mut trials: Vec<Trial> = (0..PARTS)
                .map(|part| {
                    let claims = claims.clone();
                    Trial::test(
                        format!(
                            "m_class_defects_fail_their_own_invariant_across_two_processes_{}_of_{PARTS}",
                            part + 1
                        ),
                        move || mutants_across(2, &claims),
                    )
                })
                .collect();
            trials.extend([
                Trial::test("a_killed_rank_is_named_by_the_survivors", killed_rank),
                Trial::test("a_hung_rank_is_named_by_the_others", hung_rank),
            ]);
            let conclusion = libtest_mimic::run(&args, trials);
            let _ = std::fs::remove_dir_all(&claims);
            // Empty once the other scenarios are done too.
            let _ = claims.parent().map(std::fs::remove_dir);
            conclusion.exit()
        }
    }
}

/// `mpirun -n <ranks>` on this binary playing `scenario`, with `env`.
fn mpirun(
    ranks: usize,
    extra: &[&str],
    scenario: &str,
    env: &[(&str, &str)],
) -> Result<Output, Failed> {
    let exe = std::env::current_exe().map_err(|e| Failed::from(format!("no test binary: {e}")))?;
    let mut command = Command::new("mpirun");
    command
        .args(["--oversubscribe", "-n", &ranks.to_string()])
        .args(extra)
        .arg(exe)
        // Open MPI refuses root without these; harmless otherwise.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env(SCENARIO, scenario);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().map_err(|error| {
        Failed::from(format!(
            "could not start mpirun (install Open MPI: apt-get install openmpi-bin): {error}"
        ))
    })
}

/// A launch bounded in time: what it printed, whether it exited by itself,
/// and when `phrase` first appeared in its output.
struct Bounded {
    output: Output,
    /// `false`: it ran past the limit, and every process of the launch was
    /// killed.
    exited: bool,
    said_at: Option<Duration>,
}

/// [`mpirun`], polled: past `limit`, mpirun and every rank process still
/// running (this binary's other processes) are killed. Open MPI's teardown
/// of a stopped process can hang under load after the leader exited; the
/// test must still end, and tell commcheck's timing from mpirun's.
fn mpirun_bounded(
    ranks: usize,
    extra: &[&str],
    scenario: &str,
    env: &[(&str, &str)],
    dir: &std::path::Path,
    limit: Duration,
    phrase: &str,
) -> Result<Bounded, Failed> {
    let exe = std::env::current_exe().map_err(|e| Failed::from(format!("no test binary: {e}")))?;
    // Tests of one process share `dir`: the scenario names the files.
    let (out_path, err_path) = (
        dir.join(format!("{scenario}.stdout")),
        dir.join(format!("{scenario}.stderr")),
    );
    let file = |path: &std::path::Path| {
        std::fs::File::create(path).map_err(|e| Failed::from(format!("{}: {e}", path.display())))
    };
    let mut command = Command::new("mpirun");
    command
        .args(["--oversubscribe", "-n", &ranks.to_string()])
        .args(extra)
        .arg(&exe)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env(SCENARIO, scenario)
        .stdout(file(&out_path)?)
        .stderr(file(&err_path)?);
    for (name, value) in env {
        command.env(name, value);
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|error| {
        Failed::from(format!(
            "could not start mpirun (install Open MPI: apt-get install openmpi-bin): {error}"
        ))
    })?;
    let read = |path: &std::path::Path| std::fs::read(path).unwrap_or_default();
    let mut said_at = None;
    let status = loop {
        if said_at.is_none() {
            let seen = [read(&out_path), read(&err_path)].concat();
            if String::from_utf8_lossy(&seen).contains(phrase) {
                said_at = Some(started.elapsed());
            }
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if started.elapsed() > limit {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let exited = status.is_some();
    let status = match status {
        Some(status) => status,
        None => {
            // Every other process of this binary is a rank of the launch.
            let me = std::process::id().to_string();
            if let Ok(found) = Command::new("pgrep").arg("-f").arg(&exe).output() {
                for pid in String::from_utf8_lossy(&found.stdout).split_whitespace() {
                    if pid != me {
                        let _ = Command::new("kill").args(["-KILL", pid]).status();
                    }
                }
            }
            let _ = child.kill();
            child.wait().map_err(|e| e.to_string())?
        }
    };
    Ok(Bounded {
        output: Output {
            status,
            stdout: read(&out_path),
            stderr: read(&err_path),
        },
        exited,
        said_at,
    })
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn mutants_across(ranks: usize, claims: &std::path::Path) -> Result<(), Failed> {
    std::fs::create_dir_all(claims)
        .map_err(|e| Failed::from(format!("{}: {e}", claims.display())))?;
    let claims = claims
        .to_str()
        .ok_or("the claims folder's path is not UTF-8")?;
    let output = mpirun(ranks, &[], "mutants", &[(CLAIMS, claims)])?;
    let seen = text(&output);
    println!("{seen}");
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("the M-class precision matrix across {ranks} processes failed:\n{seen}").into())
    }
}

fn killed_rank() -> Result<(), Failed> {
    // --enable-recovery: Open MPI keeps the survivors of a dead process
    // running (by default mpirun kills them at once). Its mpirun then exits
    // 0 whatever its processes' statuses: the leader's message and the
    // result file tell.
    stopped_rank(
        "kill",
        &["--enable-recovery"],
        &[],
        &[
            "rank 1 crashed: its process (at ",
            ") died mid-case",
            "commcheck: stopping after",
        ],
        false,
    )
}

fn hung_rank() -> Result<(), Failed> {
    // No --enable-recovery: once rank 0 gives up and exits non-zero, mpirun
    // ends the job, the stopped process included.
    stopped_rank(
        "hang",
        &[],
        &[
            ("COMMCHECK_CASE_TIMEOUT_MS", "3000"),
            ("COMMCHECK_GRACE_MS", "2000"),
        ],
        &[
            "the process of rank 1 sent no outcome within 2s (COMMCHECK_GRACE_MS)",
            "commcheck: stopping after",
            // Rank 2 sets a watchdog of its own (see `rank_process`).
            "rank 2 has COMMCHECK_CASE_TIMEOUT_MS=60000, the leader (rank 0) 3000: every rank uses the leader's",
            "commcheck (rank 2): COMMCHECK_CASE_TIMEOUT_MS=60000 here, 3000 on the leader (rank 0)",
        ],
        true,
    )
}

/// Runs `scenario` (rank 1's process killed or stopped mid-run) on three
/// processes: the output must say each of `said`, the launch must end
/// without hanging (within five minutes; failing when `fails`), and the result file must be
/// marked incomplete, naming rank 1.
fn stopped_rank(
    scenario: &str,
    options: &[&str],
    env: &[(&str, &str)],
    said: &[&str],
    fails: bool,
) -> Result<(), Failed> {
    let dir = tempfile_dir()?;
    let results = dir.join(format!("{scenario}.json"));
    let mut env = env.to_vec();
    env.push(("COMMCHECK_RESULTS", results.to_str().unwrap_or_default()));
    // A bound for a hang, not a speed: the leader stops the run at the
    // latest at the world's ceiling (six watchdogs: 2 min by default, 18 s
    // for `hang`) plus the grace. mpirun gets 30 s more to end the job.
    const LEADER: Duration = Duration::from_secs(300);
    const PHRASE: &str = "commcheck: stopping after";
    let bounded = mpirun_bounded(
        3,
        options,
        scenario,
        &env,
        &dir,
        LEADER + Duration::from_secs(30),
        PHRASE,
    )?;
    let output = bounded.output;
    let seen = text(&output);
    let file = std::fs::read_to_string(&results).unwrap_or_default();
    for name in [format!("{scenario}.stdout"), format!("{scenario}.stderr")] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let _ = std::fs::remove_file(&results);
    // Empty once the other scenario is done too.
    let _ = std::fs::remove_dir(&dir);
    let mut problems: Vec<String> = said
        .iter()
        .filter(|phrase| !seen.contains(**phrase))
        .map(|phrase| format!("the output does not say {phrase:?}"))
        .collect();
    if fails && output.status.success() {
        problems.push("mpirun succeeded although rank 1 stopped answering".to_owned());
    }
    match bounded.said_at {
        Some(at) if at <= LEADER => {}
        Some(at) => problems.push(format!(
            "the leader said {PHRASE:?} only after {at:?} (expected within {LEADER:?}): something hung"
        )),
        None => problems.push(format!("the leader never said {PHRASE:?}")),
    }
    if !bounded.exited && bounded.said_at.is_some_and(|at| at <= LEADER) {
        // commcheck did its part in time; Open MPI did not end the job.
        println!(
            "note: mpirun did not end the job within 30 s of the leader's exit (Open MPI's \
             teardown of the stopped process); its processes were killed"
        );
    }
    let parsed: serde_json::Value = serde_json::from_str(&file).unwrap_or_default();
    match parsed.get("incomplete").and_then(|why| why.as_str()) {
        Some(why) if why.contains("rank 1") => {}
        other => problems.push(format!(
            "the result file is not marked incomplete naming rank 1: {other:?}"
        )),
    }
    println!("{seen}");
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n--- output ---\n{seen}", problems.join("\n")).into())
    }
}

/// The folder of this process's scenarios' files, in the temp space.
fn scenarios_folder() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("commcheck-processes-{}", std::process::id()))
}

/// [`scenarios_folder`], made.
fn tempfile_dir() -> Result<std::path::PathBuf, Failed> {
    let dir = scenarios_folder();
    std::fs::create_dir_all(&dir).map_err(|e| Failed::from(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

/// One rank process of a scenario.
fn rank_process(scenario: &str) -> ! {
    let processes = Processes::from_mpi().unwrap_or_else(|error| {
        eprintln!("{error}");
        std::process::exit(2)
    });
    let cpu = CpuProcesses::connect(&processes).unwrap_or_else(|error| {
        eprintln!("rank {}: {}", processes.rank(), error.0);
        std::process::exit(2)
    });
    match scenario {
        "mutants" => {
            // Some defects hang work on purpose: the mutant watchdog.
            std::env::set_var("COMMCHECK_CASE_TIMEOUT_MS", "11000");
            let mut problems = Vec::new();
            let defects = m_class_defects();
            let mut claims = Claims::new(&processes, defects.len());
            while let Some(defect) = claims.next().map(|index| defects[index]) {
                let started = Instant::now();
                let harness = CpuHarness::with_defect(defect).across(&cpu);
                let results = run_cases_across(
                    &processes,
                    harness,
                    |case| case.invariant().class == Class::M,
                    |_, _| {},
                );
                match results {
                    Ok(Some(results)) => {
                        if let Some(why) = &results.incomplete {
                            problems.push(format!("{defect}: the run is incomplete: {why}"));
                        }
                        let row = Row {
                            defect,
                            results,
                            wall: started.elapsed(),
                        };
                        println!("across {} processes: {}", processes.size(), row.line());
                        problems.extend(row.problems());
                    }
                    Ok(None) => {}
                    Err(error) => problems.push(format!("{defect}: {error}")),
                }
            }
            let code = if problems.is_empty() {
                0
            } else {
                eprintln!("{} problem(s):\n{}", problems.len(), problems.join("\n"));
                1
            };
            processes.finish();
            std::process::exit(code)
        }
        "kill" | "hang" => {
            if processes.rank() == 1 {
                let signal = if scenario == "kill" { "-KILL" } else { "-STOP" };
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_secs(3));
                    let _ = Command::new("kill")
                        .args([signal, &std::process::id().to_string()])
                        .status();
                });
            }
            if scenario == "hang" && processes.rank() == 2 {
                // A setting of its own: it must say so and use the leader's.
                std::env::set_var("COMMCHECK_CASE_TIMEOUT_MS", "60000");
            }
            main_across(processes, CpuHarness::new().across(&cpu))
        }
        other => {
            eprintln!("{SCENARIO}: unknown scenario {other:?} (mutants, kill or hang)");
            std::process::exit(2)
        }
    }
}

/// The defects a `mutants` launch runs, taken one at a time through the
/// [`CLAIMS`] folder (every one of them without it): rank 0 takes the next
/// index no launch has taken, and tells the launch's other ranks.
struct Claims<'a> {
    processes: &'a Processes,
    folder: Option<std::path::PathBuf>,
    count: usize,
    /// The first index rank 0 has not tried yet.
    cursor: usize,
}

impl<'a> Claims<'a> {
    fn new(processes: &'a Processes, count: usize) -> Self {
        Self {
            processes,
            folder: std::env::var_os(CLAIMS).map(Into::into),
            count,
            cursor: 0,
        }
    }

    /// The index of the launch's next defect, the same in every rank;
    /// `None` once every defect is taken.
    fn next(&mut self) -> Option<usize> {
        let mine = if self.processes.rank() == 0 {
            self.take()
                .map_or_else(Vec::new, |index| (index as u64).to_le_bytes().to_vec())
        } else {
            Vec::new()
        };
        let all = self.processes.all_gather(&mine).unwrap_or_else(|error| {
            eprintln!(
                "rank {}: sharing the next defect: {error}",
                self.processes.rank()
            );
            std::process::exit(2)
        });
        let leader: [u8; 8] = all.first()?.as_slice().try_into().ok()?;
        Some(u64::from_le_bytes(leader) as usize)
    }

    /// Rank 0: the next index no launch has taken, now this launch's.
    fn take(&mut self) -> Option<usize> {
        while self.cursor < self.count {
            let index = self.cursor;
            self.cursor += 1;
            let Some(folder) = &self.folder else {
                return Some(index);
            };
            let claim = folder.join(index.to_string());
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&claim)
            {
                Ok(_) => return Some(index),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => {
                    eprintln!("{CLAIMS}: {}: {error}", claim.display());
                    std::process::exit(2)
                }
            }
        }
        None
    }
}

/// The defects whose invariant is of class M and whose path exists across
/// processes (`Defect::across_processes`; `COMMCHECK_MUTANTS` narrows them).
fn m_class_defects() -> Vec<Defect> {
    let wanted = std::env::var("COMMCHECK_MUTANTS").unwrap_or_default();
    Defect::ALL
        .iter()
        .copied()
        .filter(|d| invariant(d.invariant()).is_some_and(|i| i.class == Class::M))
        .filter(|d| d.across_processes())
        .filter(|d| wanted.trim().is_empty() || wanted.split(',').any(|w| w.trim() == d.name()))
        .collect()
}
