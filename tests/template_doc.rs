//! The backend template's test file (`templates/backend/tests/commcheck.rs`)
//! is the crate docs' minimal harness, line for line: the docs show what the
//! template runs, and `templates/check.sh` (run by `.ci/run`) runs it under
//! `cargo test`, nextest and `commcheck-report`. Regenerate the template's
//! copy with `COMMCHECK_BLESS=1 cargo test --test template_doc`.

use std::path::PathBuf;

/// The crate docs' example that starts with `// tests/commcheck.rs`, without
/// its `//! ` prefixes.
fn docs_example() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("kit/src/lib.rs")).expect("read kit/src/lib.rs");
    let mut lines = lib
        .lines()
        .skip_while(|line| *line != "//! ```no_run")
        .skip(1)
        .take_while(|line| *line != "//! ```");
    let first = lines.next().unwrap_or_default();
    assert_eq!(
        first, "//! // tests/commcheck.rs",
        "the docs' minimal harness moved"
    );
    std::iter::once(first)
        .chain(lines)
        .map(|line| {
            line.strip_prefix("//! ")
                .or_else(|| line.strip_prefix("//!"))
                .unwrap_or(line)
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
fn the_template_harness_is_the_docs_minimal_harness() {
    let expected = docs_example();
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("templates/backend/tests/commcheck.rs");
    if std::env::var("COMMCHECK_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write the template's test file");
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        text == expected,
        "{} differs from the crate docs' minimal harness (kit/src/lib.rs); regenerate it with \
         `COMMCHECK_BLESS=1 cargo test --test template_doc` and review the diff",
        path.display()
    );
}
