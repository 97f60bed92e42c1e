//! Reading input files: reports, expectations files, keys and signatures.
//!
//! Every file the crate reads goes through [`read_bounded`] (bytes) or
//! [`read_text`] (UTF-8 text): at most [`MAX_INPUT_BYTES`] (a larger file is
//! refused before it is read), never a folder; each refusal of
//! [`read_text`] starts `<path>: cannot read:` and says why. This is the
//! bottom layer of the crate: it knows files, not reports. Its items are
//! re-exported from [`crate::verify`], where they have always been.

use std::io::Read as _;
use std::path::Path;

/// The largest file [`read_text`] (so [`crate::verify_file`],
/// [`crate::load_file`] and [`crate::Expectations::load`]) reads: 64 MiB.
/// The bundled backends' reports are well under 1 MiB; a larger file is
/// refused before it is read.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Reads the file at `path`, at most [`MAX_INPUT_BYTES`] long: a folder, or
/// a file over the limit (refused from its size before it is read; a file
/// that grows while read is cut off at the limit and refused too), is an
/// [`std::io::ErrorKind::InvalidInput`] error saying so. Signature and key
/// files are read through it too.
pub fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    let refused = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
    let file = std::fs::File::open(path)?;
    let metadata = file.metadata()?;
    if metadata.is_dir() {
        return Err(refused("it is a folder, not a file".to_owned()));
    }
    let limit = format!(
        "the limit of {MAX_INPUT_BYTES} bytes ({} MiB) for an input file",
        MAX_INPUT_BYTES / (1024 * 1024)
    );
    if metadata.len() > MAX_INPUT_BYTES {
        return Err(refused(format!("{} bytes, over {limit}", metadata.len())));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        // Its size said less (a device, a file still being written).
        return Err(refused(format!("longer than {limit}")));
    }
    Ok(bytes)
}

/// Reads the UTF-8 text file at `path` through [`read_bounded`].
///
/// Every error starts `<path>: cannot read:` and says why: the OS error
/// (missing, permission denied), a folder, a file over the limit, or bytes
/// that are not UTF-8 (with the offset, line and column of the first one). A
/// leading byte-order mark is kept: the parsers ignore it.
pub fn read_text(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let cannot = |why: String| format!("{shown}: cannot read: {why}");
    let bytes = read_bounded(path).map_err(|error| cannot(error.to_string()))?;
    String::from_utf8(bytes).map_err(|error| {
        let at = error.utf8_error().valid_up_to();
        let bytes = error.as_bytes();
        let (line, column) = line_column(&bytes[..at]);
        let found = bytes.get(at).map_or(String::new(), |b| format!(" 0x{b:02x}"));
        cannot(format!(
            "not UTF-8 text: invalid byte{found} at byte offset {at} (line {line}, column {column}); \
             expected UTF-8 text"
        ))
    })
}

/// 1-based line and column (in characters) just after `before`.
fn line_column(before: &[u8]) -> (usize, usize) {
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |newline| newline + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    (line, column)
}
