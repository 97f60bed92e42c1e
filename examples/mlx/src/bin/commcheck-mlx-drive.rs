//! Runs one MLX certification (one process, or `mpirun -n N`) launch by
//! launch and writes its merged result file (see `commcheck_mlx::drive`).
//!
//! ```text
//! commcheck-mlx-drive --binary target/debug/deps/certify-<hash> --results one-process.json
//! commcheck-mlx-drive --binary target/debug/deps/certify_processes-<hash> --mpirun 2 --results mpirun-2.json
//! ```
//!
//! Exit status: 0 every case passed or is not-supported; 101 some case
//! failed, timed out, crashed or was inconclusive; 2 a usage or launch error.

use std::path::PathBuf;
use std::process::ExitCode;

use commcheck_mlx::drive::{certify, clean, Launcher};

const USAGE: &str = "usage: commcheck-mlx-drive --binary TEST_BINARY --results FILE [--mpirun N]";

fn parse() -> Result<(PathBuf, Launcher, PathBuf), String> {
    let (mut binary, mut results, mut launcher) = (None, None, Launcher::Direct);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value; {USAGE}"))
        };
        match arg.as_str() {
            "--binary" => binary = Some(PathBuf::from(value()?)),
            "--results" => results = Some(PathBuf::from(value()?)),
            "--mpirun" => {
                let n = value()?;
                launcher = match n.parse::<usize>() {
                    Ok(n) if n >= 2 => Launcher::Mpirun(n),
                    _ => return Err(format!("--mpirun: expected 2 or more processes, got {n:?}")),
                };
            }
            _ => return Err(format!("unexpected argument {arg:?}; {USAGE}")),
        }
    }
    Ok((
        binary.ok_or_else(|| format!("expected --binary; {USAGE}"))?,
        launcher,
        results.ok_or_else(|| format!("expected --results; {USAGE}"))?,
    ))
}

fn main() -> ExitCode {
    let (binary, launcher, results) = match parse() {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("commcheck-mlx-drive: {message}");
            return ExitCode::from(2);
        }
    };
    match certify(binary, launcher, results.clone()) {
        Ok(merged) => {
            for line in merged.family_summary() {
                println!("commcheck {line}");
            }
            println!("commcheck results: {}", results.display());
            if clean(&merged) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(101)
            }
        }
        Err(message) => {
            eprintln!("commcheck-mlx-drive: {message}");
            ExitCode::from(2)
        }
    }
}
