//! The CPU backend's planted defects against each of its personalities, with
//! **no instruments**: what a vendor's black-box harness would see.
//!
//! For every personality and every [`Defect`], the cases of the defect's own
//! invariant run on `CpuHarness::with_defect(defect).with_personality(p)`
//! with `Instruments::NONE`. Each row is one of:
//! - `caught`: a case of the defect's own ID failed;
//! - `blind`: every case of that ID is not-supported without instruments (the
//!   kit says which instrument it needs), or the defect is declared below as
//!   one no black box can tell from a legal design, with why; the
//!   instrumented precision matrix (`cargo test --test mutants`) proves
//!   those checks;
//! - `cannot arise`: the defect cannot happen in that personality's design,
//!   declared below with why, or it lives on another personality's path
//!   (`Defect::personality`); the table fails if such a defect is caught
//!   (the declaration is then wrong);
//! - `MISSED`: none of the above: every case of that ID was decided, and
//!   none failed. Any missed row makes the exit status 1;
//! - `UNDECIDED`: not caught, and some case of that ID was `inconclusive`:
//!   the kit could not vouch for a bound because the machine was too busy
//!   (see the block guard in `kit/EVIDENCE.md`). Such defects run again, one
//!   at a time, after the others (the table's own defects, four at a time,
//!   are load too); one still undecided then makes the exit status 1, and
//!   the row says to run it on a quieter machine.
//!
//! ```sh
//! cargo run --release --example personality_defects            # every personality
//! cargo run --release --example personality_defects -- eager    # one
//! cargo run --release --example personality_defects -- lazy eager   # some
//! COMMCHECK_MUTANTS=ForkSharesLane,OrderAfterIgnored cargo run --example personality_defects -- lazy
//! ```
//!
//! The `collectives-cancel` personality changes a process-wide answer
//! (`supports_cancellation(NativeCancel)`), so with no argument every
//! personality runs in a process of its own (this program, again).

use std::process::{Command, ExitCode};
use std::sync::Mutex;
use std::time::Instant;

use commcheck::{run_cases, CaseResult, Instruments, Verdict};
use commcheck_cpu::Defect;
use commcheck_reference::cpu::{CpuHarness, PERSONALITIES};

/// Defects that cannot arise in a personality, with why: `(defect,
/// personality, why)`.
const CANNOT_ARISE: &[(Defect, &str, &str)] = &[
    (
        Defect::SubmitSkipsEvaluation,
        "eager",
        "tensor operations compute their values when called, so a submission has nothing left to evaluate",
    ),
    (
        Defect::NativeCancelErrors,
        "collectives-cancel",
        "supports_cancellation(NativeCancel) answers false, so no NativeCancel wait is ever asked for (CAN-4's NativeCancel part does not apply)",
    ),
];

/// Defects no black box can tell from a legal design, with why: without an
/// instrument, their one observable effect is one a correct backend may
/// show too.
const BLACK_BOX_BLIND: &[(Defect, &str)] = &[
    (
        Defect::BroadcastRootEarly,
        "a broadcast's root may legally complete before its late peers join; only the observer (or held work \
         ahead of it) tells a root that reports completion before its own part ran",
    ),
    (
        Defect::RendezvousCancelErrors,
        "a send may legally end before its receiver posts; only the observer says a send was still pending \
         when its NativeCancel deadline returned Err",
    ),
];

/// What one defect's own-ID cases showed.
enum Row {
    Caught(String),
    Blind(String),
    CannotArise(String),
    Missed(String),
    /// Not caught, and some case was inconclusive.
    Undecided(String),
    /// Declared cannot arise, yet caught.
    Stale(String),
}

fn classify(defect: Defect, personality: &str, cases: &[CaseResult]) -> Row {
    let elsewhere = defect
        .personality()
        .filter(|home| home.name() != personality)
        .map(|home| format!("the defect lives on the `{home}` personality's path only"));
    let declared = CANNOT_ARISE
        .iter()
        .find(|(d, p, _)| *d == defect && *p == personality)
        .map(|(_, _, why)| (*why).to_owned())
        .or(elsewhere);
    let failed: Vec<&CaseResult> = cases.iter().filter(|c| c.verdict.is_failure()).collect();
    if let Some(case) = failed.first() {
        let seen = format!(
            "{} of {} case(s) failed, e.g. {}",
            failed.len(),
            cases.len(),
            case.name
        );
        return match declared {
            Some(_) => Row::Stale(seen),
            None => Row::Caught(seen),
        };
    }
    if let Some(why) = declared {
        return Row::CannotArise(why);
    }
    if let Some((_, why)) = BLACK_BOX_BLIND.iter().find(|(d, _)| *d == defect) {
        return Row::Blind((*why).to_owned());
    }
    if !cases.is_empty() && cases.iter().all(|c| c.verdict == Verdict::NotSupported) {
        let reason = cases[0].message.clone().unwrap_or_default();
        return Row::Blind(reason);
    }
    let verdicts: Vec<String> = cases
        .iter()
        .map(|c| format!("{} {}", c.name, c.verdict))
        .collect();
    if cases.iter().any(|c| c.verdict == Verdict::Inconclusive) {
        return Row::Undecided(verdicts.join(", "));
    }
    Row::Missed(verdicts.join(", "))
}

