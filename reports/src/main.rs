//! `commcheck-report`: certify a bundled backend, verify, summarise and
//! compare certification reports. `commcheck-report help` for usage.
//!
//! Exit status: 0 success; 1 the check did not hold (level not reached,
//! report rejected, regressions found); 2 usage or I/O error.

use std::path::PathBuf;
use std::process::ExitCode;

#[cfg(all(feature = "mpi", feature = "cpu"))]
use commcheck_report::certify_across;
use commcheck_report::markdown::SUMMARY_CAP;
use commcheck_report::{
    diff, load_file, markdown, verify, CertifyOptions, Expectations, Level, Status,
    BUNDLED_BACKENDS,
};

const USAGE: &str = "\
commcheck-report: certification reports for commcheck

Usage:
  commcheck-report certify <backend> [--out DIR] [--expectations FILE] [--require LEVEL]
  commcheck-report verify <report.json>
  commcheck-report summary <report.json> [--max-bytes N]
  commcheck-report diff <old.json> <new.json>
  commcheck-report explain <ID>
  commcheck-report help [command]
  commcheck-report --version

Commands:
  certify   run the whole suite on a bundled backend and write its report
  verify    re-check a report: schema, completeness, statuses, digest
  summary   print a report's Markdown summary
  diff      show regressions, fixes, new and removed cases between two reports
  explain   print an invariant: its text, its source in the eredu docs, its evidence

`commcheck-report <command> --help` describes each command.
Exit status: 0 success; 1 check failed; 2 usage or I/O error.
";

const CERTIFY_HELP: &str = "\
commcheck-report certify <backend> [--out DIR] [--expectations FILE] [--require LEVEL]

Runs every case of the commcheck catalogue on a bundled backend (bundled: cpu)
and writes, into DIR:
  report.json           the report (the source of truth; `verify` checks it)
  junit.xml             JUnit XML (not-supported and waived cases are <skipped>)
  summary.md            Markdown summary, capped at 1 MiB, for CI step summaries
  report.partial.jsonl  case results streamed as they finish; removed once the
                        three files above are written (left behind = the run died)

Options:
  --out DIR             output folder (default: reports/out, relative to the
                        current directory; created if needed)
  --expectations FILE   TOML waivers: [[waiver]] invariant, subject, reason, link
  --require LEVEL       level to reach for exit status 0: core or full
                        (default: full, the level bundled backends must reach)

Progress goes to stderr: one line rewritten in place on a terminal, otherwise
(CI logs) a plain line every 25 cases and for each failing case.
Environment (passed to the kit): COMMCHECK_SEED (base seed, recorded),
COMMCHECK_CASE_TIMEOUT_MS (per-case watchdog, default 20000).
Exit status: 0 level reached; 1 not reached; 2 usage or I/O error.
";

const VERIFY_HELP: &str = "\
commcheck-report verify <report.json>

Re-checks a report: the schema version is known, the digest and each case's
fingerprint match, every must-pass case has exactly one result, only statuses
allowed at the level claimed appear, the level claimed is the one reached, and
every waiver has a reason and a link. Prints every problem found, each naming
the case or field at fault.
Exit status: 0 valid; 1 rejected; 2 unreadable file or usage error.
";

const SUMMARY_HELP: &str = "\
commcheck-report summary <report.json> [--max-bytes N]

Prints the report's Markdown summary (capped at N bytes, default 1048576,
cutting whole sections, lowest priority first, with a note naming them).
It does not verify the report: run `verify` for that.
Exit status: 0 printed; 2 unreadable report or usage error.
";

const DIFF_HELP: &str = "\
commcheck-report diff <old.json> <new.json>

Compares two reports case by case: regressions (not failing before, now fail,
timeout, crash or flaky), fixes, newly not-supported cases, other status
changes, new and removed cases, the level and the backend. It does not verify
the reports: run `verify` for that. The new report regressed, with one
`regressed: ...` line per reason, when its level is lower, a case newly fails,
a new case fails, a case was removed, a case became not-supported, or the
backend's name or device differ (a new version of the same backend does not).
Exit status: 0 no regression; 1 regressed; 2 unreadable report or usage error.
";

