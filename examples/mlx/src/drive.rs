//! Driving the `mpirun` certification launch by launch.
//!
//! A case can leave MLX state behind that changes the next case's outcome in
//! the same processes: a rank thread hung in native code while it holds
//! MLX's process-wide runtime lock (every later MLX call of the process then
//! blocks), a collective one member submitted and the other never matched
//! (its message stays on the ring's sockets and pairs with the next
//! collective), a communicator MLX fences after a timed-out wait, or
//! scheduler accounting that a long run of cases leaves behind (the first
//! whole-catalogue runs hung in MLX's evaluation throttle after about a
//! hundred local cases). So:
//! - every case that runs a script runs in a launch of its own (fresh
//!   processes and, under `mpirun`, a fresh ring), like the kit's
//!   `COMMCHECK_ISOLATION=process` does for one process;
//! - the cases that are not-supported before anything runs share launches:
//!   the driver watches the result file the kit rewrites after every case
//!   and, at the first `timeout` or `crash`, ends the launch (SIGTERM),
//!   keeps the cases up to and including that one, and starts a new launch
//!   that skips every case already done.
//!
//! The merged result file lists every case once, in catalogue order.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use commcheck::{CaseResult, RunResults, Verdict};

/// How often the result file of a running launch is read.
const POLL: Duration = Duration::from_millis(500);

/// How long `mpirun` gets to end its processes after SIGTERM.
const TERM_GRACE: Duration = Duration::from_secs(15);

/// How the test binary is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// Directly, one process (`certify`): worlds of one rank, cases one at a
    /// time (MLX's process-wide runtime lock makes concurrent cases disturb
    /// each other's timing).
    Direct,
    /// Under `mpirun -n N` (`certify_processes`).
    Mpirun(usize),
}

/// What to launch.
#[derive(Debug, Clone)]
pub struct Drive {
    /// The test binary (`certify` or `certify_processes`).
    pub exe: PathBuf,
    /// How it is started.
    pub launcher: Launcher,
    /// The merged result file.
    pub results: PathBuf,
    /// Every case name, in catalogue order.
    pub cases: Vec<String>,
    /// The cases that run in a launch of their own.
    pub isolated: Vec<String>,
}

/// `mpirun` with Open MPI's run-as-root switches (harmless otherwise).
pub fn mpirun(ranks: usize, exe: &Path, args: &[OsString]) -> Command {
    let mut command = Command::new("mpirun");
    command
        .args(["--oversubscribe", "-n", &ranks.to_string()])
        .arg(exe)
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    command
}

/// The results file of launch `index`, next to the merged one.
fn launch_file(results: &Path, index: usize) -> PathBuf {
    let mut name = results.file_stem().map(OsString::from).unwrap_or_default();
    name.push(format!(".launch{index}.json"));
    results.with_file_name(name)
}

fn read_results(path: &Path) -> Option<RunResults> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether a verdict may have left the launch's processes unusable.
fn poisons(verdict: Verdict) -> bool {
    matches!(verdict, Verdict::Timeout | Verdict::Crash)
}

