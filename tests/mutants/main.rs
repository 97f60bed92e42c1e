//! Mutant proofs: every check can fail, and fails only for its own invariant.
//!
//! The **precision matrix** runs the whole catalogue, every instrument
//! provided, against the CPU reference backend with each planted defect in
//! turn. A defect must fail at least one case of the invariant it breaks, and
//! the invariants whose cases fail must be its own plus the overlaps declared
//! in [`OVERLAPS`], each justified by the contract's wording (INVARIANTS.md). `inconclusive`
//! verdicts and violations attributed to other invariants are shown, but
//! blame nothing. Run with `--nocapture` to see the matrix.
//!
//! `COMMCHECK_MUTANTS=Name,Name` restricts the matrix to some defects (by
//! [`Defect::name`]) while iterating; `COMMCHECK_MUTANT_THREADS` sets how many
//! defects run at once (default 3).

mod black_box;
mod matrix;

use std::sync::Mutex;
use std::time::Instant;

use commcheck::{run_cases, RunResults};
use commcheck_cpu::Defect;
use commcheck_reference::cpu::CpuHarness;
use matrix::{Row, OVERLAPS};

/// Watchdog for mutant runs: some defects make work hang on purpose, and a
/// hang is proven as soon as the watchdog fires. It is longer than twice
/// `slack::RELEASE`, so checks that bound their own waits report their own
/// `fail` first; hung cases overlap (the runner starts more cases while the
/// CPUs are idle), as they use no CPU.
const MUTANT_CASE_TIMEOUT_MS: &str = "11000";

/// Defects whose catalogue runs at once in the matrix (each runs as many
/// cases at a time as the CPUs have room for); most of a mutant run is
/// waiting.
const MUTANT_THREADS: usize = 3;

/// The watchdog of mutant runs (set once per process).
pub fn mutant_settings() {
    static WATCHDOG: std::sync::Once = std::sync::Once::new();
    WATCHDOG.call_once(|| {
        std::env::set_var("COMMCHECK_CASE_TIMEOUT_MS", MUTANT_CASE_TIMEOUT_MS);
    });
}

/// Prints the verdicts of a proof when the test is run with `--nocapture`.
pub fn show(results: &RunResults) {
    for case in &results.cases {
        println!(
            "{:<32} {:<13} {}",
            case.name,
            case.verdict,
            case.message.clone().unwrap_or_default()
        );
    }
}

/// The cases `select` picks, run against the CPU backend with `defect`
/// planted.
fn planted(defect: Defect, select: impl Fn(&commcheck::Case<CpuHarness>) -> bool) -> RunResults {
    run_cases(CpuHarness::with_defect(defect), select).expect("the COMMCHECK_* settings are valid")
}

impl Row {
    fn run(defect: Defect) -> Self {
        let started = Instant::now();
        let results = planted(defect, |_| true);
        Self {
            defect,
            results,
            wall: started.elapsed(),
        }
    }

    /// Whether the defect's own invariant is undecided: none of its cases
    /// failed, and some were inconclusive.
    fn undecided(&self) -> bool {
        let id = self.defect.invariant();
        let own = || self.results.cases.iter().filter(|c| c.invariant == id);
        !own().any(|c| c.verdict.is_failure())
            && own().any(|c| c.verdict == commcheck::Verdict::Inconclusive)
    }

    /// A timing check that the kit could not vouch for beside the matrix's
    /// other defects (the CPUs were busy with them: a blocked call's time
    /// is vouched for only while the process's threads are not waiting
    /// for a CPU) is inconclusive, never a pass or a fail. Its own cases
    /// then run again with the process otherwise quiet, up to
    /// [`ALONE_RUNS`] times, and their verdicts replace the matrix's: the
    /// defect must still fail its own invariant then.
    fn settle_alone(&mut self) {
        let id = self.defect.invariant();
        for run in 1..=ALONE_RUNS {
            if !self.undecided() {
                return;
            }
            let started = Instant::now();
            let alone = planted(self.defect, |case| case.invariant().id == id);
            self.wall += started.elapsed();
            for case in alone.cases {
                if let Some(old) = self.results.cases.iter_mut().find(|c| c.name == case.name) {
                    *old = case;
                }
            }
            eprintln!(
                "precision matrix: {} ({id} undecided beside the other defects; its cases alone, run {run}): {}",
                self.defect.name(),
                self.line()
            );
        }
    }
}

