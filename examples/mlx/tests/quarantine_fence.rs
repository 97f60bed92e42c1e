//! MLX's fence after a quarantined timeout, on two ranks of the ring (the
//! behaviour behind the kit's inconclusive CAN-1..4 collective cases, see
//! `reports/mlx/FINDINGS.md`, finding 8):
//! 1. rank 0 submits `all_reduce_sum` while rank 1 has not joined, and
//!    `wait_bounded(40 ms, QuarantineUntilComplete)` yields
//!    `DeadlineExceeded { QuarantineUntilComplete }`;
//! 2. before rank 1 joins, a new submission on the same communicator is
//!    refused ("native communicator is quarantined ...");
//! 3. once rank 1 has joined and its side completed, new work is accepted
//!    and completes on both ranks.
//!
//! Started without a launcher, the binary runs itself under
//! `mpirun --oversubscribe -n 2`.

use std::time::Duration;

use commcheck::processes::Processes;
use commcheck::Harness;
use commcheck_mlx::drive::mpirun;
use commcheck_mlx::{materialised, MlxHarness, MlxProcesses};
use eredu_backend_mlx::backend::nn::shared::MlxNeuralBackend;
use eredu_core::{
    BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion,
    CompletionCancellationMode,
};
use eredu_runtime::backend::SumReductionBackend;

fn main() {
    if !Processes::launched() {
        let exe = std::env::current_exe().expect("the path of this test binary");
        let status = mpirun(2, &exe, &[]).status().expect("mpirun starts");
        std::process::exit(status.code().unwrap_or(1));
    }
    let processes = Processes::from_mpi().expect("MPI gives this process's rank");
    let ring = MlxProcesses::connect(&processes).expect("MLX's ring starts");
    let me = processes.rank();
    let outcome = fence(&processes, &MlxHarness::across(&ring), me);
    let all = processes
        .all_gather(
            outcome
                .as_ref()
                .err()
                .map_or(b"".as_slice(), |e| e.as_bytes()),
        )
        .expect("outcomes are exchanged");
    drop(ring);
    processes.finish();
    let failures: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(_, text)| !text.is_empty())
        .map(|(rank, text)| format!("rank {rank}: {}", String::from_utf8_lossy(text)))
        .collect();
    if me == 0 {
        if failures.is_empty() {
            println!("quarantine fence: as described, on both ranks");
        } else {
            eprintln!("quarantine fence: {}", failures.join("; "));
        }
    }
    std::process::exit(if failures.is_empty() { 0 } else { 1 });
}

/// Steps 1 to 3 on this rank; what went otherwise.
fn fence(processes: &Processes, harness: &MlxHarness, me: usize) -> Result<(), String> {
    let world = harness.world(2).map_err(|e| e.0)?;
    let rank = harness.rank(&world, me).map_err(|e| e.0)?;
    let (group, stream) = (harness.group(&rank), harness.executor(&rank));
    let value = materialised(&[1.0, 2.0], &[2]).map_err(|e| e.0)?;
    let barrier = |tag: &str| {
        processes
            .all_gather(tag.as_bytes())
            .map(drop)
            .map_err(|e| e.to_string())
    };
    if me == 0 {
        let first = MlxNeuralBackend::all_reduce_sum(value.clone(), group, stream)
            .map_err(|e| format!("step 1: submission refused: {e}"))?;
        let policy = BoundedCompletionWait::new(
            Duration::from_millis(40),
            CompletionCancellationMode::QuarantineUntilComplete,
        )
        .map_err(|e| e.to_string())?;
        match first.completion.wait_bounded(policy) {
            Ok(BoundedCompletionOutcome::DeadlineExceeded { .. }) => {}
            other => return Err(format!("step 1: expected DeadlineExceeded, got {other:?}")),
        }
        match MlxNeuralBackend::all_reduce_sum(value.clone(), group, stream) {
            Err(error) if error.to_string().contains("quarantined") => {}
            Err(error) => return Err(format!("step 2: refused for another reason: {error}")),
            Ok(_) => return Err("step 2: accepted while the quarantined work was live".into()),
        }
    }
    barrier("joined")?;
    if me == 1 {
        let joined = MlxNeuralBackend::all_reduce_sum(value.clone(), group, stream)
            .map_err(|e| format!("step 1: rank 1's side refused: {e}"))?;
        joined
            .completion
            .wait()
            .map_err(|e| format!("step 1: rank 1's side: {e}"))?;
    }
    barrier("drained")?;
    let again = MlxNeuralBackend::all_reduce_sum(value, group, stream)
        .map_err(|e| format!("step 3: refused after the peer completed: {e}"))?;
    again.completion.wait().map_err(|e| format!("step 3: {e}"))
}
