//! Hostile input: malformed, truncated, oversized and crafted reports and
//! expectations files, fed to `verify`, `load`, `diff`, the summary and
//! `Expectations::parse` as library calls and through the binary.
//!
//! What must hold: nothing panics or overflows its stack; every refusal
//! says what was expected and what was found, naming the file or field; a
//! report that `verify` accepts differs from a valid one at most in its
//! volatile fields (see `commcheck_report::canonical`); and the binary exits
//! with the status its help documents (0 ok, 1 rejected or check failed, 2
//! unreadable input or usage error), never 101 (a panic) or a signal.
//!
//! Decisions checked here: one leading UTF-8 byte-order mark is accepted
//! (JSON reports and TOML expectations alike); an object that names a
//! member twice is rejected, whichever copy differs; input files are read
//! up to `MAX_INPUT_BYTES` (64 MiB) and a larger one is refused from its
//! size; a file that is not UTF-8 cannot be read (exit 2).
//!
//! One test binary, a module per kind of input: `properties` (arbitrary
//! and mutated text, as library calls), `reports` (crafted report text),
//! `expectations` (crafted expectations files), `files` (oversized and
//! unreadable files) and `cli` (all of it through the binary). This file
//! holds the fixtures they share; `mutations` damages a valid report.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod expectations;
mod files;
mod mutations;
mod properties;
mod reports;

use std::path::{Path, PathBuf};

use commcheck::Verdict;
use commcheck_report::{diff, load, markdown, verify, Expectations, Report};
use common::*;
use proptest::prelude::*;
use serde_json::Value;

/// A UTF-8 byte-order mark.
pub(crate) const BOM: &str = "\u{feff}";

/// A valid report with a failing class-I case (level core).
pub(crate) fn valid_report() -> Report {
    report(&standard(Verdict::Fail))
}

/// [`valid_report`] as its JSON text.
pub(crate) fn valid_text() -> String {
    json(&valid_report())
}

/// A valid expectations file (one waiver).
pub(crate) const VALID_TOML: &str = "\
[[waiver]]
invariant = \"CAN-2\"
subject = \"all_reduce_sum\"
reason = \"deadline overshoot under load\"
link = \"https://tracker.example/issues/12\"
";

/// Longest message a problem may be: long values are quoted shortened.
pub(crate) const PROBLEM_BYTES: usize = 4096;

#[track_caller]
pub(crate) fn assert_precise(problem: &str) {
    assert!(!problem.trim().is_empty(), "an empty problem");
    assert!(
        problem.len() < PROBLEM_BYTES,
        "a problem of {} bytes: {:.300}",
        problem.len(),
        problem
    );
}

/// The parsed content that the digest covers (volatile fields removed), or
/// `None` when `text` is not JSON.
fn stable(text: &str) -> Option<Value> {
    let mut value: Value = serde_json::from_str(text.trim_start_matches(BOM)).ok()?;
    if let Some(provenance) = value.get_mut("provenance").and_then(Value::as_object_mut) {
        for key in ["generated_unix", "host", "calibration"] {
            provenance.remove(key);
        }
    }
    if let Some(cases) = value.get_mut("cases").and_then(Value::as_array_mut) {
        for case in cases.iter_mut().filter_map(Value::as_object_mut) {
            case.remove("millis");
            case.remove("attempts");
        }
    }
    Some(value)
}

/// Runs `text` through every library entry point; `verify`'s answer.
///
/// `verify` refuses with at least one problem, each one bounded; `load`
/// accepts whatever `verify` accepts; a loaded report can be diffed
/// against a valid one both ways and summarised.
pub(crate) fn exercise(text: &str) -> Result<Report, Vec<String>> {
    let verified = verify(text);
    match &verified {
        Ok(report) => {
            // Accepted: the same content as the valid report, volatile
            // fields aside.
            assert_eq!(
                stable(text),
                stable(&valid_text()),
                "verify accepted a report whose content differs"
            );
            assert_eq!(load(text).as_ref(), Ok(report));
        }
        Err(problems) => {
            assert!(!problems.is_empty(), "verify: Err without a problem");
            for problem in problems {
                assert_precise(problem);
            }
        }
    }
    match load(text) {
        Ok(loaded) => {
            let valid = valid_report();
            let _ = diff(&valid, &loaded).render();
            let _ = diff(&loaded, &valid).regressed();
            let _ = diff(&loaded, &loaded).is_empty();
            let _ = markdown::render_capped(&loaded, 2048);
            let _ = markdown::render(&loaded);
        }
        Err(message) => assert_precise(&message),
    }
    if let Err(error) = Expectations::parse(text, "fuzz.toml") {
        for problem in &error.problems {
            assert!(problem.starts_with("fuzz.toml:"), "{problem}");
            assert_precise(problem);
        }
    }
    verified
}

// ---------------------------------------------------------------------------
// Files.

pub(crate) fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a test file");
    path
}

/// A sparse file of `len` zero bytes (no disk space, no time).
pub(crate) fn sparse(dir: &Path, name: &str, len: u64) -> PathBuf {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).expect("create a sparse file");
    file.set_len(len).expect("size a sparse file");
    path
}

pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary folder")
}

pub(crate) fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}