const EXPLAIN_HELP: &str = "\
commcheck-report explain <ID>

Prints the invariant ID (e.g. CAN-5; case names such as CAN-5::all_reduce_sum
are accepted too): its family and class, its text, where the eredu docs state
it, and the evidence a check of it needs. Every invariant is in INVARIANTS.md.
Exit status: 0 printed; 2 unknown ID or usage error.
";

/// A command-line problem: message for stderr, exit status 2.
struct Usage(String);

fn help_for(command: &str) -> Option<&'static str> {
    match command {
        "certify" => Some(CERTIFY_HELP),
        "verify" => Some(VERIFY_HELP),
        "summary" => Some(SUMMARY_HELP),
        "diff" => Some(DIFF_HELP),
        "explain" => Some(EXPLAIN_HELP),
        _ => None,
    }
}

/// Splits arguments into positionals and `--option value` pairs; `--help`
/// anywhere asks for help.
struct Parsed {
    positional: Vec<String>,
    options: Vec<(String, String)>,
    help: bool,
}

fn parse(args: &[String], known: &[&str]) -> Result<Parsed, Usage> {
    let mut parsed = Parsed {
        positional: Vec::new(),
        options: Vec::new(),
        help: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--help" || arg == "-h" {
            parsed.help = true;
        } else if let Some(name) = arg.strip_prefix("--") {
            let (name, inline) = match name.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (name, None),
            };
            if !known.contains(&name) {
                return Err(Usage(format!("unknown option `--{name}`")));
            }
            let value = match inline {
                Some(value) => value,
                None => args
                    .next()
                    .cloned()
                    .ok_or_else(|| Usage(format!("option `--{name}` needs a value")))?,
            };
            parsed.options.push((name.to_owned(), value));
        } else {
            parsed.positional.push(arg.clone());
        }
    }
    Ok(parsed)
}

impl Parsed {
    fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn exactly(&self, count: usize, what: &str) -> Result<(), Usage> {
        if self.positional.len() == count {
            Ok(())
        } else {
            let got = match self.positional.len() {
                0 => "none".to_owned(),
                _ => format!("`{}`", self.positional.join(" ")),
            };
            Err(Usage(format!(
                "expected {what}, got {got} (see `commcheck-report help`)"
            )))
        }
    }
}

fn run_certify(parsed: &Parsed) -> Result<ExitCode, Usage> {
    parsed.exactly(1, "one backend name")?;
    let backend = parsed.positional[0].as_str();
    let required = match parsed.option("require") {
        None => Level::Full,
        Some(text) => Level::parse(text)
            .filter(|l| *l != Level::None)
            .ok_or_else(|| Usage(format!("--require: expected core or full, got `{text}`")))?,
    };
    let expectations = match parsed.option("expectations") {
        None => Expectations::none(),
        Some(path) => Expectations::load(PathBuf::from(path).as_path())
            .map_err(|error| Usage(format!("rejected expectations file:\n{error}")))?,
    };
    let options = CertifyOptions {
        out: PathBuf::from(parsed.option("out").unwrap_or("reports/out")),
        expectations,
        progress: commcheck_report::ProgressStyle::for_stderr(),
        keep_partial: false,
    };
    #[cfg(all(feature = "mpi", feature = "cpu"))]
    if commcheck::processes::Processes::launched() {
        return certify_across_processes(backend, &options, required);
    }
    let certification = certify_bundled(backend, &options)?;
    Ok(conclude(&certification, required))
}

/// Certifies the bundled backend `backend` in this process.
#[cfg(feature = "cpu")]
fn certify_bundled(
    backend: &str,
    options: &CertifyOptions,
) -> Result<commcheck_report::Certification, Usage> {
    match backend {
        "cpu" => commcheck_report::certify(
            commcheck_reference::cpu::CpuHarness::new(),
            |_| true,
            options,
        )
        .map_err(|error| Usage(format!("certify: {error}"))),
        other => Err(unknown_backend(other)),
    }
}

/// Without the `cpu` feature no backend is bundled.
#[cfg(not(feature = "cpu"))]
fn certify_bundled(
    backend: &str,
    _options: &CertifyOptions,
) -> Result<commcheck_report::Certification, Usage> {
    Err(unknown_backend(backend))
}

