//! Files, as library calls: oversized files are refused from their size,
//! unreadable paths (missing, a folder, not UTF-8) are named with the
//! reason, and an empty file is read.

use std::path::Path;

use commcheck_report::verify::{read_text, MAX_INPUT_BYTES};
use commcheck_report::{load_file, verify_file, Expectations};

use crate::common::assert_mentions;
use crate::{sparse, tempdir, write};

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
