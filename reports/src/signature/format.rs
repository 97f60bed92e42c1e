//! minisign's file format, as far as this module reads and writes it: the
//! sizes and line prefixes of key and signature files, the key line of a
//! key file, the shape of a signature file (checked before any signature
//! code sees it), trusted comments, and where a report's signature sits.

use std::path::{Path, PathBuf};

use ct_codecs::{Base64, Decoder};

use super::error::{KeyId, KeyKind, SignatureError};

/// Appended to a report's file name to name its signature file.
pub const SIGNATURE_SUFFIX: &str = ".minisig";

/// Lines of a minisign signature file.
pub(super) const SIGNATURE_LINES: usize = 4;
/// Bytes of a signature line once decoded: algorithm, key ID, Ed25519 signature.
pub(super) const SIGNATURE_BYTES: usize = 2 + 8 + 64;
/// Bytes of the global signature (over the signature and the trusted comment).
pub(super) const GLOBAL_SIGNATURE_BYTES: usize = 64;
/// Bytes of a public key once decoded: algorithm, key ID, Ed25519 key.
pub(super) const PUBLIC_KEY_BYTES: usize = 2 + 8 + 32;
/// Bytes of a secret key once decoded: signature, KDF and checksum
/// algorithms, KDF salt and limits, key ID, Ed25519 key pair, checksum.
pub(super) const SECRET_KEY_BYTES: usize = 2 + 2 + 2 + 32 + 8 + 8 + 8 + 64 + CHECKSUM_BYTES;
/// Bytes of a secret key's checksum (its last ones).
pub(super) const CHECKSUM_BYTES: usize = 32;
pub(super) const UNTRUSTED_PREFIX: &str = "untrusted comment: ";
pub(super) const TRUSTED_PREFIX: &str = "trusted comment: ";
/// Characters kept of each trusted-comment value (backend names are free text).
const COMMENT_VALUE_CHARS: usize = 200;

/// Where a report's signature is written and looked for: its path with
/// [`SIGNATURE_SUFFIX`] appended (`report.json.minisig`).
pub fn signature_path(report: &Path) -> PathBuf {
    let mut path = report.as_os_str().to_owned();
    path.push(SIGNATURE_SUFFIX);
    PathBuf::from(path)
}

/// The key line of a key file, decoded, after the checks every key file
/// gets (text, an untrusted comment, Base64, the size of `kind`).
pub(super) fn key_bytes(
    text: &[u8],
    path: &Path,
    kind: KeyKind,
) -> Result<(String, Vec<u8>), SignatureError> {
    let malformed = |detail: String| SignatureError::KeyMalformed {
        path: path.to_owned(),
        kind,
        detail,
    };
    let text = std::str::from_utf8(text).map_err(|_| {
        malformed("not a text file (minisign key files are two lines of text)".into())
    })?;
    let mut lines = text.lines();
    match lines.next() {
        Some(line) if line.starts_with(UNTRUSTED_PREFIX) => {}
        Some(_) => {
            return Err(malformed(format!(
                "line 1 should start with `{UNTRUSTED_PREFIX}` (a minisign key file)"
            )))
        }
        None => return Err(malformed("the file is empty".into())),
    }
    let line = lines
        .next()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .ok_or_else(|| malformed("no key on line 2 (the file is cut short)".into()))?;
    let bytes = Base64::decode_to_vec(line, None)
        .map_err(|_| malformed("line 2 (the key) is not Base64".into()))?;
    let (expected, other, hint) = match kind {
        KeyKind::Public => (
            PUBLIC_KEY_BYTES,
            SECRET_KEY_BYTES,
            "this is a secret key file: verify with the public key file (`.pub`) instead, \
             and keep the secret one secret",
        ),
        KeyKind::Secret => (
            SECRET_KEY_BYTES,
            PUBLIC_KEY_BYTES,
            "this is a public key file: sign with the secret key file instead",
        ),
    };
    if bytes.len() == other {
        return Err(malformed(hint.into()));
    }
    if bytes.len() != expected {
        return Err(malformed(format!(
            "line 2 decodes to {} bytes, expected {expected} (a minisign {kind})",
            bytes.len()
        )));
    }
    if bytes[..2] != *b"Ed" {
        return Err(malformed(format!(
            "unsupported signature algorithm `{}` (minisign keys use `Ed`, Ed25519)",
            String::from_utf8_lossy(&bytes[..2])
        )));
    }
    Ok((line.to_owned(), bytes))
}