/// `certify` names a backend this build does not bundle.
fn unknown_backend(name: &str) -> Usage {
    let bundled = if BUNDLED_BACKENDS.is_empty() {
        "none (built without the `cpu` feature)".to_owned()
    } else {
        BUNDLED_BACKENDS.join(", ")
    };
    Usage(format!(
        "unknown backend `{name}`: the bundled backends are {bundled}; certify your own \
         harness with the library's `commcheck_report::certify`"
    ))
}

/// `certify` in every process of `mpirun -n N commcheck-report certify cpu`:
/// the ranks of every world are the launch's processes; rank 0 writes.
#[cfg(all(feature = "mpi", feature = "cpu"))]
fn certify_across_processes(
    backend: &str,
    options: &CertifyOptions,
    required: Level,
) -> Result<ExitCode, Usage> {
    use commcheck::processes::Processes;
    use commcheck_reference::cpu::{CpuHarness, CpuProcesses};
    if backend != "cpu" {
        return Err(unknown_backend(backend));
    }
    let processes = Processes::from_mpi().map_err(|error| Usage(format!("certify: {error}")))?;
    let code = match CpuProcesses::connect(&processes)
        .map_err(|error| commcheck_report::CertifyError(error.0))
        .and_then(|cpu| {
            certify_across(
                &processes,
                CpuHarness::new().across(&cpu),
                |_| true,
                options,
            )
        }) {
        Ok(Some(certification)) => conclude(&certification, required),
        Ok(None) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!(
                "commcheck-report (rank {}): certify: {error}",
                processes.rank()
            );
            ExitCode::from(2)
        }
    };
    processes.finish();
    Ok(code)
}

/// Prints what a certification wrote and found; the exit status for `required`.
fn conclude(certification: &commcheck_report::Certification, required: Level) -> ExitCode {
    let report = &certification.report;
    for path in &certification.files {
        println!("wrote {}", path.display());
    }
    let count = |s| report.count(s);
    println!(
        "{} {}: level {} ({} cases: {} pass, {} failing, {} not-supported, {} waived, {} unexpected pass)",
        report.provenance.backend.name,
        report.provenance.backend.version,
        report.outcome(),
        report.cases.len(),
        count(Status::Pass),
        report.cases.iter().filter(|c| c.status.is_failure()).count(),
        count(Status::NotSupported),
        count(Status::Waived),
        count(Status::UnexpectedPass),
    );
    for case in report.cases.iter().filter(|c| c.status.is_failure()) {
        println!(
            "  {} {}: {}",
            case.status,
            case.name,
            case.message.as_deref().unwrap_or("")
        );
    }
    for case in report
        .cases
        .iter()
        .filter(|c| c.status == Status::UnexpectedPass)
    {
        println!(
            "  unexpected pass {}: waived but passed; remove its waiver",
            case.name
        );
    }
    print_waivers(report);
    if let Some(why) = &report.provenance.incomplete {
        eprintln!("commcheck-report: the run is incomplete: {why}");
    }
    if report.level >= required {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "commcheck-report: level {} not reached (got {})",
            required, report.level
        );
        ExitCode::from(1)
    }
}

/// Lists every waived case with its waiver's reason and link.
fn print_waivers(report: &commcheck_report::Report) {
    for case in report.cases.iter().filter(|c| c.status == Status::Waived) {
        if let Some(waiver) = &case.waiver {
            println!(
                "  waived {}: {} ({})",
                case.name, waiver.reason, waiver.link
            );
        }
    }
}

fn run_verify(parsed: &Parsed) -> Result<ExitCode, Usage> {
    parsed.exactly(1, "one report file")?;
    let path = PathBuf::from(&parsed.positional[0]);
    let text = std::fs::read_to_string(&path)
        .map_err(|error| Usage(format!("{}: cannot read: {error}", path.display())))?;
    match verify(&text) {
        Ok(report) => {
            println!(
                "{}: valid; {} {} reaches level {} ({} must-pass cases, digest {})",
                path.display(),
                report.provenance.backend.name,
                report.provenance.backend.version,
                report.outcome(),
                report.must_pass.len(),
                report.digest
            );
            print_waivers(&report);
            Ok(ExitCode::SUCCESS)
        }
        Err(problems) => {
            eprintln!(
                "{}: rejected, {} problem(s):",
                path.display(),
                problems.len()
            );
            for problem in problems {
                eprintln!("  {problem}");
            }
            Ok(ExitCode::from(1))
        }
    }
}

