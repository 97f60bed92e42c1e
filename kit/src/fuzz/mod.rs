//! Fuzzing a backend: one versioned decoder from bytes to inputs, shared by
//! every fuzz target and by the tests that replay stored inputs.
//!
//! A vendor's sequence target is three lines: a cargo-fuzz target file,
//! `fuzz/fuzz_targets/sequence.rs`, in a `fuzz` package that depends on
//! `commcheck`, `libfuzzer-sys` and what the harness uses. The backend
//! template (`templates/backend/fuzz/` in commcheck's repository) compiles
//! the suite's own harness file into the target, so there is one harness:
//!
//! ```ignore
//! #![no_main]
//! include!("../../tests/commcheck.rs"); // `Minimal`, the suite's harness (`Clone`)
//! libfuzzer_sys::fuzz_target!(|data: &[u8]| commcheck::fuzz::run(&Minimal, data));
//! ```
//!
//! [`run`] decodes the bytes ([`decode`]), runs the operation sequence
//! against the harness through the model ([`crate::model::check_sequence`]),
//! and panics with the divergence, its SPEC ID and the decoded input when the
//! backend disagrees with the model; libFuzzer then saves the input as a
//! crash. [`run_boundary`] and [`run_deadlines`] do the same for
//! point-to-point framing and bounded waits; [`check`], [`check_boundary`]
//! and [`check_deadlines`] return the [`Failure`] instead of panicking (for
//! tests that replay a corpus). Bytes that do not decode are a clean
//! [`Rejection`]: nothing runs, nothing fails. A harness is cloned into each
//! run, so it must be `Clone` (cheaply: it is cloned per input).
//!
//! The repository's `fuzz/` package has these targets for the CPU
//! reference backend (`sequence`, `boundary`, `deadlines`, and `report` for
//! commcheck-report's parsers), its corpus and regressions, and
//! `fuzz/nightly.sh`; see `fuzz/README.md`.
//!
//! # Input formats
//!
//! The first byte of every input is its format version. A stored input
//! decodes the same way forever: a change to what any bytes decode to is a
//! new version, decoded by a new module beside the old one (old inputs keep
//! their version byte and their meaning), and the corpus is migrated by
//! decoding each file and writing it back with [`Program::encode`] (or the
//! other inputs' `encode`), which writes the newest format. A version the
//! target does not know is [`Rejection::Version`]. `sequence` reads formats
//! 1 and 2 and writes 2 ([`FORMAT`]); the other targets read and write 1.
//!
//! Every `run` function counts its inputs, decoded and rejected, and
//! times their checks ([`decoded`]), and prints the counts to stderr beside
//! libFuzzer's status lines (`commcheck sequence: 8192 inputs, 8101 decoded
//! (98.9 %), 91 rejected; checks 802 µs per input (1247 inputs/s)`), so
//! random bytes being rejected show, and so does what the target's own
//! checks cost next to libFuzzer's exec/s.
//!
//! ## Format 2 (`sequence`)
//!
//! `[2] [ranks] [mask: u32 LE] [flags] (selector arguments)*`: a world of
//! `2 + ranks % 3` ranks (every rank but 0 a late peer:
//! [`crate::model::check_sequence_sized`]; a harness that does not build
//! that size runs it at 2), then format 1's mask, flags and operations over
//! the 24 kinds of [`Kinds::NAMES`]: the first 18 with format 1's argument
//! bytes, then `DropLane` (`lane`: a fork's executor dropped with its queued
//! work, RET-2), `EmptyLocal` (`lane`: empty local dependencies, EXC-10),
//! `SubmitLazy` (`lane`: lazy values given to `submit`, SUB-2) and
//! `Refused` (`api lane`, api bit 0 for `submit_local_dependencies`: a
//! submission refused by the submission-fault instrument, SUB-4), and two
//! shapes that take several operations in format 1, one operation each:
//! `DropQueued` (`lane`: plain work queued on a fork whose executor is then
//! dropped, RET-2) and `OrderedPair` (`lane`: a held producer, a consumer
//! ordered after it on another lane and released, SUB-3). At most 128
//! operations.
//!
//! ## Format 1
//!
//! - **`sequence`** ([`Program`]): `[1] [mask: u32 LE] [flags] (selector
//!   arguments)*`. The mask is a swarm: bit `k` enables operation kind `k`
//!   of [`Kinds::NAMES`] (a mask with no such bit enables all), so each input
//!   exercises its own subset of operations. Flags bit 0 makes the run
//!   settle after each submission and release (by events, or 1 ms
//!   without an observer: [`crate::model::Options::settle`]). Each operation is a selector byte
//!   (kind = enabled kinds\[selector % their number\]) and the kind's
//!   argument bytes: `lane fault` for submissions (preceded by `index` for
//!   `Operation`, `a b width` for `UnevenGather`, `s00 s01 s10 s11 width`
//!   for `AllToAll`, `root` for `Broadcast`, `votes` (bit r: member r) for
//!   `Agree`, `values header` for `SendReceive`; fault: bit 0), `sub` for
//!   the others (`sub delay` for `LateRelease`, `sub timeout mode` for
//!   `WaitBounded`, `sub lane` for `OrderAfter`, `count` for `Fork`). A
//!   timeout is a class byte (`% 8`: 1 ns, 50 µs, 500 µs, `Duration::MAX`,
//!   then `1 + u16` nanoseconds, `1 + u16` microseconds, `1 + u8`
//!   milliseconds, or `u64` seconds and `u32` nanoseconds). Decoding stops
//!   after 64 operations or at the first operation the bytes do not
//!   complete. The world has two ranks, and only the first 18 kinds exist.
//! - **`deadlines`** ([`DeadlineCase`]): `[1] [work] [operation] [mode]
//!   [release] [delay] [flags] [timeout]`; bytes past the end read as zero.
//! - **`boundary`** ([`BoundaryCase`]): `[1] [flags] [route] [header route]
//!   schema roles mutations`; bytes past the end read as zero.
//! - **`report`** ([`ReportInput`]): `[1] [parser] text` (`diff`: `[first
//!   length: u16 LE]` then two texts); invalid UTF-8 is replaced.

