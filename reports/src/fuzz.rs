//! The `report` fuzz target: [`verify()`](crate::verify()), [`load`],
//! [`diff()`](crate::diff()) and [`Expectations::parse`] on arbitrary bytes.
//!
//! The input is decoded by the kit's versioned decoder
//! ([`commcheck::fuzz::decode`], target `report`): a parser byte, then the
//! text(s). Whatever the bytes, no call may panic; what loads is also
//! diffed, rendered and summarised, so every path a report read from disk
//! takes is exercised. The repository's `fuzz/fuzz_targets/report.rs` is
//! `commcheck_report::fuzz::run(data)`.

use commcheck::fuzz::{decode, Input, Parser, Target};

use crate::{diff, load, verify, Expectations};

/// Runs the decoded input through the parsers it names; returns how many
/// texts were accepted (a parser that panics fails the target).
pub fn check(data: &[u8]) -> usize {
    let Ok(Input::Report(input)) = decode(Target::Report, data) else {
        return 0;
    };
    match input.parser {
        Parser::Verify => input
            .texts
            .iter()
            .map(|text| {
                let verified = verify(text).is_ok();
                let loaded = load(text).is_ok();
                if verified && !loaded {
                    panic!("verify accepted a report that load refused:\n{text}");
                }
                usize::from(verified) + usize::from(loaded)
            })
            .sum(),
        Parser::Diff => {
            let reports: Vec<_> = input.texts.iter().filter_map(|t| load(t).ok()).collect();
            if let [old, new] = reports.as_slice() {
                let changes = diff(old, new);
                let _ = changes.render();
                let _ = changes.regressed();
                let _ = changes.is_empty();
                let _ = crate::markdown::render(new);
            }
            reports.len()
        }
        Parser::Expectations => input
            .texts
            .iter()
            .map(|text| match Expectations::parse(text, "fuzz.toml") {
                Ok(expectations) => {
                    let _ = expectations.unused(&[]);
                    for entry in expectations.entries() {
                        let _ =
                            expectations.waiver_for(&entry.invariant, commcheck::Subject::Submit);
                    }
                    1
                }
                Err(error) => {
                    assert!(!error.problems.is_empty(), "a refusal names no problem");
                    0
                }
            })
            .sum(),
    }
}

/// The `report` fuzz target: [`check`] (a panic is the finding).
pub fn run(data: &[u8]) {
    let _checking = commcheck::fuzz::prepare(Target::Report, data);
    check(data);
}
