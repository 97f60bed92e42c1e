//! Signing a report: the exact bytes of `report.json`, with a trusted
//! comment naming what was signed.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use super::error::{KeyId, SignatureError};
use super::files::{write_file, Visibility};
use super::format::{signature_path, trusted_comment};
use super::keys::SecretKey;

/// What [`sign_report`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The signature file.
    pub signature: PathBuf,
    /// The ID of the key that signed.
    pub key_id: KeyId,
    /// The signed trusted comment.
    pub trusted_comment: String,
}

/// Signs the report file `report` with `key` and writes the signature
/// beside it ([`signature_path`]); see [`sign_report_to`].
pub fn sign_report(report: &Path, key: &SecretKey) -> Result<Signed, SignatureError> {
    sign_report_to(report, key, &signature_path(report))
}

/// Signs the exact bytes of the report file `report` with `key` and writes
/// the minisign signature to `signature` (replacing it). The file must be a
/// commcheck report (it is parsed, not verified) so the trusted comment can
/// name its backend, level and digest.
pub fn sign_report_to(
    report: &Path,
    key: &SecretKey,
    signature: &Path,
) -> Result<Signed, SignatureError> {
    let bytes =
        crate::input::read_bounded(report).map_err(|source| SignatureError::ReadReport {
            path: report.to_owned(),
            source,
        })?;
    let (text, trusted_comment) = sign_bytes(&bytes, report, key)?;
    write_file(signature, text.as_bytes(), true, Visibility::Public)?;
    Ok(Signed {
        signature: signature.to_owned(),
        key_id: key.id,
        trusted_comment,
    })
}

/// Signs `bytes`, the contents of the report file `report` (its file name
/// goes into the trusted comment): the text of the minisign signature file
/// and its trusted comment. For tools that write the signature themselves.
pub fn sign_bytes(
    bytes: &[u8],
    report: &Path,
    key: &SecretKey,
) -> Result<(String, String), SignatureError> {
    let not_a_report = |reason: String| SignatureError::NotAReport {
        path: report.to_owned(),
        reason,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| not_a_report("not UTF-8 text".into()))?;
    let parsed = crate::load(text).map_err(not_a_report)?;
    let file = report.file_name().map_or_else(
        || report.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let backend = &parsed.provenance.backend;
    let comment = trusted_comment(&[
        ("timestamp", &timestamp.to_string()),
        ("file", &file),
        ("backend", &backend.name),
        ("version", &backend.version),
        ("device", &backend.device),
        ("level", &parsed.outcome()),
        ("kit", &parsed.provenance.kit_version),
        ("digest", &parsed.digest),
    ]);
    let untrusted = format!("signature from commcheck-report secret key {}", key.id);
    let signature = minisign::sign(
        Some(&key.public),
        &key.key,
        Cursor::new(bytes),
        Some(&comment),
        Some(&untrusted),
    )
    .map_err(|error| SignatureError::Crypto {
        action: format!("sign {}", report.display()),
        detail: error.to_string(),
    })?;
    Ok((signature.into_string(), comment))
}
