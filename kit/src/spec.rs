//! The invariant catalogue (INVARIANTS.md, generated from it): IDs are the vocabulary of cases,
//! results, reports and mutants.

/// How an invariant can be observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Class {
    /// Black-box, through the public API on one rank.
    A,
    /// Needs several ranks (a late peer keeps work pending).
    M,
    /// Needs an instrument the harness provides.
    I,
}

/// One invariant of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invariant {
    /// Stable ID, e.g. `CAN-5`.
    pub id: &'static str,
    /// Family prefix, e.g. `CAN`.
    pub family: &'static str,
    /// Observation class.
    pub class: Class,
    /// The invariant.
    pub text: &'static str,
    /// Where the eredu crates' docs state it (or why the kit infers it).
    pub source: &'static str,
    /// What observing it takes: class A, M or I, with the weaker forms a
    /// harness without instruments still gets.
    pub evidence: &'static str,
}

/// Looks an invariant up by ID.
pub fn invariant(id: &str) -> Option<&'static Invariant> {
    INVARIANTS.iter().find(|invariant| invariant.id == id)
}

/// Every invariant (INVARIANTS.md), in catalogue order.
pub const INVARIANTS: &[Invariant] = &[
    Invariant { id: "RET-1", family: "RET", class: Class::I, text: "The completion from `submit_local_dependencies` keeps the native storage of every submitted tensor alive until exact completion or safe cancellation teardown, even after the caller dropped every handle.", source: "runtime `backend.rs` CommunicationBackend doc", evidence: "I" },
    Invariant { id: "RET-2", family: "RET", class: Class::I, text: "It also keeps the executor / stream alive (drop the owned executor right after submitting: the work still completes correctly).", source: "runtime `backend.rs` CommunicationBackend doc", evidence: "I (A in its weak form)" },
    Invariant { id: "RET-3", family: "RET", class: Class::I, text: "A communication completion of any operation retains its input and output tensors, staging/count buffers, the group, the route and the stream; dropping all of those handles right after submission leaves the result correct.", source: "runtime `CommunicationCompletion` doc", evidence: "I (A/M weak form)" },
    Invariant { id: "RET-4", family: "RET", class: Class::I, text: "Dropping a completion in any state (pending, failed, timed out) never frees a resource that native work still uses.", source: "core `Completion::resources_releasable` doc, last lines", evidence: "I" },
    Invariant { id: "RET-5", family: "RET", class: Class::I, text: "The completion itself retains the output's storage: `Submission::wait_bounded` drops `output` right after the completion returns.", source: "core `Submission::wait_bounded` doc", evidence: "I" },
    Invariant { id: "RET-6", family: "RET", class: Class::A, text: "A value given to `retain_until_complete` is not dropped before exact completion, and is dropped after it (once the completion is gone).", source: "runtime `SubmissionBackend` doc", evidence: "A (drop flag)" },
    Invariant { id: "RET-7", family: "RET", class: Class::I, text: "No leak: once the work has completed (or its quarantine released it) and every handle is dropped, every native resource it used is released within a bounded time.", source: "implied by \"until\" in the docs", evidence: "I" },
    Invariant { id: "RET-8", family: "RET", class: Class::I, text: "`submit_local_dependencies` selects no group and no route: its completion retains none, and a timeout on it never fences a group.", source: "runtime doc \"does not select or infer a collective group\"", evidence: "I / M" },
    Invariant { id: "EXC-1", family: "EXC", class: Class::M, text: "`is_complete()` is nonblocking: it returns promptly while work is pending.", source: "core `Completion::is_complete`", evidence: "A+M / I" },
    Invariant { id: "EXC-2", family: "EXC", class: Class::M, text: "`is_complete()` never returns `Ok(true)` before this exact submission's work has completed.", source: "core `Completion::is_complete`", evidence: "M / I" },
    Invariant { id: "EXC-3", family: "EXC", class: Class::A, text: "Monotonic: after `Ok(true)`, never `Ok(false)` again.", source: "upstream completion-event design", evidence: "A" },
    Invariant { id: "EXC-4", family: "EXC", class: Class::M, text: "`wait()` returns only after this submission completed, and waits for nothing else: a blocked submission on another executor lane does not delay it.", source: "core `Completion::wait` \"this exact completion only\"", evidence: "M / I" },
    Invariant { id: "EXC-5", family: "EXC", class: Class::A, text: "After `wait()` returned `Ok(())`, `is_complete()` is `Ok(true)`.", source: "derived", evidence: "A" },
    Invariant { id: "EXC-6", family: "EXC", class: Class::I, text: "Errors are sticky: once an error was reported, every later `is_complete`/`wait`/`wait_bounded` reports an error, never success.", source: "core `resources_releasable` doc", evidence: "A with fault injection (I) or M" },
    Invariant { id: "EXC-7", family: "EXC", class: Class::I, text: "An error is not release: after `Err`, resources still used by native work stay alive.", source: "core `Completion::wait` doc", evidence: "I" },
    Invariant { id: "EXC-8", family: "EXC", class: Class::I, text: "`resources_releasable()` is nonblocking, `false` while work is pending, never `true` because of a timeout or cancellation request alone, and runs no application destructor (a `retain_until_complete` value is not dropped inside it).", source: "core `resources_releasable` doc", evidence: "I / M" },
    Invariant { id: "EXC-9", family: "EXC", class: Class::A, text: "A backend that does not override `resources_releasable` agrees with `matches!(is_complete(), Ok(true))`; one that overrides it still obeys EXC-8.", source: "core default method", evidence: "A" },
    Invariant { id: "EXC-10", family: "EXC", class: Class::A, text: "`submit_local_dependencies` with no tensors completes promptly.", source: "upstream completion-event design", evidence: "A" },
    Invariant { id: "CAN-1", family: "CAN", class: Class::M, text: "Work that finishes well before the deadline yields `Ok(Completed)`; work that has not finished never yields `Completed`.", source: "core `BoundedCompletion::wait_bounded`", evidence: "M / I" },
    Invariant { id: "CAN-2", family: "CAN", class: Class::M, text: "`DeadlineExceeded` is never returned before `timeout` elapsed, and `wait_bounded` returns within `timeout` plus a documented slack (NativeCancel teardown time measured and reported separately).", source: "core `BoundedCompletionWait::timeout`, `BoundedCompletionOutcome`", evidence: "M / I" },
    Invariant { id: "CAN-3", family: "CAN", class: Class::M, text: "The reported `cancellation` equals the policy's mode.", source: "core `BoundedCompletionOutcome::DeadlineExceeded`", evidence: "M / I" },
    Invariant { id: "CAN-4", family: "CAN", class: Class::M, text: "`supports_cancellation(m) == true` means: pending work under mode `m` yields `Ok(DeadlineExceeded { cancellation: m })`, not `Err` and not another mode. A backend that cannot honour `m` must answer `false`.", source: "core `supports_cancellation` doc", evidence: "M / I" },
    Invariant { id: "CAN-5", family: "CAN", class: Class::I, text: "NativeCancel: when `DeadlineExceeded{NativeCancel}` returns, native teardown is finished: no work touches any retained resource, all may be freed at once, and the executor accepts and completes new work.", source: "core `BoundedCompletion` doc", evidence: "I" },
    Invariant { id: "CAN-6", family: "CAN", class: Class::I, text: "QuarantineUntilComplete: after `DeadlineExceeded{Quarantine…}` every retained resource stays alive until the work really completes (late peer joins / hold released), and is released after that (RET-7).", source: "core `BoundedCompletion` doc", evidence: "I + M" },
    Invariant { id: "CAN-7", family: "CAN", class: Class::I, text: "An `Err` from `wait_bounded` either reports terminally completed (failed) work, or comes after live work was put in the *selected* disposition; no error path frees live resources.", source: "core `BoundedCompletion` doc (\"never return an error by merely dropping live resources\")", evidence: "I" },
    Invariant { id: "CAN-8", family: "CAN", class: Class::A, text: "Edge deadlines (1 ns, sub-millisecond, `Duration::MAX`) neither panic nor overflow nor break CAN-5..7.", source: "`BoundedCompletionWait::new` accepts all positive durations", evidence: "A / I" },
    Invariant { id: "CAN-9", family: "CAN", class: Class::I, text: "Failed work yields `Err`, never `Completed`.", source: "core doc + runtime use", evidence: "I (fault) / M" },
    Invariant { id: "SUB-1", family: "SUB", class: Class::A, text: "`fork_executors(e, n)` returns exactly `n` executors, and they are independent lanes (a held lane does not block the others).", source: "runtime `SubmissionBackend::fork_executors`", evidence: "A / I" },
    Invariant { id: "SUB-2", family: "SUB", class: Class::A, text: "`submit` evaluates exactly the given values; after its completion their values are materialised and correct.", source: "runtime `SubmissionBackend::submit`", evidence: "A" },
    Invariant { id: "SUB-3", family: "SUB", class: Class::A, text: "`order_after(c, e)` orders work submitted on `e` afterwards after `c`'s producer: the consumer sees the producer's results.", source: "runtime `SubmissionBackend::order_after`", evidence: "A / I" },
    Invariant { id: "SUB-4", family: "SUB", class: Class::I, text: "A submission that returns `Err` leaves no live native work behind, or has put it in a safe disposition (the docs are silent; the kit states this as the only safe reading).", source: "gap in the upstream docs", evidence: "I" },
    Invariant { id: "SUM-1", family: "SUM", class: Class::M, text: "`all_reduce_sum`: output = elementwise sum over members, same shape and dtype; identity on a singleton group.", source: "`SumReductionBackend`", evidence: "M" },
    Invariant { id: "SUM-2", family: "SUM", class: Class::M, text: "A wave of several reductions submitted before any wait all complete (waiting only after the whole wave never deadlocks).", source: "runtime `all_reduce_sum_wave` doc", evidence: "M" },
    Invariant { id: "GAT-1", family: "GAT", class: Class::M, text: "`all_gather_even`: concatenation of members' inputs in member order on `axis`.", source: "`EvenGatherBackend`", evidence: "M" },
    Invariant { id: "GAT-2", family: "GAT", class: Class::M, text: "`all_gather_uneven`: `counts[i]` is member i's extent along `axis`; output extent is their sum, blocks in member order.", source: "`UnevenGatherBackend` + runtime output check", evidence: "M" },
    Invariant { id: "A2A-1", family: "A2A", class: Class::M, text: "`variable_all_to_all`: the `send[p]` slices go to peer p, output is the `receive[p]` slices in peer order; zero counts are valid and every member still takes part.", source: "`VariableAllToAllBackend`", evidence: "M" },
    Invariant { id: "P2P-1", family: "P2P", class: Class::M, text: "`send_receive`: the destination receives the exact ordered bundle (values, shapes, dtypes); direction follows this rank's endpoint on the route.", source: "`PointToPointBackend`", evidence: "M" },
    Invariant { id: "P2P-2", family: "P2P", class: Class::M, text: "A received header that differs from the receiver's expected `header()` never yields success; the failure is sticky (EXC-6).", source: "`RoleExactBoundaryValue` doc", evidence: "M" },
    Invariant { id: "P2P-3", family: "P2P", class: Class::I, text: "Header and payload travel in one native message, and the bytes compared are exactly `header()` (no synthesized tag).", source: "`RoleExactBoundaryValue` doc", evidence: "I" },
    Invariant { id: "BRD-1", family: "BRD", class: Class::M, text: "`broadcast`: every member's output equals the root's input, whatever the non-roots' placeholders hold (NaN/Inf included); `root` indexes member order.", source: "`BroadcastBackend`", evidence: "M" },
    Invariant { id: "BRD-2", family: "BRD", class: Class::M, text: "An out-of-range `root` is an error, never a hang or a silent result.", source: "`BroadcastBackend`", evidence: "M" },
    Invariant { id: "BAR-1", family: "BAR", class: Class::M, text: "`barrier` completes only after every member entered it.", source: "`BarrierBackend`", evidence: "M" },
    Invariant { id: "AGR-1", family: "AGR", class: Class::M, text: "`agree_success` resolves to `true` only when every member submitted `true`.", source: "`FailureAgreementBackend`", evidence: "M" },
    Invariant { id: "AGR-2", family: "AGR", class: Class::M, text: "`agree_success` does not block on peers; `resolve_failure_agreement` starts no native work and does not block.", source: "`FailureAgreementBackend`", evidence: "M" },];

