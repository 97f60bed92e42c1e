//! Records the build of the kit into the kit (`commcheck::build`): the
//! compiler (`rustc -V` of the `RUSTC` cargo runs, so the toolchain of the
//! vendor's test binary, nightly included), the target triple, and the eredu
//! crate versions this build links. Every run's results and records carry
//! it, and reports copy it.
//!
//! # Which `Cargo.lock`
//!
//! The eredu versions come from the `Cargo.lock` of the build that compiles
//! this crate, which is the *vendor's* lock when a vendor's test binary
//! depends on `commcheck`, not commcheck's. The first of these that can be
//! read, parsed (with the `cargo-lock` crate) and lists the package
//! `commcheck` at this crate's version is used:
//!
//! 1. the file named by `COMMCHECK_LOCKFILE`, when that variable is
//!    set and not empty (for a target directory outside the workspace, e.g.
//!    a shared `CARGO_TARGET_DIR`);
//! 2. a `Cargo.lock` in `OUT_DIR` or any folder above it: `OUT_DIR` lies in
//!    the target directory of the build, by default `target/` beside the
//!    consumer's lock;
//! 3. a `Cargo.lock` in `CARGO_MANIFEST_DIR` or any folder above it (this
//!    crate's own workspace, or the lock packaged with it).
//!
//! In that lock, the versions recorded are those of the eredu packages that
//! `commcheck` reaches through its dependencies (usually one each).
//! When no lock qualifies, or the graph does not reach a crate, the version
//! recorded is `unknown`: the build never fails for it. Cargo reruns this script when the lock used, the
//! variable or this file changes.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use cargo_lock::{Lockfile, Package, Version};

/// The crates whose resolved versions every report records, with the
/// variables that carry them into the crate.
const EREDU_CRATES: [(&str, &str); 3] = [
    ("eredu-core", "COMMCHECK_BUILD_EREDU_CORE"),
    ("eredu-runtime", "COMMCHECK_BUILD_EREDU_RUNTIME"),
    ("eredu-nn", "COMMCHECK_BUILD_EREDU_NN"),
];

/// The variable that names the lock file to read.
const LOCKFILE_VARIABLE: &str = "COMMCHECK_LOCKFILE";

/// This package, as the lock lists it.
const PACKAGE: &str = "commcheck";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={LOCKFILE_VARIABLE}");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let lock = find_lock(&version);
    match &lock {
        Some((path, _)) => println!("cargo:rerun-if-changed={}", path.display()),
        None => println!(
            "cargo:warning=no Cargo.lock listing {PACKAGE} {version} was found: the eredu \
             versions recorded are `unknown` (set {LOCKFILE_VARIABLE} to the build's lock)"
        ),
    }
    for (name, variable) in EREDU_CRATES {
        let versions = lock
            .as_ref()
            .map(|(_, lock)| linked_versions(lock, &version, name))
            .unwrap_or_default();
        let value = if versions.is_empty() {
            "unknown".to_owned()
        } else {
            let versions: Vec<String> = versions.iter().map(Version::to_string).collect();
            versions.join(", ")
        };
        println!("cargo:rustc-env={variable}={value}");
    }
    println!("cargo:rustc-env=COMMCHECK_BUILD_RUSTC={}", rustc_version());
    println!(
        "cargo:rustc-env=COMMCHECK_BUILD_TARGET={}",
        std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_owned())
    );
}

/// The lock of this build and its path (see the module docs for the order).
fn find_lock(version: &str) -> Option<(PathBuf, Lockfile)> {
    let usable = |path: PathBuf| {
        let lock = Lockfile::load(&path).ok()?;
        lists_this_package(&lock, version).then_some((path, lock))
    };
    if let Some(named) = std::env::var_os(LOCKFILE_VARIABLE).filter(|v| !v.is_empty()) {
        let named = PathBuf::from(named);
        let found = usable(named.clone());
        if found.is_none() {
            println!(
                "cargo:warning={LOCKFILE_VARIABLE}={} is not a readable Cargo.lock listing \
                 {PACKAGE} {version}; looking for the build's own",
                named.display()
            );
        }
        if found.is_some() {
            return found;
        }
    }
    ["OUT_DIR", "CARGO_MANIFEST_DIR"]
        .into_iter()
        .filter_map(std::env::var_os)
        .flat_map(|start| candidates(Path::new(&start)))
        .find_map(usable)
}

/// `Cargo.lock` in `start` and in every folder above it, nearest first.
fn candidates(start: &Path) -> Vec<PathBuf> {
    start
        .ancestors()
        .map(|folder| folder.join("Cargo.lock"))
        .filter(|path| path.is_file())
        .collect()
}

fn lists_this_package(lock: &Lockfile, version: &str) -> bool {
    lock.packages
        .iter()
        .any(|p| p.name.as_str() == PACKAGE && p.version.to_string() == version)
}

/// The versions of `name` that this package (at `version`) reaches through
/// its dependencies in `lock`, lowest first.
fn linked_versions(lock: &Lockfile, version: &str, name: &str) -> BTreeSet<Version> {
    let mut seen: HashSet<(&str, &Version)> = HashSet::new();
    let mut stack: Vec<&Package> = lock
        .packages
        .iter()
        .filter(|p| p.name.as_str() == PACKAGE && p.version.to_string() == version)
        .collect();
    let mut reached = BTreeSet::new();
    while let Some(package) = stack.pop() {
        if !seen.insert((package.name.as_str(), &package.version)) {
            continue;
        }
        if package.name.as_str() == name {
            reached.insert(package.version.clone());
        }
        for dependency in &package.dependencies {
            stack.extend(lock.packages.iter().filter(|p| dependency.matches(p)));
        }
    }
    reached
}

/// `rustc -V` of the compiler building this crate.
fn rustc_version() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|version| version.trim().to_owned())
        .filter(|version| !version.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
