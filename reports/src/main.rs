//! `commcheck-report`: certify a bundled backend, verify, summarise,
//! compare and sign certification reports. `commcheck-report help` for
//! usage.
//!
//! Exit status: 0 success; 1 the check did not hold (level not reached,
//! report or signature rejected, regressions found); 2 usage or I/O error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
#[cfg(all(feature = "mpi", feature = "cpu"))]
use commcheck_report::certify_across;
use commcheck_report::markdown::SUMMARY_CAP;
use commcheck_report::signature::{self, PublicKey, SecretKey, SignatureError, Signed};
use commcheck_report::{
    diff, load_file, markdown, verify, CertifyOptions, Expectations, Level, Status,
    BUNDLED_BACKENDS,
};

const AFTER_HELP: &str = "\
`commcheck-report <command> --help` describes each command.
Exit status: 0 success; 1 check failed; 2 usage or I/O error.";

const CERTIFY_ABOUT: &str = "\
Runs every case of the commcheck catalogue on a bundled backend (bundled: cpu)
and writes, into DIR:
  report.json           the report (the source of truth; `verify` checks it)
  report.json.minisig   its minisign signature, with --sign
  junit.xml             JUnit XML (not-supported and waived cases are <skipped>)
  summary.md            Markdown summary, capped at 1 MiB, for CI step summaries
  report.svg            the invariant x subject grid, coloured by status (hover:
                        each case's message); open it in a browser
  report.partial.jsonl  case results streamed as they finish; removed once the
                        files above are written (left behind = the run died)";

const CERTIFY_AFTER: &str = "\
Progress goes to stderr: one line rewritten in place on a terminal (elapsed,
cases done, ETA, counts by status), otherwise (CI logs) a plain line every 25
cases and for each failing case; then a line per family with its counts and
the invariant x subject grid.
Exit status: 0 level reached; 1 not reached; 2 usage or I/O error (a rejected
expectations file or an unusable --sign key is reported before the run).";

/// [`CERTIFY_AFTER`] with the settings table: every variable, and who
/// reads it (certify rejects the others when set).
fn certify_after() -> String {
    format!(
        "{CERTIFY_AFTER}\nEnvironment, checked before anything is written: certify reads the\n\
         variables of every run, and under mpirun those of mpirun launches; any other\n\
         one set is an error:\n{}",
        commcheck::settings::help_text().trim_end()
    )
}

const VERIFY_ABOUT: &str = "\
Re-checks a report: the schema version is known, the digest and each case's
fingerprint match, every must-pass case has exactly one result, only statuses
allowed at the level claimed appear, the level claimed is the one reached, and
every waiver has a reason and a link. Prints every problem found, each naming
the case or field at fault.

The digest is a checksum: anyone who edits a report can recompute it. With
--key, verify also checks the report's minisign signature, which proves who
made it: the signature must be by that key and cover the exact bytes of the
report. Without --key it says that the signature was not checked.";

const VERIFY_AFTER: &str = "\
Exit status: 0 valid (and, with --key, signed by that key); 1 rejected (a
problem in the report, or a signature that is missing, truncated, malformed,
by another key or not of this report); 2 unreadable report or key file, or
usage error.";

const SUMMARY_ABOUT: &str = "\
Prints the report's Markdown summary (capped at N bytes, default 1048576,
cutting whole sections, lowest priority first, with a note naming them).
It does not verify the report: run `verify` for that.";

const SUMMARY_AFTER: &str = "Exit status: 0 printed; 2 unreadable report or usage error.";

const DIFF_ABOUT: &str = "\
Compares two reports case by case: regressions (not failing before, now fail,
timeout, crash or flaky), fixes, newly not-supported cases, other status
changes, new and removed cases, the level and the backend. It does not verify
the reports: run `verify` for that. The new report regressed, with one
`regressed: ...` line per reason, when its level is lower, a case newly fails,
a new case fails, a case was removed, a case became not-supported, or the
backend's name or device differ (a new version of the same backend does not).";

const DIFF_AFTER: &str =
    "Exit status: 0 no regression; 1 regressed; 2 unreadable report or usage error.";

const EXPLAIN_ABOUT: &str = "\
Prints the invariant ID (e.g. CAN-5; case names such as CAN-5::all_reduce_sum
are accepted too): its family and class, its text, where the eredu docs state
it, and the evidence a check of it needs. Every invariant is in INVARIANTS.md.";

const EXPLAIN_AFTER: &str = "Exit status: 0 printed; 2 unknown ID or usage error.";

