//! `kit/EVIDENCE.md` (the `commcheck::evidence` docs) carries a table of the
//! evidence every invariant can use, generated from the kit's catalogue: for
//! each (invariant, group of subjects with the same requirements), whether it
//! passed with no instrument at all in each personality of the CPU backend
//! (from the checked-in `reports/personalities/NAME/report.json`), which
//! instruments it uses on a harness that provides every one, and the world
//! sizes it runs on.
//!
//! This test regenerates the table and fails when the file's copy (between
//! `<!-- evidence-table:start -->` and `<!-- evidence-table:end -->`) differs.
//! After a change to the suites, rewrite it with
//!
//! ```text
//! COMMCHECK_BLESS=1 cargo test --test evidence_doc
//! ```
//!
//! and review the diff of `kit/EVIDENCE.md` (the prose around the table may
//! need updating too).

use std::path::PathBuf;

use commcheck::spec::{Class, INVARIANTS};
use commcheck::{catalogue, Instruments, Operation, Subject};
use commcheck_reference::cpu::{CpuHarness, PERSONALITIES};

const START: &str = "<!-- evidence-table:start -->";
const END: &str = "<!-- evidence-table:end -->";

/// Heading of the clause-by-clause section, which must name every invariant.
const CLAUSES: &str = "## Clause by clause";

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kit/EVIDENCE.md")
}

/// What a case needs, as the table shows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Requirements {
    /// Per personality (in [`PERSONALITIES`] order): whether the case passed
    /// with no instrument.
    black_box: Vec<bool>,
    instruments: String,
    worlds: String,
}

/// The cases that passed in the checked-in certification of each
/// personality with no instruments (`reports/personalities/NAME/report.json`,
/// made by `commcheck-report certify cpu --personality NAME --no-instruments`).
fn black_box_passes() -> Vec<std::collections::BTreeSet<String>> {
    PERSONALITIES
        .iter()
        .map(|personality| {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("reports/personalities")
                .join(personality)
                .join("report.json");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            let report: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
            report["cases"]
                .as_array()
                .unwrap_or_else(|| panic!("{}: no cases", path.display()))
                .iter()
                .filter(|case| case["status"] == "pass")
                .filter_map(|case| case["name"].as_str().map(str::to_owned))
                .collect()
        })
        .collect()
}

/// Names of the instruments in `needs`, or `none`.
fn instruments(needs: Instruments) -> String {
    let names = Instruments::NONE.missing(needs);
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn class(class: Class) -> &'static str {
    match class {
        Class::A => "A",
        Class::M => "M",
        Class::I => "I",
    }
}

/// A group of subjects, in catalogue order, as a reader says it.
fn subjects(group: &[Subject]) -> String {
    let local: Vec<String> = group
        .iter()
        .filter(|s| s.operation().is_none())
        .map(|s| format!("`{s}`"))
        .collect();
    let operations: Vec<Operation> = group.iter().filter_map(|s| s.operation()).collect();
    let mut parts = local;
    if operations.len() == Operation::ALL.len() {
        parts.push("all operations".into());
    } else if operations.len() > Operation::ALL.len() / 2 {
        let but: Vec<String> = Operation::ALL
            .iter()
            .filter(|op| !operations.contains(op))
            .map(|op| format!("`{op}`"))
            .collect();
        parts.push(format!("all operations but {}", but.join(", ")));
    } else {
        parts.extend(operations.iter().map(|op| format!("`{op}`")));
    }
    parts.join(", ")
}

/// The table, from the catalogue of the CPU reference harness with every
/// instrument and every claim, and from the checked-in certifications of
/// each personality with no instrument.
fn table() -> String {
    let full = catalogue(&CpuHarness::new());
    let passes = black_box_passes();
    let mut out = format!(
        "| ID | Class | Subjects | {} | Instruments used (all provided) | World sizes |\n\
         |---|---|---|{}---|---|\n",
        PERSONALITIES.join(" | "),
        "---|".repeat(PERSONALITIES.len())
    );
    for invariant in INVARIANTS {
        // Groups of subjects with the same requirements, in catalogue order.
        let mut groups: Vec<(Requirements, Vec<Subject>)> = Vec::new();
        for case in full.iter().filter(|c| c.invariant().id == invariant.id) {
            assert!(
                case.unsupported().is_none(),
                "{} is not supported on the full CPU harness: {:?}",
                case.name(),
                case.unsupported()
            );
            let worlds: Vec<String> = case.worlds().iter().map(usize::to_string).collect();
            let requirements = Requirements {
                black_box: passes.iter().map(|p| p.contains(&case.name())).collect(),
                instruments: instruments(case.needs()),
                worlds: worlds.join(", "),
            };
            match groups.iter_mut().find(|(r, _)| *r == requirements) {
                Some((_, group)) => group.push(case.subject()),
                None => groups.push((requirements, vec![case.subject()])),
            }
        }
        assert!(!groups.is_empty(), "{} has no case", invariant.id);
        for (requirements, mut group) in groups {
            group.sort();
            let black_box: Vec<&str> = requirements
                .black_box
                .iter()
                .map(|passed| if *passed { "yes" } else { "no" })
                .collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                invariant.id,
                class(invariant.class),
                subjects(&group),
                black_box.join(" | "),
                requirements.instruments,
                requirements.worlds,
            ));
        }
    }
    out.push_str(&decided_by_set());
    out
}

