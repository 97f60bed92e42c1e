//! The precision matrix's rules, shared by the in-process matrix
//! (`tests/mutants`), the one across processes (`tests/processes.rs`) and the
//! CUDA backend's (`tests/cuda_mutants.rs`): which invariants a defect may
//! fail, and what a row's problems are.

use std::collections::BTreeMap;
use std::time::Duration;

use commcheck::{CaseResult, RunResults, Verdict};
use commcheck_cpu::Defect;

/// A planted defect of some backend: its name, the invariant it breaks, and
/// the other invariants it may fail ([`OVERLAPS`]).
pub trait Planted: Copy + PartialEq + std::fmt::Display {
    fn name(self) -> &'static str;
    fn invariant(self) -> &'static str;
    /// The declared overlaps: [`OVERLAPS`]' entries of the CPU defect of
    /// the same name (the same behaviour breaks the same wording; every
    /// shared name breaks the same invariant on both backends).
    fn overlaps(self) -> Vec<&'static str> {
        OVERLAPS
            .iter()
            .filter(|(d, _, _)| d.name() == self.name())
            .map(|(_, id, _)| *id)
            .collect()
    }
}

impl Planted for Defect {
    fn name(self) -> &'static str {
        Defect::name(self)
    }
    fn invariant(self) -> &'static str {
        Defect::invariant(self)
    }
}

/// Invariants a defect may fail besides its own: `(defect, ID, why)`, where
/// *why* quotes the contract's wording (INVARIANTS.md) that makes the defect a violation of
/// that invariant too. Only overlaps the SPEC implies belong here; any other
/// cross-ID failure means a check blames the wrong invariant.
pub const OVERLAPS: &[(Defect, &str, &str)] = &[
    (
        Defect::RendezvousInputNotRetained,
        "RET-5",
        "a sender's output is its input tensor itself; RET-5: \"the completion itself retains the output's storage\"",
    ),
    (
        Defect::RendezvousInputNotRetained,
        "CAN-6",
        "a rendezvous send is live until its receiver posts, and its input is freed meanwhile; CAN-6: after a quarantine deadline \"every retained resource stays alive until the work really completes\"",
    ),
    (
        Defect::DropReleasesPending,
        "CAN-6",
        "RET-4: dropping a completion \"in any state (pending, failed, timed out)\" frees nothing live; CAN-6: after a quarantine deadline \"every retained resource stays alive until the work really completes\"",
    ),
    (
        Defect::DropReleasesPending,
        "CAN-7",
        "RET-4 covers dropping a \"failed\" completion; CAN-7: \"no error path frees live resources\"",
    ),
    (
        Defect::DropReleasesPending,
        "CAN-8",
        "CAN-8: edge deadlines must not \"break CAN-5..7\" (here CAN-6, at a 1 ns deadline)",
    ),
    (
        Defect::LeakRetained,
        "RET-6",
        "RET-6: a retained value \"is dropped after it (once the completion is gone)\"",
    ),
    (
        Defect::LeakRetained,
        "CAN-6",
        "CAN-6: quarantined resources are \"released after that (RET-7)\"",
    ),
    (
        Defect::LeakRetained,
        "CAN-8",
        "CAN-8: edge deadlines must not \"break CAN-5..7\" (here CAN-6's release)",
    ),
    (
        Defect::NonMonotonicCompletion,
        "EXC-5",
        "EXC-5: after wait() returned Ok(()), is_complete() \"is Ok(true)\" (every later call, so a flip back breaks it)",
    ),
    (
        Defect::NonStickyError,
        "P2P-2",
        "P2P-2: a header mismatch \"never yields success; the failure is sticky (EXC-6)\"",
    ),
    (
        Defect::SubmissionClearsError,
        "P2P-2",
        "P2P-2: a header mismatch \"never yields success; the failure is sticky (EXC-6)\"",
    ),
    (
        Defect::ErrorReleases,
        "CAN-7",
        "EXC-7: after Err resources used by native work stay alive = CAN-7: \"no error path frees live resources\"",
    ),
    (
        Defect::CompletedAtDeadline,
        "CAN-4",
        "CAN-4: pending work under a supported mode \"yields Ok(DeadlineExceeded { cancellation: m })\", so not Completed",
    ),
    (
        Defect::WrongCancellationMode,
        "CAN-4",
        "CAN-4: pending work yields DeadlineExceeded with the policy's mode, \"not Err and not another mode\"",
    ),
    (
        Defect::NativeCancelNoTeardown,
        "CAN-7",
        "CAN-7: an Err on live work comes only \"after live work was put in the selected disposition\" (finished teardown)",
    ),
    (
        Defect::NativeCancelNoTeardown,
        "CAN-8",
        "CAN-8: edge deadlines must not \"break CAN-5..7\" (here CAN-5)",
    ),
    (
        Defect::QuarantineDropsLive,
        "CAN-7",
        "CAN-7: under quarantine an Err comes after live work was quarantined; \"no error path frees live resources\"",
    ),
    (
        Defect::QuarantineDropsLive,
        "CAN-8",
        "CAN-8: edge deadlines must not \"break CAN-5..7\" (here CAN-6)",
    ),
    (
        Defect::FailedIsCompleted,
        "EXC-6",
        "EXC-6: after an error \"every later is_complete/wait/wait_bounded reports an error, never success\"",
    ),
    (
        Defect::FailedIsCompleted,
        "P2P-2",
        "P2P-2: a header mismatch \"never yields success; the failure is sticky (EXC-6)\"",
    ),
    (
        Defect::ForkSharesLane,
        "EXC-4",
        "EXC-4: \"a blocked submission on another executor lane does not delay it\" = SUB-1: \"a held lane does not block the others\"",
    ),
    (
        Defect::ExecutorNotRetained,
        "EXC-7",
        "EXC-7: \"after Err, resources still used by native work stay alive\": the executor of held, failed work is such a resource",
    ),
    (
        Defect::CollectiveDropsResources,
        "BRD-1",
        "RET-3: dropping the handles right after submission must leave \"the result correct\"; BRD-1's rounds drop the input handle as the runtime does, so freed inputs leave no root value to deliver",
    ),
    (
        Defect::LeakRetained,
        "CAN-5",
        "CAN-5: when NativeCancel returns, \"all may be freed at once\" (the kit reads it as: teardown has released them); a backend that never releases them breaks it",
    ),
    (
        Defect::EarlyCompletion,
        "P2P-2",
        "P2P-2: a mismatching header \"never yields success\": a completion that reports success before the receive ran yields success for it",
    ),
];

