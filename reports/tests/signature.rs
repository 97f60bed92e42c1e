//! Signed reports: key generation, signing, and every way a signature is
//! rejected, each named; the command line's `keygen`, `verify --key` and
//! `certify --sign` exit statuses.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use commcheck::Verdict;
use commcheck_report::signature::{
    comment_field, generate_keys, sign_report, signature_path, verify_report, KeyKind, PublicKey,
    SecretKey,
};
use commcheck_report::{canonical, SignatureError};
use common::*;
use ct_codecs::{Base64, Decoder, Encoder};
use serde_json::Value;

/// A folder with a key pair and a signed synthetic report.
struct Signed {
    dir: tempfile::TempDir,
    secret: SecretKey,
    public: PublicKey,
}

impl Signed {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let (secret, public) = (dir.path().join("ci.key"), dir.path().join("ci.pub"));
        let id = generate_keys(&secret, &public, false).expect("generate a key pair");
        let secret = SecretKey::load(&secret).expect("load the secret key");
        let public = PublicKey::load(&public).expect("load the public key");
        assert_eq!(secret.id(), id);
        assert_eq!(public.id(), id);
        let signed = Self {
            dir,
            secret,
            public,
        };
        std::fs::write(signed.report(), json(&report(&standard(Verdict::Pass))))
            .expect("write report.json");
        sign_report(&signed.report(), &signed.secret).expect("sign report.json");
        signed
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn report(&self) -> PathBuf {
        self.path("report.json")
    }

