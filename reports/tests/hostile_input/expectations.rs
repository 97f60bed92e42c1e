//! Crafted expectations files, as library calls: repeated keys and
//! waivers, and deep nesting, refused with their line.

use commcheck_report::Expectations;

use crate::common::assert_mentions;
use crate::mutations::nested_arrays;
use crate::{assert_precise, VALID_TOML};

#[test]
fn a_repeated_key_in_an_expectations_file_is_refused_with_its_line() {
    let repeated = "[[waiver]]\ninvariant = \"CAN-2\"\nsubject = \"*\"\nreason = \"a\"\nreason = \"b\"\nlink = \"l\"\n";
    let problems = Expectations::parse(repeated, "dup.toml")
        .err()
        .map(|e| e.problems)
        .unwrap_or_default();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_mentions(
        &problems,
        &["dup.toml:5:", "duplicate key", "reason = \"b\""],
    );
    let twice = format!("{VALID_TOML}\n{VALID_TOML}");
    assert_mentions(
        &Expectations::parse(&twice, "dup.toml")
            .err()
            .map(|e| e.problems)
            .unwrap_or_default(),
        &[
            "dup.toml:7:",
            "waiver #2 repeats `CAN-2::all_reduce_sum`",
            "line 1",
        ],
    );
    let redefined = format!("waiver = []\n{VALID_TOML}");
    assert_mentions(
        &Expectations::parse(&redefined, "dup.toml")
            .err()
            .map(|e| e.problems)
            .unwrap_or_default(),
        &["dup.toml:2:"],
    );
    let table_twice = "[waiver]\n[waiver]\n";
    assert!(Expectations::parse(table_twice, "dup.toml").is_err());
}

#[test]
fn deep_nesting_in_an_expectations_file_is_refused_with_its_line() {
    const DEEP: usize = 100_000;
    for (what, text) in [
        ("arrays", format!("waiver = {}\n", nested_arrays(DEEP))),
        (
            "inline tables",
            format!("x = {}1{}\n", "{a = ".repeat(DEEP), "}".repeat(DEEP)),
        ),
        ("dotted keys", format!("{}a = 1\n", "a.".repeat(DEEP))),
        ("a table header", format!("[{}a]\n", "a.".repeat(DEEP))),
        ("unclosed arrays", format!("waiver = {}", "[".repeat(DEEP))),
    ] {
        let problems = Expectations::parse(&text, "deep.toml")
            .err()
            .map(|e| e.problems)
            .unwrap_or_default();
        assert!(!problems.is_empty(), "{what}: accepted");
        for problem in &problems {
            assert!(
                problem.starts_with("deep.toml:1:"),
                "{what}: {problem:.300}"
            );
            assert_precise(problem);
        }
    }
}
