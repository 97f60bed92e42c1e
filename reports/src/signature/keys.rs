//! Keys: loading a minisign secret or public key file (checked so that a
//! damaged, encrypted or mixed-up key is named as such) and generating a
//! new key pair.

use std::fmt;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use super::error::{KeyId, KeyKind, SignatureError};
use super::files::{write_file, Visibility};
use super::format::{key_bytes, CHECKSUM_BYTES, SECRET_KEY_BYTES, UNTRUSTED_PREFIX};

/// The untrusted comment of the secret key files [`generate_keys`] writes.
pub const SECRET_KEY_COMMENT: &str =
    "commcheck-report secret key, unencrypted: keep it secret (a CI secret), never commit it";

/// A secret key that signs reports. Its `Debug` form shows the key ID only.
#[derive(Clone)]
pub struct SecretKey {
    pub(super) key: minisign::SecretKey,
    pub(super) public: minisign::PublicKey,
    pub(super) id: KeyId,
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
    pub(super) key: minisign::PublicKey,
    pub(super) id: KeyId,
    pub(super) path: PathBuf,
}

/// The bytes of the `kind` key file at `path`.
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
