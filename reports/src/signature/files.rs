//! Writing key and signature files: whole or not at all (a temporary file
//! and a rename), readable by their owner only or by everyone.

use std::io::Write;
use std::path::Path;

use super::error::SignatureError;

/// Who may read a file written by [`write_file`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Visibility {
    /// The owner only (mode 0600).
    Private,
    /// Everyone (mode 0644).
    Public,
}

/// Writes `bytes` to `path` through a temporary file in the same folder and
/// a rename, so `path` is never half-written; without `overwrite`, an
/// existing `path` is left alone ([`SignatureError::KeyExists`]).
pub(super) fn write_file(
    path: &Path,
    bytes: &[u8],
    overwrite: bool,
    visibility: Visibility,
) -> Result<(), SignatureError> {
    let failed = |source| SignatureError::Write {
        path: path.to_owned(),
        source,
    };
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // Created with mode 0600 on Unix.
    let mut file = tempfile::Builder::new()
        .prefix(".commcheck-report-")
        .tempfile_in(folder)
        .map_err(failed)?;
    file.write_all(bytes)
        .and_then(|()| file.as_file().sync_all())
        .map_err(failed)?;
    #[cfg(unix)]
    if visibility == Visibility::Public {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644))
            .map_err(failed)?;
    }
    #[cfg(not(unix))]
    let _ = visibility;
    let persisted = if overwrite {
        file.persist(path)
    } else {
        file.persist_noclobber(path)
    };
    persisted.map(drop).map_err(|error| {
        if error.error.kind() == std::io::ErrorKind::AlreadyExists {
            SignatureError::KeyExists {
                path: path.to_owned(),
            }
        } else {
            failed(error.error)
        }
    })
}