const REPORT_ABOUT: &str = "\
Makes a certification from the records a run of your own suite left: every
case run by `cargo test --test commcheck` or `cargo nextest run` (one process
per case), sharded or process-isolated runs, writes its own record into the
results directory (default target/commcheck/<backend>; COMMCHECK_RESULTS_DIR).
The records of the newest run are merged (records of earlier runs, with
another seed, backend version, claims, kit version or build, are left out and
counted); the report is equal to the one a single full run gives, volatile
fields aside. Writes into DIR the same files as `certify`:
  report.json           the report (`verify` checks it)
  report.json.minisig   its minisign signature, with --sign
  junit.xml             JUnit XML (not-supported and waived cases are <skipped>)
  summary.md            Markdown summary, capped at 1 MiB
  report.svg            the invariant x subject grid, coloured by status
A partial run (cases of the catalogue with no record) gives a report whose
level is `none` and whose provenance says it is partial, naming the missing
cases and those whose process died while they ran.";

const REPORT_AFTER: &str = "\
Exit status: 0 level reached; 1 not reached (a partial run never reaches one);
2 unreadable or empty results directory, usage or I/O error.";

const KEYGEN_ABOUT: &str = "\
Generates a minisign key pair for signing reports: the secret key (unencrypted,
so CI signs without a password prompt; written readable by its owner only) and
the public key. Keep the secret key secret: store it as a CI secret, never
commit it; anyone who has it can sign reports in your name. Publish the public
key: `verify --key` and `minisign -V -p KEY.pub -m report.json` check
signatures with it.";

const KEYGEN_AFTER: &str =
    "Exit status: 0 written; 2 a key file exists (without --force), I/O or usage error.";

/// Certification reports for commcheck.
#[derive(Parser)]
#[command(
    name = "commcheck-report",
    version,
    about = "commcheck-report: certification reports for commcheck",
    after_help = AFTER_HELP,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole suite on a bundled backend and write its report
    #[command(long_about = CERTIFY_ABOUT, after_help = certify_after())]
    Certify(CertifyArgs),
    /// Make a certification from the records of your own cargo test or nextest run
    #[command(long_about = REPORT_ABOUT, after_help = REPORT_AFTER)]
    Report(ReportArgs),
    /// Re-check a report: schema, completeness, statuses, digest, signature
    #[command(long_about = VERIFY_ABOUT, after_help = VERIFY_AFTER)]
    Verify(VerifyArgs),
    /// Print a report's Markdown summary
    #[command(long_about = SUMMARY_ABOUT, after_help = SUMMARY_AFTER)]
    Summary(SummaryArgs),
    /// Show regressions, fixes, new and removed cases between two reports
    #[command(long_about = DIFF_ABOUT, after_help = DIFF_AFTER)]
    Diff(DiffArgs),
    /// Print an invariant: its text, its source in the eredu docs, its evidence
    #[command(long_about = EXPLAIN_ABOUT, after_help = EXPLAIN_AFTER)]
    Explain(ExplainArgs),
    /// Generate a key pair for signing reports (`certify --sign`, `verify --key`)
    #[command(long_about = KEYGEN_ABOUT, after_help = KEYGEN_AFTER)]
    Keygen(KeygenArgs),
}

#[derive(Args)]
struct CertifyArgs {
    /// The bundled backend to certify (cpu)
    #[arg(value_name = "backend")]
    backend: String,
    /// The CPU backend's personality: an honest design that differs from the
    /// default, lazy (see commcheck_cpu::personality)
    #[arg(long, value_name = "NAME", default_value = "lazy")]
    #[cfg_attr(
        feature = "cpu",
        arg(value_parser = clap::builder::PossibleValuesParser::new(commcheck_reference::cpu::PERSONALITIES))
    )]
    personality: String,
    /// Certify the CPU backend as a harness with no instruments would
    /// (black-box evidence only: the level to expect is core); the same as
    /// `--instruments none`
    #[arg(long, conflicts_with = "instruments")]
    no_instruments: bool,
    /// Certify the CPU backend as a harness offering only these instruments
    /// would: `all` (the default), `none`, or a comma-separated list of hold,
    /// probe, ledger, fault, submission-fault, observer, wire-log (e.g.
    /// `probe,fault`)
    #[arg(long, value_name = "SET")]
    instruments: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
struct ReportArgs {
    /// The results directory your suite's run wrote (target/commcheck/<backend>)
    #[arg(value_name = "RESULTS_DIR")]
    records: PathBuf,
    #[command(flatten)]
    output: OutputArgs,
}

