//! Crafted report text, as library calls: every prefix, byte-order marks,
//! repeated members, deep nesting, wrong types and huge numbers, and
//! summaries of absurd reports.

use commcheck_report::{diff, load, markdown, verify, Expectations};

use crate::common::assert_mentions;
use crate::mutations::{insert_after, nested_arrays, nested_objects, with_raw_member};
use crate::{exercise, stable, valid_report, valid_text, BOM, VALID_TOML};

#[test]
fn every_prefix_of_a_report_is_refused() {
    let text = valid_text();
    let whole = text.trim_end().len();
    for end in (0..whole).filter(|&end| text.is_char_boundary(end)) {
        let problems = verify(&text[..end]).err().unwrap_or_default();
        assert_eq!(problems.len(), 1, "cut at {end}: {problems:?}");
        assert!(
            problems[0].starts_with("not valid JSON") || problems[0].contains("ends early"),
            "cut at {end}: {problems:?}"
        );
        assert!(load(&text[..end]).is_err(), "cut at {end}");
    }
    let empty = verify("").err().unwrap_or_default();
    assert_eq!(
        empty,
        ["not valid JSON: the input is empty (expected a report: a JSON object)"]
    );
    let blank = verify(" \n\t").err().unwrap_or_default();
    assert_mentions(&blank, &["only whitespace", "expected a report"]);
}

#[test]
fn a_byte_order_mark_is_accepted_once() {
    let text = valid_text();
    let plain = verify(&text);
    assert!(plain.is_ok());
    assert_eq!(verify(&format!("{BOM}{text}")), plain);
    assert_eq!(load(&format!("{BOM}{text}")), load(&text));
    // A second one, or one inside, is an error naming the place.
    let twice = verify(&format!("{BOM}{BOM}{text}"))
        .err()
        .unwrap_or_default();
    assert_mentions(&twice, &["not valid JSON", "byte-order mark", "line 1"]);
    let inside = verify(&text.replacen("\"schema\"", &format!("{BOM}\"schema\""), 1))
        .err()
        .unwrap_or_default();
    assert_mentions(&inside, &["not valid JSON", "line "]);
    // The same for an expectations file: the TOML parser skips one mark.
    let parsed = Expectations::parse(&format!("{BOM}{VALID_TOML}"), "bom.toml");
    assert_eq!(parsed, Expectations::parse(VALID_TOML, "bom.toml"));
    assert_eq!(parsed.map(|e| e.entries().len()), Ok(1));
    let bad = Expectations::parse(&format!("{BOM}waiver = 1\n"), "bom.toml")
        .err()
        .map(|e| e.problems)
        .unwrap_or_default();
    assert_mentions(&bad, &["bom.toml:1:", "(at `waiver = 1`)"]);
}

#[test]
fn a_repeated_member_cannot_smuggle_a_value_past_verify() {
    let text = valid_text();
    assert_eq!(valid_report().level, commcheck_report::Level::Core);
    // serde_json keeps the last copy, and the digest covers only that one:
    // a first copy is what a first-wins reader (or a human) would see.
    for (anchor, member, named) in [
        ("{", "\n  \"level\": \"full\",", "report: member `level`"),
        (
            "{",
            "\n  \"digest\": \"sha256:0000000000000000000000000000000000000000000000000000000000000000\",",
            "report: member `digest`",
        ),
        ("{", "\n  \"level\": \"core\",", "report: member `level`"),
        (
            "\"provenance\": {",
            "\n    \"backend\": {\"name\": \"other\", \"version\": \"9\", \"device\": \"gpu\"},",
            "`provenance`: member `backend`",
        ),
        (
            "\"name\": \"RET-1::submit\",",
            "\n      \"status\": \"pass\",",
            "`cases[2]` (case RET-1::submit): member `status`",
        ),
        (
            "\"name\": \"RET-1::submit\",",
            "\n      \"fingerprint\": \"0000000000000000\",",
            "`cases[2]` (case RET-1::submit): member `fingerprint`",
        ),
    ] {
        let edited = insert_after(&text, anchor, member);
        // Last-wins content is the valid report's: the digest matches.
        assert_eq!(stable(&edited), stable(&text), "{member}");
        let problems = verify(&edited).err().unwrap_or_default();
        assert_eq!(problems.len(), 1, "{member}: {problems:?}");
        assert_mentions(&problems, &[named, "appears more than once", "line "]);
        let loaded = load(&edited).err().unwrap_or_default();
        assert!(loaded.contains(named), "{loaded}");
    }
    // After the original, too.
    let edited = text.replacen("\"schema\": 1,", "\"schema\": 1,\n  \"schema\": 1,", 1);
    assert_mentions(
        &verify(&edited).err().unwrap_or_default(),
        &["report: member `schema` appears more than once"],
    );
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    const DEEP: usize = 100_000;
    for (what, text) in [
        ("arrays", nested_arrays(DEEP)),
        ("objects", nested_objects(DEEP)),
        ("unclosed arrays", "[".repeat(DEEP)),
        ("unclosed objects", "{\"a\":".repeat(DEEP)),
        ("cases", with_raw_member("cases", &nested_arrays(DEEP))),
        (
            "a message",
            with_raw_member("message", &nested_objects(DEEP)),
        ),
    ] {
        let problems = exercise(&text).err().unwrap_or_default();
        assert_eq!(problems.len(), 1, "{what}: {problems:?}");
        assert_mentions(
            &problems,
            &["not valid JSON", "recursion limit exceeded", "128 deep"],
        );
    }
    // Just under serde_json's limit: parsed, then walked by the digest,
    // the fingerprints and the typed checks, which name the field.
    let text = with_raw_member("message", &nested_arrays(110));
    let problems = exercise(&text).err().unwrap_or_default();
    assert_mentions(
        &problems,
        &[
            "case RET-6::submit (cases[0]): at `message`:",
            "invalid type: sequence, expected a string",
        ],
    );
    assert_mentions(&problems, &["case RET-6::submit (cases[0])", "fingerprint"]);
    let text = with_raw_member("provenance", &nested_objects(110));
    assert_mentions(
        &exercise(&text).err().unwrap_or_default(),
        &["provenance: at `a`: unknown field `a`"],
    );
}