/// What each family is about, in SPEC order.
const FAMILY_TITLES: &[(&str, &str)] = &[
    (
        "RET",
        "Retention: completions keep alive what native work uses",
    ),
    (
        "EXC",
        "Exact completion: `is_complete`, `wait` and `resources_releasable`",
    ),
    (
        "CAN",
        "Bounded waits and cancellation: `wait_bounded` and its dispositions",
    ),
    ("SUB", "Submission: executors, `submit`, `order_after`"),
    ("SUM", "Sum reduction"),
    ("GAT", "Gathers"),
    ("A2A", "Variable all-to-all"),
    ("P2P", "Point-to-point"),
    ("BRD", "Broadcast"),
    ("BAR", "Barrier"),
    ("AGR", "Failure agreement"),
];

/// The vendors' reference of every invariant, as Markdown: its ID, text,
/// source in the eredu docs and the evidence it needs. The repository's
/// `INVARIANTS.md` is this text (a test keeps them equal).
pub fn reference() -> String {
    let mut out = String::from(
        "# The invariants commcheck certifies\n\n\
         <!-- Generated from `commcheck::spec` (kit/src/spec.rs); regenerate with \
         `COMMCHECK_BLESS=1 cargo test --test spec_doc`. -->\n\n\
         Every obligation a backend implementing \
         `eredu_runtime::backend::CommunicationBackend` (eredu-runtime 0.5, eredu-core 0.5, \
         eredu-nn 0.2) takes on, with a stable ID used by test names \
         (`<ID>::<subject>`), results, reports and expectation files. \
         `commcheck-report explain <ID>` prints one entry.\n\n\
         **Source** points into the crates' doc comments (`cargo` downloads them to \
         `~/.cargo/registry/src/*/eredu-{core,runtime,nn}-*`); where those and this \
         text disagree, the doc comments win.\n\n\
         **Evidence** is the observation class: **A**, black-box through the public API \
         on one rank; **M**, several ranks (a late peer keeps work pending); **I**, an \
         instrument the harness provides (hold, liveness probe, resource ledger, fault \
         injection, observer, wire log). A case whose evidence the harness cannot give \
         is `not-supported`, never `pass`. `kit/EVIDENCE.md` says clause by clause \
         what each check observes.\n",
    );
    for (family, title) in FAMILY_TITLES {
        out.push_str(&format!(
            "\n## {family}: {title}\n\n| ID | Invariant | Source | Evidence |\n|---|---|---|---|\n"
        ));
        for invariant in INVARIANTS.iter().filter(|i| i.family == *family) {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                invariant.id,
                invariant.text.replace('|', "\\|"),
                invariant.source.replace('|', "\\|"),
                invariant.evidence.replace('|', "\\|")
            ));
        }
    }
    out
}

