//! The results directory: one record per case, written by whichever process
//! ran the case, so that every runner's results add up to one run.
//!
//! `cargo test` runs every case in one process; `cargo nextest run` runs each
//! in a process of its own; a sharded CI job runs a part of them on each
//! machine; `COMMCHECK_ISOLATION=process` runs each in a child. Whatever the
//! runner, each case that finishes leaves its own record, and
//! [`collect`] merges a directory's records into one [`RunResults`], equal to
//! the one a single full run gives (volatile fields aside: times, attempts,
//! the calibration). `commcheck-report report DIR` turns it into a report.
//!
//! ```text
//! target/commcheck/<backend>/     (COMMCHECK_RESULTS_DIR)
//!   runs/<run key>.json           the run's header: kit version, backend,
//!                                 instruments, claims, base seed, the whole
//!                                 catalogue (static not-supported results in it)
//!   cases/<case>.json             one record per case: its run key, its result
//!   running/<case>                written as a case starts, removed once its
//!                                 record is written
//! ```
//!
//! A run's key is a hash of its header, so every process of one run writes
//! the same header and records of another run (another seed, backend
//! version, claim, kit version or build: `crate::build`) are told apart. [`collect`] takes the run of
//! the newest record and reports the records of other runs as stale. Under
//! nextest, the processes of one `cargo nextest run` share a base seed
//! derived from `NEXTEST_RUN_ID` (unless `COMMCHECK_SEED` sets one), so they
//! are one run; shards on several machines share one with `COMMCHECK_SEED`.
//!
//! A case that started and left no record (the process running it aborted,
//! was killed, or a segfault took it) is named by its `running/` marker: the
//! merged results say which cases were in flight when their process died.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::harness::{Harness, Identity, Instruments};
use crate::results::{Calibration, CaseResult, RunResults, Verdict, RESULTS_SCHEMA};
use crate::Operation;

/// Version of the record and header files' schema.
pub const RECORDS_SCHEMA: u32 = 1;

const RUNS: &str = "runs";
const CASES: &str = "cases";
const RUNNING: &str = "running";

/// A run's header, the same for every process of the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunHeader {
    /// [`RECORDS_SCHEMA`].
    pub schema: u32,
    /// Version of the commcheck kit.
    pub kit_version: String,
    /// The backend under test.
    pub backend: Identity,
    /// Instruments the harness provided.
    pub instruments: Instruments,
    /// Operations the backend claimed.
    pub claims: Vec<Operation>,
    /// The run's base seed.
    pub seed: u64,
    /// Processes of the launch whose processes are the ranks; `None` for
    /// worlds of threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    /// The data the value checks ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<crate::results::DataCoverage>,
    /// The build of the binary that ran the cases: records of another
    /// build are another run (its key differs), never merged into this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::build::Build>,
    /// The cargo test target that ran the cases ([`super::rerun::this_suite`]),
    /// for the command that reruns some of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
    /// Every case of the catalogue, in order.
    pub catalogue: Vec<Planned>,
}

/// A case of the catalogue, as the header lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Planned {
    /// The case's name.
    pub name: String,
    /// What it exercises.
    pub subject: crate::Subject,
    /// Its result when it is not-supported before anything runs (an
    /// unclaimed operation, a missing instrument, an unbuilt world size, a
    /// part that cannot run): runners list it ignored, so it needs no record
    /// (a record, when it was run anyway, wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_supported: Option<CaseResult>,
    /// The backend does not claim what the case exercises
    /// ([`crate::Case::unclaimed`]): it is no must-pass case.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unclaimed: bool,
}

/// One case's record.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CaseRecord {
    /// [`RECORDS_SCHEMA`].
    pub schema: u32,
    /// The key of the run's header.
    pub run: String,
    /// The case's result.
    pub case: CaseResult,
    /// The lazy-work calibration of the process that ran it, if it made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// The host that ran it (absent in records of kits before it was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// A results directory could not be read or merged.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// A file or folder could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A file is not a record or header of this schema.
    #[error("{path} is not a commcheck record (schema {RECORDS_SCHEMA}): {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The directory holds no run.
    #[error("{0} holds no run's records: run the suite first (`cargo test --test <your commcheck test>` or `cargo nextest run`), with COMMCHECK_RESULTS_DIR naming this folder if it is not the default target/commcheck/<backend>")]
    Empty(PathBuf),
    /// The header a record names is not there.
    #[error("{path}: the header of run {run} is missing (expected {expected})")]
    MissingHeader {
        /// The record.
        path: PathBuf,
        /// Its run key.
        run: String,
        /// Where the header should be.
        expected: PathBuf,
    },
}

