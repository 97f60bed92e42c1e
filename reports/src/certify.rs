//! Running the suite and writing a certification: the sinks, streamed.
//!
//! [`certify`] runs the selected cases of the catalogue through
//! [`commcheck::run_cases_with`] and, in the output folder:
//! - streams each case to `report.partial.jsonl` as it finishes (one JSON
//!   object per line, written straight to the file: a first
//!   `{"kind":"start",…}` line with the backend and the must-pass count, then
//!   one `{"kind":"case",…}` line per case in completion order), so a
//!   crash of the process still leaves every case finished before it;
//! - writes `report.json`, `junit.xml` and `summary.md` once the run is
//!   over (each through a temporary file and a rename, so none is ever
//!   half-written), then removes `report.partial.jsonl`.
//!
//! A `report.partial.jsonl` left in a folder means that run did not finish.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use commcheck::settings::{Reader, Settings};
use commcheck::{Case, CaseResult, Harness};
use indicatif::{ProgressBar, ProgressDrawTarget};
use serde_json::Value;

use crate::expectations::Expectations;
use crate::model::{must_pass, Report, ReportCase, Status};
use crate::provenance::Environment;
use crate::{junit, markdown};

/// The JSON report (the source of truth).
pub const REPORT_FILE: &str = "report.json";
/// The JUnit XML view.
pub const JUNIT_FILE: &str = "junit.xml";
/// The Markdown summary.
pub const SUMMARY_FILE: &str = "summary.md";

/// The picture's file name (the invariant × subject grid, [`crate::picture`]).
pub const PICTURE_FILE: &str = "report.svg";
/// Case results streamed while the run goes on.
pub const PARTIAL_FILE: &str = "report.partial.jsonl";

/// How to run a certification.
#[derive(Debug, Clone)]
pub struct CertifyOptions {
    /// Output folder (created if needed).
    pub out: PathBuf,
    /// Waivers.
    pub expectations: Expectations,
    /// How progress is shown on stderr.
    pub progress: ProgressStyle,
    /// Keep `report.partial.jsonl` after the report is written (for debugging
    /// and tests; normally it is removed).
    pub keep_partial: bool,
}

/// How a certification shows its progress on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressStyle {
    /// Nothing.
    Off,
    /// A progress bar on stderr, redrawn in place as cases finish (elapsed
    /// time, cases done out of the total, the estimated time left, the
    /// counts by status, the last case and its status); drawn only when
    /// stderr is a terminal. At the end, a line per family and the grid.
    Line,
    /// A plain line every [`PLAIN_EVERY`] cases and for every failing case
    /// (elapsed seconds, counts by status), so CI logs show the run going
    /// on; at the end, a line per family with its counts and the grid.
    Plain,
}

impl ProgressStyle {
    /// `Line` when stderr is a terminal, `Plain` otherwise.
    pub fn for_stderr() -> Self {
        if std::io::stderr().is_terminal() {
            Self::Line
        } else {
            Self::Plain
        }
    }
}

/// Cases between two plain progress lines.
pub const PLAIN_EVERY: usize = 25;

impl CertifyOptions {
    /// Writes into `out`, no waivers, progress as suits stderr
    /// ([`ProgressStyle::for_stderr`]).
    pub fn new(out: impl Into<PathBuf>) -> Self {
        Self {
            out: out.into(),
            expectations: Expectations::none(),
            progress: ProgressStyle::for_stderr(),
            keep_partial: false,
        }
    }
}

/// What [`certify`] produced.
#[derive(Debug, Clone)]
pub struct Certification {
    /// The report written to `report.json`.
    pub report: Report,
    /// `report.json`, `junit.xml`, `summary.md`, in that order.
    pub files: Vec<PathBuf>,
}

/// Why a certification could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertifyError(pub String);

impl std::fmt::Display for CertifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CertifyError {}

fn io_error(path: &Path, error: impl std::fmt::Display) -> CertifyError {
    CertifyError(format!("{}: {error}", path.display()))
}

/// Writes `text` to `path` through a temporary file in the same folder and
/// a rename: `path` is either the old file or the whole new one, and a
/// failed write (a full disk) leaves no temporary file behind.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), CertifyError> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut temporary = tempfile::NamedTempFile::new_in(folder).map_err(|e| io_error(folder, e))?;
    // Reports are for sharing; tempfile creates its files readable by their
    // owner only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let readable = std::fs::Permissions::from_mode(0o644);
        temporary
            .as_file()
            .set_permissions(readable)
            .map_err(|e| io_error(temporary.path(), e))?;
    }
    temporary
        .write_all(text.as_bytes())
        .and_then(|()| temporary.as_file().sync_all())
        .map_err(|e| io_error(temporary.path(), e))?;
    temporary
        .persist(path)
        .map(drop)
        .map_err(|e| io_error(path, e.error))
}

