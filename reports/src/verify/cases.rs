//! Step 5 of [`verify`](super::verify): each case coherent (its name,
//! family and class, its status, message, attempts and waiver), the
//! provenance plausible, and the `invariants` texts the kit's.

use super::messages::{case_at, shorten, NAME_CHARS, QUOTE_CHARS};
use crate::model::{failing_invariants, Provenance, ReportCase, Status};

/// Version of the kit this verifier belongs to.
pub const KIT_VERSION: &str = commcheck::VERSION;

/// `invariants` holds the kit's text of exactly the invariants the cases
/// fail.
pub(super) fn check_invariant_texts(
    recorded: &std::collections::BTreeMap<String, String>,
    cases: &[ReportCase],
    problems: &mut Vec<String>,
) {
    let expected = failing_invariants(cases);
    for (id, text) in &expected {
        match recorded.get(id) {
            None => problems.push(format!(
                "invariants: no text for {id}, which a case fails (expected the kit's text of every failing invariant)"
            )),
            Some(seen) if seen != text => problems.push(format!(
                "invariants.{id}: the text differs from the kit's ({})",
                shorten(text, QUOTE_CHARS)
            )),
            Some(_) => {}
        }
    }
    for id in recorded.keys().filter(|id| !expected.contains_key(*id)) {
        problems.push(format!(
            "invariants.{}: no case fails it (only failing invariants are listed)",
            shorten(id, NAME_CHARS)
        ));
    }
}

/// The provenance names a kit and a backend, and a plausible revision.
pub(super) fn check_provenance(provenance: &Provenance, problems: &mut Vec<String>) {
    if provenance.kit_version.trim().is_empty() {
        problems.push("provenance.kit_version: empty".to_owned());
    }
    if provenance.backend.name.trim().is_empty() {
        problems.push("provenance.backend.name: empty".to_owned());
    }
    if let Some(revision) = &provenance.git_revision {
        if revision.is_empty() || !revision.bytes().all(|b| b.is_ascii_hexdigit()) {
            problems.push(format!(
                "provenance.git_revision: `{}` is not a hex commit id",
                shorten(revision, QUOTE_CHARS)
            ));
        }
    }
}

/// A waiver (at `at`) has a reason and a link.
pub(super) fn check_waiver_text(at: &str, reason: &str, link: &str, problems: &mut Vec<String>) {
    if reason.trim().is_empty() {
        problems.push(format!(
            "{at}: waiver has no reason (a waiver needs a reason and a link)"
        ));
    }
    if link.trim().is_empty() {
        problems.push(format!(
            "{at}: waiver has no link (a waiver needs a reason and a link)"
        ));
    }
}

/// Case `index` is coherent in itself (see the module docs).
pub(super) fn check_case(
    index: usize,
    case: &ReportCase,
    provenance: Option<&Provenance>,
    problems: &mut Vec<String>,
) {
    let at = case_at(index, &case.name);
    let expected_name = format!("{}::{}", case.invariant, case.subject);
    if case.name != expected_name {
        problems.push(format!(
            "{at}: name does not match its invariant and subject (expected `{}`)",
            shorten(&expected_name, NAME_CHARS)
        ));
    }
    if provenance.is_some_and(|p| p.kit_version == KIT_VERSION) {
        match commcheck::spec::invariant(&case.invariant) {
            None => problems.push(format!(
                "{at}: `{}` is not an invariant of kit {KIT_VERSION}",
                shorten(&case.invariant, NAME_CHARS)
            )),
            Some(invariant) => {
                if invariant.family != case.family {
                    problems.push(format!(
                        "{at}: family `{}`, SPEC says `{}`",
                        shorten(&case.family, NAME_CHARS),
                        invariant.family
                    ));
                }
                if invariant.class != case.class {
                    problems.push(format!(
                        "{at}: class {:?}, SPEC says {:?}",
                        case.class, invariant.class
                    ));
                }
            }
        }
    }
    let expected = Status::of(case.verdict, case.waiver.is_some());
    if case.status != expected {
        problems.push(format!(
            "{at}: status `{}` does not follow from verdict `{}` {} a waiver (expected `{expected}`)",
            case.status,
            case.verdict,
            if case.waiver.is_some() { "with" } else { "without" }
        ));
    }
    if case.verdict != commcheck::Verdict::Pass
        && case.message.as_deref().is_none_or(|m| m.trim().is_empty())
    {
        problems.push(format!("{at}: verdict `{}` has no message", case.verdict));
    }
    // A case not-supported before anything ran is recorded without running
    // (zero attempts); every other verdict rests on at least one attempt.
    if case.attempts == 0 && case.verdict != commcheck::Verdict::NotSupported {
        problems.push(format!(
            "{at}: zero attempts for verdict `{}` (only a case not-supported before running has none)",
            case.verdict
        ));
    }
    if let Some(waiver) = &case.waiver {
        check_waiver_text(&at, &waiver.reason, &waiver.link, problems);
    }
}
