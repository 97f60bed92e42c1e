//! `verify`: everything wrong with a report, each problem named precisely.

mod common;

use commcheck::{Subject, Verdict};
use commcheck_report::{Level, Status};
use common::*;
use serde_json::Value;

fn edit(text: &str, change: impl FnOnce(&mut Value)) -> String {
    let mut value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    change(&mut value);
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

fn case_mut<'a>(value: &'a mut Value, name: &str) -> &'a mut Value {
    let cases = value["cases"].as_array_mut().map(|c| c.iter_mut());
    cases
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

#[test]
fn a_fresh_report_verifies() {
    let report = report(&standard(Verdict::Pass));
    assert_eq!(report.level, Level::Full);
    let verified = commcheck_report::verify(&json(&report));
    assert_eq!(verified.as_ref().err(), None);
    assert_eq!(verified.ok(), Some(report));
}

#[test]
fn a_tampered_verdict_is_rejected_naming_the_case() {
    let text = json(&report(&standard(Verdict::Fail)));
    assert!(problems(&text).is_empty());
    // Make the failing class-I case look like a pass, consistently.
    let tampered = edit(&text, |v| {
        let case = case_mut(v, "RET-1::submit");
        case["verdict"] = "pass".into();
        case["status"] = "pass".into();
        case["message"] = Value::Null;
    });
    let problems = problems(&tampered);
    assert_mentions(&problems, &["case RET-1::submit", "fingerprint", "edited"]);
    assert_mentions(&problems, &["digest:", "altered"]);
    // The level still says core while the (tampered) results reach full.
    assert_mentions(&problems, &["level:", "`core`", "`full`"]);
}

#[test]
fn an_edited_verdict_alone_is_named_by_status_and_fingerprint() {
    let text = json(&report(&standard(Verdict::Pass)));
    let tampered = edit(&text, |v| {
        case_mut(v, "SUM-1::all_reduce_sum")["verdict"] = "fail".into()
    });
    let problems = problems(&tampered);
    assert_mentions(&problems, &["case SUM-1::all_reduce_sum", "fingerprint"]);
    assert_mentions(
        &problems,
        &[
            "case SUM-1::all_reduce_sum",
            "status `pass` does not follow from verdict `fail`",
        ],
    );
    assert_mentions(&problems, &["case SUM-1::all_reduce_sum", "no message"]);
}

#[test]
fn a_truncated_report_is_rejected_as_truncated() {
    let text = json(&report(&standard(Verdict::Pass)));
    let problems = problems(&text[..text.len() / 2]);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("not valid JSON") && problems[0].contains("truncated"),
        "{problems:#?}"
    );
}

#[test]
fn an_unknown_schema_is_rejected() {
    let text = edit(&json(&report(&standard(Verdict::Pass))), |v| {
        v["schema"] = 2.into()
    });
    assert_eq!(
        problems(&text),
        vec!["schema: version 2 is not known to this verifier (it reads version 1)".to_owned()]
    );
    let text = edit(&text, |v| {
        if let Some(members) = v.as_object_mut() {
            members.remove("schema");
        }
    });
    assert_mentions(&problems(&text), &["schema: missing"]);
}

#[test]
fn duplicate_and_missing_cases_are_named() {
    let report = report(&standard(Verdict::Pass));
    let text = edit(&json(&report), |v| {
        let Some(cases) = v["cases"].as_array_mut() else {
            return;
        };
        let duplicate = cases[0].clone();
        cases.retain(|c| c["name"] != "EXC-1::submit");
        cases.push(duplicate);
    });
    let problems = problems(&text);
    assert_mentions(&problems, &["case EXC-1::submit", "no result (missing)"]);
    assert_mentions(&problems, &["case RET-6::submit", "2 results (duplicate"]);
    assert_mentions(&problems, &["level:", "reach `none`"]);
}

#[test]
fn a_must_pass_list_listing_a_case_twice_is_rejected() {
    let text = edit(&json(&report(&standard(Verdict::Pass))), |v| {
        if let Some(list) = v["must_pass"].as_array_mut() {
            list.push("RET-6::submit".into());
        }
    });
    assert_mentions(
        &problems(&text),
        &["must_pass: case RET-6::submit is listed 2 times"],
    );
}

