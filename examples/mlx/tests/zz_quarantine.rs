use commcheck::processes::Processes;
use commcheck::Harness;
use commcheck_mlx::{materialised, MlxHarness, MlxProcesses};
use eredu_backend_mlx::backend::nn::shared::MlxNeuralBackend;
use eredu_core::{BoundedCompletion, BoundedCompletionWait, Completion, CompletionCancellationMode};
use eredu_runtime::backend::SumReductionBackend;
use std::time::Duration;

fn main() {
    let processes = Processes::from_mpi().unwrap();
    let ring = MlxProcesses::connect(&processes).unwrap();
    let harness = MlxHarness::across(&ring);
    let me = processes.rank();
    let world = harness.world(2).unwrap();
    let rank = harness.rank(&world, me).unwrap();
    let (group, stream) = (harness.group(&rank), harness.executor(&rank));
    let t = materialised(&[1.0, 2.0], &[2]).unwrap();
    if me == 0 {
        let s = MlxNeuralBackend::all_reduce_sum(t.clone(), group, stream).unwrap();
        let out = s.completion.wait_bounded(BoundedCompletionWait::new(Duration::from_millis(40), CompletionCancellationMode::QuarantineUntilComplete).unwrap());
        println!("rank0 first wait_bounded: {out:?}");
    }
    processes.all_gather(b"x").unwrap(); // rank 1 joins now
    if me == 1 {
        let s = MlxNeuralBackend::all_reduce_sum(t.clone(), group, stream).unwrap();
        s.completion.wait().unwrap();
        println!("rank1 joined and completed");
    }
    processes.all_gather(b"y").unwrap();
    for delay in [0u64, 100, 1000, 3000] {
        std::thread::sleep(Duration::from_millis(delay));
        let r = MlxNeuralBackend::all_reduce_sum(t.clone(), group, stream);
        let ok = r.is_ok();
        println!("rank{me} after {delay} ms: submit {:?}", r.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        let oks = processes.all_gather(&[ok as u8]).unwrap();
        if let Ok(s) = r { if oks.iter().all(|o| o[0] == 1) { s.completion.wait().unwrap(); println!("rank{me}: second completed"); break; } else { std::mem::forget(s); } }
    }
    processes.finish();
}
