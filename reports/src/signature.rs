//! Signed reports: who made a report, not only whether it is intact.
//!
//! A report's `digest` (see [`crate::canonical`]) is a checksum: it catches
//! accidental edits and truncation, but whoever edits a report can recompute
//! it. A signature proves that the holder of a secret key made the file.
//!
//! **Format.** Keys and signatures are [minisign]'s (Ed25519, the file
//! prehashed with BLAKE2b-512), so the reference `minisign` tool reads them
//! too: `minisign -V -p key.pub -m report.json` verifies a report signed
//! here, and a key pair made by `minisign -G -W` (no password) signs here.
//! - The public key file is minisign's: an `untrusted comment:` line and the
//!   Base64 of the algorithm (`Ed`), the 8-byte key ID and the 32-byte key.
//! - The secret key file is minisign's *unencrypted* secret key (no
//!   password, so CI can sign without a prompt). Anyone who has it can sign
//!   reports in your name: keep it out of the repository, in a CI secret,
//!   readable by its owner only ([`generate_keys`] writes it with mode 0600).
//! - The signature covers the exact bytes of `report.json` and is written
//!   beside it as `report.json.minisig` ([`signature_path`]). Its *trusted
//!   comment*, signed too, names what was signed (tab-separated
//!   `key:value` fields: `timestamp`, `file`, `backend`, `version`,
//!   `device`, `level`, `kit` and `digest`), so `minisign -V` shows it.
//!
//! [`generate_keys`] writes a key pair, [`sign_report`] signs a report file,
//! [`verify_report`] checks one against a public key. Every failure is a
//! [`SignatureError`] naming the file and the reason.
//!
//! [minisign]: https://jedisct1.github.io/minisign/

use std::fmt;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use ct_codecs::{Base64, Decoder};
use serde_json::Value;

use crate::canonical;

/// Appended to a report's file name to name its signature file.
pub const SIGNATURE_SUFFIX: &str = ".minisig";

/// The untrusted comment of the secret key files [`generate_keys`] writes.
pub const SECRET_KEY_COMMENT: &str =
    "commcheck-report secret key, unencrypted: keep it secret (a CI secret), never commit it";

