//! Merging the result files of several runs of the same harness into one.
//!
//! MLX keeps one communication group per process, so its certification is
//! two runs: one process (worlds of one rank, MLX's singleton group) and
//! `mpirun -n N` (one rank per process over MLX's ring). Each case of the
//! merged results combines that case's results in every run:
//!
//! - the verdict is the worst one (`crash`, `timeout`, `fail`, `flaky`,
//!   `inconclusive`, `pass`, then `not-supported`): a failure in any run is a
//!   failure, a run that could not build a world (`not-supported`) does not
//!   hide another run's verdict on it;
//! - the message joins the messages of the runs with that verdict, each
//!   prefixed with its run's label;
//! - worlds are the union of the sizes the runs ran it on; attempts and wall
//!   time add up; notes and attributed violations are kept, labelled.

use commcheck::{Attributed, CaseResult, Identity, RunResults, Verdict};

/// One run's results and the label its messages carry in the merge.
#[derive(Debug, Clone)]
pub struct LabelledRun {
    /// A short name of the run, e.g. `one process`.
    pub label: String,
    /// The run's results.
    pub results: RunResults,
}

/// Why runs cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError(pub String);

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MergeError {}

/// How bad a verdict is, for the merge: higher wins.
fn severity(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::NotSupported => 0,
        Verdict::Pass => 1,
        Verdict::Inconclusive => 2,
        Verdict::Flaky => 3,
        Verdict::Fail => 4,
        Verdict::Timeout => 5,
        Verdict::Crash => 6,
    }
}

/// Merges the runs' results. `order` gives the case order of the merged
/// results (the catalogue's); cases it does not name follow in the order
/// the runs list them.
pub fn merge(runs: &[LabelledRun], order: &[String]) -> Result<RunResults, MergeError> {
    let first = runs
        .first()
        .ok_or_else(|| MergeError("expected at least one result file, got none".into()))?;
    for run in &runs[1..] {
        let (a, b) = (&first.results, &run.results);
        if a.schema != b.schema || a.kit_version != b.kit_version {
            return Err(MergeError(format!(
                "expected results of one kit version and schema, got {} (schema {}) for {:?} and \
                 {} (schema {}) for {:?}",
                a.kit_version, a.schema, first.label, b.kit_version, b.schema, run.label
            )));
        }
        if a.backend.name != b.backend.name
            || a.backend.version != b.backend.version
            || a.instruments != b.instruments
            || a.claims != b.claims
        {
            return Err(MergeError(format!(
                "expected results of one backend with the same claims and instruments, got {} {} \
                 for {:?} and {} {} for {:?}",
                a.backend.name,
                a.backend.version,
                first.label,
                b.backend.name,
                b.backend.version,
                run.label
            )));
        }
    }
    let mut names: Vec<String> = order.to_vec();
    for run in runs {
        for case in &run.results.cases {
            if !names.contains(&case.name) {
                names.push(case.name.clone());
            }
        }
    }
    let cases = names
        .iter()
        .filter_map(|name| {
            let found: Vec<(&str, &CaseResult)> = runs
                .iter()
                .filter_map(|run| {
                    run.results
                        .cases
                        .iter()
                        .find(|case| case.name == *name)
                        .map(|case| (run.label.as_str(), case))
                })
                .collect();
            merge_case(&found)
        })
        .collect();
    let base = &first.results;
    let incomplete: Vec<String> = runs
        .iter()
        .filter_map(|run| {
            run.results
                .incomplete
                .as_ref()
                .map(|why| format!("[{}] {why}", run.label))
        })
        .collect();
    Ok(RunResults {
        schema: base.schema,
        kit_version: base.kit_version.clone(),
        backend: Identity {
            name: base.backend.name.clone(),
            version: base.backend.version.clone(),
            device: runs
                .iter()
                .map(|run| format!("[{}] {}", run.label, run.results.backend.device))
                .collect::<Vec<_>>()
                .join("; "),
        },
        instruments: base.instruments,
        claims: base.claims.clone(),
        seed: base.seed,
        cases,
        calibration: runs.iter().find_map(|run| run.results.calibration.clone()),
        processes: runs.iter().filter_map(|run| run.results.processes).max(),
        incomplete: (!incomplete.is_empty()).then(|| incomplete.join("; ")),
        data: base.data.clone(),
        build: base.build.clone(),
        hosts: {
            let mut hosts: Vec<String> = runs
                .iter()
                .flat_map(|run| run.results.hosts.clone())
                .collect();
            hosts.sort();
            hosts.dedup();
            hosts
        },
    })
}

/// One case's results in several runs, merged (see the module docs).
fn merge_case(found: &[(&str, &CaseResult)]) -> Option<CaseResult> {
    let worst = found
        .iter()
        .map(|(_, case)| case.verdict)
        .max_by_key(|verdict| severity(*verdict))?;
    let deciding: Vec<&(&str, &CaseResult)> = found
        .iter()
        .filter(|(_, case)| case.verdict == worst)
        .collect();
    let (_, template) = deciding.first()?;
    let messages: Vec<String> = deciding
        .iter()
        .filter_map(|(label, case)| case.message.as_ref().map(|m| format!("[{label}] {m}")))
        .collect();
    // A pass carries no message; any other verdict carries its runs' own.
    let message = (worst != Verdict::Pass && !messages.is_empty()).then(|| messages.join(" | "));
    let mut worlds: Vec<usize> = found
        .iter()
        .flat_map(|(_, case)| case.worlds.iter().copied())
        .collect();
    worlds.sort_unstable();
    worlds.dedup();
    let label_all = found.len() > 1;
    let labelled = |label: &str, text: &str| {
        if label_all {
            format!("[{label}] {text}")
        } else {
            text.to_owned()
        }
    };
    Some(CaseResult {
        name: template.name.clone(),
        invariant: template.invariant.clone(),
        family: template.family.clone(),
        class: template.class,
        subject: template.subject,
        verdict: worst,
        message,
        attempts: found.iter().map(|(_, case)| case.attempts).sum(),
        millis: found.iter().map(|(_, case)| case.millis).sum(),
        seed: template.seed,
        evidence: template.evidence,
        worlds,
        notes: found
            .iter()
            .flat_map(|(label, case)| case.notes.iter().map(|note| labelled(label, note)))
            .collect(),
        attributed: found
            .iter()
            .flat_map(|(label, case)| {
                case.attributed.iter().map(|seen| Attributed {
                    invariant: seen.invariant.clone(),
                    message: labelled(label, &seen.message),
                })
            })
            .collect(),
    })
}

/// `family: n pass, n fail, ...` lines for `results`, one per family.
pub fn family_counts(results: &RunResults) -> Vec<String> {
    let mut families: Vec<String> = Vec::new();
    for case in &results.cases {
        if !families.contains(&case.family) {
            families.push(case.family.clone());
        }
    }
    families
        .iter()
        .map(|family| {
            let of_family: Vec<&CaseResult> = results
                .cases
                .iter()
                .filter(|case| case.family == *family)
                .collect();
            let counts = [
                Verdict::Pass,
                Verdict::Fail,
                Verdict::NotSupported,
                Verdict::Timeout,
                Verdict::Crash,
                Verdict::Flaky,
                Verdict::Inconclusive,
            ]
            .into_iter()
            .filter_map(|verdict| {
                let n = of_family
                    .iter()
                    .filter(|case| case.verdict == verdict)
                    .count();
                (n > 0).then(|| format!("{n} {verdict}"))
            })
            .collect::<Vec<_>>()
            .join(", ");
            format!("{family}: {counts}")
        })
        .collect()
}