/// One invariant as `commcheck-report explain` prints it.
pub fn explain(invariant: &Invariant) -> String {
    let mut text = format!(
        "{id} ({family}, class {class:?})\n\n{text}\n\nSource: {source}\nEvidence: {evidence}\n",
        id = invariant.id,
        family = invariant.family,
        class = invariant.class,
        text = invariant.text,
        source = invariant.source,
        evidence = invariant.evidence,
    );
    text.push('\n');
    text.push_str(EVIDENCE_LEGEND);
    let rows = evidence_rows(invariant.id);
    if !rows.is_empty() {
        text.push_str("\nIts cases (kit/EVIDENCE.md, \"What each invariant can use\"):\n");
        for row in rows {
            text.push_str(&format!(
                "  on {}: {}; world sizes {}; passed with no instrument on the CPU personalities: {}\n",
                row.subjects.replace('`', ""),
                if row.instruments == "none" {
                    "no instrument".to_owned()
                } else {
                    format!("needs the {}", row.instruments)
                },
                row.worlds,
                if row.black_box.is_empty() {
                    "none".to_owned()
                } else {
                    row.black_box.join(", ")
                }
            ));
        }
    }
    text
}

/// What the evidence classes mean (`explain` prints it).
pub const EVIDENCE_LEGEND: &str = "\
Evidence classes: A, black-box through the public API on one rank; M, several
ranks (a late peer keeps work pending); I, an instrument the harness provides
(hold, liveness probe, resource ledger, fault injection, observer, wire log).
A case whose evidence the harness cannot give is not-supported, never pass.
";

