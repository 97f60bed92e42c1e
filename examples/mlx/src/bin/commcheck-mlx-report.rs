//! Writes the MLX certification report from the result files of its runs.
//!
//! ```text
//! commcheck-mlx-report --out reports/mlx [--require core|full] LABEL=RESULTS.json...
//! ```
//!
//! Each `LABEL=PATH` is one run's result file (`COMMCHECK_RESULTS` of a
//! `certify` or `certify_processes` run); the runs are merged case by case
//! (see `commcheck_mlx::merge`), and `report.json`, `junit.xml` and
//! `summary.md` are written into the output folder with `commcheck-report`'s
//! own model. Prints the verdict counts by family of every run and of the
//! merge.
//!
//! Exit status: 0 the level is reached (default `core`); 1 it is not; 2 a
//! usage, input or output error.

use std::path::PathBuf;
use std::process::ExitCode;

use commcheck::RunResults;
use commcheck_mlx::merge::{family_counts, merge, LabelledRun};
use commcheck_mlx::MlxHarness;
use commcheck_report::{must_pass, write_report, Environment, Expectations, Level, Report};

const USAGE: &str =
    "usage: commcheck-mlx-report --out DIR [--require core|full] LABEL=RESULTS.json...";

struct Options {
    out: PathBuf,
    require: Level,
    runs: Vec<(String, PathBuf)>,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut out = None;
    let mut require = Level::Core;
    let mut runs = Vec::new();
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = Some(PathBuf::from(args.next().ok_or("--out needs a folder")?)),
            "--require" => {
                let level = args.next().ok_or("--require needs core or full")?;
                require = Level::parse(&level)
                    .filter(|level| *level != Level::None)
                    .ok_or_else(|| format!("--require: expected core or full, got {level:?}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            run => {
                let (label, path) = run.split_once('=').ok_or_else(|| {
                    format!("expected LABEL=RESULTS.json or an option, got {run:?}")
                })?;
                runs.push((label.to_owned(), PathBuf::from(path)));
            }
        }
    }
    let out = out.ok_or("expected --out DIR")?;
    if runs.is_empty() {
        return Err("expected at least one LABEL=RESULTS.json".to_owned());
    }
    Ok(Options { out, require, runs })
}

fn load(label: &str, path: &PathBuf) -> Result<LabelledRun, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("{}: cannot read: {error}", path.display()))?;
    let results: RunResults = serde_json::from_str(&text).map_err(|error| {
        format!(
            "{}: expected a commcheck result file, got: {error}",
            path.display()
        )
    })?;
    Ok(LabelledRun {
        label: label.to_owned(),
        results,
    })
}

fn run(options: &Options) -> Result<Level, String> {
    let runs = options
        .runs
        .iter()
        .map(|(label, path)| load(label, path))
        .collect::<Result<Vec<_>, _>>()?;
    for run in &runs {
        println!(
            "run [{}]: {} cases{}",
            run.label,
            run.results.cases.len(),
            run.results
                .incomplete
                .as_ref()
                .map(|why| format!(" (incomplete: {why})"))
                .unwrap_or_default()
        );
        for line in family_counts(&run.results) {
            println!("  {line}");
        }
    }
    let harness = MlxHarness::new();
    let order: Vec<String> = commcheck::catalogue(&harness)
        .iter()
        .map(commcheck::Case::name)
        .collect();
    let merged = merge(&runs, &order).map_err(|error| error.to_string())?;
    println!("merged: {} cases", merged.cases.len());
    for line in family_counts(&merged) {
        println!("  {line}");
    }
    let report = Report::build(
        &merged,
        must_pass(&harness),
        &Expectations::none(),
        Environment::detect(),
    );
    std::fs::create_dir_all(&options.out)
        .map_err(|error| format!("{}: cannot create: {error}", options.out.display()))?;
    let files = write_report(&report, &options.out).map_err(|error| error.to_string())?;
    for file in files {
        println!("wrote {}", file.display());
    }
    println!(
        "{} {}: level {} ({} must-pass cases)",
        report.provenance.backend.name,
        report.provenance.backend.version,
        report.level,
        report.must_pass.len()
    );
    Ok(report.level)
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("commcheck-mlx-report: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(level) if level >= options.require => ExitCode::SUCCESS,
        Ok(level) => {
            eprintln!(
                "commcheck-mlx-report: level {} not reached (got {level})",
                options.require
            );
            ExitCode::from(1)
        }
        Err(message) => {
            eprintln!("commcheck-mlx-report: {message}");
            ExitCode::from(2)
        }
    }
}
