//! Records build-time provenance for reports: the eredu crate versions this
//! build links (read from the workspace `Cargo.lock`) and `rustc -V`.

use std::path::PathBuf;
use std::process::Command;

/// The crates whose resolved versions every report records.
const EREDU_CRATES: [(&str, &str); 3] = [
    ("eredu-core", "COMMCHECK_REPORT_EREDU_CORE"),
    ("eredu-runtime", "COMMCHECK_REPORT_EREDU_RUNTIME"),
    ("eredu-nn", "COMMCHECK_REPORT_EREDU_NN"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let lock = manifest.join("..").join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    println!("cargo:rerun-if-changed=build.rs");
    let lock = std::fs::read_to_string(&lock).unwrap_or_default();
    for (name, variable) in EREDU_CRATES {
        let versions = locked_versions(&lock, name);
        let value = if versions.is_empty() {
            "unknown".to_owned()
        } else {
            versions.join(", ")
        };
        println!("cargo:rustc-env={variable}={value}");
    }
    println!("cargo:rustc-env=COMMCHECK_REPORT_RUSTC={}", rustc_version());
}

/// Every version of package `name` in a `Cargo.lock` (usually one).
fn locked_versions(lock: &str, name: &str) -> Vec<String> {
    let wanted = format!("name = \"{name}\"");
    let mut versions = Vec::new();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() != wanted {
            continue;
        }
        if let Some(version) = lines
            .next()
            .and_then(|next| next.trim().strip_prefix("version = \""))
            .and_then(|rest| rest.strip_suffix('"'))
        {
            versions.push(version.to_owned());
        }
    }
    versions
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
