//! Certification wall time of the CPU backend (`cargo bench --bench
//! certify`; `-- eager` benches one):
//!
//! - `certify_cpu`: the default certification (every instrument, as
//!   `commcheck-report certify cpu` runs it), with the runner's own count of
//!   cases at once (`default`) and with the fixed two cases at once of
//!   commcheck 0.1's first releases (`jobs_2`, `COMMCHECK_JOBS=2`);
//! - `certify_no_instruments`: each personality with no instruments, as a
//!   vendor's uninstrumented harness would run it.
//!
//! Each sample is a whole certification in a fresh process (this program
//! again, with `COMMCHECK_BENCH_CERTIFY=<personality>`): the
//! `collectives-cancel` personality changes a process-wide answer, and a
//! vendor pays process start-up too. A certification with a failing,
//! inconclusive or timed-out case aborts the benchmark (a fast wrong run
//! measures nothing). The closing lines give each median as a ratio to a
//! baseline measured in the same run (`jobs_2`; `lazy` for the
//! personalities); absolute times depend on the machine and its load.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use commcheck::{run_cases, Instruments, Verdict};
use commcheck_reference::cpu::{CpuHarness, PERSONALITIES};
use criterion::Criterion;

/// Set in the child: the personality to certify once.
const CHILD: &str = "COMMCHECK_BENCH_CERTIFY";

/// The child's name for the default certification (every instrument).
const FULL: &str = "full";

/// Every sample's duration, per personality.
static SAMPLES: Mutex<BTreeMap<&'static str, Vec<Duration>>> = Mutex::new(BTreeMap::new());

/// The child's work: one certification; exit status 1 if a case did not end
/// pass or not-supported.
fn certify_once(personality: &str) -> ! {
    let harness = match personality {
        FULL => CpuHarness::new(),
        _ => match CpuHarness::new().with_personality(personality) {
            Ok(harness) => harness.with_instruments(Instruments::NONE),
            Err(error) => {
                eprintln!("{error}");
                std::process::exit(2)
            }
        },
    };
    let results = match run_cases(harness, |_| true) {
        Ok(results) => results,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(2)
        }
    };
    let bad: Vec<String> = results
        .cases
        .iter()
        .filter(|case| !matches!(case.verdict, Verdict::Pass | Verdict::NotSupported))
        .map(|case| format!("{} {}", case.name, case.verdict))
        .collect();
    if bad.is_empty() {
        std::process::exit(0)
    }
    eprintln!("{personality}: {}", bad.join(", "));
    std::process::exit(1)
}

/// One certification of `personality` in a child process, timed; `jobs`
/// sets `COMMCHECK_JOBS` (unset: the runner's own count).
fn certify_in_child(personality: &str, jobs: Option<&str>) -> Duration {
    let me = std::env::current_exe().expect("the benchmark can find its own program");
    let mut command = Command::new(me);
    command.env(CHILD, personality);
    match jobs {
        Some(jobs) => command.env("COMMCHECK_JOBS", jobs),
        None => command.env_remove("COMMCHECK_JOBS"),
    };
    let started = Instant::now();
    let status = command
        .status()
        .expect("the benchmark can run its own program");
    let took = started.elapsed();
    assert!(
        status.success(),
        "certifying {personality} did not end with every case pass or not-supported ({status})"
    );
    took
}

/// Times `runs` whole certifications of `personality` into `SAMPLES` under
/// `label`.
fn timed(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    label: &'static str,
    personality: &'static str,
    jobs: Option<&'static str>,
) {
    group.bench_function(label, |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let took = certify_in_child(personality, jobs);
                SAMPLES
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(label)
                    .or_default()
                    .push(took);
                total += took;
            }
            total
        })
    });
}

/// A group of whole-process certifications: ten samples, no warm-up to
/// speak of (each sample is a fresh process).
fn group<'c>(
    c: &'c mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'c, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    group
}

fn default_certification(c: &mut Criterion) {
    let mut group = group(c, "certify_cpu");
    timed(&mut group, "default", FULL, None);
    timed(&mut group, "jobs_2", FULL, Some("2"));
    group.finish();
}

fn certification(c: &mut Criterion) {
    let mut group = group(c, "certify_no_instruments");
    for personality in PERSONALITIES {
        timed(&mut group, personality, personality, None);
    }
    group.finish();
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    if let Ok(personality) = std::env::var(CHILD) {
        certify_once(&personality);
    }
    let mut criterion = Criterion::default().configure_from_args();
    default_certification(&mut criterion);
    certification(&mut criterion);
    criterion.final_summary();
    let mut samples = SAMPLES.lock().unwrap_or_else(|p| p.into_inner());
    let baseline = |label: &str| {
        if label == "default" || label == "jobs_2" {
            "jobs_2"
        } else {
            "lazy"
        }
    };
    let medians: BTreeMap<&str, Duration> = samples
        .iter_mut()
        .map(|(label, samples)| (*label, median(samples)))
        .collect();
    for (label, took) in &medians {
        let runs = samples[label].len();
        match medians.get(baseline(label)) {
            Some(base) if !base.is_zero() => println!(
                "certify {label:<18} median {took:>10.2?} over {runs} run(s): {:.2}x {}",
                took.as_secs_f64() / base.as_secs_f64(),
                baseline(label)
            ),
            _ => println!("certify {label:<18} median {took:>10.2?} over {runs} run(s)"),
        }
    }
}
