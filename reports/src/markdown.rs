//! The Markdown summary sink, for CI step summaries.
//!
//! The summary is capped ([`SUMMARY_CAP`], GitHub's 1 MiB step-summary
//! limit, by default). It is a header (title, level, counts: never cut)
//! followed by sections in priority order: families, failures, unexpected
//! passes, waived, unused waivers, missing results, not supported,
//! provenance, then the full case table of each family. When everything does
//! not fit, sections are taken in priority order while they fit: one that
//! does not fit is left out whole (never part of a table; a smaller, later
//! one may still fit), and a note right under the header names each section
//! cut and its size. Table cells are kept on one line and long messages are
//! shortened to [`MESSAGE_CHARS`] characters; `report.json` has them whole.

use std::collections::{HashMap, HashSet};

use commcheck::spec::FAMILIES;

use crate::model::{Report, ReportCase, Status};

/// Default size cap of the summary, in bytes.
pub const SUMMARY_CAP: usize = 1024 * 1024;

/// The smallest cap `summary --max-bytes` accepts: room for the heading and
/// the note naming what was cut (a smaller cap could not be kept).
pub const MIN_CAP: usize = 4096;

/// Longest message shown in a table cell, in characters.
pub const MESSAGE_CHARS: usize = 400;

/// One `## ` section of the summary.
struct Section {
    title: String,
    body: String,
}