mod boundary;
mod format;
mod format2;
mod input;
mod tally;

use input::LIMIT;
pub use input::{
    BoundaryCase, DeadlineCase, Frame, Input, Kinds, Parser, Program, Rejection, ReleaseAt,
    ReportInput, Role, Target,
};

use std::sync::{Arc, Once};
use std::time::Duration;

use crate::harness::Harness;
use crate::model::{check_sequence_sized, check_sequence_with, Options, Sequence};

pub use boundary::{check_boundary, run_boundary};
pub use tally::{decoded, Checking, DecodedCount};

/// The newest format version this kit reads, and the one it writes
/// `sequence` inputs in; `deadlines`, `boundary` and `report` inputs are
/// still format 1 (their layouts did not change).
pub const FORMAT: u8 = input::SEQUENCE_VERSION;

/// Decodes `data` as an input of `target`: never panics, whatever the bytes.
pub fn decode(target: Target, data: &[u8]) -> Result<Input, Rejection> {
    match target {
        Target::Sequence => match data.first() {
            Some(&input::SEQUENCE_VERSION) => {
                let mut reader = format::Reader::new(data);
                reader.byte();
                format2::program(reader).map(Input::Sequence)
            }
            _ => format::program(data).map(Input::Sequence),
        },
        Target::Boundary => format::boundary(data).map(Input::Boundary),
        Target::Deadlines => format::deadline(data).map(Input::Deadlines),
        Target::Report => format::report(data).map(Input::Report),
    }
}

/// The stored inputs of one corpus or regressions folder
/// (`fuzz/corpus/<target>`, `fuzz/regressions/<target>`), sorted: every
/// file but hidden ones, decoded forms (`*.txt`) and a README. A missing
/// folder has none.
pub fn stored_inputs(folder: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .filter(|path| {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.') && !name.ends_with(".txt") && name != "README.md"
        })
        .collect();
    files.sort();
    files
}

/// The decoded form of `data` as `target` reads it: the `Debug` form of its
/// input (pretty-printed), or the rejection. Regression files store it
/// beside the bytes (`<name>.txt`).
pub fn describe(target: Target, data: &[u8]) -> String {
    match decode(target, data) {
        Ok(input) => format!("{input:#?}\n"),
        Err(rejection) => format!("rejected: {rejection}\n"),
    }
}

/// A failing input: what the backend did wrong, and the input decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The target that ran it.
    pub target: Target,
    /// The SPEC ID violated; `None` when a hang, a crash or the harness
    /// could not be attributed.
    pub id: Option<&'static str>,
    /// What was expected and what happened.
    pub message: String,
    /// The decoded input ([`describe`]).
    pub input: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.id {
            Some(id) => write!(f, "{id}: ")?,
            None => f.write_str("(no SPEC ID) ")?,
        }
        write!(
            f,
            "{}\n{} input:\n{}",
            self.message, self.target, self.input
        )
    }
}

impl std::error::Error for Failure {}

fn sequence_failure(
    target: Target,
    data: &[u8],
    divergence: crate::model::Divergence,
    ops: &Sequence,
) -> Failure {
    Failure {
        target,
        id: divergence.id,
        message: format!("{divergence}\nreplay:\n{ops}"),
        input: describe(target, data),
    }
}

