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

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use commcheck::Verdict;
use commcheck_report::verify::{read_text, MAX_INPUT_BYTES};
use commcheck_report::{
    diff, load, load_file, markdown, verify, verify_file, Expectations, Report,
};
use common::*;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

const BOM: &str = "\u{feff}";

/// A valid report with a failing class-I case (level core).
fn valid_report() -> Report {
    report(&standard(Verdict::Fail))
}

/// [`valid_report`] as its JSON text.
fn valid_text() -> String {
    json(&valid_report())
}

/// A valid expectations file (one waiver).
const VALID_TOML: &str = "\
[[waiver]]
invariant = \"CAN-2\"
subject = \"all_reduce_sum\"
reason = \"deadline overshoot under load\"
link = \"https://tracker.example/issues/12\"
";

/// Longest message a problem may be: long values are quoted shortened.
const PROBLEM_BYTES: usize = 4096;

#[track_caller]
fn assert_precise(problem: &str) {
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
fn exercise(text: &str) -> Result<Report, Vec<String>> {
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
// Structural mutations of a valid report.

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// The path of every member and element of `value`.
fn paths(value: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    let children: Vec<(Step, &Value)> = match value {
        Value::Object(members) => members
            .iter()
            .map(|(k, v)| (Step::Key(k.clone()), v))
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (Step::Index(i), v))
            .collect(),
        _ => Vec::new(),
    };
    for (step, child) in children {
        prefix.push(step);
        out.push(prefix.clone());
        paths(child, prefix, out);
        prefix.pop();
    }
}

fn node_mut<'v>(value: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |value, step| match step {
        Step::Key(key) => value.get_mut(key.as_str()),
        Step::Index(index) => value.get_mut(*index),
    })
}

/// A marker string replaced by a raw JSON token after serialising.
const RAW_MARK: &str = "\u{2}raw\u{2}";
/// Keys replaced by the key of the duplicated member after serialising:
/// the first sorts before every report key, the second after.
const DUP_FIRST: &str = "\u{1}dup";
const DUP_LAST: &str = "\u{7f}dup";

#[derive(Debug, Clone)]
enum Mutation {
    /// Remove the member or element.
    Delete,
    /// Replace it with another JSON value (often of the wrong type).
    Replace(Value),
    /// Replace it with a raw token (huge numbers, NaN, invalid escapes…).
    Raw(&'static str),
    /// A member named twice: the copy before or after the original, with
    /// the original's value (`None`) or another one.
    Duplicate { first: bool, value: Option<Value> },
}

fn nested_arrays_value(depth: usize) -> Value {
    (0..depth).fold(Value::Null, |inner, _| Value::Array(vec![inner]))
}

fn replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::from(0)),
        Just(Value::from(-1)),
        Just(Value::from(u64::MAX)),
        Just(Value::from(i64::MIN)),
        Just(Value::from(u64::from(u32::MAX) + 1)),
        Just(Value::from(1.5)),
        Just(Value::from(1e308)),
        Just(Value::from(-1e308)),
        Just(Value::from("NaN")),
        Just(Value::from("Infinity")),
        Just(Value::from("-inf")),
        Just(Value::from("1e999")),
        Just(Value::from("")),
        Just(Value::from("x".repeat(5000))),
        Just(Value::from("\u{0}\u{1f}\u{7f}\u{feff}\u{fffd}é𝄞 | <b>`")),
        Just(Value::Array(Vec::new())),
        Just(serde_json::json!({})),
        Just(serde_json::json!([1, "two", null])),
        Just(serde_json::json!({"a": 1, "operation": "all_reduce_sum"})),
        Just(nested_arrays_value(100)),
        any::<String>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::Delete),
        replacement().prop_map(Mutation::Replace),
        prop::sample::select(vec![
            "NaN",
            "Infinity",
            "-Infinity",
            "1e400",
            "-1e400",
            "18446744073709551616",
            "-9223372036854775809",
            "123456789012345678901234567890123456789",
            "1e-400",
            "01",
            "-",
            "+1",
            ".5",
            "1.",
            "1e",
            "0x10",
            "\"\\ud800\"",
            "\"\\u0000\"",
            "\"\\x41\"",
            "tru",
            "nul",
            "undefined",
            "[1,]",
            "{\"a\":1,}",
            "\"a\" \"b\"",
        ])
        .prop_map(Mutation::Raw),
        (any::<bool>(), prop::option::of(replacement()))
            .prop_map(|(first, value)| Mutation::Duplicate { first, value }),
    ]
}

