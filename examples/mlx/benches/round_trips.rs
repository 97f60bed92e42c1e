//! Round trips of the CPU reference backend (`commcheck-cpu`) and of MLX
//! (`eredu-backend-mlx` on MLX's CPU device), measured in the same run:
//!
//! - `local_dependencies/<backend>`: `submit_local_dependencies` of one
//!   evaluated 4-element tensor, then `wait`;
//! - `all_reduce_sum_singleton/<backend>`: `all_reduce_sum` of that tensor on
//!   a group of one member, then `wait`.
//!
//! After criterion's report, a table gives each backend's mean time per
//! round trip over criterion's measurement samples and the ratio cpu/mlx
//! (below 1: the CPU reference backend is faster).
//!
//! `cargo bench --bench round_trips -- --warm-up-time 1 --measurement-time 3`

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use commcheck_cpu::CpuBackend;
use commcheck_cpu::CpuDevice;
use commcheck_mlx::{cpu_stream, materialised, plain_singleton_group, MlxGroup};
use criterion::Criterion;
use eredu_backend_mlx::backend::nn::shared::MlxNeuralBackend;
use eredu_core::Completion;
use eredu_runtime::backend::{CommunicationBackend, SumReductionBackend};

/// Samples criterion takes per benchmark.
const SAMPLES: usize = 50;

const VALUES: [f32; 4] = [1.0, 2.0, 3.0, 4.0];

/// Every `(iterations, elapsed)` criterion asked one benchmark for, in order.
#[derive(Default, Clone)]
struct Record(Rc<RefCell<Vec<(u64, Duration)>>>);

impl Record {
    /// Times `iters` runs of `once`, and keeps the measurement.
    fn time(&self, iters: u64, mut once: impl FnMut()) -> Duration {
        let start = Instant::now();
        for _ in 0..iters {
            once();
        }
        let elapsed = start.elapsed();
        self.0.borrow_mut().push((iters, elapsed));
        elapsed
    }

    /// Mean time per iteration over the measurement samples (criterion's
    /// last [`SAMPLES`] calls; its warm-up calls come before them).
    fn mean(&self) -> Option<Duration> {
        let all = self.0.borrow();
        let samples = &all[all.len().saturating_sub(SAMPLES)..];
        let iters: u64 = samples.iter().map(|(iters, _)| iters).sum();
        let elapsed: Duration = samples.iter().map(|(_, elapsed)| *elapsed).sum();
        (iters > 0).then(|| elapsed.div_f64(iters as f64))
    }
}

/// One benchmark's records for both backends.
struct Pair {
    name: &'static str,
    cpu: Record,
    mlx: Record,
}

fn local_dependencies(c: &mut Criterion) -> Pair {
    let pair = Pair {
        name: "local_dependencies",
        cpu: Record::default(),
        mlx: Record::default(),
    };
    let mut group = c.benchmark_group(pair.name);
    group.sample_size(SAMPLES);

    let device = CpuDevice::new();
    let executor = device.executor();
    let value = device
        .tensor(&VALUES, &[4])
        .expect("an evaluated CPU tensor");
    let record = pair.cpu.clone();
    group.bench_function("cpu", |b| {
        b.iter_custom(|iters| {
            record.time(iters, || {
                CpuBackend::submit_local_dependencies([&value], &executor)
                    .and_then(|submission| submission.completion.wait())
                    .expect("CPU local dependencies complete")
            })
        })
    });

    let stream = cpu_stream();
    let value = materialised(&VALUES, &[4]).expect("an evaluated MLX tensor");
    let record = pair.mlx.clone();
    group.bench_function("mlx", |b| {
        b.iter_custom(|iters| {
            record.time(iters, || {
                MlxNeuralBackend::submit_local_dependencies([&value], &stream)
                    .and_then(|submission| submission.completion.wait())
                    .expect("MLX local dependencies complete")
            })
        })
    });
    group.finish();
    pair
}

fn all_reduce_sum_singleton(c: &mut Criterion) -> Pair {
    let pair = Pair {
        name: "all_reduce_sum_singleton",
        cpu: Record::default(),
        mlx: Record::default(),
    };
    let mut group = c.benchmark_group(pair.name);
    group.sample_size(SAMPLES);

    let device = CpuDevice::new();
    let executor = device.executor();
    let cpu_group = device
        .group(1)
        .expect("a CPU group of one member")
        .remove(0);
    let value = device
        .tensor(&VALUES, &[4])
        .expect("an evaluated CPU tensor");
    let record = pair.cpu.clone();
    group.bench_function("cpu", |b| {
        b.iter_custom(|iters| {
            record.time(iters, || {
                let sum = CpuBackend::all_reduce_sum(value.clone(), &cpu_group, &executor)
                    .expect("CPU reduction submitted");
                sum.completion.wait().expect("CPU reduction completes");
                std::hint::black_box(sum.output);
            })
        })
    });

    let stream = cpu_stream();
    let native = plain_singleton_group().expect("MLX's singleton group");
    let mlx_group = MlxGroup::uncontracted(&native);
    let value = materialised(&VALUES, &[4]).expect("an evaluated MLX tensor");
    let record = pair.mlx.clone();
    group.bench_function("mlx", |b| {
        b.iter_custom(|iters| {
            record.time(iters, || {
                let sum = MlxNeuralBackend::all_reduce_sum(value.clone(), &mlx_group, &stream)
                    .expect("MLX reduction submitted");
                sum.completion.wait().expect("MLX reduction completes");
                std::hint::black_box(sum.output);
            })
        })
    });
    group.finish();
    pair
}

fn show(duration: Option<Duration>) -> String {
    duration.map_or_else(
        || "-".to_owned(),
        |d| format!("{:.2} µs", d.as_secs_f64() * 1e6),
    )
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let pairs = [
        local_dependencies(&mut criterion),
        all_reduce_sum_singleton(&mut criterion),
    ];
    criterion.final_summary();
    println!();
    println!("| round trip | commcheck-cpu | MLX (CPU device) | ratio cpu/mlx |");
    println!("|---|---|---|---|");
    for pair in &pairs {
        let (cpu, mlx) = (pair.cpu.mean(), pair.mlx.mean());
        let ratio = match (cpu, mlx) {
            (Some(cpu), Some(mlx)) if !mlx.is_zero() => {
                format!("{:.3}", cpu.as_secs_f64() / mlx.as_secs_f64())
            }
            _ => "-".to_owned(),
        };
        println!(
            "| {} | {} | {} | {ratio} |",
            pair.name,
            show(cpu),
            show(mlx)
        );
    }
}