/// The options of a command that writes a certification (`certify`,
/// `report`).
#[derive(Args)]
struct OutputArgs {
    /// Output folder, relative to the current directory (created if
    /// needed; files of an earlier report there are replaced); by default
    /// under target/, never a checked-in folder
    #[arg(long, value_name = "DIR", default_value = "target/commcheck-report")]
    out: PathBuf,
    /// TOML waivers: [[waiver]] invariant, subject, reason, link
    #[arg(long, value_name = "FILE")]
    expectations: Option<PathBuf>,
    /// Level to reach for exit status 0
    #[arg(long, value_name = "LEVEL", value_enum, default_value_t = Required::Full)]
    require: Required,
    /// Sign report.json with this minisign secret key (from `keygen`)
    ///
    /// The key must be unencrypted (`keygen` makes one); the signature goes
    /// to report.json.minisig, beside the report. The key is read before
    /// anything runs or is written.
    #[arg(long, value_name = "SECRET_KEY_FILE", verbatim_doc_comment)]
    sign: Option<PathBuf>,
}

/// `--require`: the level a certification must reach.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Required {
    /// Every class-A and class-M must-pass case certifies
    Core,
    /// Every must-pass case certifies (the level bundled backends must reach)
    Full,
}

impl From<Required> for Level {
    fn from(required: Required) -> Self {
        match required {
            Required::Core => Level::Core,
            Required::Full => Level::Full,
        }
    }
}

#[derive(Args)]
struct VerifyArgs {
    /// The report to verify
    #[arg(value_name = "report.json")]
    report: PathBuf,
    /// Also check the report's signature with this minisign public key
    #[arg(long, value_name = "PUBLIC_KEY_FILE")]
    key: Option<PathBuf>,
    /// The signature file [default: the report's path + .minisig]
    #[arg(long, value_name = "FILE", requires = "key")]
    signature: Option<PathBuf>,
}

#[derive(Args)]
struct SummaryArgs {
    /// The report to summarise
    #[arg(value_name = "report.json")]
    report: PathBuf,
    /// Largest summary to print, in bytes (at least 4096: the heading and
    /// the note saying what was cut need that much)
    #[arg(long, value_name = "N", default_value_t = SUMMARY_CAP, value_parser = parse_bytes)]
    max_bytes: usize,
}

/// `--max-bytes`: a whole number of bytes, at least [`markdown::MIN_CAP`].
fn parse_bytes(text: &str) -> Result<usize, String> {
    let bytes: usize = text.parse().map_err(|_| {
        format!("expected a number of bytes (a whole number such as {SUMMARY_CAP}), got `{text}`")
    })?;
    if bytes < markdown::MIN_CAP {
        return Err(format!(
            "expected at least {} bytes (the heading and the note saying what was cut), got {bytes}",
            markdown::MIN_CAP
        ));
    }
    Ok(bytes)
}

#[derive(Args)]
struct DiffArgs {
    /// The earlier report
    #[arg(value_name = "old.json")]
    old: PathBuf,
    /// The later report
    #[arg(value_name = "new.json")]
    new: PathBuf,
}

#[derive(Args)]
struct ExplainArgs {
    /// An invariant ID (CAN-5) or case name (CAN-5::all_reduce_sum)
    #[arg(value_name = "ID")]
    id: String,
}

#[derive(Args)]
struct KeygenArgs {
    /// Where to write the secret key (keep it secret: a CI secret)
    #[arg(long, value_name = "FILE")]
    secret: PathBuf,
    /// Where to write the public key (publish it)
    #[arg(long, value_name = "FILE")]
    public: PathBuf,
    /// Replace existing key files
    #[arg(long)]
    force: bool,
}

/// A problem that stops a command: message for stderr, exit status 2.
struct Usage(String);

/// What a command that writes a certification needs besides the results,
/// read before the (long) run so that a bad option fails at once.
struct Output {
    options: CertifyOptions,
    required: Level,
    key: Option<SecretKey>,
}

impl OutputArgs {
    fn prepare(&self) -> Result<Output, Usage> {
        let expectations = match &self.expectations {
            None => Expectations::none(),
            Some(path) => Expectations::load(path)
                .map_err(|error| Usage(format!("rejected expectations file:\n{error}")))?,
        };
        let key = self
            .sign
            .as_deref()
            .map(SecretKey::load)
            .transpose()
            .map_err(|error| Usage(format!("--sign: {error}")))?;
        Ok(Output {
            options: CertifyOptions {
                out: self.out.clone(),
                expectations,
                progress: commcheck_report::ProgressStyle::for_stderr(),
                keep_partial: false,
            },
            required: self.require.into(),
            key,
        })
    }
}

