//! `all_reduce_sum` over 2 to 8 stream-ranks of one device at 16 MiB and
//! 256 MiB per rank, against a device-to-device copy of one rank's buffer
//! measured in the same run (CUDA events; the mean of 10 after 2 warm-ups).
//!
//! Bandwidth counts the bytes that must move at least: an all-reduce over
//! `n` ranks of `S` bytes reads `n·S` and writes `n·S`; a copy of `S` reads
//! `S` and writes `S`. The ratio is all-reduce bandwidth over copy
//! bandwidth (the target is at least 0.5). Without a GPU it says why and
//! exits 0 (a benchmark, not a test); `COMMCHECK_BENCH_OUT` names a file for
//! the Markdown table.

use commcheck_cuda::{
    share, CudaDevice, CudaError, DeviceMemory, Event, Launch, RankAddresses, MAX_RANKS,
};
use std::fmt::Write as _;

const WARMUP: usize = 2;
const ITERATIONS: usize = 10;

fn all_reduce_ms(device: &CudaDevice, ranks: usize, bytes: usize) -> Result<f32, CudaError> {
    let len = bytes / 4;
    let inputs = (0..ranks)
        .map(|_| device.alloc(bytes))
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = (0..ranks)
        .map(|_| device.alloc(bytes))
        .collect::<Result<Vec<_>, _>>()?;
    let mut addresses = RankAddresses {
        inputs: [0; MAX_RANKS],
        outputs: [0; MAX_RANKS],
    };
    for r in 0..ranks {
        addresses.inputs[r] = inputs[r].address();
        addresses.outputs[r] = outputs[r].address();
    }
    let descriptor = device.slot(std::mem::size_of::<RankAddresses>())?;
    descriptor.write_value(&addresses)?;
    let coordinator = device.stream()?;
    let streams = (0..ranks)
        .map(|_| device.stream())
        .collect::<Result<Vec<_>, _>>()?;
    let error = device.slot(4)?;
    for input in &inputs {
        input.zero_on(&coordinator)?;
    }
    let mut round = || -> Result<(), CudaError> {
        // Every rank starts once all inputs are ready, and the coordinator
        // waits for every rank: one all-reduce, start to finish.
        let start = device.record(&coordinator, Event::COMPLETION)?;
        let mut ends = Vec::with_capacity(ranks);
        for (r, stream) in streams.iter().enumerate() {
            start.make_wait(stream)?;
            let (begin, end) = share(len, ranks, r);
            let launch = Launch::AllReduceSum {
                ranks: descriptor.address(),
                count: ranks as u32,
                begin,
                end,
                element: 0,
            };
            device.launch(stream, launch, 0, error.address())?;
            ends.push(device.record(stream, Event::COMPLETION)?);
        }
        for end in &ends {
            end.make_wait(&coordinator)?;
        }
        Ok(())
    };
    time(device, &coordinator, &mut round)
}

fn copy_ms(device: &CudaDevice, bytes: usize) -> Result<f32, CudaError> {
    let (source, destination): (DeviceMemory, DeviceMemory) =
        (device.alloc(bytes)?, device.alloc(bytes)?);
    let stream = device.stream()?;
    source.zero_on(&stream)?;
    let mut round = || destination.copy_from_on(&source, bytes, &stream);
    time(device, &stream, &mut round)
}

fn time(
    device: &CudaDevice,
    stream: &cudarc::driver::CudaStream,
    round: &mut dyn FnMut() -> Result<(), CudaError>,
) -> Result<f32, CudaError> {
    for _ in 0..WARMUP {
        round()?;
    }
    let start = device.record(stream, Event::TIMED)?;
    for _ in 0..ITERATIONS {
        round()?;
    }
    let end = device.record(stream, Event::TIMED)?;
    end.synchronize()?;
    Ok(end.elapsed_since(&start)? / ITERATIONS as f32)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists; nothing to list
    }
    let device = match CudaDevice::open(0) {
        Ok(device) => device,
        Err(error) => {
            eprintln!("all_reduce benchmark: not run: {error}");
            return;
        }
    };
    let gib_s = |bytes: f64, ms: f32| bytes / (f64::from(ms) / 1e3) / f64::from(1u32 << 30);
    let mut table = format!(
        "all_reduce_sum on stream-ranks of one {} (driver CUDA {}), mean of {ITERATIONS}\n\n\
         | Ranks | Bytes per rank | all-reduce ms | all-reduce GiB/s (2nS/t) | copy ms | copy GiB/s (2S/t) | ratio |\n\
         |---|---|---|---|---|---|---|\n",
        device.info().name,
        device.info().driver
    );
    for bytes in [16usize << 20, 256 << 20] {
        let copy = match copy_ms(&device, bytes) {
            Ok(ms) => ms,
            Err(error) => {
                eprintln!("copy of {bytes} bytes: {error}");
                std::process::exit(1);
            }
        };
        let copy_bw = gib_s(2.0 * bytes as f64, copy);
        for ranks in 2..=8 {
            match all_reduce_ms(&device, ranks, bytes) {
                Ok(ms) => {
                    let bw = gib_s(2.0 * (ranks * bytes) as f64, ms);
                    let _ = writeln!(
                        table,
                        "| {ranks} | {} MiB | {ms:.3} | {bw:.0} | {copy:.3} | {copy_bw:.0} | {:.2} |",
                        bytes >> 20,
                        bw / copy_bw
                    );
                }
                Err(error) => {
                    eprintln!("all-reduce over {ranks} ranks of {bytes} bytes: {error}");
                    std::process::exit(1);
                }
            }
        }
    }
    print!("{table}");
    if let Ok(path) = std::env::var("COMMCHECK_BENCH_OUT") {
        if let Err(error) = std::fs::write(&path, &table) {
            eprintln!("{path}: {error}");
            std::process::exit(1);
        }
    }
}