impl Section {
    fn table(
        title: impl Into<String>,
        intro: &str,
        header: &[&str],
        rows: Vec<Vec<String>>,
    ) -> Option<Self> {
        if rows.is_empty() {
            return None;
        }
        let title = title.into();
        let mut body = format!("## {title}\n\n");
        if !intro.is_empty() {
            body.push_str(intro);
            body.push_str("\n\n");
        }
        body.push_str(&format!("| {} |\n", header.join(" | ")));
        body.push_str(&format!("|{}\n", "---|".repeat(header.len())));
        for row in rows {
            body.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        body.push('\n');
        Some(Self { title, body })
    }
}

/// Text made safe for one Markdown table cell.
pub fn cell(text: &str) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == MESSAGE_CHARS {
            out.push('…');
            break;
        }
        match c {
            '|' => out.push_str("\\|"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Text as an inline code span in a table cell (no HTML is interpreted
/// inside a code span, so only pipes, backticks and line breaks matter),
/// shortened to [`MESSAGE_CHARS`] characters like [`cell`].
fn code(text: &str) -> String {
    let mut inner = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == MESSAGE_CHARS {
            inner.push('…');
            break;
        }
        match c {
            '`' => inner.push('\''),
            '|' => inner.push_str("\\|"),
            c if c.is_control() => inner.push(' '),
            c => inner.push(c),
        }
    }
    format!("`{inner}`")
}

fn header(report: &Report) -> String {
    let backend = &report.provenance.backend;
    let mut out = format!(
        "# commcheck certification: {} {}\n\n**Level reached: {}** ({}:",
        cell(&backend.name),
        cell(&backend.version),
        report.outcome(),
        commcheck::results::cases(report.cases.len())
    );
    let counts: Vec<String> = Status::ALL
        .iter()
        .map(|s| format!(" {} {s}", report.count(*s)))
        .collect();
    out.push_str(&counts.join(","));
    out.push_str(")\n\n");
    out.push_str(&format!("**{}**\n\n", cell(&report.decided().to_string())));
    out.push_str(&format!(
        "Device: {} · kit {} · digest {}\n\n",
        cell(&backend.device),
        cell(&report.provenance.kit_version),
        code(&report.digest)
    ));
    let unexpected = report.count(Status::UnexpectedPass);
    if unexpected > 0 {
        out.push_str(&format!(
            "**Unexpected passes: {unexpected}** waived case(s) passed: remove their waivers.\n\n"
        ));
    }
    out
}

fn families(report: &Report) -> Option<Section> {
    let rows = FAMILIES
        .iter()
        .filter_map(|family| {
            let cases: Vec<&ReportCase> = report
                .cases
                .iter()
                .filter(|c| c.family == *family)
                .collect();
            (!cases.is_empty()).then(|| {
                let mut row = vec![(*family).to_owned(), cases.len().to_string()];
                row.extend(
                    Status::ALL
                        .iter()
                        .map(|s| cases.iter().filter(|c| c.status == *s).count().to_string()),
                );
                row
            })
        })
        .collect();
    let mut header = vec!["Family", "Cases"];
    header.extend(Status::ALL.iter().map(|s| s.as_str()));
    Section::table("Families", "", &header, rows)
}

fn message(case: &ReportCase) -> String {
    cell(case.message.as_deref().unwrap_or(""))
}

fn waiver_cells(case: &ReportCase) -> [String; 2] {
    case.waiver
        .as_ref()
        .map_or([String::new(), String::new()], |w| {
            [cell(&w.reason), cell(&w.link)]
        })
}

fn failures(report: &Report) -> Option<Section> {
    let rows = report
        .cases
        .iter()
        .filter(|c| c.status.is_failure())
        .map(|c| {
            vec![
                code(&c.name),
                c.status.to_string(),
                c.attempts.to_string(),
                message(c),
            ]
        })
        .collect();
    Section::table(
        "Failures",
        "",
        &["Case", "Status", "Attempts", "Message"],
        rows,
    )
}

/// Each invariant a failing case concerns, once, with its text.
fn failing_invariants(report: &Report) -> Option<Section> {
    let mut ids: Vec<&str> = Vec::new();
    for case in report.cases.iter().filter(|c| c.status.is_failure()) {
        if !ids.contains(&case.invariant.as_str()) {
            ids.push(&case.invariant);
        }
    }
    let rows = ids
        .into_iter()
        .map(|id| {
            let text = commcheck::spec::invariant(id).map_or("", |i| i.text);
            vec![code(id), cell(text)]
        })
        .collect();
    Section::table(
        "Failing invariants",
        "What each invariant above says (all of them: `INVARIANTS.md`, or `commcheck-report explain <ID>`).",
        &["Invariant", "Text"],
        rows,
    )
}

fn inconclusive(report: &Report) -> Option<Section> {
    let rows = report
        .cases
        .iter()
        .filter(|c| c.status == Status::Inconclusive)
        .map(|c| vec![code(&c.name), c.attempts.to_string(), message(c)])
        .collect();
    Section::table(
        "Inconclusive",
        "The check could not establish its precondition on any attempt: nothing was learnt about the \
         invariant. These cases do not certify, and blame no invariant.",
        &["Case", "Attempts", "Message"],
        rows,
    )
}

fn attributed(report: &Report) -> Option<Section> {
    let unresolved = crate::model::unresolved_attributions(&report.cases);
    let rows = report
        .cases
        .iter()
        .flat_map(|c| {
            c.attributed.iter().map(|a| {
                let failed = !unresolved.iter().any(|(name, id, message)| {
                    *name == c.name && *id == a.invariant && *message == a.message
                });
                vec![
                    code(&a.invariant),
                    code(&c.name),
                    if failed {
                        "yes".to_owned()
                    } else {
                        "**no: blocks certification**".to_owned()
                    },
                    cell(&a.message),
                ]
            })
        })
        .collect();
    Section::table(
        "Violations seen by other cases",
        "Each belongs to the invariant named first (e.g. a wrong output value seen while checking retention \
         belongs to the operation's value invariant); it did not change the status of the case that saw it. \
         Nothing seen is lost: a violation whose invariant has no failing case in the report keeps the report \
         at level `none`.",
        &["Invariant", "Seen by", "A case of it failed", "Message"],
        rows,
    )
}

fn notes(report: &Report) -> Option<Section> {
    let rows = report
        .cases
        .iter()
        .flat_map(|c| c.notes.iter().map(move |n| vec![code(&c.name), cell(n)]))
        .collect();
    Section::table("Notes on verdicts", "", &["Case", "Note"], rows)
}

fn unexpected_passes(report: &Report) -> Option<Section> {
    let rows = report
        .cases
        .iter()
        .filter(|c| c.status == Status::UnexpectedPass)
        .map(|c| {
            let [reason, link] = waiver_cells(c);
            vec![code(&c.name), reason, link]
        })
        .collect();
    Section::table(
        "Unexpected passes",
        "These cases are waived in the expectations file but passed.",
        &["Case", "Waiver reason", "Link"],
        rows,
    )
}

fn waived(report: &Report) -> Option<Section> {
    let rows = report
        .cases
        .iter()
        .filter(|c| c.status == Status::Waived)
        .map(|c| {
            let [reason, link] = waiver_cells(c);
            vec![
                code(&c.name),
                c.verdict.to_string(),
                reason,
                link,
                message(c),
            ]
        })
        .collect();
    Section::table(
        "Waived",
        "",
        &["Case", "Verdict", "Reason", "Link", "Message"],
        rows,
    )
}

fn unused_waivers(report: &Report) -> Option<Section> {
    let rows = report
        .unused_waivers
        .iter()
        .map(|w| {
            vec![
                code(&w.invariant),
                code(&w.subject),
                cell(&w.reason),
                cell(&w.link),
            ]
        })
        .collect();
    Section::table(
        "Unused waivers",
        "These expectations-file entries matched no case.",
        &["Invariant", "Subject", "Reason", "Link"],
        rows,
    )
}

fn missing(report: &Report) -> Option<Section> {
    let results: HashSet<&str> = report.cases.iter().map(|c| c.name.as_str()).collect();
    let rows = report
        .must_pass
        .iter()
        .filter(|name| !results.contains(name.as_str()))
        .map(|name| vec![code(name)])
        .collect();
    Section::table(
        "Missing results",
        "These must-pass cases have no result: the run was partial.",
        &["Case"],
        rows,
    )
}

fn not_supported(report: &Report) -> Option<Section> {
    let rows = report
        .cases
        .iter()
        .filter(|c| c.status == Status::NotSupported)
        .map(|c| vec![code(&c.name), message(c)])
        .collect();
    Section::table("Not supported", "", &["Case", "Reason"], rows)
}

fn provenance(report: &Report) -> Option<Section> {
    let p = &report.provenance;
    let mut rows = vec![
        vec!["kit".to_owned(), cell(&p.kit_version)],
        vec!["tool".to_owned(), cell(&p.tool)],
        vec![
            "backend".to_owned(),
            cell(&format!(
                "{} {} ({})",
                p.backend.name, p.backend.version, p.backend.device
            )),
        ],
        vec![
            "claims".to_owned(),
            cell(
                &p.claims
                    .iter()
                    .map(|o| o.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ],
        vec![
            "instruments".to_owned(),
            cell(&serde_json::to_string(&p.instruments).unwrap_or_default()),
        ],
    ];
    rows.extend(
        p.eredu
            .iter()
            .map(|(name, version)| vec![cell(name), cell(version)]),
    );
    rows.extend([
        vec!["rustc".to_owned(), cell(&p.rustc)],
        vec![
            "target".to_owned(),
            cell(p.target.as_deref().unwrap_or("not recorded")),
        ],
        vec![
            "cases ran on".to_owned(),
            cell(&if p.ran_on.is_empty() {
                "not recorded".to_owned()
            } else if p.ranks.is_empty() {
                p.ran_on.join(", ")
            } else {
                ranks(&p.ranks)
            }),
        ],
        vec![
            "git revision".to_owned(),
            code(p.git_revision.as_deref().unwrap_or("none")),
        ],
        vec![
            "host".to_owned(),
            cell(&format!(
                "{} ({} {}, {} CPUs)",
                p.host.hostname, p.host.os, p.host.arch, p.host.cpus
            )),
        ],
        vec!["seed".to_owned(), p.seed.to_string()],
        vec![
            "value-check data".to_owned(),
            cell(&p.data.as_ref().map_or_else(
                || "not recorded".to_owned(),
                commcheck::DataCoverage::describe,
            )),
        ],
        vec![
            "generated (Unix time)".to_owned(),
            p.generated_unix.to_string(),
        ],
        vec![
            "must-pass cases".to_owned(),
            report.must_pass.len().to_string(),
        ],
    ]);
    Section::table("Provenance", "", &["", ""], rows)
}

fn all_cases(report: &Report) -> Vec<Section> {
    // SPEC's families first, then any other in order of appearance; one
    // pass over the cases (an unverified report may name many families).
    let mut families: Vec<(&str, Vec<&ReportCase>)> = FAMILIES
        .iter()
        .map(|family| (*family, Vec::new()))
        .collect();
    let mut index: HashMap<&str, usize> = FAMILIES
        .iter()
        .enumerate()
        .map(|(i, family)| (*family, i))
        .collect();
    for case in &report.cases {
        let at = *index.entry(case.family.as_str()).or_insert_with(|| {
            families.push((case.family.as_str(), Vec::new()));
            families.len() - 1
        });
        families[at].1.push(case);
    }
    families
        .into_iter()
        .filter_map(|(family, cases)| {
            let rows = cases
                .into_iter()
                .map(|c| {
                    vec![
                        code(&c.name),
                        format!("{:?}", c.class),
                        c.status.to_string(),
                        c.attempts.to_string(),
                        c.millis.to_string(),
                        c.seed.to_string(),
                    ]
                })
                .collect();
            Section::table(
                format!("All cases: {}", cell(family)),
                "",
                &["Case", "Class", "Status", "Attempts", "ms", "Seed"],
                rows,
            )
        })
        .collect()
}

/// Every section, in priority order.
fn sections(report: &Report) -> Vec<Section> {
    let mut sections: Vec<Section> = [
        families(report),
        failures(report),
        failing_invariants(report),
        inconclusive(report),
        attributed(report),
        unexpected_passes(report),
        waived(report),
        unused_waivers(report),
        missing(report),
        not_supported(report),
        notes(report),
        provenance(report),
    ]
    .into_iter()
    .flatten()
    .collect();
    sections.extend(all_cases(report));
    sections
}

/// Sections named one by one in the truncation note; the rest are counted.
const NOTE_NAMES: usize = 20;

fn truncation_note(cut: &[&Section], cap: usize) -> String {
    let mut list: Vec<String> = cut
        .iter()
        .take(NOTE_NAMES)
        .map(|s| format!("\"{}\" ({} bytes)", s.title, s.body.len()))
        .collect();
    if cut.len() > NOTE_NAMES {
        let rest = &cut[NOTE_NAMES..];
        list.push(format!(
            "and {} more ({} bytes)",
            rest.len(),
            rest.iter().map(|s| s.body.len()).sum::<usize>()
        ));
    }
    format!(
        "> **Truncated:** this summary is capped at {cap} bytes, so {} whole section(s) were left out: {}. \
         The complete results are in `report.json` (and `junit.xml`).\n\n",
        cut.len(),
        list.join(", ")
    )
}

/// The longest truncation note any choice of cut sections can need: the
/// [`NOTE_NAMES`] longest titles named, every section counted.
fn note_room(sections: &[Section], cap: usize) -> usize {
    let mut longest: Vec<&Section> = sections.iter().collect();
    longest.sort_by_key(|s| std::cmp::Reverse(s.title.len()));
    longest.truncate(NOTE_NAMES);
    let total: usize = sections.iter().map(|s| s.body.len()).sum();
    let named = longest.len();
    // Each size (and the count of the rest) is at most `total`'s digits.
    let digits = total.to_string().len();
    truncation_note(&longest, cap).len()
        + (sections.len().to_string().len() + 1) * 2
        + (digits + 1) * (named + 1)
        + if sections.len() > named {
            32 + digits
        } else {
            0
        }
}

/// The summary, capped at [`SUMMARY_CAP`] bytes.
pub fn render(report: &Report) -> String {
    render_capped(report, SUMMARY_CAP)
}

/// The summary, capped at `cap` bytes (see the module docs). A cap smaller
/// than the header and the truncation note yields just those two.
pub fn render_capped(report: &Report, cap: usize) -> String {
    let header = header(report);
    let sections = sections(report);
    let total: usize = header.len() + sections.iter().map(|s| s.body.len()).sum::<usize>();
    if total <= cap {
        return sections.iter().fold(header, |out, s| out + &s.body);
    }
    // Room for the worst-case note, then greedy in priority order.
    let mut budget = cap.saturating_sub(header.len() + note_room(&sections, cap));
    let mut kept = Vec::new();
    let mut cut = Vec::new();
    for section in &sections {
        if section.body.len() <= budget {
            budget -= section.body.len();
            kept.push(section);
        } else {
            cut.push(section);
        }
    }
    let mut out = header;
    out.push_str(&truncation_note(&cut, cap));
    for section in kept {
        out.push_str(&section.body);
    }
    out
}

/// `rank 0: host (address); rank 1: ...` for a run across processes.
pub(crate) fn ranks(ranks: &[commcheck::RankPlace]) -> String {
    ranks
        .iter()
        .map(|r| format!("rank {}: {} ({})", r.rank, r.host, r.address))
        .collect::<Vec<_>>()
        .join("; ")
}