/// Lines of a minisign signature file.
const SIGNATURE_LINES: usize = 4;
/// Bytes of a signature line once decoded: algorithm, key ID, Ed25519 signature.
const SIGNATURE_BYTES: usize = 2 + 8 + 64;
/// Bytes of the global signature (over the signature and the trusted comment).
const GLOBAL_SIGNATURE_BYTES: usize = 64;
/// Bytes of a public key once decoded: algorithm, key ID, Ed25519 key.
const PUBLIC_KEY_BYTES: usize = 2 + 8 + 32;
/// Bytes of a secret key once decoded: signature, KDF and checksum
/// algorithms, KDF salt and limits, key ID, Ed25519 key pair, checksum.
const SECRET_KEY_BYTES: usize = 2 + 2 + 2 + 32 + 8 + 8 + 8 + 64 + CHECKSUM_BYTES;
/// Bytes of a secret key's checksum (its last ones).
const CHECKSUM_BYTES: usize = 32;
const UNTRUSTED_PREFIX: &str = "untrusted comment: ";
const TRUSTED_PREFIX: &str = "trusted comment: ";
/// Characters kept of each trusted-comment value (backend names are free text).
const COMMENT_VALUE_CHARS: usize = 200;

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
    fn from_slice(bytes: &[u8]) -> Option<Self> {
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

/// Where a report's signature is written and looked for: its path with
/// [`SIGNATURE_SUFFIX`] appended (`report.json.minisig`).
pub fn signature_path(report: &Path) -> PathBuf {
    let mut path = report.as_os_str().to_owned();
    path.push(SIGNATURE_SUFFIX);
    PathBuf::from(path)
}

/// A secret key that signs reports. Its `Debug` form shows the key ID only.
#[derive(Clone)]
pub struct SecretKey {
    key: minisign::SecretKey,
    public: minisign::PublicKey,
    id: KeyId,
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A public key that verifies reports' signatures.
#[derive(Debug, Clone)]
pub struct PublicKey {
    key: minisign::PublicKey,
    id: KeyId,
    path: PathBuf,
}

/// The key line of a key file, decoded, after the checks every key file
/// gets (text, an untrusted comment, Base64, the size of `kind`).
fn key_bytes(text: &[u8], path: &Path, kind: KeyKind) -> Result<(String, Vec<u8>), SignatureError> {
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

fn read_key_file(path: &Path, kind: KeyKind) -> Result<Vec<u8>, SignatureError> {
    crate::input::read_bounded(path).map_err(|source| SignatureError::ReadKey {
        path: path.to_owned(),
        kind,
        source,
    })
}

impl SecretKey {
    /// Reads an unencrypted minisign secret key file.
    pub fn load(path: &Path) -> Result<Self, SignatureError> {
        Self::parse(&read_key_file(path, KeyKind::Secret)?, path)
    }

    /// Parses the contents of an unencrypted minisign secret key file read
    /// from `path` (named in errors).
    pub fn parse(text: &[u8], path: &Path) -> Result<Self, SignatureError> {
        let malformed = |detail: String| SignatureError::KeyMalformed {
            path: path.to_owned(),
            kind: KeyKind::Secret,
            detail,
        };
        let (line, bytes) = key_bytes(text, path, KeyKind::Secret)?;
        match &bytes[2..4] {
            [0, 0] => {}
            b"Sc" => {
                return Err(malformed(
                    "the key is encrypted with a password; commcheck-report signs with \
                     unencrypted keys so CI needs no prompt: make one with \
                     `commcheck-report keygen` (or `minisign -G -W`)"
                        .into(),
                ))
            }
            other => {
                return Err(malformed(format!(
                    "unknown key protection `{}` (expected none: an unencrypted key)",
                    String::from_utf8_lossy(other)
                )))
            }
        }
        if bytes[4..6] != *b"B2" {
            return Err(malformed(
                "unknown checksum algorithm (minisign keys use `B2`, BLAKE2b)".into(),
            ));
        }
        // The reference tool's passwordless keys (`minisign -G -W`) carry
        // no checksum (all zeros); every other key's checksum is checked.
        let key = if bytes[SECRET_KEY_BYTES - CHECKSUM_BYTES..]
            .iter()
            .all(|&byte| byte == 0)
        {
            minisign::SecretKey::from_bytes(&bytes).map_err(|e| malformed(e.to_string()))?
        } else {
            let boxed =
                minisign::SecretKeyBox::from_string(&format!("{UNTRUSTED_PREFIX}\n{line}\n"))
                    .map_err(|error| malformed(error.to_string()))?;
            minisign::SecretKey::from_unencrypted_box(boxed).map_err(|error| {
                malformed(format!(
                    "{error}: the key's checksum does not match its contents (a damaged key file)"
                ))
            })?
        };
        let public =
            minisign::PublicKey::from_secret_key(&key).map_err(|e| malformed(e.to_string()))?;
        // The secret half must make signatures the public half accepts
        // (`sign` checks its signature with `public`).
        minisign::sign(
            Some(&public),
            &key,
            Cursor::new(b""),
            Some("self-test"),
            None,
        )
        .map_err(|_| {
            malformed("its secret and public halves do not match (a damaged key file)".into())
        })?;
        let id = KeyId::from_slice(key.keynum())
            .ok_or_else(|| malformed("the key ID is not 8 bytes".into()))?;
        Ok(Self { key, public, id })
    }

    /// The key's ID (the one its signatures and public key carry).
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// The minisign public key file of this key (what `keygen` writes).
    pub fn public_key_file(&self) -> Result<String, SignatureError> {
        self.public
            .to_box()
            .map(minisign::PublicKeyBox::into_string)
            .map_err(|error| SignatureError::Crypto {
                action: "write the public key".into(),
                detail: error.to_string(),
            })
    }
}

impl PublicKey {
    /// Reads a minisign public key file.
    pub fn load(path: &Path) -> Result<Self, SignatureError> {
        Self::parse(&read_key_file(path, KeyKind::Public)?, path)
    }

    /// Parses the contents of a minisign public key file read from `path`
    /// (named in errors).
    pub fn parse(text: &[u8], path: &Path) -> Result<Self, SignatureError> {
        let (_, bytes) = key_bytes(text, path, KeyKind::Public)?;
        let malformed = |detail: String| SignatureError::KeyMalformed {
            path: path.to_owned(),
            kind: KeyKind::Public,
            detail,
        };
        let key = minisign::PublicKey::from_bytes(&bytes).map_err(|e| malformed(e.to_string()))?;
        let id = KeyId::from_slice(key.keynum())
            .ok_or_else(|| malformed("the key ID is not 8 bytes".into()))?;
        Ok(Self {
            key,
            id,
            path: path.to_owned(),
        })
    }

    /// The key's ID.
    pub fn id(&self) -> KeyId {
        self.id
    }
}

/// Generates a key pair and writes the unencrypted secret key to `secret`
/// (mode 0600 on Unix) and the public key to `public`, both in minisign's
/// format. Refuses to replace an existing file unless `overwrite`. Returns
/// the new key's ID.
pub fn generate_keys(
    secret: &Path,
    public: &Path,
    overwrite: bool,
) -> Result<KeyId, SignatureError> {
    let same = secret == public
        || matches!(
            (secret.canonicalize(), public.canonicalize()),
            (Ok(a), Ok(b)) if a == b
        );
    if same {
        return Err(SignatureError::SameKeyFile {
            path: public.to_owned(),
        });
    }
    if !overwrite {
        for path in [secret, public] {
            if path.symlink_metadata().is_ok() {
                return Err(SignatureError::KeyExists {
                    path: path.to_owned(),
                });
            }
        }
    }
    let crypto = |error: minisign::PError| SignatureError::Crypto {
        action: "generate a key pair".into(),
        detail: error.to_string(),
    };
    let pair = minisign::KeyPair::generate_unencrypted_keypair().map_err(crypto)?;
    let secret_text = pair
        .sk
        .to_box(Some(SECRET_KEY_COMMENT))
        .map_err(crypto)?
        .into_string();
    let public_text = pair.pk.to_box().map_err(crypto)?.into_string();
    let id = KeyId::from_slice(pair.pk.keynum()).ok_or_else(|| SignatureError::Crypto {
        action: "generate a key pair".into(),
        detail: "the key ID is not 8 bytes".into(),
    })?;
    write_file(
        secret,
        secret_text.as_bytes(),
        overwrite,
        Visibility::Private,
    )?;
    if let Err(error) = write_file(
        public,
        public_text.as_bytes(),
        overwrite,
        Visibility::Public,
    ) {
        // No secret key without its public half.
        let _ = std::fs::remove_file(secret);
        return Err(error);
    }
    Ok(id)
}

/// Who may read a file written by [`write_file`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Visibility {
    /// The owner only (mode 0600).
    Private,
    /// Everyone (mode 0644).
    Public,
}

/// Writes `bytes` to `path` through a temporary file in the same folder and
/// a rename, so `path` is never half-written; without `overwrite`, an
/// existing `path` is left alone ([`SignatureError::KeyExists`]).
fn write_file(
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

/// The trusted comment of `fields`: tab-separated `key:value` pairs (as
/// minisign's own `timestamp:…\tfile:…`), each value on one line, without
/// tabs and cut to [`COMMENT_VALUE_CHARS`] characters.
fn trusted_comment(fields: &[(&str, &str)]) -> String {
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

/// The value of `key` in a trusted comment written by [`sign_bytes`].
pub fn comment_field<'a>(comment: &'a str, key: &str) -> Option<&'a str> {
    comment
        .split('\t')
        .find_map(|field| field.strip_prefix(key)?.strip_prefix(':'))
}

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

/// What a signature file says, checked for shape.
struct ParsedSignature {
    boxed: minisign::SignatureBox,
    key_id: KeyId,
    trusted_comment: String,
}

/// Checks the shape of a signature file (so a damaged one is named as such
/// and never reaches the signature code), then parses it.
fn parse_signature(bytes: &[u8], path: &Path) -> Result<ParsedSignature, SignatureError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_ids_print_as_minisign_does() {
        let id = KeyId([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]);
        assert_eq!(id.to_string(), "0807060504030201");
    }

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
