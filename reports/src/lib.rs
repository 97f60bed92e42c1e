//! Certification reports for commcheck runs: one event model, several sinks.
//!
//! A [`Report`] is built from the kit's [`commcheck::RunResults`]. Its JSON
//! form is the source of truth; [`junit`] and [`markdown`] render views of
//! it; [`verify()`] re-checks a report; [`diff()`] compares two;
//! [`Expectations`] reads waivers; [`certify()`] runs the suite and writes all
//! of them (the `commcheck-report` command line does the same from a shell).
//!
//! # The JSON report, schema 1
//!
//! ```text
//! {
//!   "format": "commcheck-report",
//!   "schema": 1,
//!   "level": "none" | "core" | "full",
//!   "provenance": {
//!     "kit_version", "results_schema", "tool",
//!     "eredu": { "eredu-core": "0.5.0", "eredu-nn": …, "eredu-runtime": … },
//!     "rustc": "rustc 1.x.y (…)", "target": "x86_64-unknown-linux-gnu" (optional),
//!     "git_revision": "<hex>" | null,
//!     "host": { "hostname", "os", "arch", "cpus" },
//!     "backend": { "name", "version", "device" },
//!     "instruments": { "hold", "probe", "ledger", "fault", "observer", "wire_log" },
//!     "claims": ["all_reduce_sum", …], "seed": <base seed>, "generated_unix": <seconds>,
//!     "data": { "dtypes": ["f32", "f16", "bf16"], "sweep_worlds": [2, 3],
//!               "sweeps": [{ "dtype", "boundaries", "elements", "skipped" }, …] }
//!   },
//!   "must_pass": ["RET-1::local_dependencies", …],
//!   "cases": [{
//!     "name", "invariant", "family", "class": "A" | "M" | "I",
//!     "subject": "submit" | { "operation": "all_reduce_sum" } | …,
//!     "verdict": "pass" | "fail" | "not-supported" | "timeout" | "crash" | "flaky",
//!     "status": <verdict> | "waived" | "unexpected-pass",
//!     "message": "…" | null, "attempts", "millis", "seed",
//!     "waiver": { "reason", "link" } | null,
//!     "fingerprint": "<16 hex digits>"
//!   }, …],
//!   "unused_waivers": [{ "invariant", "subject", "reason", "link" }, …],
//!   "invariants": { "SUM-1": "<the invariant's text>", … },   (only when a case fails)
//!   "digest": "sha256:<64 hex digits>"
//! }
//! ```
//!
//! - `must_pass` is every SPEC invariant on every *claimed* subject of the
//!   kit version that wrote the report ([`must_pass()`]: the catalogue's case
//!   names, minus unclaimed operations and CAN-5 or CAN-6 when the backend
//!   does not claim their one cancellation mode). `cases` also holds those
//!   unclaimed cases, as `not-supported`.
//! - `status` is [`Status::of`] the verdict and the waiver.
//! - `level` ([`Level::reached`]): `full` when every must-pass case has
//!   exactly one result and its status *certifies* (`pass` or
//!   `unexpected-pass`); `core` when that holds for every must-pass case of
//!   class A or M; else `none`. `waived` (a failure accepted in the
//!   expectations file with a reason and a link, recorded in the report),
//!   `flaky`, `timeout`, `crash`, `fail` and `not-supported` never certify. A
//!   report whose waived cases would raise its level says so apart
//!   ([`Report::with_waivers`], printed as `full-with-waivers (8)`), and
//!   `verify` and the summary list every waiver with its reason and link.
//! - `digest` and `fingerprint`: see [`canonical`] for the canonical form.
//!
//! # Checksums and signatures
//!
//! The `digest` is a checksum: it catches accidental edits and truncation,
//! but whoever edits a report can recompute it, so it says nothing about
//! who made the report. A [`signature`] does: [`sign_report`] signs the
//! exact bytes of `report.json` with a minisign secret key and writes
//! `report.json.minisig` beside it; [`verify_report`] checks that signature
//! against the public key (and names why it fails: missing or truncated
//! signature file, wrong key, a report edited after it was signed). The
//! command line does the same:
//!
//! ```text
//! commcheck-report keygen --secret ci.key --public ci.pub   # ci.key: a CI secret
//! commcheck-report certify cpu --out out --sign ci.key       # + out/report.json.minisig
//! commcheck-report verify out/report.json --key ci.pub
//! minisign -V -p ci.pub -m out/report.json                   # the same check
//! ```
//!
//! - `invariants`: the kit's text of every invariant a case fails (status
//!   `fail`, `timeout`, `crash` or `flaky`), so the report alone says what
//!   was broken; `verify` checks it lists exactly those, with the kit's
//!   texts.
//!
//! A schema change that alters the meaning or the set of members bumps
//! [`REPORT_SCHEMA`] once a version is published; `verify` refuses schemas
//! it does not know. (`invariants` joined schema 1 before the first
//! release.)

mod assemble;
pub mod canonical;
pub mod certify;
pub mod collect;
pub mod diff;
pub mod expectations;
pub mod fuzz;
mod input;
pub mod junit;
pub mod markdown;
pub mod model;
pub mod picture;
pub mod provenance;
pub mod signature;
pub mod verify;

pub use certify::{
    certify, certify_across, write_report, Certification, CertifyError, CertifyOptions,
    ProgressStyle,
};
pub use diff::{diff, Diff};
pub use expectations::{Expectation, Expectations, ExpectationsError};
pub use model::{
    must_pass, unresolved_attributions, Level, Report, ReportCase, Status, Waiver, REPORT_FORMAT,
    REPORT_SCHEMA,
};
pub use provenance::Environment;
pub use signature::{sign_report, verify_report, SignatureError};
pub use verify::{load, load_file, verify, verify_file};

/// The backends bundled with commcheck that `certify` can run by name: the
/// CPU reference backend with the `cpu` feature (a default one), none
/// without it. A vendor certifies their own harness with [`certify()`].
pub const BUNDLED_BACKENDS: &[&str] = if cfg!(feature = "cpu") { &["cpu"] } else { &[] };