/// One row of the matrix: what the whole catalogue found for one defect.
pub struct Row<D: Planted = Defect> {
    pub defect: D,
    pub results: RunResults,
    pub wall: Duration,
}

impl<D: Planted> Row<D> {
    /// The verdicts of the failing cases, per invariant.
    pub fn failing(&self) -> BTreeMap<&str, Vec<Verdict>> {
        let mut ids: BTreeMap<&str, Vec<Verdict>> = BTreeMap::new();
        for case in &self.results.cases {
            if case.verdict.is_failure() {
                ids.entry(case.invariant.as_str())
                    .or_default()
                    .push(case.verdict);
            }
        }
        ids
    }

    /// Violations the cases attributed to other invariants, per invariant
    /// (one entry per observation).
    pub fn attributed(&self) -> BTreeMap<&str, Vec<Verdict>> {
        let mut ids: BTreeMap<&str, Vec<Verdict>> = BTreeMap::new();
        for case in &self.results.cases {
            for seen in &case.attributed {
                ids.entry(seen.invariant.as_str())
                    .or_default()
                    .push(Verdict::Fail);
            }
        }
        ids
    }

    /// Inconclusive cases, grouped per invariant: `ID::{subject,subject}`.
    pub fn inconclusive(&self) -> Vec<String> {
        let mut ids: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for case in &self.results.cases {
            if case.verdict == Verdict::Inconclusive {
                ids.entry(case.invariant.as_str())
                    .or_default()
                    .push(case.subject.to_string());
            }
        }
        ids.into_iter()
            .map(|(id, subjects)| match subjects.as_slice() {
                [one] => format!("{id}::{one}"),
                _ => format!("{id}::{{{}}}", subjects.join(",")),
            })
            .collect()
    }