fn run_certify(args: &CertifyArgs) -> Result<ExitCode, Usage> {
    let output = args.output.prepare()?;
    #[cfg(all(feature = "mpi", feature = "cpu"))]
    if commcheck::processes::Processes::launched() {
        return certify_across_processes(&args.backend, args, &output);
    }
    #[cfg(not(all(feature = "mpi", feature = "cpu")))]
    if commcheck::processes::Processes::launched() {
        // Each process would certify a world of its own and write the same
        // report: refuse rather than claim a run across processes.
        return Err(Usage(
            "certify: this process was started by an MPI launcher (mpirun set its environment), \
             but this commcheck-report was built without the `mpi` and `cpu` features, so it \
             cannot join the other processes: every process would certify alone. Rebuild with \
             `--features mpi,cpu`, or run it without mpirun"
                .into(),
        ));
    }
    let certification = certify_bundled(&args.backend, args, &output.options)?;
    finish(certification, &output)
}

fn run_report(args: &ReportArgs) -> Result<ExitCode, Usage> {
    let output = args.output.prepare()?;
    let made =
        commcheck_report::collect::report_from_records(&args.records, &output.options.expectations)
            .map_err(|error| Usage(format!("report: {error}")))?;
    for (run, count) in &made.collected.stale {
        eprintln!(
            "commcheck-report: left out {count} record(s) of an earlier run ({run}): another seed, \
             backend version, claims, kit version or build (compiler, target, eredu versions)"
        );
        // Runs under one seed merge: say which seed keeps the earlier one.
        let header = args.records.join("runs").join(format!("{run}.json"));
        let seed = std::fs::read_to_string(&header)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|value| value.get("seed").and_then(serde_json::Value::as_u64));
        if let (Some(seed), false) = (seed, made.collected.is_whole()) {
            eprintln!(
                "commcheck-report: to rerun some cases and keep that run's other records, rerun \
                 them under its seed (records of runs with one seed merge): \
                 COMMCHECK_SEED={seed} cargo test --test <your suite> -- <filters>"
            );
        }
    }
    let again = commcheck::runner::rerun::to_rerun(&made.report.cases);
    if !again.is_empty() {
        eprintln!(
            "commcheck-report: once the backend is fixed, this reruns the failing and inconclusive cases and \
             those that recorded another invariant's violation, under the run's seed (their records replace \
             these; then run `report` again):\n  {}",
            commcheck::runner::rerun::command(
                made.collected.header.seed,
                made.collected.header.suite.as_deref(),
                &again
            )
        );
    }
    std::fs::create_dir_all(&output.options.out)
        .map_err(|error| Usage(format!("{}: {error}", output.options.out.display())))?;
    let files = commcheck_report::write_report(&made.report, &output.options.out)
        .map_err(|error| Usage(format!("report: {error}")))?;
    finish(
        commcheck_report::Certification {
            report: made.report,
            files,
        },
        &output,
    )
}

/// Signs the certification's report when asked, then [`conclude`]s. A
/// report that could not be signed is exit status 2 (after the conclusion).
fn finish(
    mut certification: commcheck_report::Certification,
    output: &Output,
) -> Result<ExitCode, Usage> {
    let report = output
        .options
        .out
        .join(commcheck_report::certify::REPORT_FILE);
    let signed = output
        .key
        .as_ref()
        .map(|key| signature::sign_report(&report, key));
    if let Some(Ok(signed)) = &signed {
        certification.files.push(signed.signature.clone());
    }
    let code = conclude(
        &certification,
        output.required,
        signed.as_ref().and_then(|s| s.as_ref().ok()),
    );
    match signed {
        Some(Err(error)) => Err(Usage(format!(
            "the report is written but not signed: {error}"
        ))),
        _ => Ok(code),
    }
}

/// Certifies the bundled backend `backend` in this process.
#[cfg(feature = "cpu")]
fn certify_bundled(
    backend: &str,
    args: &CertifyArgs,
    options: &CertifyOptions,
) -> Result<commcheck_report::Certification, Usage> {
    match backend {
        "cpu" => commcheck_report::certify(cpu_harness(args)?, |_| true, options)
            .map_err(|error| Usage(format!("certify: {error}"))),
        other => Err(unknown_backend(other)),
    }
}

