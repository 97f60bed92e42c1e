//! `INVARIANTS.md`, the vendors' reference of every invariant, is generated
//! from `commcheck::spec`, where the texts live once: this test keeps the two
//! equal. Regenerate with `COMMCHECK_BLESS=1 cargo test --test spec_doc`.
//! The README's table of settings is `commcheck::settings::TABLE`'s.

use std::path::PathBuf;

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("INVARIANTS.md")
}

#[test]
fn the_invariant_reference_is_generated_from_the_spec_module() {
    let expected = commcheck::spec::reference();
    let path = path();
    if std::env::var("COMMCHECK_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write INVARIANTS.md");
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        text == expected,
        "INVARIANTS.md differs from commcheck::spec::reference(); regenerate it with \
         `COMMCHECK_BLESS=1 cargo test --test spec_doc` and review the diff"
    );
}

/// The README shows the settings table of `commcheck::settings` as it is.
#[test]
fn the_readme_shows_the_settings_table() {
    let table = commcheck::settings::markdown_table();
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .expect("read README.md");
    assert!(
        readme.contains(&table),
        "README.md does not show commcheck::settings::markdown_table() as it is; paste:\n{table}"
    );
}
