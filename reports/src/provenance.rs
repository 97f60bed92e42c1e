//! Provenance: what a report records about where it comes from.
//!
//! From the run ([`commcheck::build::Build`], recorded by the binary that ran
//! the cases: a vendor's test binary for `report`, this tool for `certify`):
//! the compiler (`rustc -V`, nightly when the suite ran under nightly), the
//! target, and the resolved `eredu-core`, `eredu-runtime` and `eredu-nn`
//! versions of that build (the kit's build script reads them from the
//! build's own `Cargo.lock`; `unknown` when not found). Results of kits
//! that did not record their build fall back to this tool's own.
//! Run time: host name, OS, architecture, CPU count, `git rev-parse HEAD` of
//! the working directory (absent when it is not a git checkout), the time.
//! From the run: kit version, backend identity, instruments, claims, seed.

use std::collections::BTreeMap;
use std::process::Command;

use commcheck::RunResults;

use crate::model::{Host, Provenance};

/// `commcheck-report <version>`.
pub fn tool() -> String {
    format!("commcheck-report {}", env!("CARGO_PKG_VERSION"))
}

/// Everything a report records that is not in the kit's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// See [`Provenance::tool`].
    pub tool: String,
    /// See [`Provenance::eredu`].
    pub eredu: BTreeMap<String, String>,
    /// See [`Provenance::rustc`].
    pub rustc: String,
    /// See [`Provenance::git_revision`].
    pub git_revision: Option<String>,
    /// See [`Provenance::host`].
    pub host: Host,
    /// See [`Provenance::generated_unix`].
    pub generated_unix: u64,
}

impl Environment {
    /// The environment of this process, now.
    pub fn detect() -> Self {
        let build = commcheck::build::Build::this();
        Self {
            tool: tool(),
            eredu: build.eredu,
            rustc: build.rustc,
            git_revision: git_revision(),
            host: host(),
            generated_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    /// The provenance of a report on `results` produced in this environment.
    pub fn provenance(self, results: &RunResults) -> Provenance {
        // What built the binary that ran the cases, where the run says.
        let (eredu, rustc, target) = match &results.build {
            Some(build) => (
                build.eredu.clone(),
                build.rustc.clone(),
                Some(build.target.clone()),
            ),
            None => (self.eredu, self.rustc, None),
        };
        Provenance {
            kit_version: results.kit_version.clone(),
            results_schema: results.schema,
            tool: self.tool,
            eredu,
            rustc,
            target,
            ran_on: results.hosts.clone(),
            git_revision: self.git_revision,
            host: self.host,
            backend: results.backend.clone(),
            instruments: results.instruments,
            claims: results.claims.clone(),
            seed: results.seed,
            calibration: results.calibration.clone(),
            processes: results.processes,
            ranks: results.ranks.clone(),
            incomplete: results.incomplete.clone(),
            data: results.data.clone(),
            generated_unix: self.generated_unix,
        }
    }
}

/// `git rev-parse HEAD` in the working directory; `None` outside a checkout
/// or without git.
pub fn git_revision() -> Option<String> {
    let output = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let revision = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    let plausible = !revision.is_empty() && revision.bytes().all(|b| b.is_ascii_hexdigit());
    (output.status.success() && plausible).then_some(revision)
}

/// This host.
pub fn host() -> Host {
    Host {
        hostname: commcheck::build::hostname(),
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
    }
}
