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
//!
//! The files of this module, each above the ones it names: `error` (what
//! can go wrong, and the [`KeyKind`] and [`KeyId`] it names), `format`
//! (minisign's file format: key lines, signature files, trusted comments),
//! `files` (writing key and signature files), `keys` (loading and making
//! keys), `sign` (signing a report) and `check` (checking a signature).

mod check;
mod error;
mod files;
mod format;
mod keys;
mod sign;

pub use check::{verify_report, verify_report_bytes, Verified};
pub use error::{KeyId, KeyKind, SignatureError};
pub use format::{comment_field, signature_path, SIGNATURE_SUFFIX};
pub use keys::{generate_keys, PublicKey, SecretKey, SECRET_KEY_COMMENT};
pub use sign::{sign_bytes, sign_report, sign_report_to, Signed};
