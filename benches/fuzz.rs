//! Fuzz throughput of the `sequence` target's checking path, without
//! libFuzzer (`cargo bench --bench fuzz`): every stored input of
//! `fuzz/corpus/sequence` decoded and run through the model against the CPU
//! reference backend ([`commcheck::fuzz::check`]), as the target runs each
//! input. Criterion reports inputs per second (one element = one input); an
//! input that fails aborts the benchmark (the corpus passes on the clean
//! backend). The CI fuzz smoke prints libFuzzer's own exec/s beside it.

use std::path::Path;
use std::time::Duration;

use commcheck_reference::cpu::CpuHarness;
use criterion::{Criterion, Throughput};

fn corpus() -> Vec<Vec<u8>> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/sequence");
    commcheck::fuzz::stored_inputs(&folder)
        .iter()
        .map(|path| std::fs::read(path).expect("a stored input is readable"))
        .collect()
}

fn sequence(c: &mut Criterion) {
    let inputs = corpus();
    assert!(!inputs.is_empty(), "fuzz/corpus/sequence holds no input");
    let harness = CpuHarness::new();
    let mut group = c.benchmark_group("fuzz_sequence");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(inputs.len() as u64));
    group.bench_function("corpus", |b| {
        b.iter(|| {
            for input in &inputs {
                if let Err(failure) = commcheck::fuzz::check(&harness, input) {
                    panic!("a corpus input failed on the clean backend: {failure}");
                }
            }
        })
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    sequence(&mut criterion);
    criterion.final_summary();
}