/// The valid report's JSON with `mutation` applied at `path`.
fn mutate(path: &[Step], mutation: &Mutation) -> String {
    let mut value: Value = serde_json::from_str(&valid_text()).expect("a report is JSON");
    let (parent_path, last) = path.split_at(path.len() - 1);
    let mut raw = None;
    let mut duplicated = None;
    match mutation {
        Mutation::Delete => match (node_mut(&mut value, parent_path), &last[0]) {
            (Some(Value::Object(members)), Step::Key(key)) => {
                members.remove(key);
            }
            (Some(Value::Array(items)), Step::Index(index)) => {
                items.remove(*index);
            }
            _ => {}
        },
        Mutation::Replace(new) => {
            if let Some(node) = node_mut(&mut value, path) {
                *node = new.clone();
            }
        }
        Mutation::Raw(token) => {
            if let Some(node) = node_mut(&mut value, path) {
                *node = Value::from(RAW_MARK);
                raw = Some(*token);
            }
        }
        Mutation::Duplicate { first, value: copy } => {
            let original = node_mut(&mut value, path).map(|node| node.clone());
            let copy = copy.clone().or(original).unwrap_or(Value::Null);
            match (node_mut(&mut value, parent_path), &last[0]) {
                (Some(Value::Object(members)), Step::Key(key)) => {
                    let mark = if *first { DUP_FIRST } else { DUP_LAST };
                    members.insert(mark.to_owned(), copy);
                    duplicated = Some((mark, key.clone()));
                }
                (Some(Value::Array(items)), Step::Index(index)) => {
                    items.insert(*index, copy);
                }
                _ => {}
            }
        }
    }
    let mut text = serde_json::to_string_pretty(&value).expect("JSON");
    if let Some(token) = raw {
        text = text.replace(&serde_json::to_string(RAW_MARK).expect("JSON"), token);
    }
    if let Some((mark, key)) = duplicated {
        text = text.replace(
            &serde_json::to_string(mark).expect("JSON"),
            &serde_json::to_string(&key).expect("JSON"),
        );
    }
    text
}

fn all_paths() -> Vec<Vec<Step>> {
    let value: Value = serde_json::from_str(&valid_text()).expect("a report is JSON");
    let mut out = Vec::new();
    paths(&value, &mut Vec::new(), &mut out);
    out
}

// ---------------------------------------------------------------------------
// Files and the binary.

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a test file");
    path
}

/// A sparse file of `len` zero bytes (no disk space, no time).
fn sparse(dir: &Path, name: &str, len: u64) -> PathBuf {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).expect("create a sparse file");
    file.set_len(len).expect("size a sparse file");
    path
}

/// Runs the binary: its exit status (never a signal, never 101), stdout
/// and stderr.
#[track_caller]
fn cli<S: AsRef<OsStr>>(args: &[S]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_commcheck-report"))
        .args(args)
        .output()
        .expect("run commcheck-report");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let shown: Vec<String> = args
        .iter()
        .map(|a| {
            let a = a.as_ref().to_string_lossy();
            a.chars().take(80).collect()
        })
        .collect();
    let Some(code) = output.status.code() else {
        panic!(
            "{shown:?}: killed by a signal ({:?}); stderr: {stderr}",
            output.status
        );
    };
    assert_ne!(code, 101, "{shown:?} panicked: {stderr}");
    assert!(
        matches!(code, 0..=2),
        "{shown:?}: undocumented exit status {code}: {stderr}"
    );
    (code, stdout, stderr)
}