#[test]
fn a_waiver_without_reason_is_rejected() {
    let expectations = commcheck_report::Expectations::parse(
        "[[waiver]]\ninvariant = \"RET-1\"\nsubject = \"submit\"\nreason = \"known\"\nlink = \"https://x.invalid/1\"\n",
        "e.toml",
    )
    .unwrap_or_default();
    let report = report_with(&standard(Verdict::Fail), &expectations);
    assert_eq!(report.cases[2].status, Status::Waived);
    assert!(problems(&json(&report)).is_empty());
    for remove in ["reason", "link"] {
        let text = edit(&json(&report), |v| {
            if let Some(waiver) = case_mut(v, "RET-1::submit")["waiver"].as_object_mut() {
                waiver.remove(remove);
            }
        });
        let problems = problems(&text);
        assert_mentions(
            &problems,
            &["case RET-1::submit", &format!("waiver has no {remove}")],
        );
    }
}

#[test]
fn statuses_not_allowed_at_the_claimed_level_are_named() {
    let text = json(&report(&standard(Verdict::Timeout)));
    let text = edit(&text, |v| v["level"] = "full".into());
    let problems = problems(&text);
    assert_mentions(
        &problems,
        &[
            "case RET-1::submit",
            "status `timeout` is not allowed at level full",
        ],
    );
}

#[test]
fn shape_errors_name_the_field_and_everything_is_listed() {
    let text = edit(&json(&report(&standard(Verdict::Pass))), |v| {
        v["surprise"] = true.into();
        v["provenance"]["host"] = Value::Null;
        case_mut(v, "EXC-1::submit")["status"] = "great".into();
    });
    let problems = problems(&text);
    assert_mentions(&problems, &["surprise: unknown member"]);
    assert_mentions(&problems, &["provenance:"]);
    assert_mentions(
        &problems,
        &["case EXC-1::submit", "unknown variant `great`"],
    );
    assert_mentions(&problems, &["digest:"]);
}

#[test]
fn results_for_unclaimed_operations_must_be_not_supported() {
    let text = edit(&json(&report(&standard(Verdict::Pass))), |v| {
        let case = case_mut(v, "BRD-1::broadcast");
        case["verdict"] = "pass".into();
        case["status"] = "pass".into();
    });
    assert_mentions(
        &problems(&text),
        &[
            "case BRD-1::broadcast",
            "not claimed, so the case must be not-supported",
        ],
    );
}

#[test]
fn garbage_never_panics() {
    for text in [
        "",
        "null",
        "[]",
        "{}",
        "{\"schema\":1}",
        "{\"schema\":\"1\"}",
        "\u{0}",
        "{\"schema\":1,\"cases\":{}}",
    ] {
        assert!(!problems(text).is_empty(), "{text:?}");
    }
    let _ = Subject::Submit;
}

#[test]
fn every_truncation_and_byte_edit_is_rejected_without_panicking() {
    let text = json(&report(&standard(Verdict::Fail)));
    for end in (0..text.len()).step_by(37) {
        assert!(
            !problems(&text[..end]).is_empty(),
            "accepted a report cut at byte {end}"
        );
    }
    // Change one digit or letter: always caught, but in the volatile fields
    // that equal runs do not share (see `commcheck_report::canonical`).
    let stable = |text: &str| {
        let mut value: Value = serde_json::from_str(text).ok()?;
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
    };
    let original = stable(&text);
    let bytes = text.as_bytes();
    for at in (0..bytes.len()).step_by(53) {
        let replacement = match bytes[at] {
            b'0'..=b'8' => bytes[at] + 1,
            b'a'..=b'y' => bytes[at] + 1,
            _ => continue,
        };
        let mut edited = bytes.to_vec();
        edited[at] = replacement;
        let edited = String::from_utf8(edited).unwrap_or_default();
        if stable(&edited).is_some() && stable(&edited) == original {
            continue;
        }
        assert!(
            !problems(&edited).is_empty(),
            "accepted an edit at byte {at}"
        );
    }
}

#[test]
fn equal_runs_give_equal_digests_and_a_real_edit_does_not() {
    let report = report(&standard(Verdict::Pass));
    let mut again = report.clone();
    // What differs between equal runs: timing, retries, host, calibration, time.
    again.cases[0].millis += 1234;
    again.cases[0].attempts += 1;
    again.provenance.generated_unix += 60;
    again.provenance.host.hostname = "another-host".into();
    let digest = |report: &commcheck_report::Report| {
        let value: serde_json::Value =
            serde_json::from_str(&json(report)).expect("a report is JSON");
        commcheck_report::canonical::report_digest(&value)
    };
    assert_eq!(digest(&report), digest(&again));
    let mut edited = report.clone();
    edited.cases[0].status = commcheck_report::Status::Fail;
    assert_ne!(digest(&report), digest(&edited));
}

