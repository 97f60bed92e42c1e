//! Certification wall time of the CPU backend in each personality, with no
//! instruments, as a vendor's uninstrumented harness would run it
//! (`cargo bench --bench certify`; `-- eager` benches one).
//!
//! Each sample is a whole certification in a fresh process (this program
//! again, with `COMMCHECK_BENCH_CERTIFY=<personality>`): the
//! `collectives-cancel` personality changes a process-wide answer, and a
//! vendor pays process start-up too. A certification with a failing,
//! inconclusive or timed-out case aborts the benchmark (a fast wrong run
//! measures nothing). The closing lines give each personality's median as a
//! ratio to `lazy`'s, measured in the same run; absolute times depend on the
//! machine and its load.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use commcheck::{run_cases, Instruments, Verdict};
use commcheck_reference::cpu::{CpuHarness, PERSONALITIES};
use criterion::Criterion;

/// Set in the child: the personality to certify once.
const CHILD: &str = "COMMCHECK_BENCH_CERTIFY";

/// Every sample's duration, per personality.
static SAMPLES: Mutex<BTreeMap<&'static str, Vec<Duration>>> = Mutex::new(BTreeMap::new());

/// The child's work: one certification; exit status 1 if a case did not end
/// pass or not-supported.
fn certify_once(personality: &str) -> ! {
    let harness = match CpuHarness::new().with_personality(personality) {
        Ok(harness) => harness.with_instruments(Instruments::NONE),
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(2)
        }
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

/// One certification of `personality` in a child process, timed.
fn certify_in_child(personality: &str) -> Duration {
    let me = std::env::current_exe().expect("the benchmark can find its own program");
    let started = Instant::now();
    let status = Command::new(me)
        .env(CHILD, personality)
        .status()
        .expect("the benchmark can run its own program");
    let took = started.elapsed();
    assert!(
        status.success(),
        "certifying {personality} did not end with every case pass or not-supported ({status})"
    );
    took
}

fn certification(c: &mut Criterion) {
    let mut group = c.benchmark_group("certify_no_instruments");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    for personality in PERSONALITIES {
        group.bench_function(personality, |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let took = certify_in_child(personality);
                    SAMPLES
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(personality)
                        .or_default()
                        .push(took);
                    total += took;
                }
                total
            })
        });
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
    certification(&mut criterion);
    criterion.final_summary();
    let mut samples = SAMPLES.lock().unwrap_or_else(|p| p.into_inner());
    let lazy = samples.get_mut("lazy").map(|s| median(s));
    for (personality, samples) in samples.iter_mut() {
        let took = median(samples);
        match lazy {
            Some(lazy) if !lazy.is_zero() => println!(
                "certify {personality:<18} median {took:>10.2?} over {} run(s): {:.2}x lazy",
                samples.len(),
                took.as_secs_f64() / lazy.as_secs_f64()
            ),
            _ => println!(
                "certify {personality:<18} median {took:>10.2?} over {} run(s)",
                samples.len()
            ),
        }
    }
}
