//! Benchmarks of the CPU reference backend (`cargo bench -p commcheck-cpu`).
//!
//! - `round_trip`: submit-to-completion of one empty submission on one executor.
//! - `local_dependencies_round_trip`: `submit_local_dependencies` of one
//!   evaluated tensor, then `wait`, on one idle executor.
//! - `all_reduce_sum_singleton`: `all_reduce_sum` of a 4-element tensor on a
//!   group of one member, then `wait`.
//! - `all_reduce_sum/<ranks>x<size>`: one reduction across rank threads, with
//!   throughput in bytes of one rank's tensor; `copy/<size>` measures a plain
//!   copy of the same bytes in the same run, so the two can be compared as a
//!   ratio on the same machine and load.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use commcheck_cpu::{CpuBackend, CpuDevice, CpuExecutor, CpuGroup};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use eredu_core::Completion;
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend, SumReductionBackend};

fn round_trip(c: &mut Criterion) {
    let device = CpuDevice::new();
    let executor = device.executor();
    c.bench_function("round_trip", |b| {
        b.iter(|| {
            CpuBackend::submit(&executor, std::iter::empty())
                .and_then(|completion| completion.wait())
                .expect("empty submission completes")
        })
    });
}

fn local_dependencies_round_trip(c: &mut Criterion) {
    let device = CpuDevice::new();
    let executor = device.executor();
    let value = device
        .tensor(&[1.0, 2.0, 3.0, 4.0], &[4])
        .expect("evaluated tensor");
    c.bench_function("local_dependencies_round_trip", |b| {
        b.iter(|| {
            CpuBackend::submit_local_dependencies(std::iter::once(&value), &executor)
                .and_then(|submission| submission.completion.wait())
                .expect("local dependencies complete")
        })
    });
}

fn all_reduce_sum_singleton(c: &mut Criterion) {
    let device = CpuDevice::new();
    let executor = device.executor();
    let group = device.group(1).expect("group").remove(0);
    let value = device
        .tensor(&[1.0, 2.0, 3.0, 4.0], &[4])
        .expect("evaluated tensor");
    c.bench_function("all_reduce_sum_singleton", |b| {
        b.iter(|| {
            let sum = CpuBackend::all_reduce_sum(value.clone(), &group, &executor).expect("submit");
            sum.completion.wait().expect("reduction completes");
            sum.output
        })
    });
}

/// Rank threads that run `iters` reductions on command and report their time.
struct Ranks {
    go: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<Duration>,
}

impl Ranks {
    fn start(ranks: usize, elements: usize) -> Self {
        let device = CpuDevice::new();
        let groups = device.group(ranks).expect("group");
        let (report, done) = mpsc::channel();
        let go = groups
            .into_iter()
            .enumerate()
            .map(|(rank, group)| {
                let (go, orders) = mpsc::channel::<u64>();
                let (device, report) = (device.clone(), report.clone());
                thread::spawn(move || rank_loop(&device, rank, &group, elements, &orders, &report));
                go
            })
            .collect();
        Self { go, done }
    }

    fn run(&self, iters: u64) -> Duration {
        for go in &self.go {
            go.send(iters).expect("rank thread alive");
        }
        (0..self.go.len())
            .map(|_| self.done.recv().expect("rank thread reports"))
            .max()
            .unwrap_or_default()
    }
}

fn rank_loop(
    device: &CpuDevice,
    rank: usize,
    group: &CpuGroup,
    elements: usize,
    orders: &mpsc::Receiver<u64>,
    report: &mpsc::Sender<Duration>,
) {
    let executor: CpuExecutor = device.executor();
    let input = device
        .tensor(&vec![rank as f32; elements], &[elements as i32])
        .expect("input");
    while let Ok(iters) = orders.recv() {
        let start = Instant::now();
        for _ in 0..iters {
            let sum = CpuBackend::all_reduce_sum(input.clone(), group, &executor).expect("submit");
            sum.completion.wait().expect("reduction completes");
        }
        if report.send(start.elapsed()).is_err() {
            return;
        }
    }
}

fn all_reduce_sum(c: &mut Criterion) {
    let mut group = c.benchmark_group("all_reduce_sum");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    for mib in [1usize, 16] {
        let bytes = mib << 20;
        let elements = bytes / 4;
        group.throughput(Throughput::Bytes(bytes as u64));
        let source = vec![1.0f32; elements];
        let mut target = vec![0.0f32; elements];
        group.bench_with_input(
            BenchmarkId::new("copy", format!("{mib}MiB")),
            &mib,
            |b, _| {
                b.iter(|| {
                    target.copy_from_slice(&source);
                    std::hint::black_box(&target);
                })
            },
        );
        for ranks in [2usize, 4] {
            let world = Ranks::start(ranks, elements);
            group.bench_with_input(
                BenchmarkId::new(format!("{ranks}ranks"), format!("{mib}MiB")),
                &ranks,
                |b, _| b.iter_custom(|iters| world.run(iters)),
            );
        }
    }
    group.finish();
}

criterion_group!(
    benches,
    round_trip,
    local_dependencies_round_trip,
    all_reduce_sum_singleton,
    all_reduce_sum
);
criterion_main!(benches);