#[test]
fn zero_attempts_only_for_a_case_not_supported_before_running() {
    // Cases not-supported before anything runs are recorded without running.
    let mut results = results(&standard(Verdict::NotSupported));
    for case in &mut results.cases {
        if case.verdict == Verdict::NotSupported {
            case.attempts = 0;
        }
    }
    let must_pass = standard(Verdict::NotSupported)
        .iter()
        .map(|(id, s, _)| format!("{id}::{s}"))
        .collect();
    let built = commcheck_report::Report::build(
        &results,
        must_pass,
        &commcheck_report::Expectations::none(),
        environment(),
    );
    assert_eq!(problems(&json(&built)), Vec::<String>::new());
    // A pass that never ran is rejected.
    let text = json(&report(&standard(Verdict::Pass)));
    let tampered = edit(&text, |v| {
        case_mut(v, "SUM-1::all_reduce_sum")["attempts"] = 0.into()
    });
    assert_mentions(
        &problems(&tampered),
        &[
            "case SUM-1::all_reduce_sum",
            "zero attempts for verdict `pass`",
        ],
    );
}

#[test]
fn failing_invariants_carry_their_text_and_verify_checks_it() {
    let text = json(&report(&standard(Verdict::Fail)));
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let recorded = value["invariants"]["RET-1"].as_str().unwrap_or_default();
    let kit = commcheck::spec::invariant("RET-1").map_or("", |i| i.text);
    assert!(!kit.is_empty() && recorded == kit, "{recorded:?}");
    assert_eq!(value["invariants"].as_object().map(|o| o.len()), Some(1));
    // A passing report lists none.
    let passing: Value =
        serde_json::from_str(&json(&report(&standard(Verdict::Pass)))).unwrap_or(Value::Null);
    assert!(passing.get("invariants").is_none());
    // An altered text, a missing one and an extra one are each named.
    let altered = edit(&text, |v| v["invariants"]["RET-1"] = "anything goes".into());
    assert_mentions(
        &problems(&altered),
        &["invariants.RET-1", "differs from the kit's"],
    );
    let missing = edit(&text, |v| {
        v.as_object_mut().map(|o| o.remove("invariants"));
    });
    assert_mentions(&problems(&missing), &["invariants: no text for RET-1"]);
    let extra = edit(&text, |v| v["invariants"]["SUM-1"] = "x".into());
    assert_mentions(&problems(&extra), &["invariants.SUM-1", "no case fails it"]);
}

/// Nothing seen is lost: a violation a case recorded for another invariant
/// keeps the report at level `none` unless a case of that invariant failed;
/// the summary marks it; a failing case of that invariant resolves it.
#[test]
fn an_attributed_violation_that_fails_no_case_blocks_certification() {
    use commcheck::Attributed;
    use commcheck_report::{unresolved_attributions, Expectations};
    let seen = Attributed {
        invariant: "CAN-5".to_owned(),
        message: "all_reduce_sum: teardown unfinished, seen while checking SUM-1".to_owned(),
    };
    let with_attribution = |can_verdict: Verdict| {
        let verdicts = [
            ("RET-6", Subject::Submit, Verdict::Pass),
            ("SUM-1", SUM, Verdict::Pass),
            ("CAN-5", SUM, can_verdict),
        ];
        let mut results = results(&verdicts);
        results.cases[1].attributed.push(seen.clone());
        let must_pass = verdicts
            .iter()
            .map(|(id, s, _)| format!("{id}::{s}"))
            .collect();
        commcheck_report::Report::build(&results, must_pass, &Expectations::none(), environment())
    };
    let lost = with_attribution(Verdict::Pass);
    assert_eq!(lost.level, Level::None);
    assert_eq!(unresolved_attributions(&lost.cases).len(), 1);
    let text = json(&lost);
    assert!(problems(&text).is_empty(), "{:?}", problems(&text));
    let summary = commcheck_report::markdown::render(&lost);
    assert!(summary.contains("blocks certification"), "{summary}");
    // Claiming a level the attribution blocks is named by verify.
    let claimed = edit(&text, |v| v["level"] = "full".into());
    assert_mentions(&problems(&claimed), &["level:", "`full`", "`none`"]);
    // A failing case of the attributed invariant resolves it.
    let resolved = with_attribution(Verdict::Fail);
    assert!(unresolved_attributions(&resolved.cases).is_empty());
    assert_eq!(resolved.level, Level::Core);
}