fn run_summary(parsed: &Parsed) -> Result<ExitCode, Usage> {
    parsed.exactly(1, "one report file")?;
    let cap = match parsed.option("max-bytes") {
        None => SUMMARY_CAP,
        Some(text) => text.parse().map_err(|_| {
            Usage(format!(
                "--max-bytes: expected a number of bytes, got `{text}`"
            ))
        })?,
    };
    let report = load_file(PathBuf::from(&parsed.positional[0]).as_path()).map_err(Usage)?;
    print!("{}", markdown::render_capped(&report, cap));
    Ok(ExitCode::SUCCESS)
}

fn run_diff(parsed: &Parsed) -> Result<ExitCode, Usage> {
    parsed.exactly(2, "two report files (old, new)")?;
    let old = load_file(PathBuf::from(&parsed.positional[0]).as_path()).map_err(Usage)?;
    let new = load_file(PathBuf::from(&parsed.positional[1]).as_path()).map_err(Usage)?;
    let diff = diff(&old, &new);
    print!("{}", diff.render());
    let regressed = diff.regressed();
    for reason in &regressed {
        println!("regressed: {reason}");
    }
    Ok(if regressed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn run_explain(parsed: &Parsed) -> Result<ExitCode, Usage> {
    parsed.exactly(1, "one invariant ID, e.g. CAN-5")?;
    let wanted = parsed.positional[0].as_str();
    let id = wanted.split_once("::").map_or(wanted, |(id, _)| id);
    let invariant = commcheck::spec::invariant(&id.to_ascii_uppercase()).ok_or_else(|| {
        let family = id
            .split('-')
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let same_family: Vec<&str> = commcheck::spec::INVARIANTS
            .iter()
            .filter(|i| i.family == family)
            .map(|i| i.id)
            .collect();
        Usage(if same_family.is_empty() {
            format!(
                "no invariant `{wanted}`: IDs are a family ({}) and a number, e.g. CAN-5",
                commcheck::spec::FAMILIES.join(", ")
            )
        } else {
            format!(
                "no invariant `{wanted}`; the {family} family has {}",
                same_family.join(", ")
            )
        })
    })?;
    print!("{}", commcheck::spec::explain(invariant));
    Ok(ExitCode::SUCCESS)
}

fn run(args: &[String]) -> Result<ExitCode, Usage> {
    let Some((command, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return Ok(ExitCode::from(2));
    };
    if matches!(command.as_str(), "--version" | "-V") {
        println!("commcheck-report {}", env!("CARGO_PKG_VERSION"));
        return Ok(ExitCode::SUCCESS);
    }
    if matches!(command.as_str(), "help" | "--help" | "-h") {
        match rest.first() {
            None => print!("{USAGE}"),
            Some(topic) => print!(
                "{}",
                help_for(topic).ok_or_else(|| Usage(format!("no command `{topic}`")))?
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let known: &[&str] = match command.as_str() {
        "certify" => &["out", "expectations", "require"],
        "summary" => &["max-bytes"],
        "verify" | "diff" | "explain" => &[],
        other => return Err(Usage(format!("unknown command `{other}`\n\n{USAGE}"))),
    };
    let parsed = parse(rest, known)?;
    if parsed.help {
        print!("{}", help_for(command).unwrap_or(USAGE));
        return Ok(ExitCode::SUCCESS);
    }
    match command.as_str() {
        "certify" => run_certify(&parsed),
        "verify" => run_verify(&parsed),
        "summary" => run_summary(&parsed),
        "explain" => run_explain(&parsed),
        _ => run_diff(&parsed),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    match run(&args) {
        Ok(code) => code,
        Err(Usage(message)) => {
            eprintln!("commcheck-report: {message}");
            ExitCode::from(2)
        }
    }
}