/// `verify`, `summary` and `diff` (both sides) of the file at `path`:
/// `verify` exits `verify_code`, the others 2 (they do not verify, but
/// cannot show what is not a report), and each refusal names the file.
#[track_caller]
fn cli_refuses(path: &Path, valid: &Path, verify_code: i32, why: &str) {
    let shown = path.display().to_string();
    let (code, _, err) = cli(&[OsStr::new("verify"), path.as_os_str()]);
    assert_eq!(code, verify_code, "verify {shown} ({why}): {err}");
    assert!(err.contains(&shown), "verify {shown} ({why}): {err}");
    let (code, _, err) = cli(&[OsStr::new("summary"), path.as_os_str()]);
    assert_eq!(code, 2, "summary {shown} ({why}): {err}");
    assert!(err.contains(&shown), "summary ({why}): {err}");
    for args in [
        [OsStr::new("diff"), path.as_os_str(), valid.as_os_str()],
        [OsStr::new("diff"), valid.as_os_str(), path.as_os_str()],
    ] {
        let (code, _, err) = cli(&args);
        assert_eq!(code, 2, "{args:?} ({why}): {err}");
        assert!(err.contains(&shown), "{args:?} ({why}): {err}");
        assert!(err.len() < PROBLEM_BYTES, "{args:?}: {} bytes", err.len());
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary folder")
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// Property tests: library.

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_are_refused_without_panicking(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let text = String::from_utf8_lossy(&bytes);
        prop_assert!(exercise(&text).is_err());
    }

    #[test]
    fn arbitrary_strings_are_refused_without_panicking(text in any::<String>()) {
        prop_assert!(exercise(&text).is_err());
    }

    #[test]
    fn json_like_text_is_refused_without_panicking(
        text in "\u{feff}?[\\[\\]{}\":,0-9a-z \\\\.eE+\\-]{0,300}",
    ) {
        prop_assert!(exercise(&text).is_err());
    }

    #[test]
    fn toml_like_text_never_panics(
        text in "\u{feff}?(\\[\\[waiver\\]\\]\n|[a-z]{1,9} ?= ?(\"[^\"\n]{0,12}\"|[0-9]{1,4}|\\[|\\{|true)\n|[\\[\\]{}=\".,# \na-z0-9\\-]{0,40})*",
    ) {
        match Expectations::parse(&text, "fuzz.toml") {
            Ok(parsed) => {
                for entry in parsed.entries() {
                    prop_assert!(!entry.reason.trim().is_empty() && !entry.link.trim().is_empty());
                }
            }
            Err(error) => {
                prop_assert!(!error.problems.is_empty());
                for problem in &error.problems {
                    prop_assert!(problem.starts_with("fuzz.toml:"), "{}", problem);
                    assert_precise(problem);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_truncated_report_is_refused(at in any::<Index>()) {
        let text = valid_text();
        let whole = text.trim_end().len();
        let end = at.index(whole);
        prop_assume!(text.is_char_boundary(end));
        let problems = exercise(&text[..end]).err();
        prop_assert!(problems.is_some(), "accepted a report cut at byte {}", end);
        prop_assert!(load(&text[..end]).is_err());
    }

    #[test]
    fn byte_flips_are_refused_unless_only_volatile_fields_changed(
        flips in prop::collection::vec((any::<Index>(), 1u8..=255), 1..4),
    ) {
        let text = valid_text();
        let mut bytes = text.into_bytes();
        let len = bytes.len();
        for (at, mask) in &flips {
            bytes[at.index(len)] ^= mask;
        }
        match String::from_utf8(bytes.clone()) {
            // `exercise` checks that an accepted report has the valid content.
            Ok(edited) => {
                let _ = exercise(&edited);
            }
            Err(_) => {
                // Not UTF-8: the file readers say so, naming the offset.
                let dir = tempdir();
                let path = write(dir.path(), "report.json", &bytes);
                let problems = verify_file(&path).err().unwrap_or_default();
                prop_assert!(
                    problems.len() == 1 && problems[0].contains("not UTF-8 text: invalid byte 0x"),
                    "{:?}", problems
                );
                let loaded = load_file(&path).err().unwrap_or_default();
                prop_assert!(loaded.contains("byte offset"), "{}", loaded);
                let expectations = Expectations::load(&path).err().map(|e| e.to_string());
                prop_assert!(
                    expectations.as_deref().is_some_and(|e| e.contains("not UTF-8")),
                    "{:?}", expectations
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn structural_mutations_are_refused_or_only_touch_volatile_fields(
        at in any::<Index>(),
        mutation in mutation(),
    ) {
        let paths = all_paths();
        let path = &paths[at.index(paths.len())];
        let text = mutate(path, &mutation);
        let verified = exercise(&text);
        if let Mutation::Duplicate { .. } = mutation {
            if let Some(Step::Key(key)) = path.last() {
                let problems = verified.err().unwrap_or_default();
                prop_assert!(
                    mentions(&problems, &["member `", "appears more than once"]),
                    "a duplicated `{}` at {:?} was not named: {:?}", key, path, problems
                );
                let loaded = load(&text).err().unwrap_or_default();
                prop_assert!(loaded.contains("appears more than once"), "{}", loaded);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Specific hostile inputs: library.

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

/// `text` with `member` inserted right after the first `anchor`.
fn insert_after(text: &str, anchor: &str, member: &str) -> String {
    let at = text.find(anchor).expect("anchor in the report") + anchor.len();
    format!("{}{member}{}", &text[..at], &text[at..])
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

/// `[` × depth then `]` × depth.
fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// `{"a":` × depth, `null`, `}` × depth.
fn nested_objects(depth: usize) -> String {
    format!("{}null{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

/// The valid report with the value of `member` of the first case (or of
/// the report, for `cases`) replaced by `raw` JSON.
fn with_raw_member(member: &str, raw: &str) -> String {
    let mut value: Value = serde_json::from_str(&valid_text()).expect("JSON");
    let slot = if member == "cases" || member == "provenance" {
        &mut value[member]
    } else {
        &mut value["cases"][0][member]
    };
    *slot = Value::from(RAW_MARK);
    serde_json::to_string_pretty(&value)
        .expect("JSON")
        .replace(&serde_json::to_string(RAW_MARK).expect("JSON"), raw)
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
fn oversized_files_are_refused_from_their_size() {
    let dir = tempdir();
    let limit = MAX_INPUT_BYTES;
    assert_eq!(limit, 64 * 1024 * 1024);
    let huge = sparse(dir.path(), "huge.json", 200 * 1024 * 1024);
    let over = sparse(dir.path(), "over.json", limit + 1);
    for (path, size) in [(&huge, "209715200 bytes"), (&over, "67108865 bytes")] {
        let expected = format!(
            "{}: cannot read: {size}, over the limit of 67108864 bytes (64 MiB) for an input file",
            path.display()
        );
        assert_eq!(read_text(path), Err(expected.clone()));
        assert_eq!(verify_file(path), Err(vec![expected.clone()]));
        assert_eq!(load_file(path), Err(expected.clone()));
        assert_eq!(
            Expectations::load(path).map_err(|e| e.problems),
            Err(vec![expected])
        );
    }
    // At the limit: read (and refused as JSON, not for its size).
    let at = sparse(dir.path(), "at.json", limit);
    assert_eq!(read_text(&at).map(|text| text.len() as u64), Ok(limit));
    assert_mentions(
        &verify_file(&at).err().unwrap_or_default(),
        &["not valid JSON: expected value at line 1 column 1"],
    );
    // A file whose size says nothing (a device): cut off past the limit.
    let zero = Path::new("/dev/zero");
    if zero.exists() {
        assert_eq!(
            read_text(zero),
            Err(
                "/dev/zero: cannot read: longer than the limit of 67108864 bytes (64 MiB) \
                 for an input file"
                    .to_owned()
            )
        );
    }
}

#[test]
fn unreadable_paths_are_named_with_the_reason() {
    let dir = tempdir();
    let folder = dir.path();
    let shown = folder.display();
    let expected = format!("{shown}: cannot read: it is a folder, not a file");
    assert_eq!(read_text(folder), Err(expected.clone()));
    assert_eq!(verify_file(folder), Err(vec![expected.clone()]));
    assert_eq!(load_file(folder), Err(expected.clone()));
    assert_eq!(
        Expectations::load(folder).map_err(|e| e.problems),
        Err(vec![expected])
    );
    let missing = folder.join("missing.json");
    let error = read_text(&missing).err().unwrap_or_default();
    assert!(
        error.starts_with(&format!("{}: cannot read: ", missing.display()))
            && error.contains("No such file"),
        "{error}"
    );
    assert!(verify_file(&missing).is_err() && load_file(&missing).is_err());
    assert!(Expectations::load(&missing).is_err());
    // Not UTF-8: the first bad byte, its offset, line and column.
    let latin1 = write(folder, "latin1.json", b"{\"format\":\n \"\xff\"}");
    assert_eq!(
        read_text(&latin1),
        Err(format!(
            "{}: cannot read: not UTF-8 text: invalid byte 0xff at byte offset 13 \
             (line 2, column 3); expected UTF-8 text",
            latin1.display()
        ))
    );
    for (name, bytes) in [
        ("surrogate.json", &b"[\"\xed\xa0\x80\"]"[..]),
        ("cut.json", b"{\"a\":\"\xc3"),
        ("overlong.toml", b"reason = \"\xc0\xaf\""),
    ] {
        let path = write(folder, name, bytes);
        let error = read_text(&path).err().unwrap_or_default();
        assert!(error.contains("not UTF-8 text: invalid byte 0x"), "{error}");
        assert!(Expectations::load(&path).is_err());
    }
    // An empty file is read; it is not a report, but it is an empty
    // expectations file (no waivers).
    let empty = write(folder, "empty", "");
    assert_eq!(read_text(&empty), Ok(String::new()));
    assert_mentions(
        &verify_file(&empty).err().unwrap_or_default(),
        &["the input is empty"],
    );
    assert!(load_file(&empty).is_err_and(|e| e.contains("the input is empty")));
    assert_eq!(Expectations::load(&empty), Ok(Expectations::none()));
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

// ---------------------------------------------------------------------------
// Through the binary.

#[test]
fn cli_malformed_reports_exit_1_for_verify_and_2_for_summary_and_diff() {
    let dir = tempdir();
    let text = valid_text();
    let valid = write(dir.path(), "valid.json", &text);
    let (code, out, err) = cli(&[OsStr::new("verify"), valid.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.json", Vec::new(), "the input is empty"),
        ("blank.json", b" \n".to_vec(), "only whitespace"),
        (
            "truncated.json",
            text.as_bytes()[..text.len() / 2].to_vec(),
            "truncated",
        ),
        ("null.json", b"null".to_vec(), "expected a JSON object"),
        (
            "garbage.json",
            b"\x00\x01 garbage".to_vec(),
            "not valid JSON",
        ),
        (
            "duplicate.json",
            insert_after(&text, "{", "\n  \"level\": \"full\",").into_bytes(),
            "member `level` appears more than once",
        ),
        (
            "deep.json",
            nested_arrays(100_000).into_bytes(),
            "recursion limit exceeded",
        ),
        (
            "wrong-type.json",
            with_raw_member("attempts", "\"NaN\"").into_bytes(),
            "at `attempts`",
        ),
        (
            "bom-twice.json",
            format!("{BOM}{BOM}{text}").into_bytes(),
            "byte-order mark",
        ),
    ];
    for (name, bytes, why) in cases {
        let path = write(dir.path(), name, &bytes);
        cli_refuses(&path, &valid, 1, why);
        let (_, _, err) = cli(&[OsStr::new("verify"), path.as_os_str()]);
        assert!(err.contains(why), "verify {name}: {err}");
        assert!(
            err.len() < PROBLEM_BYTES,
            "verify {name}: {} bytes",
            err.len()
        );
    }
    // A byte-order mark is accepted by every command.
    let bom = write(dir.path(), "bom.json", format!("{BOM}{text}"));
    for args in [
        vec![OsStr::new("verify"), bom.as_os_str()],
        vec![OsStr::new("summary"), bom.as_os_str()],
        vec![OsStr::new("diff"), bom.as_os_str(), valid.as_os_str()],
    ] {
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
}

#[test]
fn cli_unreadable_inputs_exit_2() {
    let dir = tempdir();
    let valid = write(dir.path(), "valid.json", valid_text());
    let missing = dir.path().join("missing.json");
    cli_refuses(&missing, &valid, 2, "missing");
    cli_refuses(dir.path(), &valid, 2, "a folder");
    let latin1 = write(dir.path(), "latin1.json", b"{\"format\": \"\xff\"}");
    cli_refuses(&latin1, &valid, 2, "not UTF-8");
    let (_, _, err) = cli(&[OsStr::new("summary"), latin1.as_os_str()]);
    assert!(
        err.contains("not UTF-8 text: invalid byte 0xff at byte offset 12"),
        "{err}"
    );
    // Oversized: summary and diff refuse from the size, naming the limit.
    let huge = sparse(dir.path(), "huge.json", 200 * 1024 * 1024);
    for args in [
        vec![OsStr::new("summary"), huge.as_os_str()],
        vec![OsStr::new("diff"), huge.as_os_str(), valid.as_os_str()],
        vec![OsStr::new("diff"), valid.as_os_str(), huge.as_os_str()],
    ] {
        let (code, _, err) = cli(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("209715200 bytes, over the limit of 67108864 bytes (64 MiB)"),
            "{args:?}: {err}"
        );
    }
    // `verify` of it: refused, never a crash (see the ignored test below for
    // the exact status).
    let (code, _, _) = cli(&[OsStr::new("verify"), huge.as_os_str()]);
    assert!(code == 1 || code == 2);
}

/// `verify` reads its report itself (it needs the exact bytes for
/// `--key`): it must read through `commcheck_report::verify::read_text` to
/// get the size limit (exit 2, the limit named, nothing read) and the
/// precise UTF-8 message.
#[test]
fn cli_verify_refuses_an_oversized_report_from_its_size() {
    let dir = tempdir();
    let huge = sparse(dir.path(), "huge.json", 200 * 1024 * 1024);
    let (code, _, err) = cli(&[OsStr::new("verify"), huge.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("209715200 bytes, over the limit of 67108864 bytes (64 MiB)"),
        "{err}"
    );
    let latin1 = write(dir.path(), "latin1.json", b"{\"format\": \"\xff\"}");
    let (code, _, err) = cli(&[OsStr::new("verify"), latin1.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("invalid byte 0xff at byte offset 12"), "{err}");
}

#[test]
fn cli_hostile_expectations_files_exit_2_before_any_run() {
    let dir = tempdir();
    let out = dir.path().join("out");
    let mut files: Vec<(PathBuf, &str)> = vec![
        (dir.path().join("missing.toml"), "cannot read"),
        (dir.path().to_path_buf(), "it is a folder"),
        (
            sparse(dir.path(), "huge.toml", 200 * 1024 * 1024),
            "over the limit of 67108864 bytes",
        ),
        (
            write(dir.path(), "latin1.toml", b"reason = \"\xff\""),
            "not UTF-8 text",
        ),
        (
            write(
                dir.path(),
                "dup.toml",
                "[[waiver]]\ninvariant = \"CAN-2\"\ninvariant = \"CAN-3\"\n",
            ),
            ":3: duplicate key",
        ),
        (
            write(
                dir.path(),
                "deep.toml",
                format!("waiver = {}\n", nested_arrays(100_000)),
            ),
            ":1:",
        ),
    ];
    files.push((
        write(
            dir.path(),
            "bom.toml",
            format!("{BOM}[[waiver]]\ninvariant = \"NOPE-1\"\nsubject = \"*\"\nreason = \"r\"\nlink = \"l\"\n"),
        ),
        ":2: waiver #1: field `invariant`: `NOPE-1` is not an invariant ID of INVARIANTS.md",
    ));
    for (path, why) in files {
        let (code, _, err) = cli(&[
            OsStr::new("certify"),
            OsStr::new("cpu"),
            OsStr::new("--out"),
            out.as_os_str(),
            OsStr::new("--expectations"),
            path.as_os_str(),
        ]);
        assert_eq!(code, 2, "{}: {err}", path.display());
        assert!(
            err.contains(why),
            "{}: `{why}` not in {err}",
            path.display()
        );
        assert!(err.len() < PROBLEM_BYTES, "{} bytes", err.len());
    }
    assert!(!out.join("report.json").exists(), "no run started");
}

#[test]
fn cli_explain_refuses_hostile_ids_with_exit_2() {
    let long = "A".repeat(100_000);
    for id in [
        "",
        "::",
        "CAN-",
        "-",
        "../",
        "../../etc/passwd",
        "CAN-5/../CAN-6",
        "ÇAN-5",
        "CAN-５",
        "CAN-5 ",
        " CAN-5",
        "CAN-5\n",
        "CAN-99999999999999999999",
        "CAN--5",
        "::CAN-5",
        "%s%n",
        "\u{202e}5-NAC",
        &long,
    ] {
        let (code, out, err) = cli(&["explain", id]);
        assert_eq!(code, 2, "explain {:.40?}: {out}{err:.300}", id);
        assert!(out.is_empty(), "explain {id:.40?} printed {out:.300}");
        assert!(
            err.contains("no invariant `"),
            "explain {id:.40?}: {err:.300}"
        );
    }
    // Case names, any case, are accepted: the ID before `::` counts.
    for id in [
        "CAN-5",
        "can-5",
        "CAN-5::all_reduce_sum",
        "CAN-5::",
        "CAN-5::../x",
    ] {
        let (code, out, err) = cli(&["explain", id]);
        assert_eq!(code, 0, "explain {id:?}: {err}");
        assert!(out.starts_with("CAN-5 (CAN, class I)"), "{out}");
    }
    // Not an ID at all: usage errors.
    let (code, _, err) = cli(&["explain"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = cli(&["explain", "CAN-5", "CAN-6"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = cli(&["explain", "--", "-x"]);
    assert_eq!(code, 2, "{err}");
    #[cfg(unix)]
    {
        use std::ffi::OsString;
        use std::os::unix::ffi::OsStringExt;
        let invalid = OsString::from_vec(b"CAN-\xff".to_vec());
        let (code, _, err) = cli(&[OsString::from("explain"), invalid]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("UTF-8"), "{err}");
    }
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn cli_arbitrary_files_are_refused_with_the_documented_status(
        bytes in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let dir = tempdir();
        let valid = write(dir.path(), "valid.json", valid_text());
        let path = write(dir.path(), "fuzz.json", &bytes);
        // Text that is not a report is rejected (1); bytes that are not
        // text cannot be read (2).
        let verify_code = if std::str::from_utf8(&bytes).is_ok() { 1 } else { 2 };
        cli_refuses(&path, &valid, verify_code, "arbitrary bytes");
    }

    #[test]
    fn cli_explain_of_arbitrary_ids_never_crashes(id in "[^\u{0}]{0,64}") {
        let (code, _, _) = cli(&["explain", id.as_str()]);
        prop_assert!(code == 0 || code == 2);
    }
}