    fn verify(&self) -> Result<commcheck_report::signature::Verified, SignatureError> {
        verify_report(&self.report(), &self.public, None)
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[track_caller]
fn assert_message(error: &SignatureError, parts: &[&str]) {
    let message = error.to_string();
    for part in parts {
        assert!(
            message.contains(part),
            "`{message}` does not mention `{part}`"
        );
    }
}

#[test]
fn keygen_writes_minisign_keys_and_never_overwrites_by_default() {
    let signed = Signed::new();
    let (secret, public) = (signed.path("ci.key"), signed.path("ci.pub"));
    let public_text = String::from_utf8(read(&public)).unwrap_or_default();
    assert!(
        public_text.starts_with(&format!(
            "untrusted comment: minisign public key: {}\n",
            signed.public.id()
        )),
        "{public_text}"
    );
    assert_eq!(public_text.lines().count(), 2, "{public_text}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| {
            std::fs::metadata(path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!(mode(&secret), 0o600, "the secret key is the owner's only");
        assert_eq!(mode(&public), 0o644);
    }
    let before = read(&secret);
    let error = generate_keys(&secret, &signed.path("other.pub"), false)
        .expect_err("an existing secret key is not replaced");
    assert!(matches!(error, SignatureError::KeyExists { .. }), "{error}");
    assert_message(&error, &["ci.key", "already exists"]);
    assert_eq!(read(&secret), before);
    assert!(!signed.path("other.pub").exists());
    let error = generate_keys(&signed.path("a.key"), &public, false)
        .expect_err("an existing public key is not replaced");
    assert_message(&error, &["ci.pub", "already exists"]);
    assert!(
        !signed.path("a.key").exists(),
        "no secret key without its public key"
    );
    let error = generate_keys(&secret, &secret, true).expect_err("one file for both keys");
    assert!(
        matches!(error, SignatureError::SameKeyFile { .. }),
        "{error}"
    );
    // With `overwrite`, a new pair replaces the old one.
    let id = generate_keys(&secret, &public, true).expect("replace the key pair");
    assert_ne!(id, signed.public.id());
    assert_ne!(read(&secret), before);
}

#[test]
fn a_signed_report_verifies_and_its_comment_names_it() {
    let signed = Signed::new();
    let verified = signed.verify().expect("the signature holds");
    assert_eq!(verified.key_id, signed.public.id());
    assert_eq!(verified.signature, signature_path(&signed.report()));
    let report = report(&standard(Verdict::Pass));
    let comment = &verified.trusted_comment;
    assert_eq!(comment_field(comment, "backend"), Some("synthetic"));
    assert_eq!(comment_field(comment, "version"), Some("1.0.0"));
    assert_eq!(comment_field(comment, "level"), Some("full"));
    assert_eq!(comment_field(comment, "file"), Some("report.json"));
    assert_eq!(
        comment_field(comment, "digest"),
        Some(report.digest.as_str())
    );
    // An explicit signature path works the same.
    let elsewhere = signed.path("elsewhere.minisig");
    std::fs::rename(signature_path(&signed.report()), &elsewhere).expect("move the signature");
    let verified = verify_report(&signed.report(), &signed.public, Some(&elsewhere));
    assert_eq!(verified.map(|v| v.signature).ok(), Some(elsewhere));
}

#[test]
fn editing_any_byte_of_the_report_is_rejected() {
    let signed = Signed::new();
    let original = read(&signed.report());
    let mut checked = 0;
    for at in 0..original.len() {
        let mut edited = original.clone();
        edited[at] ^= 0x01;
        write(&signed.report(), &edited);
        match signed.verify() {
            Err(error @ SignatureError::Mismatch { .. }) => {
                assert!(error.is_rejection());
                checked += 1;
            }
            other => panic!("an edit at byte {at} gave {other:?}"),
        }
    }
    // Bytes appended or removed at the end too.
    for edited in [
        [original.as_slice(), b"\n"].concat(),
        original[..original.len() - 1].to_vec(),
    ] {
        write(&signed.report(), &edited);
        let error = signed.verify().expect_err("a changed length is rejected");
        assert!(matches!(error, SignatureError::Mismatch { .. }), "{error}");
    }
    assert!(checked > 100, "{checked}");
    write(&signed.report(), &original);
    assert!(signed.verify().is_ok());
}

/// `text` (a report) with `change` applied and its fingerprints and digest
/// recomputed, so that `verify` accepts its contents.
fn resealed(text: &[u8], change: impl FnOnce(&mut Value)) -> String {
    let mut value: Value = serde_json::from_slice(text).unwrap_or(Value::Null);
    change(&mut value);
    if let Some(cases) = value["cases"].as_array_mut() {
        for case in cases {
            case["fingerprint"] = canonical::case_fingerprint(case).into();
        }
    }
    value["digest"] = canonical::report_digest(&value).into();
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}

#[test]
fn a_report_edited_and_resealed_passes_verify_but_not_the_signature() {
    let signed = Signed::new();
    let original = read(&signed.report());
    // Claim another version of the backend, everything consistent again.
    let forged = resealed(&original, |report| {
        report["provenance"]["backend"]["version"] = "9.9.9".into();
    });
    assert!(
        problems(&forged).is_empty(),
        "the digest alone cannot tell: {:?}",
        problems(&forged)
    );
    write(&signed.report(), &forged);
    let error = signed.verify().expect_err("a resealed edit is rejected");
    assert!(matches!(error, SignatureError::Mismatch { .. }), "{error}");
    assert_message(
        &error,
        &[
            "does not match the report",
            "digest",
            "edited and its digest recomputed",
        ],
    );
    // An edit without re-sealing is named as such.
    let mut value: Value = serde_json::from_slice(&original).unwrap_or(Value::Null);
    value["provenance"]["backend"]["version"] = "9.9.9".into();
    write(
        &signed.report(),
        serde_json::to_string_pretty(&value).unwrap_or_default(),
    );
    let error = signed.verify().expect_err("an edit is rejected");
    assert_message(&error, &["edited after it was signed"]);
    // A change of layout only: same digest, other bytes.
    let compact =
        serde_json::to_string(&serde_json::from_slice::<Value>(&original).ok()).unwrap_or_default();
    write(&signed.report(), compact);
    assert!(problems(&String::from_utf8_lossy(&read(&signed.report()))).is_empty());
    let error = signed.verify().expect_err("a new layout is rejected");
    assert_message(&error, &["where its digest does not look"]);
}

#[test]
fn the_signature_of_another_report_is_rejected() {
    let signed = Signed::new();
    let other = signed.path("other.json");
    write(&other, json(&report(&standard(Verdict::Fail))));
    sign_report(&other, &signed.secret).expect("sign the other report");
    let error = verify_report(
        &signed.report(),
        &signed.public,
        Some(&signature_path(&other)),
    )
    .expect_err("another report's signature");
    assert!(matches!(error, SignatureError::Mismatch { .. }), "{error}");
    assert_message(&error, &["another report's signature"]);
}

#[test]
fn a_signature_by_another_key_is_rejected_naming_both_keys() {
    let signed = Signed::new();
    let (secret, public) = (signed.path("other.key"), signed.path("other.pub"));
    let other = generate_keys(&secret, &public, false).expect("a second key pair");
    let other_public = PublicKey::load(&public).expect("load it");
    let error = verify_report(&signed.report(), &other_public, None).expect_err("wrong key");
    assert!(matches!(error, SignatureError::WrongKey { .. }), "{error}");
    assert!(error.is_rejection());
    assert_message(
        &error,
        &[
            "wrong key",
            &signed.public.id().to_string(),
            &other.to_string(),
            "other.pub",
        ],
    );
    // Re-signed by the other key: the first key rejects it the same way.
    sign_report(&signed.report(), &SecretKey::load(&secret).expect("load")).expect("sign");
    let error = signed.verify().expect_err("signed by the other key");
    assert!(matches!(error, SignatureError::WrongKey { .. }), "{error}");
}

#[test]
fn a_missing_or_truncated_signature_file_is_named() {
    let signed = Signed::new();
    let path = signature_path(&signed.report());
    let text = read(&path);
    for end in 0..text.len() - 1 {
        write(&path, &text[..end]);
        let error = signed.verify().expect_err("a truncated signature");
        assert!(
            matches!(error, SignatureError::SignatureTruncated { .. }),
            "cut at {end}: {error}"
        );
        assert_message(&error, &["report.json.minisig", "truncated"]);
    }
    // Without its final newline the signature is whole.
    write(&path, &text[..text.len() - 1]);
    assert!(signed.verify().is_ok());
    std::fs::remove_file(&path).expect("remove the signature");
    let error = signed.verify().expect_err("no signature");
    assert!(
        matches!(error, SignatureError::SignatureMissing { .. }),
        "{error}"
    );
    assert_message(&error, &["report.json.minisig", "no signature file"]);
}

#[test]
fn damaged_signature_files_are_rejected_without_panicking() {
    let signed = Signed::new();
    let path = signature_path(&signed.report());
    let text = String::from_utf8(read(&path)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let with_line = |number: usize, line: &str| {
        let mut lines = lines.clone();
        lines[number - 1] = line;
        lines.join("\n") + "\n"
    };
    let cases = [
        (with_line(1, "a comment"), "line 1"),
        (
            with_line(2, "not base64!"),
            "line 2 (the signature) is not Base64",
        ),
        (with_line(2, "AAAA"), "decodes to 3 bytes, expected 74"),
        (with_line(3, "comment: x"), "line 3"),
        (
            with_line(4, "AAAA"),
            "line 4 (the global signature) decodes to 3 bytes",
        ),
        ("\u{0}\u{1}\n\n\n\n".to_owned(), "line 1"),
    ];
    for (damaged, expected) in cases {
        write(&path, &damaged);
        let error = signed.verify().expect_err("a damaged signature");
        assert!(
            matches!(error, SignatureError::SignatureMalformed { .. }),
            "{error}"
        );
        assert_message(&error, &[expected]);
    }
    // An edited trusted comment breaks the global signature.
    write(&path, with_line(3, "trusted comment: level:full"));
    let error = signed.verify().expect_err("an edited trusted comment");
    assert!(matches!(error, SignatureError::Mismatch { .. }), "{error}");
    // Any byte flipped anywhere: an error, never a panic, never accepted;
    // except in the untrusted comment's text, which minisign does not sign.
    let bytes = text.as_bytes();
    let untrusted = "untrusted comment: ".len()..lines[0].len();
    for at in (0..bytes.len()).filter(|at| !untrusted.contains(at)) {
        let mut edited = bytes.to_vec();
        edited[at] ^= 0x20;
        write(&path, &edited);
        assert!(
            signed.verify().is_err(),
            "accepted a signature edited at byte {at}"
        );
    }
    write(&path, with_line(1, "untrusted comment: anything"));
    assert!(signed.verify().is_ok());
}

#[test]
fn key_files_are_checked_and_named() {
    let signed = Signed::new();
    let missing = signed.path("missing.pub");
    let error = PublicKey::load(&missing).expect_err("no key file");
    assert!(
        matches!(
            error,
            SignatureError::ReadKey {
                kind: KeyKind::Public,
                ..
            }
        ),
        "{error}"
    );
    assert!(!error.is_rejection());
    assert_message(&error, &["missing.pub", "cannot read the public key file"]);
    let cases: [(&str, &[u8], &str); 4] = [
        ("empty.pub", b"", "empty"),
        ("garbage.pub", b"hello\nworld\n", "line 1"),
        (
            "short.pub",
            b"untrusted comment: x\nRWQ=\n",
            "decodes to 2 bytes, expected 42",
        ),
        ("binary.pub", b"\xff\xfe", "not a text file"),
    ];
    for (name, text, expected) in cases {
        let error = PublicKey::parse(text, Path::new(name)).expect_err("a bad key");
        assert!(
            matches!(error, SignatureError::KeyMalformed { .. }),
            "{error}"
        );
        assert_message(&error, &[name, "malformed public key file", expected]);
    }
    // The two keys swapped.
    let error = PublicKey::load(&signed.path("ci.key")).expect_err("a secret key");
    assert_message(&error, &["this is a secret key file"]);
    let error = SecretKey::load(&signed.path("ci.pub")).expect_err("a public key");
    assert_message(&error, &["this is a public key file"]);
    // A damaged secret key fails its checksum.
    let secret = String::from_utf8(read(&signed.path("ci.key"))).unwrap_or_default();
    let mut lines: Vec<String> = secret.lines().map(str::to_owned).collect();
    let key = &mut lines[1];
    let middle = key.len() / 2;
    let flipped = if &key[middle..=middle] == "A" {
        "B"
    } else {
        "A"
    };
    key.replace_range(middle..=middle, flipped);
    let error = SecretKey::parse(lines.join("\n").as_bytes(), Path::new("damaged.key"))
        .expect_err("a damaged key");
    assert_message(&error, &["damaged.key", "malformed secret key file"]);
    // Without a checksum (all zeros, as `minisign -G -W` writes), the key
    // is checked by signing with it: intact, it signs; damaged, it is named.
    let decoded =
        Base64::decode_to_vec(secret.lines().nth(1).unwrap_or_default(), None).unwrap_or_default();
    assert_eq!(decoded.len(), 158);
    let encode = |bytes: &[u8]| {
        let line = Base64::encode_to_string(bytes).unwrap_or_default();
        format!("untrusted comment: no checksum\n{line}\n")
    };
    let mut unchecked = decoded.clone();
    unchecked[126..].fill(0);
    let key = SecretKey::parse(encode(&unchecked).as_bytes(), Path::new("w.key"))
        .expect("a key without a checksum");
    assert_eq!(key.id(), signed.public.id());
    sign_report(&signed.report(), &key).expect("sign with it");
    assert!(signed.verify().is_ok());
    unchecked[70] ^= 0x01;
    let error = SecretKey::parse(encode(&unchecked).as_bytes(), Path::new("w.key"))
        .expect_err("a damaged key without a checksum");
    assert_message(&error, &["w.key", "do not match (a damaged key file)"]);
    // The secret key's Debug form does not show the key.
    assert!(!format!("{:?}", signed.secret).contains(&lines[1][10..30]));
}

#[test]
fn only_reports_are_signed() {
    let signed = Signed::new();
    let file = signed.path("notes.txt");
    write(&file, "not a report");
    let error = sign_report(&file, &signed.secret).expect_err("not a report");
    assert!(
        matches!(error, SignatureError::NotAReport { .. }),
        "{error}"
    );
    assert!(!signature_path(&file).exists());
}

/// The reference `minisign` tool verifies our signatures. It needs the tool,
/// so it is ignored by a plain `cargo test` (shown ignored, never a pass);
/// `.ci/run` installs minisign and runs it with `--ignored`.
#[test]
#[ignore = "needs the minisign tool (apt-get install minisign); .ci/run runs it"]
fn minisign_verifies_our_signatures() {
    let signed = Signed::new();
    let output = Command::new("minisign")
        .arg("-V")
        .arg("-p")
        .arg(signed.path("ci.pub"))
        .arg("-m")
        .arg(signed.report())
        .output();
    let output = output.expect("minisign is not installed (apt-get install minisign)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("Trusted comment: timestamp:"), "{stdout}");
    write(&signed.report(), b"{}");
    let status = Command::new("minisign")
        .arg("-V")
        .arg("-q")
        .arg("-p")
        .arg(signed.path("ci.pub"))
        .arg("-m")
        .arg(signed.report())
        .status()
        .map(|s| s.success());
    assert_eq!(
        status.ok(),
        Some(false),
        "minisign accepted an edited report"
    );
    // A passwordless key pair of the reference tool signs here.
    let (secret, public) = (signed.path("w.key"), signed.path("w.pub"));
    let made = Command::new("minisign")
        .args(["-G", "-W", "-p"])
        .arg(&public)
        .arg("-s")
        .arg(&secret)
        .output()
        .map(|o| o.status.success());
    assert_eq!(made.ok(), Some(true), "minisign -G -W");
    let key = SecretKey::load(&secret).expect("load minisign's key");
    write(&signed.report(), json(&report(&standard(Verdict::Pass))));
    sign_report(&signed.report(), &key).expect("sign with minisign's key");
    let public = PublicKey::load(&public).expect("load minisign's public key");
    assert!(verify_report(&signed.report(), &public, None).is_ok());
}

fn cli(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_commcheck-report"))
        .args(args)
        .output()
        .expect("run commcheck-report");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

macro_rules! cli {
    ($($arg:expr),* $(,)?) => {
        cli(&[$(std::ffi::OsStr::new($arg)),*])
    };
}

#[test]
fn command_line_keygen_and_verify_key_round_trip() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = |name: &str| dir.path().join(name);
    let (secret, public) = (path("ci.key"), path("ci.pub"));
    let (code, out, err) = cli!("keygen", "--secret", &secret, "--public", &public);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("keep it secret"), "{out}");
    let (code, _, err) = cli!("keygen", "--secret", &secret, "--public", &public);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    let (code, _, err) = cli!("keygen", "--secret", &secret, "--public", &public, "--force");
    assert_eq!(code, Some(0), "{err}");

    let report_path = path("report.json");
    write(&report_path, json(&report(&standard(Verdict::Pass))));
    let key = SecretKey::load(&secret).expect("load the secret key");
    sign_report(&report_path, &key).expect("sign");

    let (code, out, err) = cli!("verify", &report_path, "--key", &public);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(": valid;"), "{out}");
    assert!(
        out.contains(&format!("signature good: made with key {}", key.id())),
        "{out}"
    );
    // Without --key: valid, and it says the signature was not checked.
    let (code, out, _) = cli!("verify", &report_path);
    assert_eq!(code, Some(0));
    assert!(out.contains("signature not checked (no --key)"), "{out}");
    assert!(out.contains("report.json.minisig is there"), "{out}");

    // A resealed edit: verify alone accepts it, verify --key does not.
    let forged = resealed(&read(&report_path), |report| {
        report["provenance"]["backend"]["name"] = "someone-else".into();
    });
    write(&report_path, forged);
    let (code, _, _) = cli!("verify", &report_path);
    assert_eq!(code, Some(0));
    let (code, _, err) = cli!("verify", &report_path, "--key", &public);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("rejected, 1 problem(s)"), "{err}");
    assert!(
        err.contains("signature: ") && err.contains("does not match the report"),
        "{err}"
    );

    // Missing signature, another signature file, a wrong key: exit 1.
    sign_report(&report_path, &key).expect("sign again");
    let (code, _, err) = cli!(
        "verify",
        &report_path,
        "--key",
        &public,
        "--signature",
        &path("nowhere.minisig")
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no signature file"), "{err}");
    let (other_secret, other_public) = (path("other.key"), path("other.pub"));
    cli!(
        "keygen",
        "--secret",
        &other_secret,
        "--public",
        &other_public
    );
    let (code, _, err) = cli!("verify", &report_path, "--key", &other_public);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("wrong key"), "{err}");

    // An unreadable report or key file: exit 2.
    let (code, _, err) = cli!("verify", &path("none.json"), "--key", &public);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot read"), "{err}");
    let (code, _, err) = cli!("verify", &report_path, "--key", &path("none.pub"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--key: ") && err.contains("none.pub"), "{err}");
    // --signature needs --key.
    let (code, _, err) = cli!("verify", &report_path, "--signature", &path("x"));
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn certify_checks_its_signing_key_before_the_run() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out = dir.path().join("out");
    let (code, _, err) = cli!(
        "certify",
        "cpu",
        "--out",
        &out,
        "--sign",
        &dir.path().join("missing.key")
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--sign: ") && err.contains("cannot read the secret key file"),
        "{err}"
    );
    assert!(!out.exists(), "the run did not start");
}