/// The defects `COMMCHECK_MUTANTS` selects (all by default).
fn selected() -> (Vec<Defect>, bool) {
    match std::env::var("COMMCHECK_MUTANTS") {
        Ok(names) if !names.trim().is_empty() => {
            let names: Vec<&str> = names.split(',').map(str::trim).collect();
            for name in &names {
                assert!(
                    Defect::ALL.iter().any(|d| d.name() == *name),
                    "COMMCHECK_MUTANTS: no defect named {name}"
                );
            }
            let defects = Defect::ALL
                .iter()
                .copied()
                .filter(|d| names.contains(&d.name()))
                .collect();
            (defects, false)
        }
        _ => (Defect::ALL.to_vec(), true),
    }
}

fn threads() -> usize {
    std::env::var("COMMCHECK_MUTANT_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(MUTANT_THREADS)
}

/// Runs every defect against the whole catalogue, `threads()` at a time.
fn matrix(defects: &[Defect]) -> Vec<Row> {
    let next = Mutex::new(0usize);
    let rows = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads().min(defects.len()) {
            scope.spawn(|| loop {
                let index = {
                    let mut next = next.lock().unwrap_or_else(|p| p.into_inner());
                    *next += 1;
                    *next - 1
                };
                let Some(&defect) = defects.get(index) else {
                    break;
                };
                let row = Row::run(defect);
                eprintln!("precision matrix: {}", row.line());
                rows.lock().unwrap_or_else(|p| p.into_inner()).push(row);
            });
        }
    });
    let mut rows = rows.into_inner().unwrap_or_else(|p| p.into_inner());
    rows.sort_by_key(|row| Defect::ALL.iter().position(|d| *d == row.defect));
    for row in &mut rows {
        row.settle_alone();
    }
    rows
}

/// Runs of a defect's own cases alone, after the matrix, while none of
/// them failed and some were inconclusive.
const ALONE_RUNS: usize = 2;

/// Every defect fails its own invariant, and otherwise only its declared
/// overlaps; every defect has a row.
#[test]
fn precision_matrix() {
    mutant_settings();
    let (defects, all) = selected();
    let started = Instant::now();
    let rows = matrix(&defects);
    let wall = started.elapsed();

    println!("\nprecision matrix ({} defects):", rows.len());
    for row in &rows {
        println!("{}", row.line());
    }
    println!("declared overlaps (* = not seen in this run):");
    for (defect, id, why) in OVERLAPS {
        let seen = rows
            .iter()
            .any(|row| row.defect == *defect && row.fails(id));
        let ran = rows.iter().any(|row| row.defect == *defect);
        let mark = if seen || !ran { ' ' } else { '*' };
        println!("{mark} {:<26} {:<6} {why}", defect.name(), id);
    }
    println!(
        "precision matrix: {} defects in {:.1}s ({} at a time, cases each: {})",
        rows.len(),
        wall.as_secs_f64(),
        threads(),
        std::env::var("COMMCHECK_JOBS").map_or_else(
            |_| "as the CPUs have room".to_owned(),
            |jobs| format!("{jobs} at a time")
        )
    );

    let mut problems: Vec<String> = rows.iter().flat_map(Row::problems).collect();
    if all {
        for defect in Defect::ALL {
            if !rows.iter().any(|row| row.defect == *defect) {
                problems.push(format!("{defect}: not in the matrix"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "precision matrix: {} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every overlap names a SPEC invariant other than its defect's own, once.
#[test]
fn overlaps_are_well_formed() {
    for (i, (defect, id, why)) in OVERLAPS.iter().enumerate() {
        assert!(
            commcheck::spec::invariant(id).is_some(),
            "{defect}: overlap {id} is no SPEC ID"
        );
        assert_ne!(*id, defect.invariant(), "{defect}: overlap with its own ID");
        assert!(
            !why.is_empty(),
            "{defect}: overlap {id} has no justification"
        );
        assert!(
            !OVERLAPS[..i].iter().any(|(d, o, _)| d == defect && o == id),
            "{defect}: overlap {id} declared twice"
        );
    }
}