/// How many cases of the CPU harness's catalogue each instrument set can
/// decide (every part runnable: neither not-supported nor capped), as a
/// table under the main one.
fn decided_by_set() -> String {
    const SETS: [&str; 8] = [
        "none",
        "probe",
        "fault",
        "observer",
        "hold",
        "probe,fault",
        "probe,fault,observer",
        "all",
    ];
    let mut out = String::from(
        "\nCases each instrument set can decide on the CPU harness (the rest are not-supported, or capped: \
         able to fail, never to pass):\n\n| Instruments offered | Cases decided | Of the catalogue |\n|---|---|---|\n",
    );
    for set in SETS {
        let instruments: Instruments = set.parse().expect("a known instrument set");
        let cases = catalogue(&CpuHarness::new().with_instruments(instruments));
        let decided = cases
            .iter()
            .filter(|case| case.not_supported_before_running().is_none())
            .count();
        out.push_str(&format!(
            "| {} | {decided} of {} | {:.1}% |\n",
            set.replace(',', ", "),
            cases.len(),
            100.0 * decided as f64 / cases.len() as f64
        ));
    }
    out
}

/// The file's text with its table section replaced by `table`.
fn with_table(text: &str, table: &str) -> String {
    let (start, end) = section(text);
    format!("{}\n{table}{}", &text[..start], &text[end..])
}

/// Byte range between the end of the start marker and the end marker.
fn section(text: &str) -> (usize, usize) {
    let start = text
        .find(START)
        .unwrap_or_else(|| panic!("kit/EVIDENCE.md has no {START} marker"))
        + START.len();
    let end = text[start..]
        .find(END)
        .unwrap_or_else(|| panic!("kit/EVIDENCE.md has no {END} marker after {START}"))
        + start;
    (start, end)
}

#[test]
fn the_evidence_table_is_generated_from_the_catalogue() {
    let path = path();
    let text = std::fs::read_to_string(&path).expect("read kit/EVIDENCE.md");
    let expected = with_table(&text, &table());
    if std::env::var("COMMCHECK_BLESS").is_ok_and(|v| v == "1") {
        if expected != text {
            // Written aside, then renamed: the other test reads the file meanwhile.
            let fresh = path.with_extension("md.new");
            std::fs::write(&fresh, &expected).expect("write kit/EVIDENCE.md.new");
            std::fs::rename(&fresh, &path).expect("replace kit/EVIDENCE.md");
            println!("rewrote the evidence table of {}", path.display());
        }
        return;
    }
    let (start, end) = section(&text);
    let (want_start, want_end) = section(&expected);
    assert!(
        expected == text,
        "the evidence table of kit/EVIDENCE.md is stale; regenerate it with \
         `COMMCHECK_BLESS=1 cargo test --test evidence_doc` and review the diff.\n\
         --- in the file:\n{}\n--- generated:\n{}",
        &text[start..end],
        &expected[want_start..want_end]
    );
}

#[test]
fn every_invariant_is_gone_through_clause_by_clause() {
    let text = std::fs::read_to_string(path()).expect("read kit/EVIDENCE.md");
    let at = text
        .find(CLAUSES)
        .unwrap_or_else(|| panic!("kit/EVIDENCE.md has no `{CLAUSES}` section"));
    let clauses = &text[at..];
    let missing: Vec<&str> = INVARIANTS
        .iter()
        .map(|invariant| invariant.id)
        .filter(|id| !clauses.contains(&format!("**{id}**")))
        .collect();
    assert!(
        missing.is_empty(),
        "the clause-by-clause section of kit/EVIDENCE.md does not go through {missing:?} \
         (each invariant is introduced as **ID**)"
    );
}
