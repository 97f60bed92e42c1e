//! Certification levels: which cases must pass ([`must_pass`]), the level a
//! set of results reaches ([`Level::reached`]) and what stands between it
//! and the next one ([`blockers`]). One piece for every place that grades a
//! run: the closing summary of `cargo test`, and `commcheck-report`'s
//! reports (which add waivers).
//!
//! ```
//! use commcheck::runner::level::Level;
//!
//! assert_eq!(Level::parse("core"), Some(Level::Core));
//! assert!(Level::Core < Level::Full);
//! ```

use std::collections::{HashMap, HashSet};

use crate::case::Case;
use crate::harness::Harness;
use crate::matrix::Subject;
use crate::operation::Operation;
use crate::results::{Attributed, CaseResult, Verdict};
use crate::spec::Class;

/// The certification level a set of results reaches.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Some class-A or class-M must-pass case does not certify.
    None,
    /// Every class-A and class-M must-pass case certifies.
    Core,
    /// Every must-pass case certifies, instrumented (class I) ones included.
    Full,
}

impl Level {
    /// The level as reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Core => "core",
            Self::Full => "full",
        }
    }

    /// Parses `none`, `core` or `full`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(Self::None),
            "core" => Some(Self::Core),
            "full" => Some(Self::Full),
            _ => None,
        }
    }

    /// Whether the level asks `class` invariants to certify.
    pub fn requires(self, class: Class) -> bool {
        match self {
            Self::None => false,
            Self::Core => matches!(class, Class::A | Class::M),
            Self::Full => true,
        }
    }

    /// The level `cases` reach against `must_pass`: `full` when every
    /// must-pass case has exactly one result and it certifies
    /// ([`Graded::certifies`]); `core` when that holds for every must-pass
    /// case of class A or M; `none` otherwise. A must-pass case without
    /// exactly one result blocks both levels, and so does a violation a case
    /// recorded for another invariant when no case of that invariant failed
    /// ([`unresolved`]).
    pub fn reached<G: Graded>(must_pass: &[String], cases: &[G]) -> Self {
        Self::reached_by(must_pass, cases, G::certifies)
    }

    /// [`Level::reached`] with `certifies` deciding which results count.
    pub fn reached_by<G: Graded>(
        must_pass: &[String],
        cases: &[G],
        certifies: impl Fn(&G) -> bool,
    ) -> Self {
        if !unresolved(cases).is_empty() {
            return Self::None;
        }
        let results = sole_results(cases);
        let mut level = Self::Full;
        for name in must_pass {
            match results.get(name.as_str()) {
                Some(Some(case)) if certifies(case) => {}
                Some(Some(case)) if !Self::Core.requires(case.class()) => {
                    level = level.min(Self::Core);
                }
                _ => return Self::None,
            }
        }
        level
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A case result as a level sees it (the kit's [`CaseResult`], a report's
/// case).
pub trait Graded {
    /// `<invariant>::<subject>`.
    fn name(&self) -> &str;
    /// The invariant's ID.
    fn invariant(&self) -> &str;
    /// The invariant's evidence class.
    fn class(&self) -> Class;
    /// Whether the result counts towards a level (a pass).
    fn certifies(&self) -> bool;
    /// Whether the case fails its invariant (a waived failure included).
    fn fails(&self) -> bool;
    /// What the case saw violated while checking its own invariant.
    fn attributed(&self) -> &[Attributed];
    /// Its verdict, for [`blockers`].
    fn verdict(&self) -> Verdict;
    /// Its message, for [`blockers`].
    fn message(&self) -> Option<&str>;
}

impl Graded for CaseResult {
    fn name(&self) -> &str {
        &self.name
    }
    fn invariant(&self) -> &str {
        &self.invariant
    }
    fn class(&self) -> Class {
        self.class
    }
    fn certifies(&self) -> bool {
        self.verdict == Verdict::Pass
    }
    fn fails(&self) -> bool {
        self.verdict.is_failure()
    }
    fn attributed(&self) -> &[Attributed] {
        &self.attributed
    }
    fn verdict(&self) -> Verdict {
        self.verdict
    }
    fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

/// The must-pass list of this kit version for `harness`: the names of every
/// catalogue case whose subject is claimed (every non-operation subject, and
/// each operation the harness claims) and that is not about a cancellation
/// mode the backend does not claim ([`Case::unclaimed`]), in catalogue order.
pub fn must_pass<H: Harness>(harness: &H) -> Vec<String> {
    let claims = harness.claims().operations();
    crate::catalogue(harness)
        .iter()
        .filter(|case| is_claimed(case.subject(), &claims) && !case.unclaimed())
        .map(Case::name)
        .collect()
}

/// Whether `subject` is claimed given the claimed operations.
pub fn is_claimed(subject: Subject, claims: &[Operation]) -> bool {
    subject.operation().is_none_or(|op| claims.contains(&op))
}

/// The violations `cases` recorded for another invariant whose invariant
/// has no failing case among them: observed with certainty, yet failing
/// nothing. Any of them keeps the level at `none`. Each is `(case name,
/// what it saw)`.
pub fn unresolved<G: Graded>(cases: &[G]) -> Vec<(&str, &Attributed)> {
    let failed = failing(cases);
    cases
        .iter()
        .flat_map(|case| {
            case.attributed()
                .iter()
                .map(move |seen| (case.name(), seen))
        })
        .filter(|(_, seen)| !failed.contains(seen.invariant.as_str()))
        .collect()
}

/// The invariants some case of `cases` fails (a waived failure included).
pub(crate) fn failing<G: Graded>(cases: &[G]) -> HashSet<&str> {
    cases
        .iter()
        .filter(|case| case.fails())
        .map(Graded::invariant)
        .collect()
}

/// Each case name of `cases` with its result: `Some` for a name with
/// exactly one result, `None` for a name with several.
pub fn sole_results<G: Graded>(cases: &[G]) -> HashMap<&str, Option<&G>> {
    let mut results: HashMap<&str, Option<&G>> = HashMap::with_capacity(cases.len());
    for case in cases {
        results
            .entry(case.name())
            .and_modify(|sole| *sole = None)
            .or_insert(Some(case));
    }
    results
}

/// What keeps `cases` from the level above the one they reach, one line
/// per kind of obstacle (empty at `full`): must-pass cases without exactly
/// one result, violations that fail nothing, and must-pass cases of the
/// classes the next level asks for that do not certify, counted by verdict
/// (not-supported ones by reason), with up to three names each.
pub fn blockers<G: Graded>(must_pass: &[String], cases: &[G]) -> Vec<String> {
    let level = Level::reached(must_pass, cases);
    let next = match level {
        Level::None => Level::Core,
        Level::Core => Level::Full,
        Level::Full => return Vec::new(),
    };
    let mut lines = Vec::new();
    let unresolved = unresolved(cases);
    if !unresolved.is_empty() {
        lines.push(format!(
            "{} violation(s) seen while checking another invariant fail no case of their own \
             (first: {} saw {})",
            unresolved.len(),
            unresolved[0].0,
            unresolved[0].1.invariant
        ));
    }
    let results = sole_results(cases);
    let mut missing = Vec::new();
    let mut by_kind: Vec<(String, Vec<&str>)> = Vec::new();
    for name in must_pass {
        match results.get(name.as_str()) {
            Some(Some(case)) if case.certifies() || !next.requires(case.class()) => {}
            Some(Some(case)) => {
                let kind = match case.verdict() {
                    Verdict::NotSupported => format!(
                        "not-supported ({})",
                        crate::runner::decided::not_supported_reason(
                            case.message().unwrap_or_default()
                        )
                    ),
                    verdict => verdict.as_str().to_owned(),
                };
                match by_kind.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, names)) => names.push(name),
                    None => by_kind.push((kind, vec![name])),
                }
            }
            _ => missing.push(name.as_str()),
        }
    }
    if !missing.is_empty() {
        lines.push(format!(
            "{} must-pass case(s) without exactly one result ({}{})",
            missing.len(),
            missing[..missing.len().min(3)].join(", "),
            if missing.len() > 3 { ", …" } else { "" }
        ));
    }
    for (kind, names) in by_kind {
        lines.push(format!(
            "{} must-pass case(s) {kind}: {}{}",
            names.len(),
            names[..names.len().min(3)].join(", "),
            if names.len() > 3 { ", …" } else { "" }
        ));
    }
    lines
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::results::Evidence;

    /// A result of case `name` (`<ID>::...`) on `submit`.
    pub(crate) fn case(name: &str, class: Class, verdict: Verdict) -> CaseResult {
        CaseResult {
            name: name.to_owned(),
            invariant: name.split("::").next().unwrap_or_default().to_owned(),
            family: name[..3].to_owned(),
            class,
            subject: Subject::Submit,
            verdict,
            message: (verdict == Verdict::NotSupported)
                .then(|| "needs the hold instrument, which the harness does not provide".into()),
            attempts: 1,
            millis: 0,
            seed: 0,
            evidence: Evidence::BlackBox,
            worlds: Vec::new(),
            notes: Vec::new(),
            attributed: Vec::new(),
        }
    }

    #[test]
    fn levels_and_what_blocks_the_next() {
        let must: Vec<String> = ["EXC-1::submit", "RET-1::submit"]
            .map(String::from)
            .to_vec();
        let mut cases = vec![
            case("EXC-1::submit", Class::A, Verdict::Pass),
            case("RET-1::submit", Class::I, Verdict::NotSupported),
        ];
        assert_eq!(Level::reached(&must, &cases), Level::Core);
        assert_eq!(
            blockers(&must, &cases),
            ["1 must-pass case(s) not-supported (instrument): RET-1::submit"]
        );
        cases[1].verdict = Verdict::Pass;
        assert_eq!(Level::reached(&must, &cases), Level::Full);
        assert!(blockers(&must, &cases).is_empty());
        cases[0].verdict = Verdict::Fail;
        assert_eq!(Level::reached(&must, &cases), Level::None);
        assert_eq!(
            blockers(&must, &cases),
            ["1 must-pass case(s) fail: EXC-1::submit"]
        );
        cases.pop();
        assert_eq!(
            blockers(&must, &cases)[0],
            "1 must-pass case(s) without exactly one result (RET-1::submit)"
        );
    }
}
