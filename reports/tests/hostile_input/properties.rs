//! Property tests, as library calls: arbitrary bytes and strings,
//! JSON-like and TOML-like text, truncated reports, byte flips and
//! structural mutations are refused (or only touch volatile fields),
//! without panicking.

use commcheck_report::{load, load_file, verify_file, Expectations};
use proptest::prelude::*;
use proptest::sample::Index;

use crate::common::mentions;
use crate::mutations::{all_paths, mutate, mutation, Mutation, Step};
use crate::{assert_precise, config, exercise, tempdir, valid_text, write};

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