/// One row of EVIDENCE.md's table for an invariant.
struct EvidenceRow {
    subjects: String,
    black_box: Vec<&'static str>,
    instruments: String,
    worlds: String,
}

/// The rows of kit/EVIDENCE.md's table for `id`: the subjects, the CPU
/// personalities whose uninstrumented certification passed them, the
/// instruments and the world sizes.
fn evidence_rows(id: &str) -> Vec<EvidenceRow> {
    const EVIDENCE: &str = include_str!("../EVIDENCE.md");
    let table = EVIDENCE
        .split("<!-- evidence-table:start -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- evidence-table:end -->").next())
        .unwrap_or_default();
    let mut lines = table.lines().filter(|l| l.starts_with('|'));
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split('|')
        .map(str::trim)
        .collect();
    lines
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.get(1) != Some(&id) || cells.len() != header.len() {
                return None;
            }
            let n = cells.len();
            Some(EvidenceRow {
                subjects: cells[3].to_owned(),
                black_box: (4..n - 3)
                    .filter(|&i| cells[i] == "yes")
                    .map(|i| header[i])
                    .collect(),
                instruments: cells[n - 3].replace(" (all provided)", ""),
                worlds: cells[n - 2].to_owned(),
            })
        })
        .collect()
}

/// The families, in SPEC order.
pub const FAMILIES: &[&str] = &[
    "RET", "EXC", "CAN", "SUB", "SUM", "GAT", "A2A", "P2P", "BRD", "BAR", "AGR",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explain_says_what_a_case_needs() {
        let text = explain(invariant("CAN-5").expect("CAN-5"));
        assert!(text.contains("Evidence classes: A, black-box"), "{text}");
        assert!(
            text.contains("on local_dependencies: needs the hold, liveness probe"),
            "{text}"
        );
        let text = explain(invariant("SUM-1").expect("SUM-1"));
        assert!(
            text.contains("passed with no instrument on the CPU personalities: lazy"),
            "{text}"
        );
    }

    #[test]
    fn ids_are_unique_and_families_known() {
        for (i, a) in INVARIANTS.iter().enumerate() {
            assert!(FAMILIES.contains(&a.family), "{}", a.id);
            assert!(a.id.starts_with(a.family));
            assert!(INVARIANTS[i + 1..].iter().all(|b| b.id != a.id), "{}", a.id);
        }
        assert_eq!(INVARIANTS.len(), 44);
        assert_eq!(
            FAMILY_TITLES.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
            FAMILIES
        );
    }

    #[test]
    fn the_reference_lists_every_invariant_with_its_source() {
        let text = reference();
        for invariant in INVARIANTS {
            assert!(!invariant.source.is_empty() && !invariant.evidence.is_empty());
            assert!(
                text.contains(&format!("| {} | ", invariant.id)),
                "{}",
                invariant.id
            );
        }
        let can5 = explain(invariant("CAN-5").unwrap());
        assert!(
            can5.starts_with("CAN-5 (CAN, class I)\n\nNativeCancel: "),
            "{can5}"
        );
        assert!(can5.contains("Source: core `BoundedCompletion` doc"));
    }
}
