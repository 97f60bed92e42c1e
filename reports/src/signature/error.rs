//! What can go wrong with keys and signatures ([`SignatureError`]), and the
//! key kinds and key IDs its messages name.

use std::fmt;
use std::path::PathBuf;

/// Which key file a problem is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The secret key (signs).
    Secret,
    /// The public key (verifies).
    Public,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Secret => "secret key",
            Self::Public => "public key",
        })
    }
}

/// A minisign key ID: 8 bytes, shown as minisign shows it (16 uppercase hex
/// digits of the little-endian number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId([u8; 8]);

impl KeyId {
    /// The ID in `bytes`, when they are 8.
    pub(super) fn from_slice(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016X}", u64::from_le_bytes(self.0))
    }
}

/// Why a key pair could not be made, a report could not be signed, or a
/// report's signature was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The report file could not be read.
    #[error("{}: cannot read the report: {source}", path.display())]
    ReadReport {
        /// The report file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Asked to sign a file that is not a commcheck report.
    #[error("{}: not a commcheck report, so not signed: {reason}", path.display())]
    NotAReport {
        /// The file.
        path: PathBuf,
        /// Why it is not a report.
        reason: String,
    },
    /// There is no signature file.
    #[error(
        "{}: no signature file: expected the report's minisign signature there \
         (written by `certify --sign`)",
        path.display()
    )]
    SignatureMissing {
        /// Where the signature was expected.
        path: PathBuf,
    },
    /// The signature file exists but could not be read.
    #[error("{}: cannot read the signature file: {source}", path.display())]
    ReadSignature {
        /// The signature file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The signature file is cut short.
    #[error("{}: the signature file is truncated: {detail}", path.display())]
    SignatureTruncated {
        /// The signature file.
        path: PathBuf,
        /// What is missing.
        detail: String,
    },
    /// The signature file is not a minisign signature this verifier accepts.
    #[error("{}: malformed signature file: {detail}", path.display())]
    SignatureMalformed {
        /// The signature file.
        path: PathBuf,
        /// What is wrong, and where.
        detail: String,
    },
    /// A key file could not be read.
    #[error("{}: cannot read the {kind} file: {source}", path.display())]
    ReadKey {
        /// The key file.
        path: PathBuf,
        /// Which key it should be.
        kind: KeyKind,
        /// What the system said.
        source: std::io::Error,
    },
    /// A key file is not a minisign key of the expected kind.
    #[error("{}: malformed {kind} file: {detail}", path.display())]
    KeyMalformed {
        /// The key file.
        path: PathBuf,
        /// Which key it should be.
        kind: KeyKind,
        /// What is wrong, and where.
        detail: String,
    },
    /// The signature was made with another key than the public key given.
    #[error(
        "{}: wrong key: the signature was made with key {signed_with}, but {} is key {key_id}",
        signature.display(),
        key.display()
    )]
    WrongKey {
        /// The signature file.
        signature: PathBuf,
        /// The ID of the key that made the signature.
        signed_with: KeyId,
        /// The public key file.
        key: PathBuf,
        /// Its key ID.
        key_id: KeyId,
    },
    /// The signature, by the right key, is not one of these bytes.
    #[error(
        "{}: the signature does not match the report (checked against {}): {detail}",
        report.display(),
        signature.display()
    )]
    Mismatch {
        /// The report file.
        report: PathBuf,
        /// The signature file.
        signature: PathBuf,
        /// What most likely happened.
        detail: String,
    },
    /// `generate_keys` without `overwrite` found a file in the way.
    #[error("{}: already exists: not overwriting a key file", path.display())]
    KeyExists {
        /// The existing file.
        path: PathBuf,
    },
    /// The secret and the public key were to be written to one file.
    #[error(
        "{}: the secret and the public key need two different files",
        path.display()
    )]
    SameKeyFile {
        /// The path given for both.
        path: PathBuf,
    },
    /// A key or signature file could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The signing library failed (no randomness, an unusable key).
    #[error("cannot {action}: {detail}")]
    Crypto {
        /// What was being done: `generate a key pair` or `sign <file>`.
        action: String,
        /// What the signing library said.
        detail: String,
    },
}

impl SignatureError {
    /// Whether this rejects a report's signature (it is missing, damaged, by
    /// another key, or not the signature of these bytes), as opposed to a
    /// file that could not be read or written or a key file that is not a
    /// key: `commcheck-report verify` exits 1 for the former, 2 for the
    /// latter.
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            Self::SignatureMissing { .. }
                | Self::SignatureTruncated { .. }
                | Self::SignatureMalformed { .. }
                | Self::WrongKey { .. }
                | Self::Mismatch { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_ids_print_as_minisign_does() {
        let id = KeyId([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]);
        assert_eq!(id.to_string(), "0807060504030201");
    }
}
