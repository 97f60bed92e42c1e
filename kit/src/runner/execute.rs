//! Running one case: each world size it builds, attempt by attempt, under the
//! case watchdog; how a world's end becomes a verdict (a timing failure is
//! retried once and `flaky` when it passes then; what the kit cannot vouch
//! for is `inconclusive` and retried); and the case's result record.

use crate::case::Case;
use crate::check::Finding;
use crate::dtype::Dtype;
use crate::harness::Harness;
use crate::operation::Operation;
use crate::results::{CaseResult, Verdict};
use crate::world::{run_world, Run, Script, WorldEnd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A case's own seed: stable for a given base seed and case name.
pub(crate) fn case_seed(base: u64, name: &str) -> u64 {
    name.bytes()
        .fold(base ^ 0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// What one attempt at a case found.
struct Attempt {
    verdict: Verdict,
    message: Option<String>,
    /// The world sizes it ran on.
    worlds: Vec<usize>,
    /// Whether it ended on a call that blocked (a [`WorldEnd::Blocked`]):
    /// that call has not returned, so its thread may still hold what the
    /// backend locks, and a retry in the same process would run into it.
    blocked: bool,
}

/// Runs one world of a case: `(ranks, seed, limit, script, run)`.
pub(crate) type World<'a, H> =
    &'a (dyn Fn(usize, u64, Duration, Script<H>, &Run) -> WorldEnd + Sync);

/// How a case's worlds run: in this process ([`run_world`]), all of a case's
/// sizes at once (each is a world of its own, as concurrent cases are); or
/// across the processes of a launch, one world at a time (the launch has
/// one set of processes).
pub(crate) enum Worlds<'a, H: Harness> {
    /// In this process, every size at once.
    AtOnce(World<'a, H>),
    /// One size after the other, until one does not pass.
    InTurn(World<'a, H>),
}

impl<H: Harness> Clone for Worlds<'_, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: Harness> Copy for Worlds<'_, H> {}

/// One attempt at `case`: a fresh world of each of its sizes; the verdict
/// is that of the first size (in the case's order) that does not pass, as
/// if they had run in turn.
fn attempt<H: Harness>(
    case: &Case<H>,
    seed: u64,
    limit: Duration,
    run: &Run,
    worlds: Worlds<'_, H>,
) -> Attempt {
    let script = match &case.script {
        Ok(script) => Arc::clone(script),
        Err(reason) => {
            return Attempt {
                verdict: Verdict::NotSupported,
                message: Some(reason.clone()),
                worlds: Vec::new(),
                blocked: false,
            }
        }
    };
    let world_at = |regime: Regime| -> WorldEnd {
        let Regime {
            ranks,
            large,
            dtype,
            sends,
        } = regime;
        let run = Run {
            journal: Arc::clone(&run.journal),
            attempt: run.attempt,
            large,
            large_dtype: dtype,
            largest_world: case.worlds.iter().copied().max().unwrap_or(ranks),
            sends,
        };
        match worlds {
            Worlds::AtOnce(world) | Worlds::InTurn(world) => {
                world(ranks, seed, limit, Arc::clone(&script), &run)
            }
        }
    };
    let runs = regimes(case);
    let mut ends: Vec<Option<WorldEnd>> = match worlds {
        Worlds::AtOnce(_) if runs.len() > 1 => std::thread::scope(|scope| {
            let running: Vec<_> = runs
                .iter()
                .map(|&world| {
                    std::thread::Builder::new()
                        .name("commcheck-case-world".into())
                        .spawn_scoped(scope, move || world_at(world))
                })
                .collect();
            running
                .into_iter()
                .zip(&runs)
                .map(|(spawned, &world)| match spawned {
                    Ok(thread) => thread.join().unwrap_or_else(|payload| WorldEnd::Crashed {
                        rank: 0,
                        message: format!(
                            "(the kit's world supervisor) panicked: {}",
                            crate::world::panic_message(&*payload)
                        ),
                    }),
                    // No thread to run it on: run it here, after the others.
                    Err(_) => world_at(world),
                })
                .map(Some)
                .collect()
        }),
        _ => runs.iter().map(|_| None).collect(),
    };
    // The verdict is that of the first run (in order) that does not pass.
    let mut ran = Vec::new();
    for (&world, end) in runs.iter().zip(&mut ends) {
        if world.large.is_none() {
            ran.push(world.ranks);
        }
        let end = end.take().unwrap_or_else(|| world_at(world));
        // A blocked call has not returned, and an overrun world's ranks
        // are still running: neither is retried beside them.
        let blocked = matches!(end, WorldEnd::Blocked { .. } | WorldEnd::Overran { .. });
        let (verdict, message) = classify(case, world, end, limit, run);
        if verdict != Verdict::Pass {
            return Attempt {
                verdict,
                message,
                worlds: ran,
                blocked,
            };
        }
    }
    Attempt {
        verdict: Verdict::Pass,
        message: None,
        worlds: ran,
        blocked: false,
    }
}

/// The world runs of `case`: each size at the standard submissions, then
/// once more (a fresh world of the first size) past the harness's protocol
/// boundaries where the case has such a regime, in `f32` and in each dtype
/// whose boundaries differ, and (RET cases and EXC-2 on a transfer or a
/// broadcast) once more with the sender or the root as the subject.
fn regimes<H: Harness>(case: &Case<H>) -> Vec<Regime> {
    let standard = |ranks| Regime {
        ranks,
        large: None,
        dtype: Dtype::F32,
        sends: false,
    };
    let mut runs: Vec<Regime> = case.worlds.iter().map(|&ranks| standard(ranks)).collect();
    if let (Some(&ranks), Some(large)) = (case.worlds.first(), case.large.as_ref()) {
        let past = |elements, dtype| Regime {
            large: Some(elements),
            dtype,
            ..standard(ranks)
        };
        runs.push(past(large.elements, Dtype::F32));
        runs.extend(
            large
                .dtypes
                .iter()
                .map(|&(dtype, elements)| past(elements, dtype)),
        );
        if large.sender {
            runs.push(Regime {
                sends: true,
                ..past(large.elements, Dtype::F32)
            });
        }
    }
    runs
}

/// How many worlds `case` runs (at once, in the adaptive count: what the
/// admission counts).
pub(crate) fn world_runs<H: Harness>(case: &Case<H>) -> usize {
    regimes(case).len()
}

/// One world run of a case.
#[derive(Debug, Clone, Copy)]
struct Regime {
    ranks: usize,
    /// Elements per rank past the protocol boundaries (`None`: the standard
    /// submissions).
    large: Option<usize>,
    /// The dtype of those elements.
    dtype: Dtype,
    /// Whether the subject is the member whose part needs no peer (a
    /// transfer's sender, a broadcast's root).
    sends: bool,
}

/// The verdict of one world run, of `ranks` ranks, at the standard
/// submissions or (`large`) past the harness's protocol boundaries.
fn classify<H: Harness>(
    case: &Case<H>,
    Regime {
        ranks,
        large,
        dtype,
        sends,
    }: Regime,
    end: WorldEnd,
    limit: Duration,
    run: &Run,
) -> (Verdict, Option<String>) {
    let mut parts = Vec::new();
    if case.worlds.len() > 1 {
        parts.push(format!("world of {ranks}"));
    }
    if let (Some(elements), Some(regime)) = (large, case.large.as_ref()) {
        parts.push(match dtype {
            Dtype::F32 => format!("{elements} elements per rank, {}", regime.why),
            other => format!(
                "{elements} {other} elements per rank, just past the largest protocol boundary the harness \
                 names for {other}"
            ),
        });
    }
    if sends {
        parts.push(
            match case.subject.operation() {
                Some(Operation::Broadcast) => "the subject is the root, its late peers receive",
                _ => "the subject sends, its late peer receives",
            }
            .to_owned(),
        );
    }
    let world = if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    };
    let id = case.invariant.id;
    match end {
        WorldEnd::Crashed { rank, message } => (
            Verdict::Crash,
            Some(format!("rank {rank}{world} {message}")),
        ),
        WorldEnd::TimedOut { ranks, stacks } => (
            Verdict::Timeout,
            Some(format!(
                "rank(s) {ranks:?}{world} did not finish, and no rank made progress for {limit:?} of watching (hung \
                 in backend or harness code){}",
                crate::world::where_they_were(&ranks, &stacks)
            )),
        ),
        WorldEnd::Overran { ranks, ran, idle } => (
            Verdict::Inconclusive,
            Some(format!(
                "{}: inconclusive, {id} not checked: rank(s) {ranks:?}{world} had not finished after {ran:?} but were \
                 not hung (the last progress {idle:?} before): this machine is too slow now to finish the case",
                case.name()
            )),
        ),
        WorldEnd::Blocked {
            rank,
            what,
            invariant,
            limit,
        } => {
            let seen = format!(
                "{what} on rank {rank}{world} had not returned after {limit:?} of time in which it could have run; the call must not block"
            );
            if invariant == id {
                (Verdict::Fail, Some(format!("{id} violated: {seen}")))
            } else if invariant == crate::world::SETUP {
                (
                    Verdict::Inconclusive,
                    Some(format!(
                        "{}: inconclusive, {id} not checked: setup: {what} on rank {rank}{world} had not returned after \
                         {limit:?}",
                        case.name()
                    )),
                )
            } else {
                run.journal_attribute(&invariant, &seen);
                (
                    Verdict::Inconclusive,
                    Some(format!(
                        "{invariant} violated while checking {id} (recorded for {invariant}): {seen}"
                    )),
                )
            }
        }
        WorldEnd::Finished(checks) => {
            let mut failures = Vec::new();
            let mut inconclusive = Vec::new();
            let mut unsupported = Vec::new();
            for (rank, check) in checks.into_iter().enumerate() {
                match check {
                    Ok(()) => {}
                    Err(Finding::Violation(message)) => failures.push(format!(
                        "{id} violated on rank {rank}{world}: {message}"
                    )),
                    Err(Finding::Harness(message)) => failures.push(format!(
                        "{}: harness error on rank {rank}{world}: {message}",
                        case.name()
                    )),
                    Err(Finding::Inconclusive(message)) => inconclusive.push(format!(
                        "{}: inconclusive on rank {rank}{world}, {id} not checked: {message}",
                        case.name()
                    )),
                    Err(Finding::NotSupported(reason)) => unsupported.push(reason),
                    Err(Finding::NothingToCheck(message)) => run.journal_note(&format!(
                        "nothing to check on rank {rank}{world}: {message}"
                    )),
                }
            }
            if !failures.is_empty() {
                (Verdict::Fail, Some(failures.join("; ")))
            } else if !inconclusive.is_empty() {
                (Verdict::Inconclusive, Some(inconclusive.join("; ")))
            } else if let Some(reason) = unsupported.into_iter().next() {
                (Verdict::NotSupported, Some(reason))
            } else {
                (Verdict::Pass, None)
            }
        }
    }
}

/// Attempts an inconclusive case may take in all (each with more lazy work).
const INCONCLUSIVE_ATTEMPTS: u32 = 3;

/// Runs one case in this process: one attempt; a retry for a timing check
/// that failed; more attempts, each with more lazy work, while inconclusive.
/// An attempt that ended on a blocked call is never retried (see
/// [`Attempt::blocked`]). With `at_once`, the case's worlds run at once
/// (when the runner's count of cases is its own, not `COMMCHECK_JOBS` or
/// libtest's `--test-threads`, which say how many worlds a backend may have
/// at a time).
pub(crate) fn execute<H: Harness>(
    harness: &Arc<H>,
    case: &Case<H>,
    base: u64,
    limit: Duration,
    at_once: bool,
) -> CaseResult {
    let world = |ranks, seed, limit, script, run: &Run| {
        run_world(Arc::clone(harness), ranks, seed, limit, script, run)
    };
    let worlds = if at_once {
        Worlds::AtOnce(&world)
    } else {
        Worlds::InTurn(&world)
    };
    execute_with(case, base, limit, worlds)
}

/// [`execute`], each world run by `worlds`.
/// `limit` is the per-case watchdog.
pub(crate) fn execute_with<H: Harness>(
    case: &Case<H>,
    base: u64,
    limit: Duration,
    worlds: Worlds<'_, H>,
) -> CaseResult {
    let started = Instant::now();
    let seed = case_seed(base, &case.name());
    let mut run = Run::default();
    let mut tried = attempt(case, seed, limit, &run, worlds);
    let mut attempts = 1;
    while tried.verdict == Verdict::Inconclusive
        && !tried.blocked
        && attempts < INCONCLUSIVE_ATTEMPTS
    {
        run.attempt = attempts;
        tried = attempt(case, seed, limit, &run, worlds);
        attempts += 1;
    }
    if case.timing && tried.verdict == Verdict::Fail && !tried.blocked {
        run.attempt = attempts;
        attempts += 1;
        let second = attempt(case, seed, limit, &run, worlds);
        if second.verdict == Verdict::Pass {
            tried.verdict = Verdict::Flaky;
            tried.message = tried
                .message
                .map(|m| format!("failed, then passed on retry: {m}"));
        } else {
            tried = second;
        }
    }
    // Every check reads completion through is_complete(): once it was seen
    // reporting Ok(true) for live work (EXC-2), another invariant's failure
    // in the same case rests on a false report.
    if let Some(early) = run.journal.early_completion() {
        // Cases about what is_complete() reports keep their own verdict: a
        // success reported for live work is EXC-2's early completion, or, after
        // an error, EXC-6's (and P2P-2's) lost stickiness.
        let about_reports = ["EXC-2", "EXC-6", "P2P-2"].contains(&case.invariant.id);
        if tried.verdict.is_failure() && !about_reports {
            run.journal_attribute("EXC-2", &early);
            tried.message = Some(format!(
                "{}: inconclusive, {} not checked: {early} (EXC-2), so this case's finding cannot be trusted: {}",
                case.name(),
                case.invariant.id,
                tried.message.unwrap_or_default()
            ));
            tried.verdict = Verdict::Inconclusive;
        }
    }
    let (notes, attributed) = run.journal.take();
    let instrumented = run.journal.instrumented();
    let mut result = result(
        case,
        tried.verdict,
        tried.message,
        attempts,
        started.elapsed(),
        seed,
    );
    result.worlds = tried.worlds;
    if instrumented {
        result.evidence = crate::results::Evidence::Instrumented;
    }
    result.notes = if result.verdict == Verdict::Pass {
        notes
    } else {
        Vec::new()
    };
    result.attributed = attributed;
    result
}

pub(crate) fn result<H: Harness>(
    case: &Case<H>,
    verdict: Verdict,
    message: Option<String>,
    attempts: u32,
    elapsed: Duration,
    seed: u64,
) -> CaseResult {
    CaseResult {
        name: case.name(),
        invariant: case.invariant.id.to_owned(),
        family: case.invariant.family.to_owned(),
        class: case.invariant.class,
        subject: case.subject,
        verdict,
        message,
        attempts,
        millis: elapsed.as_millis() as u64,
        seed,
        evidence: case.evidence,
        worlds: Vec::new(),
        notes: Vec::new(),
        attributed: Vec::new(),
    }
}