#[test]
fn wrong_types_and_huge_numbers_name_the_field() {
    for (member, raw, parts) in [
        (
            "attempts",
            "\"NaN\"",
            &[
                "cases[0]): at `attempts`:",
                "invalid type: string \"NaN\", expected u32",
            ][..],
        ),
        (
            "attempts",
            "4294967296",
            &[
                "at `attempts`:",
                "invalid value: integer `4294967296`, expected u32",
            ],
        ),
        ("seed", "-1", &["at `seed`:", "expected u64"]),
        (
            "seed",
            "1.5",
            &["at `seed`:", "invalid type: floating point `1.5`"],
        ),
        ("millis", "1e400", &["not valid JSON: number out of range"]),
        ("millis", "NaN", &["not valid JSON: expected value"]),
        (
            "seed",
            "18446744073709551616",
            &["at `seed`:", "expected u64"],
        ),
        (
            "verdict",
            "\"Infinity\"",
            &["at `verdict`:", "unknown variant `Infinity`"],
        ),
        ("subject", "{}", &["at `subject`:"]),
        (
            "worlds",
            "[1, \"two\"]",
            &["at `worlds[1]`:", "invalid type: string \"two\""],
        ),
        (
            "waiver",
            "{\"reason\": 5}",
            &["at `waiver.reason`:", "expected a string"],
        ),
    ] {
        let text = with_raw_member(member, raw);
        let problems = exercise(&text).err().unwrap_or_default();
        assert_mentions(&problems, parts);
    }
    // A long value is quoted shortened.
    let long = format!("\"{}\"", "x".repeat(100_000));
    let problems = exercise(&with_raw_member("attempts", &long))
        .err()
        .unwrap_or_default();
    assert_mentions(
        &problems,
        &["at `attempts`:", "invalid type: string", "bytes in all)"],
    );
    // The header: what was expected, what was found.
    let text = valid_text();
    for (from, to, parts) in [
        (
            "\"schema\": 1,",
            "\"schema\": 1.0,",
            &["schema: expected a version number", "found the number 1.0"][..],
        ),
        (
            "\"schema\": 1,",
            "\"schema\": \"1\",",
            &[
                "schema: expected a version number",
                "found the string \"1\"",
            ],
        ),
        (
            "\"format\": \"commcheck-report\",",
            "\"format\": [[1]],",
            &["format: expected the string \"commcheck-report\", found an array of 1 element(s)"],
        ),
    ] {
        assert_mentions(
            &exercise(&text.replacen(from, to, 1))
                .err()
                .unwrap_or_default(),
            parts,
        );
    }
    let digest = valid_report().digest;
    let text = text.replacen(&format!("\"{digest}\""), "{\"sha256\": 1}", 1);
    assert_mentions(
        &exercise(&text).err().unwrap_or_default(),
        &["digest: expected a string (\"sha256:<64 hex digits>\"), found an object of 1 member(s)"],
    );
    assert_mentions(
        &exercise("[1, 2]").err().unwrap_or_default(),
        &["report: expected a JSON object at the top level, found an array of 2 element(s)"],
    );
    // `load` names the field as well.
    let loaded = load(&with_raw_member("attempts", "\"NaN\""))
        .err()
        .unwrap_or_default();
    assert!(
        loaded.starts_with("not a schema-1 report: at `cases[0].attempts`: invalid type"),
        "{loaded}"
    );
}

#[test]
fn summaries_of_hostile_reports_stay_bounded() {
    // `summary` does not verify: a report with thousands of families,
    // huge names and a huge digest still renders within its cap.
    let mut report = valid_report();
    let template = report.cases[0].clone();
    report.cases = (0..3000)
        .map(|i| {
            let mut case = template.clone();
            case.family = format!("F{i}-{}", "f".repeat(300));
            case.name = format!("{i}{}", "n".repeat(1000));
            case
        })
        .collect();
    report.digest = "d".repeat(100_000);
    report.must_pass = (0..3000).map(|i| format!("missing-{i}")).collect();
    let cap = 64 * 1024;
    let capped = markdown::render_capped(&report, cap);
    assert!(capped.len() <= cap, "{} > {cap}", capped.len());
    assert!(
        capped.contains(" more ("),
        "the note counts what it does not name"
    );
    let _ = diff(&report, &valid_report()).render();
}