/// Runs the cases `select` picks on `harness` and writes the certification
/// into `options.out` (see the module docs). The must-pass list is always the
/// whole one of this kit version: a partial selection yields a report whose
/// level is `none` and that `verify` rejects for its missing cases.
pub fn certify<H: Harness>(
    harness: H,
    select: impl Fn(&Case<H>) -> bool,
    options: &CertifyOptions,
) -> Result<Certification, CertifyError> {
    certify_by(harness, options, |harness, progress| {
        commcheck::run_cases_with(harness, select, progress)
            .map_err(|error| CertifyError(error.to_string()))
    })
}

/// [`certify`] with the ranks of every world in the processes of a launch
/// (`mpirun -n N commcheck-report certify ...`; see
/// [`commcheck::processes`]). Rank 0 writes the files and gets
/// `Some(certification)`; the other ranks write nothing and get `None`.
/// When a rank's process died, the report is built from the cases that ran
/// (its level is `none`) and says why in its provenance.
pub fn certify_across<H: Harness>(
    processes: &commcheck::processes::Processes,
    harness: H,
    select: impl Fn(&Case<H>) -> bool,
    options: &CertifyOptions,
) -> Result<Option<Certification>, CertifyError> {
    let run = |harness, progress: &(dyn Fn(&CaseResult, usize) + Sync)| {
        commcheck::processes::run_cases_across(processes, harness, &select, progress)
            .map_err(|error| CertifyError(error.to_string()))
    };
    if processes.rank() != 0 {
        return run(harness, &|_, _| {}).map(|_| None);
    }
    certify_by(harness, options, |harness, progress| {
        run(harness, progress)?.ok_or_else(|| CertifyError("rank 0 got no results".into()))
    })
    .map(Some)
}

/// Writes the certification of the results `run` produces (it calls its
/// second argument as each case finishes).
fn certify_by<H: Harness>(
    harness: H,
    options: &CertifyOptions,
    run: impl FnOnce(
        H,
        &(dyn Fn(&CaseResult, usize) + Sync),
    ) -> Result<commcheck::RunResults, CertifyError>,
) -> Result<Certification, CertifyError> {
    // A bad `COMMCHECK_*` setting, or one certify does not read, fails
    // before anything is written.
    let reader = if commcheck::processes::Processes::launched() {
        Reader::CASES_ACROSS
    } else {
        Reader::CASES
    };
    Settings::read(reader).map_err(|e| CertifyError(e.to_string()))?;
    std::fs::create_dir_all(&options.out).map_err(|e| io_error(&options.out, e))?;
    let must_pass = must_pass(&harness);
    let identity = harness.identity();
    let stream = Stream::create(&options.out.join(PARTIAL_FILE))?;
    stream.write(&serde_json::json!({
        "kind": "start",
        "backend": identity,
        "kit_version": crate::verify::KIT_VERSION,
        "must_pass": must_pass.len(),
    }));
    let progress = Progress::new(options.progress);
    let results = run(harness, &|result: &CaseResult, total| {
        let case = ReportCase::from_result(
            result,
            options
                .expectations
                .waiver_for(&result.invariant, result.subject),
        );
        let mut line = serde_json::to_value(&case).unwrap_or(Value::Null);
        if let Value::Object(members) = &mut line {
            members.insert("kind".to_owned(), Value::from("case"));
        }
        stream.write(&line);
        progress.update(&case, total);
    })?;
    progress.finish(&results);
    let report = Report::build(
        &results,
        must_pass,
        &options.expectations,
        Environment::detect(),
    );
    let files = write_report(&report, &options.out)?;
    stream.finish(options.keep_partial);
    Ok(Certification { report, files })
}