/// The defects `COMMCHECK_MUTANTS` selects (all by default).
fn selected() -> Result<Vec<Defect>, String> {
    match std::env::var("COMMCHECK_MUTANTS") {
        Ok(names) if !names.trim().is_empty() => names
            .split(',')
            .map(str::trim)
            .map(|name| {
                Defect::ALL
                    .iter()
                    .copied()
                    .find(|d| d.name() == name)
                    .ok_or_else(|| format!("COMMCHECK_MUTANTS: no defect named `{name}`"))
            })
            .collect(),
        _ => Ok(Defect::ALL.to_vec()),
    }
}

/// Runs the cases of `defect`'s own ID against the personality, with no
/// instruments, and classifies what they showed.
fn row(defect: Defect, personality: &str) -> Row {
    let id = defect.invariant();
    CpuHarness::with_defect(defect)
        .with_personality(personality)
        .map_err(|e| e.to_string())
        .and_then(|harness| {
            run_cases(harness.with_instruments(Instruments::NONE), |case| {
                case.invariant().id == id
            })
            .map_err(|e| e.to_string())
        })
        .map(|results| classify(defect, personality, &results.cases))
        .unwrap_or_else(Row::Missed)
}

/// Runs the table for one personality in this process; `Ok(true)` when no
/// row is missed, undecided or stale.
fn one(personality: &str) -> Result<bool, String> {
    std::env::set_var("COMMCHECK_CASE_TIMEOUT_MS", "11000");
    std::env::set_var("COMMCHECK_JOBS", "4");
    // Chosen once, first: collectives-cancel is process-wide.
    CpuHarness::new()
        .with_personality(personality)
        .map_err(|e| e.to_string())?;
    let defects = selected()?;
    let started = Instant::now();
    let next = Mutex::new(0usize);
    let rows = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4.min(defects.len()) {
            scope.spawn(|| loop {
                let index = {
                    let mut next = next.lock().unwrap_or_else(|p| p.into_inner());
                    *next += 1;
                    *next - 1
                };
                let Some(&defect) = defects.get(index) else {
                    break;
                };
                let row = row(defect, personality);
                rows.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((defect, row));
            });
        }
    });
    let mut rows = rows.into_inner().unwrap_or_else(|p| p.into_inner());
    // Undecided defects again, alone: the kit's own retries ran while the
    // other defects loaded the machine.
    for (defect, row) in &mut rows {
        if let Row::Undecided(before) = row {
            *row = match self::row(*defect, personality) {
                Row::Caught(seen) => Row::Caught(format!("{seen} (run again alone)")),
                Row::Undecided(seen) => Row::Undecided(format!(
                    "{seen} (again alone; first: {before}): the kit could not vouch for its bounds on this machine, run it on a quieter one"
                )),
                other => other,
            };
        }
    }
    rows.sort_by_key(|(defect, _)| Defect::ALL.iter().position(|d| d == defect));
    let mut counts = [0usize; 6];
    for (defect, row) in &rows {
        let (slot, what, detail) = match row {
            Row::Caught(seen) => (0, "caught", seen.as_str()),
            Row::Blind(why) => (1, "blind", why.as_str()),
            Row::CannotArise(why) => (2, "cannot arise", why.as_str()),
            Row::Missed(seen) => (3, "MISSED", seen.as_str()),
            Row::Stale(seen) => (4, "CAUGHT, declared cannot arise", seen.as_str()),
            Row::Undecided(seen) => (5, "UNDECIDED", seen.as_str()),
        };
        counts[slot] += 1;
        println!(
            "{personality:<18} {:<26} {:<6} {what:<13} {detail}",
            defect.name(),
            defect.invariant()
        );
    }
    println!(
        "{personality}: {} defects in {:.1}s: {} caught, {} blind without instruments, {} cannot arise, {} missed, {} wrongly declared, {} undecided",
        rows.len(),
        started.elapsed().as_secs_f64(),
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        counts[5]
    );
    Ok(counts[3] + counts[4] + counts[5] == 0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(flag) = args.iter().find(|arg| arg.starts_with('-')) {
        let usage = format!(
            "usage: personality_defects [PERSONALITY...]   (of {}; none: every one)\n\
             One personality runs in this process; several run each in a process of its own, in turn.\n\
             COMMCHECK_MUTANTS=Name,Name restricts the defects.",
            PERSONALITIES.join(", ")
        );
        if flag == "--help" || flag == "-h" {
            println!("{usage}");
            return ExitCode::SUCCESS;
        }
        eprintln!("personality_defects: unknown option `{flag}`\n{usage}");
        return ExitCode::from(2);
    }
    if let [personality] = args.as_slice() {
        return match one(personality) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(error) => {
                eprintln!("personality_defects: {error}");
                ExitCode::from(2)
            }
        };
    }
    let Ok(me) = std::env::current_exe() else {
        eprintln!("personality_defects: cannot find this program to run it per personality");
        return ExitCode::from(2);
    };
    let personalities: Vec<&str> = if args.is_empty() {
        PERSONALITIES.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    let mut ok = true;
    for personality in personalities {
        match Command::new(&me).arg(personality).status() {
            Ok(status) if status.success() => {}
            Ok(status) if status.code() == Some(1) => ok = false,
            Ok(status) => {
                eprintln!("personality_defects: {personality}: {status}");
                return ExitCode::from(2);
            }
            Err(error) => {
                eprintln!("personality_defects: {personality}: {error}");
                return ExitCode::from(2);
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
