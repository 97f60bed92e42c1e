//! Certifies `eredu-backend-mlx` with one rank per process, under
//! `mpirun -n N` (the kit's `mpi` feature): every process runs this binary,
//! agrees on loopback ports for MLX's ring backend, then follows rank 0's
//! lead case by case. Worlds have N ranks (the ring) or one rank (on
//! process 0).
//!
//! Started without a launcher (`cargo test --test certify_processes`), the
//! binary drives the launches itself (N from `COMMCHECK_MLX_RANKS`, default
//! 2; the result file from `COMMCHECK_RESULTS`, default
//! `target/commcheck/mpirun-N.json`):
//! - with no arguments, the whole catalogue launch by launch (every case
//!   that runs in fresh processes of its own; see `commcheck_mlx::drive`);
//! - with arguments (filters, `--list`, ...), one `mpirun` launch with them.

use std::ffi::OsString;
use std::path::PathBuf;

use commcheck::processes::{main_across, Processes};
use commcheck_mlx::drive::{certify, clean, mpirun, Launcher};
use commcheck_mlx::{MlxHarness, MlxProcesses};

fn main() {
    if !Processes::launched() {
        std::process::exit(drive());
    }
    let processes = Processes::from_mpi().unwrap_or_else(|error| {
        eprintln!("{error}");
        std::process::exit(2)
    });
    let ring = MlxProcesses::connect(&processes).unwrap_or_else(|error| {
        eprintln!("rank {}: {}", processes.rank(), error.0);
        std::process::exit(2)
    });
    main_across(processes, MlxHarness::across(&ring))
}

/// The driver (no launcher around this process); its exit status.
fn drive() -> i32 {
    let ranks = match std::env::var("COMMCHECK_MLX_RANKS").map(|n| n.parse::<usize>()) {
        Err(_) => 2,
        Ok(Ok(n)) if n >= 2 => n,
        Ok(_) => {
            eprintln!("certify_processes: expected COMMCHECK_MLX_RANKS to be 2 or more");
            return 2;
        }
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            eprintln!("certify_processes: expected the path of this binary, got {error}");
            return 2;
        }
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if !args.is_empty() {
        return match mpirun(ranks, &exe, &args).status() {
            Ok(status) => status.code().unwrap_or(1),
            Err(error) => {
                eprintln!("certify_processes: expected to start mpirun, got {error}");
                2
            }
        };
    }
    let results = std::env::var_os("COMMCHECK_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("target/commcheck/mpirun-{ranks}.json")));
    match certify(exe, Launcher::Mpirun(ranks), results.clone()) {
        Ok(merged) => {
            for line in merged.family_summary() {
                println!("commcheck {line}");
            }
            println!(
                "commcheck results ({ranks} processes): {}",
                results.display()
            );
            if clean(&merged) {
                0
            } else {
                101
            }
        }
        Err(error) => {
            eprintln!("certify_processes: {error}");
            2
        }
    }
}