/// What [`collect`] found in a results directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    /// The header of the run collected: its whole catalogue.
    pub header: RunHeader,
    /// The merged results of the newest run. `incomplete` says why when a
    /// runnable case has no record.
    pub results: RunResults,
    /// Runnable cases of the catalogue with no record, in catalogue order.
    pub missing: Vec<String>,
    /// Of those, the ones that started and never finished: the process
    /// running them died.
    pub unfinished: Vec<String>,
    /// Records of other runs, left out: run key and count.
    pub stale: Vec<(String, usize)>,
}

impl Collected {
    /// Whether every case of the catalogue has a result.
    pub fn is_whole(&self) -> bool {
        self.missing.is_empty()
    }
}

/// The records a process writes (see the module docs).
pub(crate) struct Records {
    dir: PathBuf,
    key: String,
    /// This process's lazy-work calibration, once made.
    calibration: Box<dyn Fn() -> Option<Calibration> + Send + Sync>,
    /// The first write error, reported once.
    failed: std::sync::atomic::AtomicBool,
}

/// The default results directory: `commcheck/<backend>` in cargo's target
/// directory (found from the test executable's path: the first ancestor
/// holding cargo's `CACHEDIR.TAG`), else `target/commcheck/<backend>`.
pub fn default_dir(backend: &str) -> PathBuf {
    let target = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .find(|dir| dir.join("CACHEDIR.TAG").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("commcheck").join(file_name(backend))
}

/// A file name for `name`: letters, digits, `-`, `.` and `_` as they are,
/// every other byte as `%XX` (so distinct names stay distinct).
fn file_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    // `.` and `..` are not file names.
    if out.chars().all(|c| c == '.') {
        out = out.replace('.', "%2E");
    }
    out
}

/// A stable 64-bit FNV-1a hash, as 16 hex digits.
fn key_of(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Writes `text` to `path` through a temporary file and a rename: a reader
/// never sees half a file, and a full disk leaves no empty file behind.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let folder = path.parent().unwrap_or(Path::new("."));
    let mut temporary = tempfile::NamedTempFile::new_in(folder)?;
    // Records are read by other processes and tools; tempfile creates its
    // files readable by their owner only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        temporary
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    temporary.write_all(text.as_bytes())?;
    temporary.persist(path).map(drop).map_err(|e| e.error)
}

