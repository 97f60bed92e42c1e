//! Through the binary: malformed, unreadable and oversized reports,
//! hostile expectations files and invariant IDs get the exit status the
//! help documents (0 ok, 1 rejected, 2 unreadable or usage), never a panic
//! or a signal, and each refusal names the file.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use proptest::prelude::*;

use crate::mutations::{insert_after, nested_arrays, with_raw_member};
use crate::{config, sparse, tempdir, valid_text, write, BOM, PROBLEM_BYTES};

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