/// The trusted comment of `fields`: tab-separated `key:value` pairs (as
/// minisign's own `timestamp:…\tfile:…`), each value on one line, without
/// tabs and cut to [`COMMENT_VALUE_CHARS`] characters.
pub(super) fn trusted_comment(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(key, value)| {
            let value: String = value
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .take(COMMENT_VALUE_CHARS)
                .collect();
            format!("{key}:{}", value.trim())
        })
        .collect::<Vec<_>>()
        .join("\t")
}

/// The value of `key` in a trusted comment written by
/// [`sign_bytes`](super::sign_bytes).
pub fn comment_field<'a>(comment: &'a str, key: &str) -> Option<&'a str> {
    comment
        .split('\t')
        .find_map(|field| field.strip_prefix(key)?.strip_prefix(':'))
}

/// What a signature file says, checked for shape.
pub(super) struct ParsedSignature {
    pub(super) boxed: minisign::SignatureBox,
    pub(super) key_id: KeyId,
    pub(super) trusted_comment: String,
}

/// Checks the shape of a signature file (so a damaged one is named as such
/// and never reaches the signature code), then parses it.
pub(super) fn parse_signature(
    bytes: &[u8],
    path: &Path,
) -> Result<ParsedSignature, SignatureError> {
    let truncated = |detail: String| SignatureError::SignatureTruncated {
        path: path.to_owned(),
        detail,
    };
    let malformed = |detail: String| SignatureError::SignatureMalformed {
        path: path.to_owned(),
        detail,
    };
    if bytes.is_empty() {
        return Err(truncated("the file is empty".into()));
    }
    let lossy = String::from_utf8_lossy(bytes);
    let count = lossy.lines().count();
    if count < SIGNATURE_LINES {
        return Err(truncated(format!(
            "it has {count} of the {SIGNATURE_LINES} lines of a minisign signature (untrusted \
             comment, signature, trusted comment, global signature)"
        )));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| malformed("not UTF-8 text".into()))?;
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    if !lines[0].starts_with(UNTRUSTED_PREFIX) {
        return Err(malformed(format!(
            "line 1 should start with `{UNTRUSTED_PREFIX}`"
        )));
    }
    let decode = |number: usize, what: &str, expected: usize, last: bool| {
        let decoded = Base64::decode_to_vec(lines[number - 1].trim(), None).ok();
        match decoded {
            Some(decoded) if decoded.len() == expected => Ok(decoded),
            // The last line without its newline: the file was cut there.
            _ if last && !complete => Err(truncated(format!(
                "line {number} ({what}) is cut short: the file does not end with a newline"
            ))),
            Some(decoded) => Err(malformed(format!(
                "line {number} ({what}) decodes to {} bytes, expected {expected}",
                decoded.len()
            ))),
            None => Err(malformed(format!("line {number} ({what}) is not Base64"))),
        }
    };
    let last = lines.len() == SIGNATURE_LINES;
    let signature = decode(2, "the signature", SIGNATURE_BYTES, false)?;
    match &signature[..2] {
        b"ED" => {}
        b"Ed" => {
            return Err(malformed(
                "a legacy signature (algorithm `Ed`: the file itself, not its BLAKE2b hash, \
                 was signed), which is not accepted: sign the report again"
                    .into(),
            ))
        }
        other => {
            return Err(malformed(format!(
                "unknown signature algorithm `{}` (expected `ED`, prehashed Ed25519)",
                String::from_utf8_lossy(other)
            )))
        }
    }
    let trusted_comment = lines[2]
        .strip_prefix(TRUSTED_PREFIX)
        .ok_or_else(|| malformed(format!("line 3 should start with `{TRUSTED_PREFIX}`")))?
        .trim()
        .to_owned();
    decode(4, "the global signature", GLOBAL_SIGNATURE_BYTES, last)?;
    let key_id = KeyId::from_slice(&signature[2..10])
        .ok_or_else(|| malformed("the key ID is not 8 bytes".into()))?;
    let boxed = minisign::SignatureBox::from_string(text).map_err(|e| malformed(e.to_string()))?;
    Ok(ParsedSignature {
        boxed,
        key_id,
        trusted_comment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_comments_keep_one_line_per_field() {
        let comment = trusted_comment(&[("backend", " odd\tname\n "), ("digest", "sha256:ab")]);
        assert_eq!(comment, "backend:odd name\tdigest:sha256:ab");
        assert_eq!(comment_field(&comment, "digest"), Some("sha256:ab"));
        assert_eq!(comment_field(&comment, "back"), None);
    }

    #[test]
    fn signature_files_sit_beside_the_report() {
        assert_eq!(
            signature_path(Path::new("out/report.json")),
            PathBuf::from("out/report.json.minisig")
        );
    }
}