    /// Whether some case of `id` failed.
    #[allow(dead_code, reason = "used by the in-process matrix only")]
    pub fn fails(&self, id: &str) -> bool {
        self.results
            .cases
            .iter()
            .any(|case| case.invariant == id && case.verdict.is_failure())
    }

    /// The matrix line.
    pub fn line(&self) -> String {
        let inconclusive = self.inconclusive();
        format!(
            "{:<26} {:<6} {:>5.1}s  fail: {}  inconclusive: {}  attributed: {}",
            self.defect.name(),
            self.defect.invariant(),
            self.wall.as_secs_f64(),
            counts(&self.failing()),
            if inconclusive.is_empty() {
                "-".to_owned()
            } else {
                inconclusive.join(" ")
            },
            counts(&self.attributed()),
        )
    }

    /// What is wrong with this row: a missing proof, or failures of an
    /// invariant neither the defect's own nor a declared overlap (one
    /// problem per such invariant, naming its cases).
    pub fn problems(&self) -> Vec<String> {
        let defect = self.defect;
        let id = defect.invariant();
        let mut problems = Vec::new();
        let own: Vec<_> = self
            .results
            .cases
            .iter()
            .filter(|c| c.invariant == id)
            .collect();
        if own.is_empty() {
            problems.push(format!("{defect}: no case checks {id}"));
        }
        for case in own.iter().filter(|c| c.verdict == Verdict::NotSupported) {
            problems.push(format!(
                "{defect}: {} is not-supported on the CPU harness: {}",
                case.name,
                case.message.clone().unwrap_or_default()
            ));
        }
        if !own.is_empty() && !own.iter().any(|c| c.verdict.is_failure()) {
            problems.push(format!(
                "{defect}: no case of {id} failed:\n{}",
                own.iter()
                    .map(|c| format!(
                        "    {} {} {}",
                        c.name,
                        c.verdict,
                        c.message.clone().unwrap_or_default()
                    ))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
        let mut stray: BTreeMap<&str, Vec<&CaseResult>> = BTreeMap::new();
        // A `flaky` verdict of another ID is a timing check that passed on its
        // retry: under the matrix's load it says nothing about the defect.
        for case in &self.results.cases {
            if case.verdict.is_failure()
                && case.verdict != Verdict::Flaky
                && case.invariant != id
                && !defect.overlaps().contains(&case.invariant.as_str())
            {
                stray.entry(case.invariant.as_str()).or_default().push(case);
            }
        }
        for (other, cases) in stray {
            problems.push(format!(
                "{defect} fails {other}, no declared overlap ({} case(s)):\n{}",
                cases.len(),
                cases
                    .iter()
                    .map(|c| format!(
                        "    {} {}: {}",
                        c.name,
                        c.verdict,
                        c.message.clone().unwrap_or_default()
                    ))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
        problems
    }
}

/// `ID×count` for each invariant, with the verdicts other than `fail`
/// among them (`ID×3[1 timeout]`); `-` for none.
fn counts(ids: &BTreeMap<&str, Vec<Verdict>>) -> String {
    if ids.is_empty() {
        return "-".to_owned();
    }
    ids.iter()
        .map(|(id, verdicts)| {
            let mut odd: BTreeMap<&str, usize> = BTreeMap::new();
            for verdict in verdicts.iter().filter(|v| **v != Verdict::Fail) {
                *odd.entry(verdict.as_str()).or_default() += 1;
            }
            let odd = if odd.is_empty() {
                String::new()
            } else {
                let odd: Vec<_> = odd.iter().map(|(v, n)| format!("{n} {v}")).collect();
                format!("[{}]", odd.join(", "))
            };
            format!("{id}×{}{odd}", verdicts.len())
        })
        .collect::<Vec<_>>()
        .join(" ")
}
