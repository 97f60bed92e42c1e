//! One line on stderr in one `write`: the processes of a launch share their
//! stderr, and `eprintln!` writes a formatted line in pieces, so two
//! processes' lines could interleave mid-line.

use std::io::Write;

/// Writes `line` and a newline to stderr with a single `write` (a pipe
/// keeps writes of up to 4 KiB whole).
pub(crate) fn say(line: impl std::fmt::Display) {
    let line = format!("{line}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
