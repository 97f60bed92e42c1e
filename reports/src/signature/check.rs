//! Checking a report's signature: by the right key, over these bytes, and
//! naming the report's digest; when it fails, saying what most likely
//! happened.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{KeyId, SignatureError};
use super::format::{comment_field, parse_signature, signature_path};
use super::keys::PublicKey;
use crate::canonical;

/// A signature that holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The signature file checked.
    pub signature: PathBuf,
    /// The key that made it.
    pub key_id: KeyId,
    /// Its trusted comment (signed too).
    pub trusted_comment: String,
}

/// Checks that the signature file `signature` (default: beside the report,
/// [`signature_path`]) is `key`'s signature of the exact bytes of the
/// report file `report`. The report's contents are not verified here: see
/// [`crate::verify()`].
pub fn verify_report(
    report: &Path,
    key: &PublicKey,
    signature: Option<&Path>,
) -> Result<Verified, SignatureError> {
    let bytes =
        crate::input::read_bounded(report).map_err(|source| SignatureError::ReadReport {
            path: report.to_owned(),
            source,
        })?;
    verify_report_bytes(&bytes, report, key, signature)
}

/// [`verify_report`] on the report's contents already read (`bytes`, read
/// from `report`): for a tool that checks the same bytes in other ways too.
pub fn verify_report_bytes(
    bytes: &[u8],
    report: &Path,
    key: &PublicKey,
    signature: Option<&Path>,
) -> Result<Verified, SignatureError> {
    let signature = signature.map_or_else(|| signature_path(report), Path::to_owned);
    let text = crate::input::read_bounded(&signature).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            SignatureError::SignatureMissing {
                path: signature.clone(),
            }
        } else {
            SignatureError::ReadSignature {
                path: signature.clone(),
                source,
            }
        }
    })?;
    check(bytes, report, &text, &signature, key)
}

/// Whether `signature_text`, read from `signature`, is `key`'s signature of
/// `bytes`, read from `report`.
fn check(
    bytes: &[u8],
    report: &Path,
    signature_text: &[u8],
    signature: &Path,
    key: &PublicKey,
) -> Result<Verified, SignatureError> {
    let parsed = parse_signature(signature_text, signature)?;
    if parsed.key_id != key.id {
        return Err(SignatureError::WrongKey {
            signature: signature.to_owned(),
            signed_with: parsed.key_id,
            key: key.path.clone(),
            key_id: key.id,
        });
    }
    let mismatch = |detail: String| SignatureError::Mismatch {
        report: report.to_owned(),
        signature: signature.to_owned(),
        detail,
    };
    minisign::verify(
        &key.key,
        &parsed.boxed,
        Cursor::new(bytes),
        true,
        false,
        false,
    )
    .map_err(|_| mismatch(explain_mismatch(bytes, &parsed.trusted_comment)))?;
    // Signed by the right key; the comment and the report must agree too.
    let recorded = serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|value| value.get("digest")?.as_str().map(str::to_owned));
    if let (Some(signed), Some(recorded)) =
        (comment_field(&parsed.trusted_comment, "digest"), recorded)
    {
        if signed != recorded {
            return Err(mismatch(format!(
                "the signed trusted comment names digest {signed}, but the report's digest is \
                 {recorded}"
            )));
        }
    }
    Ok(Verified {
        signature: signature.to_owned(),
        key_id: parsed.key_id,
        trusted_comment: parsed.trusted_comment,
    })
}

/// Why a signature by the right key does not fit `bytes`, as far as the
/// report and the (unauthenticated) trusted comment tell.
fn explain_mismatch(bytes: &[u8], trusted_comment: &str) -> String {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return "the report was altered after it was signed (it is not valid JSON any more), \
                or the signature belongs to another file"
            .into();
    };
    let recorded = value.get("digest").and_then(Value::as_str);
    let computed = canonical::report_digest(&value);
    let signed = comment_field(trusted_comment, "digest");
    match (recorded, signed) {
        (Some(recorded), _) if recorded != computed => {
            "the report was edited after it was signed (its contents no longer match its own \
             digest)"
                .into()
        }
        (Some(recorded), Some(signed)) if recorded != signed => format!(
            "the signature names a report with digest {signed}, but this report's digest is \
             {recorded}: it is another report's signature, or this report was edited and its \
             digest recomputed"
        ),
        (Some(_), Some(_)) => "the report's bytes were changed where its digest does not look \
             (layout, or a volatile field: times, attempts, the host, the calibration, the time \
             of writing), or the signature file was altered"
            .into(),
        _ => "the report was edited after it was signed, or the signature belongs to another \
              file"
            .into(),
    }
}
