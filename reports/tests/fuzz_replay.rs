//! Replays the `report` fuzz target's stored inputs with plain `cargo
//! test`: every file under `fuzz/corpus/report` and `fuzz/regressions/report`
//! goes through `commcheck_report::fuzz::check` (verify, load, diff,
//! Expectations::parse), and none may panic. (Their decoded forms are
//! checked by the root package's `tests/fuzz_replay.rs`.)
//!
//! `cargo test -p commcheck-report --test fuzz_replay -- --ignored --exact
//! write_seeds` rewrites the seeds (`fuzz/corpus/report/seed-*`).

mod common;

use std::path::{Path, PathBuf};

use commcheck::fuzz::{Parser, ReportInput};
use commcheck::Verdict;
use common::*;

fn folder(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(kind)
        .join("report")
}

#[test]
fn report_inputs_replay() {
    let mut failures = Vec::new();
    let mut replayed = 0;
    for kind in ["corpus", "regressions"] {
        for path in commcheck::fuzz::stored_inputs(&folder(kind)) {
            let data = std::fs::read(&path).expect("readable input");
            replayed += 1;
            let outcome = std::panic::catch_unwind(|| commcheck_report::fuzz::check(&data));
            if outcome.is_err() {
                failures.push(path.display().to_string());
            }
        }
    }
    println!("report: {replayed} stored input(s) replayed");
    assert!(replayed > 0, "no stored report input");
    assert!(failures.is_empty(), "panicked on: {}", failures.join(", "));
}

/// The seeds: a valid report for `verify`, two for `diff` (a regression
/// between them), and an expectations file.
fn seeds() -> Vec<(&'static str, ReportInput)> {
    let passing = json(&report(&standard(Verdict::Pass)));
    let failing = json(&report(&standard(Verdict::Fail)));
    vec![
        (
            "verify",
            ReportInput {
                parser: Parser::Verify,
                texts: vec![failing.clone()],
            },
        ),
        (
            "diff",
            ReportInput {
                parser: Parser::Diff,
                texts: vec![passing, failing],
            },
        ),
        (
            "expectations",
            ReportInput {
                parser: Parser::Expectations,
                texts: vec![
                    "[[waiver]]\ninvariant = \"CAN-2\"\nsubject = \"all_reduce_sum\"\n\
                     reason = \"deadline overshoot under load\"\nlink = \"https://tracker.invalid/12\"\n"
                        .into(),
                ],
            },
        ),
    ]
}

#[test]
fn seeds_are_accepted() {
    for (name, input) in seeds() {
        let accepted = commcheck_report::fuzz::check(&input.encode());
        assert!(accepted > 0, "seed {name} was refused");
    }
}

#[test]
#[ignore = "writes fuzz/corpus/report/seed-*: run on purpose"]
fn write_seeds() {
    let folder = folder("corpus");
    std::fs::create_dir_all(&folder).expect("corpus folder");
    for (name, input) in seeds() {
        std::fs::write(folder.join(format!("seed-{name}")), input.encode()).expect("seed written");
    }
}