impl Records {
    /// Opens `dir` for a run of `harness` with base seed `seed` over
    /// `catalogue` and writes the run's header.
    pub(crate) fn open<H: Harness>(
        dir: PathBuf,
        harness: &std::sync::Arc<H>,
        seed: u64,
        processes: Option<usize>,
        catalogue: Vec<Planned>,
    ) -> Result<Self, String> {
        let header = RunHeader {
            schema: RECORDS_SCHEMA,
            kit_version: crate::VERSION.to_owned(),
            backend: harness.identity(),
            instruments: harness.instruments(),
            claims: harness.claims().operations(),
            seed,
            processes,
            data: Some(crate::results::DataCoverage::of(&**harness)),
            build: Some(crate::build::Build::this()),
            suite: super::rerun::this_suite(),
            catalogue,
        };
        let json = serde_json::to_string_pretty(&header).map_err(|e| e.to_string())?;
        let key = key_of(&json);
        let written = [RUNS, CASES, RUNNING]
            .iter()
            .try_for_each(|sub| std::fs::create_dir_all(dir.join(sub)))
            .and_then(|()| {
                let path = dir.join(RUNS).join(format!("{key}.json"));
                if path.is_file() {
                    Ok(())
                } else {
                    write_atomically(&path, &json)
                }
            });
        written.map_err(|error| format!("cannot write results to {}: {error}", dir.display()))?;
        Ok(Self {
            dir,
            key,
            calibration: {
                let harness = std::sync::Arc::clone(harness);
                Box::new(move || crate::matrix::lazy::calibration(&*harness))
            },
            failed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a record or start mark of this process could not be written.
    pub(crate) fn write_failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn warn(&self, error: String) {
        if !self.failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            eprintln!("commcheck: {error} (results of this process are not all recorded)");
        }
    }

    /// Marks `name` as started.
    pub(crate) fn start(&self, name: &str) {
        let path = self.dir.join(RUNNING).join(file_name(name));
        if let Err(error) = std::fs::write(&path, std::process::id().to_string()) {
            self.warn(format!("cannot write {}: {error}", path.display()));
        }
    }

    /// Records `result` with this process's lazy-work calibration, then
    /// removes its start mark.
    pub(crate) fn finish(&self, result: &CaseResult) {
        let record = CaseRecord {
            schema: RECORDS_SCHEMA,
            run: self.key.clone(),
            case: result.clone(),
            calibration: (self.calibration)(),
            host: Some(crate::build::hostname()),
        };
        let path = self
            .dir
            .join(CASES)
            .join(format!("{}.json", file_name(&result.name)));
        let written = serde_json::to_string_pretty(&record)
            .map_err(std::io::Error::other)
            .and_then(|json| write_atomically(&path, &json));
        match written {
            Ok(()) => {
                let _ = std::fs::remove_file(self.dir.join(RUNNING).join(file_name(&result.name)));
            }
            Err(error) => self.warn(format!("cannot write {}: {error}", path.display())),
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, RecordsError> {
    let text = std::fs::read_to_string(path).map_err(|source| RecordsError::Io {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| RecordsError::Malformed {
        path: path.to_owned(),
        why: e.to_string(),
    })
}

/// The `.json` files of `dir` (none when it does not exist).
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, RecordsError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RecordsError::Io {
                path: dir.to_owned(),
                source,
            })
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| RecordsError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Merges the records of `dir` (see the module docs): the run of the newest
/// record, every case of its catalogue, and what is missing.
///
/// ```no_run
/// let collected = commcheck::runner::records::collect("target/commcheck/minimal".as_ref())?;
/// if !collected.is_whole() {
///     eprintln!("partial: no result for {}", collected.missing.join(", "));
/// }
/// # Ok::<(), commcheck::runner::records::RecordsError>(())
/// ```
pub fn collect(dir: &Path) -> Result<Collected, RecordsError> {
    let modified = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH)
    };
    let mut records = Vec::new();
    // The newest file of any run, header or record, names the current run:
    // a run that started and died before its first record is still the
    // newest.
    let mut newest: Option<(std::time::SystemTime, String, PathBuf)> = None;
    let mut consider = |time, key: &str, path: &Path| {
        if newest.as_ref().is_none_or(|(seen, _, _)| time > *seen) {
            newest = Some((time, key.to_owned(), path.to_owned()));
        }
    };
    for path in json_files(&dir.join(CASES))? {
        let record: CaseRecord = read_json(&path)?;
        if record.schema != RECORDS_SCHEMA {
            return Err(RecordsError::Malformed {
                path,
                why: format!("schema {}, expected {RECORDS_SCHEMA}", record.schema),
            });
        }
        consider(modified(&path), &record.run, &path);
        records.push(record);
    }
    for path in json_files(&dir.join(RUNS))? {
        if let Some(key) = path.file_stem().and_then(|s| s.to_str()) {
            consider(modified(&path), key, &path);
        }
    }
    let Some((_, key, newest_path)) = newest else {
        return Err(RecordsError::Empty(dir.to_owned()));
    };
    let header_path = dir.join(RUNS).join(format!("{key}.json"));
    if !header_path.is_file() {
        return Err(RecordsError::MissingHeader {
            path: newest_path,
            run: key,
            expected: header_path,
        });
    }
    let header: RunHeader = read_json(&header_path)?;
    let mut stale: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_name: BTreeMap<String, CaseRecord> = BTreeMap::new();
    for record in records {
        if record.run == key {
            by_name.insert(record.case.name.clone(), record);
        } else {
            *stale.entry(record.run).or_default() += 1;
        }
    }
    let calibration = by_name.values().find_map(|r| r.calibration.clone());
    let mut hosts: Vec<String> = by_name.values().filter_map(|r| r.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    let mut cases = Vec::with_capacity(header.catalogue.len());
    let mut missing = Vec::new();
    for planned in &header.catalogue {
        // A record wins: a case listed ignored may have been run anyway
        // (`--include-ignored`), and then its verdict is what it found.
        if let Some(record) = by_name.remove(&planned.name) {
            cases.push(record.case);
        } else if let Some(result) = &planned.not_supported {
            cases.push(result.clone());
        } else {
            missing.push(planned.name.clone());
        }
    }
    let unfinished: Vec<String> = missing
        .iter()
        .filter(|name| dir.join(RUNNING).join(file_name(name)).is_file())
        .cloned()
        .collect();
    let incomplete =
        (!missing.is_empty()).then(|| describe_missing(&header, &missing, &unfinished));
    let results = RunResults {
        schema: RESULTS_SCHEMA,
        kit_version: header.kit_version.clone(),
        backend: header.backend.clone(),
        instruments: header.instruments,
        claims: header.claims.clone(),
        seed: header.seed,
        cases,
        calibration,
        processes: header.processes,
        incomplete,
        data: header.data.clone(),
        build: header.build.clone(),
        hosts,
        ranks: Vec::new(),
    };
    Ok(Collected {
        header,
        results,
        missing,
        unfinished,
        stale: stale.into_iter().collect(),
    })
}

/// Why merged results are partial: how many cases have no result, which,
/// and which of them died in flight.
fn describe_missing(header: &RunHeader, missing: &[String], unfinished: &[String]) -> String {
    const SHOWN: usize = 10;
    let runnable = header
        .catalogue
        .iter()
        .filter(|planned| planned.not_supported.is_none())
        .count();
    let mut why = format!(
        "partial: {} of {runnable} runnable cases have no result ({}{})",
        missing.len(),
        missing
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
        if missing.len() > SHOWN {
            format!(", and {} more", missing.len() - SHOWN)
        } else {
            String::new()
        }
    );
    if !unfinished.is_empty() {
        why.push_str(&format!(
            "; started and never finished (the process running them died, e.g. an abort without COMMCHECK_ISOLATION=process): {}",
            unfinished.join(", ")
        ));
    }
    why
}

/// The catalogue as a header lists it: every case, with the result of each
/// one not-supported before anything runs (`seed_of` gives its seed).
pub(crate) fn planned<H: Harness>(
    cases: &[crate::Case<H>],
    seed_of: impl Fn(&str) -> u64,
) -> Vec<Planned> {
    cases
        .iter()
        .map(|case| Planned {
            name: case.name(),
            subject: case.subject,
            unclaimed: case.unclaimed,
            not_supported: case.not_supported_before_running().map(|reason| {
                crate::runner::execute::result(
                    case,
                    Verdict::NotSupported,
                    Some(reason.to_owned()),
                    0,
                    std::time::Duration::ZERO,
                    seed_of(&case.name()),
                )
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_keep_distinct_names_distinct() {
        assert_eq!(
            file_name("CAN-5::all_reduce_sum"),
            "CAN-5%3A%3Aall_reduce_sum"
        );
        assert_ne!(file_name("a::b"), file_name("a__b"));
        assert_eq!(file_name("a/b"), "a%2Fb");
        assert_eq!(file_name(".."), "%2E%2E");
    }

    #[test]
    fn an_empty_directory_is_an_error_saying_what_to_run() {
        let dir = tempfile::tempdir().unwrap();
        let error = collect(dir.path()).unwrap_err();
        assert!(matches!(error, RecordsError::Empty(_)));
        assert!(error.to_string().contains("holds no run's records"));
    }

    #[test]
    fn a_malformed_record_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(CASES)).unwrap();
        std::fs::write(dir.path().join(CASES).join("x.json"), "{\"schema\": 1").unwrap();
        let error = collect(dir.path()).unwrap_err();
        assert!(error.to_string().contains("x.json"), "{error}");
        assert!(matches!(error, RecordsError::Malformed { .. }));
    }
}