/// The CPU harness `args` ask for (an unknown personality is a usage error).
#[cfg(feature = "cpu")]
fn cpu_harness(args: &CertifyArgs) -> Result<commcheck_reference::cpu::CpuHarness, Usage> {
    let harness = commcheck_reference::cpu::CpuHarness::new()
        .with_personality(&args.personality)
        .map_err(|error| Usage(format!("certify: --personality: {}", error.0)))?;
    let instruments = match (&args.instruments, args.no_instruments) {
        (_, true) => commcheck::Instruments::NONE,
        (Some(set), false) => set
            .parse()
            .map_err(|error| Usage(format!("certify: --instruments: {error}")))?,
        (None, false) => return Ok(harness),
    };
    Ok(harness.with_instruments(instruments))
}

/// Without the `cpu` feature no backend is bundled.
#[cfg(not(feature = "cpu"))]
fn certify_bundled(
    backend: &str,
    _args: &CertifyArgs,
    _options: &CertifyOptions,
) -> Result<commcheck_report::Certification, Usage> {
    Err(unknown_backend(backend))
}

/// `certify` names a backend this build does not bundle.
fn unknown_backend(name: &str) -> Usage {
    let bundled = if BUNDLED_BACKENDS.is_empty() {
        "this build bundles no backend (it was built without the `cpu` feature)".to_owned()
    } else {
        format!("the bundled backends are {}", BUNDLED_BACKENDS.join(", "))
    };
    Usage(format!(
        "unknown backend `{name}`: {bundled}; certify your own \
         backend by running your suite (`cargo test --test commcheck` or `cargo nextest run`), then \
         `commcheck-report report target/commcheck/<backend>`"
    ))
}