/// Writes `report.json`, `junit.xml`, `summary.md` and `report.svg` into `out`.
pub fn write_report(report: &Report, out: &Path) -> Result<Vec<PathBuf>, CertifyError> {
    let json = report
        .to_json()
        .map_err(|e| CertifyError(format!("cannot serialise the report: {e}")))?;
    let junit = junit::render(report).map_err(|e| CertifyError(e.to_string()))?;
    let files = [
        (REPORT_FILE, json),
        (JUNIT_FILE, junit),
        (SUMMARY_FILE, markdown::render(report)),
        (PICTURE_FILE, crate::picture::svg(report)),
    ];
    let mut written = Vec::new();
    for (name, text) in files {
        let path = out.join(name);
        write_atomically(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}

/// The streamed JSON-lines file.
struct Stream {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl Stream {
    fn create(path: &Path) -> Result<Self, CertifyError> {
        let file = File::create(path).map_err(|e| io_error(path, e))?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(Some(file)),
        })
    }

    /// Appends one line; on a write error, warns once and stops streaming
    /// (the final report is still written).
    fn write(&self, value: &Value) {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let Some(open) = file.as_mut() else { return };
        let line = format!("{value}\n");
        if let Err(error) = open.write_all(line.as_bytes()).and_then(|()| open.flush()) {
            eprintln!(
                "commcheck-report: cannot stream to {}: {error}",
                self.path.display()
            );
            *file = None;
        }
    }

    /// The run is over and its report written: the partial file goes
    /// (unless `keep`).
    fn finish(self, keep: bool) {
        drop(self.file);
        if !keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Progress on stderr.
struct Progress {
    style: ProgressStyle,
    done: AtomicUsize,
    failing: AtomicUsize,
    /// Cases done, by status.
    counts: Mutex<Vec<(Status, usize)>>,
    started: std::time::Instant,
    /// The bar of [`ProgressStyle::Line`].
    bar: Option<ProgressBar>,
}

/// The bar's layout: `00:01:12 [####....] 120/236 cases, eta 1m: 100 pass,
/// 20 not-supported; last CAN-2::barrier`.
const BAR_TEMPLATE: &str = "{elapsed_precise} [{bar:20}] {pos}/{len} cases, eta {left}: {wide_msg}";

/// The time left, once a quarter of the cases are done: the elapsed time
/// per case so far, times the cases left. The longest cases start first, so
/// a rate read earlier overstates what is left many times over (`None`:
/// too early to tell).
fn time_left(elapsed: std::time::Duration, done: u64, total: u64) -> Option<std::time::Duration> {
    (done > 0 && done * 4 >= total)
        .then(|| elapsed.mul_f64(total.saturating_sub(done) as f64 / done as f64))
}

impl Progress {
    fn new(style: ProgressStyle) -> Self {
        let bar = (style == ProgressStyle::Line).then(|| {
            let look = indicatif::ProgressStyle::with_template(BAR_TEMPLATE)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .with_key(
                    "left",
                    |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let left =
                            time_left(state.elapsed(), state.pos(), state.len().unwrap_or(0));
                        let _ = match left {
                            Some(left) => write!(w, "{:#}", indicatif::HumanDuration(left)),
                            None => write!(w, "…"),
                        };
                    },
                )
                .progress_chars("##.");
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(look)
        });
        Self {
            style,
            done: AtomicUsize::new(0),
            failing: AtomicUsize::new(0),
            counts: Mutex::new(Vec::new()),
            started: std::time::Instant::now(),
            bar,
        }
    }

    /// The counts so far, by status (`100 pass, 2 fail`).
    fn tally(&self, status: Status) -> String {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        match counts.iter_mut().find(|(s, _)| *s == status) {
            Some((_, n)) => *n += 1,
            None => counts.push((status, 1)),
        }
        counts.sort_by_key(|(s, _)| Status::ALL.iter().position(|a| a == s));
        counts
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn update(&self, case: &ReportCase, total: usize) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if case.status.is_failure() {
            self.failing.fetch_add(1, Ordering::SeqCst);
        }
        let tally = self.tally(case.status);
        match self.style {
            ProgressStyle::Off => {}
            ProgressStyle::Plain => {
                if case.status.is_failure() || done % PLAIN_EVERY == 0 || done == total {
                    eprintln!(
                        "commcheck-report: {done}/{total} cases done after {} s: {tally}{}",
                        self.started.elapsed().as_secs(),
                        if case.status.is_failure() {
                            format!(" ({} {})", case.name, case.status)
                        } else {
                            String::new()
                        }
                    );
                }
            }
            ProgressStyle::Line => {
                let Some(bar) = &self.bar else { return };
                bar.set_length(u64::try_from(total).unwrap_or(u64::MAX));
                bar.set_message(format!("{tally}; last {} {}", case.name, case.status));
                bar.inc(1);
            }
        }
    }

    /// Leaves the bar's last state on screen (nothing when no case ran),
    /// then, unless progress is off, one line per family with its counts
    /// and the invariant × subject grid, on lines of their own.
    fn finish(&self, results: &commcheck::RunResults) {
        if let Some(bar) = &self.bar {
            if self.done.load(Ordering::SeqCst) > 0 {
                bar.finish();
            } else {
                bar.finish_and_clear();
            }
        }
        if self.style == ProgressStyle::Off || results.cases.is_empty() {
            return;
        }
        let mut text = String::from("\n");
        for line in results.family_summary() {
            text.push_str(&format!("commcheck-report: {line}\n"));
        }
        text.push_str("commcheck-report: grid (invariant x subject):\n");
        for line in commcheck::runner::grid::Grid::of_results(results)
            .to_text()
            .lines()
        {
            text.push_str(&format!("  {line}\n"));
        }
        eprint!("{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_time_left_is_shown_before_a_quarter_of_the_cases() {
        use std::time::Duration;
        let second = Duration::from_secs(1);
        assert_eq!(time_left(second, 0, 236), None);
        assert_eq!(time_left(second, 58, 236), None);
        assert_eq!(time_left(second, 59, 236), Some(second * 3));
        assert_eq!(time_left(second, 236, 236), Some(Duration::ZERO));
    }
}
