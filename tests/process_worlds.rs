//! Process-per-rank worlds without MPI: threads stand in for the processes
//! of a launch, each with its own [`Processes`] (connected with
//! [`Processes::connect`]) and its own CPU transport. `tests/processes.rs`
//! runs the real thing under `mpirun` (the `mpi` feature).

use commcheck::processes::{run_cases_across, Listener, Processes};
use commcheck::{Case, RunResults, Verdict};
use commcheck_cpu::Defect;
use commcheck_reference::cpu::{CpuHarness, CpuProcesses};

/// Runs the cases of `ids` across `size` stand-in processes; rank 0's results.
fn across(size: usize, defect: Option<Defect>, ids: &'static [&'static str]) -> RunResults {
    let listeners: Vec<Listener> = (0..size).map(|_| Listener::bind().unwrap()).collect();
    let addresses: Vec<String> = listeners.iter().map(|l| l.address().to_owned()).collect();
    let ranks: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(rank, listener)| {
            let addresses = addresses.clone();
            std::thread::spawn(move || {
                let processes = Processes::connect(listener, rank, &addresses).unwrap();
                let cpu = CpuProcesses::connect(&processes).unwrap();
                let harness = match defect {
                    Some(defect) => CpuHarness::with_defect(defect),
                    None => CpuHarness::new(),
                }
                .across(&cpu);
                let select = |case: &Case<CpuHarness>| ids.contains(&case.invariant().id);
                run_cases_across(&processes, harness, select, |_, _| {}).unwrap()
            })
        })
        .collect();
    let mut results: Vec<Option<RunResults>> =
        ranks.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        results[1..].iter().all(Option::is_none),
        "only rank 0 has results"
    );
    results[0].take().unwrap()
}

#[test]
fn multi_rank_cases_pass_across_processes() {
    let results = across(3, None, &["SUM-1", "P2P-2", "BAR-1", "CAN-5"]);
    assert_eq!(results.processes, Some(3));
    assert_eq!(results.incomplete, None);
    assert!(!results.cases.is_empty());
    for case in &results.cases {
        assert_eq!(
            case.verdict,
            Verdict::Pass,
            "{}: {:?}",
            case.name,
            case.message
        );
    }
    let spanning = results
        .cases
        .iter()
        .filter(|c| c.worlds.iter().any(|w| *w > 1));
    assert!(spanning.count() > 0, "no world spanned the processes");
    assert!(results
        .cases
        .iter()
        .any(|c| c.invariant == "SUM-1" && c.worlds.contains(&3)));
}

#[test]
fn a_defect_fails_its_own_invariant_across_processes() {
    let results = across(2, Some(Defect::SkipHeaderCheck), &["P2P-1", "P2P-2"]);
    let failing: Vec<&str> = results
        .cases
        .iter()
        .filter(|c| c.verdict.is_failure())
        .map(|c| c.invariant.as_str())
        .collect();
    assert_eq!(failing, ["P2P-2"], "{:#?}", results.cases);
}