/// Ends `child` (the test binary, or the `mpirun` that started it):
/// SIGTERM, then SIGKILL after [`TERM_GRACE`].
fn end(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + TERM_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs one launch of the test binary with `args`: its results (possibly
/// partial; ended at the first case that may have poisoned the processes).
fn launch(drive: &Drive, index: usize, args: &[OsString]) -> Result<Option<RunResults>, String> {
    let file = launch_file(&drive.results, index);
    let _ = std::fs::remove_file(&file);
    let mut command = match drive.launcher {
        Launcher::Direct => {
            let mut command = Command::new(&drive.exe);
            command.args(args).arg("--test-threads=1");
            command
        }
        Launcher::Mpirun(ranks) => mpirun(ranks, &drive.exe, args),
    };
    let mut child = command
        .env("COMMCHECK_RESULTS", &file)
        .spawn()
        .map_err(|error| {
            format!(
                "expected to start {} (mpirun: apt-get install openmpi-bin), got {error}",
                drive.exe.display()
            )
        })?;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        let poisoned = read_results(&file)
            .is_some_and(|results| results.cases.iter().any(|case| poisons(case.verdict)));
        if poisoned {
            // The kit rewrote the file after the poisoning case: end the
            // launch before the cases after it burn a watchdog each.
            end(&mut child);
            break;
        }
        std::thread::sleep(POLL);
    }
    let results = read_results(&file);
    let _ = std::fs::remove_file(&file);
    Ok(results)
}

/// What the launches found so far.
#[derive(Default)]
struct Found {
    cases: HashMap<String, CaseResult>,
    first: Option<RunResults>,
    launches: usize,
}

impl Found {
    /// Keeps the cases of `results` up to and including the first that may
    /// have poisoned its processes; how many.
    fn keep(&mut self, results: RunResults) -> usize {
        let mut kept = 0;
        for case in &results.cases {
            self.cases.insert(case.name.clone(), case.clone());
            kept += 1;
            if poisons(case.verdict) {
                break;
            }
        }
        match &mut self.first {
            None => self.first = Some(results),
            Some(first) if first.calibration.is_none() => first.calibration = results.calibration,
            Some(_) => {}
        }
        kept
    }
}

/// Runs every case of `drive.cases` across launches (see the module docs)
/// and returns the merged results.
pub fn run(drive: &Drive) -> Result<RunResults, String> {
    let mut found = Found::default();
    let batched: Vec<&String> = drive
        .cases
        .iter()
        .filter(|name| !drive.isolated.contains(name))
        .collect();
    while batched.iter().any(|name| !found.cases.contains_key(*name)) {
        found.launches += 1;
        let mut args: Vec<OsString> = vec!["--exact".into()];
        for name in drive
            .cases
            .iter()
            .filter(|name| found.cases.contains_key(*name) || drive.isolated.contains(name))
        {
            args.push("--skip".into());
            args.push(name.into());
        }
        let results = launch(drive, found.launches, &args)?
            .ok_or_else(|| format!("launch {} wrote no result file", found.launches))?;
        let kept = found.keep(results);
        eprintln!(
            "commcheck-mlx: launch {} (not-supported cases) ran {kept} case(s)",
            found.launches
        );
        if kept == 0 {
            return Err(format!("launch {} made no progress", found.launches));
        }
    }
    for name in &drive.isolated {
        found.launches += 1;
        let args: Vec<OsString> = vec!["--exact".into(), name.into()];
        let results = launch(drive, found.launches, &args)?
            .ok_or_else(|| format!("the launch of {name} wrote no result file"))?;
        if found.keep(results) == 0 {
            return Err(format!("the launch of {name} ran no case"));
        }
    }
    let launches = found.launches;
    eprintln!("commcheck-mlx: {launches} launches");
    let mut merged = found.first.ok_or("no launch produced results")?;
    let mut cases = found.cases;
    merged.cases = drive
        .cases
        .iter()
        .filter_map(|name| cases.remove(name))
        .collect();
    let missing = drive.cases.len() - merged.cases.len();
    merged.processes = match drive.launcher {
        Launcher::Direct => None,
        Launcher::Mpirun(ranks) => Some(ranks),
    };
    merged.incomplete =
        (missing > 0).then(|| format!("{missing} case(s) did not run in {launches} launches"));
    Ok(merged)
}

/// Certifies with the test binary `exe` started by `launcher` (see the
/// module docs): every case of the MLX harness's catalogue, each case that
/// runs a script in a launch of its own. Writes the merged
/// results to `results` and returns them.
pub fn certify(exe: PathBuf, launcher: Launcher, results: PathBuf) -> Result<RunResults, String> {
    let catalogue = match launcher {
        Launcher::Direct => commcheck::catalogue(&crate::MlxHarness::new()),
        Launcher::Mpirun(ranks) => commcheck::catalogue(&crate::MlxHarness::planning(ranks)),
    };
    let cases: Vec<String> = catalogue.iter().map(commcheck::Case::name).collect();
    // Every case that runs a script gets fresh processes; the others
    // (not-supported before anything runs) share one launch.
    let isolated: Vec<String> = catalogue
        .iter()
        .filter(|case| case.unsupported().is_none())
        .map(commcheck::Case::name)
        .collect();
    if let Some(parent) = results.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    let drive = Drive {
        exe,
        launcher,
        results: results.clone(),
        cases,
        isolated,
    };
    let merged = run(&drive)?;
    let json = serde_json::to_string_pretty(&merged).map_err(|error| error.to_string())?;
    std::fs::write(&results, json)
        .map_err(|error| format!("cannot write {}: {error}", results.display()))?;
    Ok(merged)
}

/// Whether `results` certify nothing less than a clean run would: no
/// failure, no inconclusive case, nothing missing.
pub fn clean(results: &RunResults) -> bool {
    results.incomplete.is_none()
        && results
            .cases
            .iter()
            .all(|case| !case.verdict.is_failure() && case.verdict != Verdict::Inconclusive)
}