/// The `sequence` target's check: decodes `data` and runs its operations
/// against `harness` through the model. `Ok` for rejected bytes.
pub fn check<H: Harness + Clone>(harness: &H, data: &[u8]) -> Result<(), Failure> {
    let Ok(Input::Sequence(program)) = decode(Target::Sequence, data) else {
        return Ok(());
    };
    // A world size the harness does not build runs at two ranks.
    let ranks = match harness.world_sizes().contains(program.ranks) {
        true => program.ranks,
        false => 2,
    };
    let outcome = check_sequence_sized(
        Arc::new(harness.clone()),
        &program.ops,
        program.options(),
        ranks,
    );
    judge(Target::Sequence, data, outcome.map(drop), &program.ops)
}

/// A sequence's outcome as a fuzz finding: a divergence, unless it is
/// inconclusive ([`Divergence::inconclusive`]: an unplaced fault, or a wait
/// bounded by time that expired on a loaded machine): then no finding.
///
/// [`Divergence::inconclusive`]: crate::model::Divergence::inconclusive
fn judge(
    target: Target,
    data: &[u8],
    outcome: Result<(), crate::model::Divergence>,
    ops: &Sequence,
) -> Result<(), Failure> {
    match outcome {
        Err(divergence) if !divergence.inconclusive() => {
            Err(sequence_failure(target, data, divergence, ops))
        }
        _ => Ok(()),
    }
}

/// The `deadlines` target's check: one bounded wait (1 ns to
/// `Duration::MAX`, either disposition) racing the work's completion,
/// checked by the model. `Ok` for rejected bytes.
pub fn check_deadlines<H: Harness + Clone>(harness: &H, data: &[u8]) -> Result<(), Failure> {
    let Ok(Input::Deadlines(case)) = decode(Target::Deadlines, data) else {
        return Ok(());
    };
    let ops = case.sequence();
    let options = Options {
        limit: LIMIT,
        settle: Duration::ZERO,
    };
    let outcome = check_sequence_with(Arc::new(harness.clone()), &ops, options);
    judge(Target::Deadlines, data, outcome.map(drop), &ops)
}

thread_local! {
    /// Set on the thread that runs fuzz inputs.
    static FUZZ_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Once per process: panics on threads other than the fuzzing one (the
/// rank threads, whose panics the kit catches and reports as divergences
/// with their SPEC ID) no longer go to the previous hook, which under
/// libFuzzer aborts the process at once.
fn contain_rank_panics() {
    static ONCE: Once = Once::new();
    FUZZ_THREAD.with(|fuzzing| fuzzing.set(true));
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if FUZZ_THREAD.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Writes the decoded input ([`describe`]) to the file named by
/// `COMMCHECK_FUZZ_DECODED`, when it is set: running a target binary on one
/// input with it set is how `fuzz/nightly.sh` stores a regression's decoded
/// form beside it.
fn write_decoded_if_asked(target: Target, data: &[u8]) {
    static PATH: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
    if let Some(path) = PATH.get_or_init(|| std::env::var_os("COMMCHECK_FUZZ_DECODED")) {
        if let Err(error) = std::fs::write(path, describe(target, data)) {
            eprintln!("COMMCHECK_FUZZ_DECODED: {error}");
        }
    }
}

pub(crate) fn fail(failure: Failure) -> ! {
    panic!("commcheck {} target: {failure}", failure.target)
}

/// Prepares a fuzz target's thread for one input: panics on the kit's
/// rank threads are reported with their SPEC ID instead of aborting at
/// once, with `COMMCHECK_FUZZ_DECODED=<file>` set the decoded input is
/// written there, and the input is counted ([`decoded`]). The input's check
/// is timed until the returned [`Checking`] is dropped. Every `run`
/// function calls it; a target of one's own (such as `report`) calls it too:
///
/// ```
/// use commcheck::fuzz::{prepare, Target};
/// let _checking = prepare(Target::Report, b"\x01\x00text");
/// // ... check the input ...
/// ```
pub fn prepare(target: Target, data: &[u8]) -> Checking {
    let checking = Checking::start(target);
    contain_rank_panics();
    write_decoded_if_asked(target, data);
    tally::count(target, decode(target, data).is_ok());
    checking
}

/// The `sequence` fuzz target: [`check`], panicking on a failure.
pub fn run<H: Harness + Clone>(harness: &H, data: &[u8]) {
    let _checking = prepare(Target::Sequence, data);
    if let Err(failure) = check(harness, data) {
        fail(failure)
    }
}

/// The `deadlines` fuzz target: [`check_deadlines`], panicking on a failure.
pub fn run_deadlines<H: Harness + Clone>(harness: &H, data: &[u8]) {
    let _checking = prepare(Target::Deadlines, data);
    if let Err(failure) = check_deadlines(harness, data) {
        fail(failure)
    }
}

#[cfg(test)]
mod tests;
