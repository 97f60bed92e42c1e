//! The build that ran the cases: the compiler and target of the binary the
//! kit was compiled into (a vendor's test binary, or `commcheck-report`),
//! the kit's version and the eredu crate versions that build links, read
//! by the kit's build script from the build's own `Cargo.lock` (set
//! `COMMCHECK_LOCKFILE` to it when the target directory is elsewhere).
//! Every run's results and records carry it ([`crate::RunResults::build`]);
//! records of different builds are different runs, and reports copy it: a
//! certificate names the binary that ran its cases, not the tool that wrote
//! it.
//!
//! ```
//! let build = commcheck::build::Build::this();
//! assert!(build.rustc.starts_with("rustc ") || build.rustc == "unknown");
//! assert_eq!(build.kit, commcheck::VERSION);
//! ```

use std::collections::BTreeMap;

/// Version of this kit; certification reports record it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What built the binary that ran the cases.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Build {
    /// `rustc -V` of the compiler (`unknown` when it could not be asked).
    pub rustc: String,
    /// The target triple.
    pub target: String,
    /// The kit's version.
    pub kit: String,
    /// The eredu crates the build links, with their versions (`unknown`
    /// when the build's `Cargo.lock` was not found).
    pub eredu: BTreeMap<String, String>,
}

impl Build {
    /// The build of this binary.
    pub fn this() -> Self {
        Self {
            rustc: env!("COMMCHECK_BUILD_RUSTC").to_owned(),
            target: env!("COMMCHECK_BUILD_TARGET").to_owned(),
            kit: VERSION.to_owned(),
            eredu: [
                ("eredu-core", env!("COMMCHECK_BUILD_EREDU_CORE")),
                ("eredu-runtime", env!("COMMCHECK_BUILD_EREDU_RUNTIME")),
                ("eredu-nn", env!("COMMCHECK_BUILD_EREDU_NN")),
            ]
            .into_iter()
            .map(|(name, version)| (name.to_owned(), version.to_owned()))
            .collect(),
        }
    }
}

/// This host's name (`unknown` when it cannot be read): which machine ran
/// a case, recorded with it (shards of one run may run on several).
pub fn hostname() -> String {
    let from_file = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let from_env = || {
        ["HOSTNAME", "COMPUTERNAME"]
            .iter()
            .find_map(|var| std::env::var(var).ok())
    };
    let from_command = || {
        std::process::Command::new("hostname")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
    };
    from_file
        .or_else(from_env)
        .or_else(from_command)
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compiler recorded is the one that built this test: the `rustc`
    /// cargo's toolchain resolves to (`cargo +nightly test` makes both
    /// nightly: rustup passes the toolchain on to the processes it starts).
    #[test]
    fn the_build_names_the_compiler_that_built_this_test() {
        let running = std::process::Command::new("rustc")
            .arg("-V")
            .output()
            .ok()
            .and_then(|output| String::from_utf8(output.stdout).ok())
            .map(|version| version.trim().to_owned());
        let build = Build::this();
        if let Some(running) = running.filter(|v| !v.is_empty()) {
            assert_eq!(build.rustc, running);
        }
        assert!(!build.target.is_empty() && build.target != "unknown");
        assert_ne!(build.eredu["eredu-core"], "unknown");
    }
}