/// `certify` in every process of `mpirun -n N commcheck-report certify cpu`:
/// the ranks of every world are the launch's processes; rank 0 writes (and
/// signs).
#[cfg(all(feature = "mpi", feature = "cpu"))]
fn certify_across_processes(
    backend: &str,
    args: &CertifyArgs,
    output: &Output,
) -> Result<ExitCode, Usage> {
    use commcheck::processes::Processes;
    use commcheck_reference::cpu::CpuProcesses;
    if backend != "cpu" {
        return Err(unknown_backend(backend));
    }
    let harness = cpu_harness(args)?;
    let processes = Processes::from_mpi().map_err(|error| Usage(format!("certify: {error}")))?;
    let code = match CpuProcesses::connect(&processes)
        .map_err(|error| commcheck_report::CertifyError(error.0))
        .and_then(|cpu| certify_across(&processes, harness.across(&cpu), |_| true, &output.options))
    {
        Ok(Some(certification)) => finish(certification, output).unwrap_or_else(|Usage(error)| {
            eprintln!("commcheck-report: {error}");
            ExitCode::from(2)
        }),
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
fn conclude(
    certification: &commcheck_report::Certification,
    required: Level,
    signed: Option<&Signed>,
) -> ExitCode {
    let report = &certification.report;
    for path in &certification.files {
        println!("wrote {}", path.display());
    }
    if let Some(signed) = signed {
        println!(
            "signed with key {}: {}",
            signed.key_id,
            signed.signature.display()
        );
    }
    let count = |s| report.count(s);
    println!("{}", report.decided());
    let groups = commcheck::runner::rerun::seen_by(&report.cases);
    if groups.iter().any(|group| !group.failed) {
        println!(
            "  violations seen by cases of other invariants, of which no case failed (the report cannot certify):"
        );
        for group in groups.iter().filter(|group| !group.failed) {
            println!("    {}", commcheck::runner::rerun::describe(group));
        }
    }
    println!(
        "{} {}: level {} ({}: {} pass, {} failing, {} not-supported, {} waived, {} unexpected pass)",
        report.provenance.backend.name,
        report.provenance.backend.version,
        report.outcome(),
        commcheck::results::cases(report.cases.len()),
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

fn run_verify(args: &VerifyArgs) -> Result<ExitCode, Usage> {
    let path = args.report.as_path();
    let text = commcheck_report::verify::read_text(path).map_err(Usage)?;
    let key = args
        .key
        .as_deref()
        .map(PublicKey::load)
        .transpose()
        .map_err(|error| Usage(format!("--key: {error}")))?;
    let content = verify(&text);
    let signed = key.as_ref().map(|key| {
        signature::verify_report_bytes(text.as_bytes(), path, key, args.signature.as_deref())
    });
    let mut problems = content.as_ref().err().cloned().unwrap_or_default();
    match &signed {
        Some(Err(error)) if !error.is_rejection() => {
            return Err(Usage(error.to_string()));
        }
        Some(Err(error)) => problems.push(format!("signature: {error}")),
        _ => {}
    }
    match (&content, problems.is_empty()) {
        (Ok(report), true) => {
            println!(
                "{}: valid; {} {} reaches level {} ({} must-pass cases, digest {})",
                path.display(),
                report.provenance.backend.name,
                report.provenance.backend.version,
                report.outcome(),
                report.must_pass.len(),
                report.digest
            );
            print_waivers(report);
        }
        _ => {
            eprintln!(
                "{}: rejected, {} problem(s):",
                path.display(),
                problems.len()
            );
            for problem in &problems {
                eprintln!("  {problem}");
            }
        }
    }
    match &signed {
        Some(Ok(verified)) => println!(
            "{}: signature good: made with key {} ({}); trusted comment: {}",
            path.display(),
            verified.key_id,
            verified.signature.display(),
            verified.trusted_comment
        ),
        Some(Err(_)) => {}
        None => println!("{}", unchecked_signature(path)),
    }
    // certify removes it once its report is written: one beside the report
    // is a later run's, which died before writing its own.
    let partial = path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join(commcheck_report::certify::PARTIAL_FILE);
    if partial.exists() {
        eprintln!(
            "{}: warning: {} is beside it: a later certify into this folder died before writing its \
             report, so this report.json may be from an earlier run (the partial file lists the cases that run \
             finished)",
            path.display(),
            partial.display()
        );
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What `verify` says without `--key`: a digest is not an author.
fn unchecked_signature(report: &Path) -> String {
    let beside = signature::signature_path(report);
    let found = if beside.exists() {
        format!(" ({} is there)", beside.display())
    } else {
        String::new()
    };
    format!(
        "{}: signature not checked (no --key){found}: the digest is a checksum anyone can \
         recompute, not proof of who made the report; `--key PUBLIC_KEY_FILE` checks the \
         signature",
        report.display()
    )
}

fn run_summary(args: &SummaryArgs) -> Result<ExitCode, Usage> {
    let report = load_file(&args.report).map_err(Usage)?;
    print!("{}", markdown::render_capped(&report, args.max_bytes));
    Ok(ExitCode::SUCCESS)
}

fn run_diff(args: &DiffArgs) -> Result<ExitCode, Usage> {
    let old = load_file(&args.old).map_err(Usage)?;
    let new = load_file(&args.new).map_err(Usage)?;
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

fn run_explain(args: &ExplainArgs) -> Result<ExitCode, Usage> {
    let wanted = args.id.as_str();
    let id = wanted.split_once("::").map_or(wanted, |(id, _)| id);
    let invariant = commcheck::spec::invariant(&id.to_ascii_uppercase()).ok_or_else(|| {
        // Quote at most 60 characters of what was asked.
        let wanted: String = match wanted.char_indices().nth(60) {
            Some((cut, _)) => format!("{}…", &wanted[..cut]),
            None => wanted.to_owned(),
        };
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

fn run_keygen(args: &KeygenArgs) -> Result<ExitCode, Usage> {
    let id = signature::generate_keys(&args.secret, &args.public, args.force).map_err(|error| {
        let hint = match error {
            SignatureError::KeyExists { .. } => " (pass --force to replace it)",
            _ => "",
        };
        Usage(format!("keygen: {error}{hint}"))
    })?;
    println!(
        "wrote {} (secret key {id}: keep it secret, e.g. as a CI secret; never commit it)",
        args.secret.display()
    );
    println!(
        "wrote {} (public key {id}: publish it; `verify --key` checks signatures with it)",
        args.public.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn run(command: &Command) -> Result<ExitCode, Usage> {
    match command {
        Command::Certify(args) => run_certify(args),
        Command::Report(args) => run_report(args),
        Command::Verify(args) => run_verify(args),
        Command::Summary(args) => run_summary(args),
        Command::Diff(args) => run_diff(args),
        Command::Explain(args) => run_explain(args),
        Command::Keygen(args) => run_keygen(args),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version: exit status 0; usage errors: 2.
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    match run(&cli.command) {
        Ok(code) => code,
        Err(Usage(message)) => {
            eprintln!("commcheck-report: {message}");
            ExitCode::from(2)
        }
    }
}
