//! `report.svg`: a certification at a glance. The invariant × subject grid
//! ([`commcheck::runner::grid`]), one row per invariant and one column per
//! subject, each cell coloured by the case's status and titled with its
//! name, status and message (a browser shows the title on hover), under a
//! heading with the backend, the level and the counts by status. Plain SVG
//! 1.1, no script and no external resource.

use std::fmt::Write as _;

use commcheck::runner::grid::Grid;

use crate::model::{Report, ReportCase, Status};

/// Not-supported because the backend does not claim the operation (or the
/// world size): expected, never blocks a level. Darker: for want of an
/// instrument (or another reason), which keeps a report from `full`.
const NOT_CLAIMED: &str = "#e6e6e6";
const NOT_SUPPORTED: &str = "#9e9e9e";
/// The outline of a cell whose case saw a violation of another invariant
/// that no case of that invariant fails: it keeps the report at `none`.
const UNRESOLVED: &str = "#c62828";

/// The fill of a case's cell: its status's colour, a lighter grey for an
/// operation or world size the backend does not claim.
fn fill(case: &ReportCase) -> &'static str {
    match (case.status, case.message.as_deref()) {
        (Status::NotSupported, Some(message))
            if matches!(
                commcheck::runner::decided::not_supported_reason(message),
                "unclaimed" | "world size"
            ) =>
        {
            NOT_CLAIMED
        }
        (status, _) => colour(status),
    }
}

/// The fill colour of a status.
fn colour(status: Status) -> &'static str {
    match status {
        Status::Pass => "#2e7d32",
        Status::UnexpectedPass => "#1565c0",
        Status::Fail | Status::Timeout | Status::Crash | Status::Flaky => "#c62828",
        Status::Waived => "#ef6c00",
        Status::Inconclusive => "#f9a825",
        Status::NotSupported => NOT_SUPPORTED,
    }
}

/// `text` escaped for XML character data and attribute values.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => escaped.push(' '),
            c => escaped.push(c),
        }
    }
    escaped
}

const CELL_W: usize = 30;
const CELL_H: usize = 20;
const LEFT: usize = 70;
const TOP: usize = 210;

/// The picture of `report`, as an SVG document.
pub fn svg(report: &Report) -> String {
    let grid = Grid::of(report.cases.iter().map(|c| {
        (
            c.invariant.as_str(),
            c.subject,
            c.verdict,
            c.name.as_str(),
            c.message.as_deref(),
        )
    }));
    let case = |name: &str| report.cases.iter().find(|c| c.name == name);
    let unresolved: std::collections::HashSet<&str> =
        crate::model::unresolved_attributions(&report.cases)
            .into_iter()
            .map(|(name, _, _)| name)
            .collect();
    let width = (LEFT + grid.columns.len() * CELL_W + 20).max(760);
    let height = TOP + grid.rows.len() * CELL_H + 40;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{width}" height="{height}" fill="white"/>"#
    );
    let backend = &report.provenance.backend;
    let _ = writeln!(
        svg,
        r#"<text x="10" y="22" font-size="16" font-weight="bold">{} {}: level {}</text>"#,
        escape(&backend.name),
        escape(&backend.version),
        escape(&report.outcome())
    );
    let counts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|&s| {
            let n = report.count(s);
            (n > 0).then(|| format!("{n} {s}"))
        })
        .collect();
    let _ = writeln!(
        svg,
        r#"<text x="10" y="40">{}: {}</text>"#,
        commcheck::results::cases(report.cases.len()),
        escape(&counts.join(", ")),
    );
    // The decided share, cut before its not-supported reasons if long.
    let decided = report.decided().to_string();
    let decided = decided.split("; not-supported").next().unwrap_or_default();
    let _ = writeln!(svg, r#"<text x="10" y="56">{}</text>"#, escape(decided));
    // The legend.
    let mut x = 10;
    let legend = [
        (colour(Status::Pass), "white", "pass"),
        (colour(Status::Fail), "white", "fail, timeout, crash, flaky"),
        (
            "white",
            UNRESOLVED,
            "saw another ID's violation that fails no case",
        ),
        (colour(Status::Inconclusive), "white", "inconclusive"),
        (NOT_SUPPORTED, "white", "not-supported (instrument...)"),
        (NOT_CLAIMED, "white", "not claimed"),
        (colour(Status::Waived), "white", "waived"),
        (colour(Status::UnexpectedPass), "white", "unexpected pass"),
    ];
    let mut y = 66;
    for (fill, stroke, label) in legend {
        // About 7 pixels a character at 12 px sans-serif.
        let wide = 16 + 7 * label.len() + 16;
        if x + wide > width {
            (x, y) = (10, y + 18);
        }
        let _ = writeln!(
            svg,
            r#"<rect x="{x}" y="{y}" width="12" height="12" fill="{fill}" stroke="{stroke}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            x + 16,
            y + 11,
            escape(label)
        );
        x += wide;
    }
    // Column headings, rotated.
    for (i, subject) in grid.columns.iter().enumerate() {
        let cx = LEFT + i * CELL_W + CELL_W / 2;
        let _ = writeln!(
            svg,
            r#"<text x="{cx}" y="{}" transform="rotate(-60 {cx} {})">{}</text>"#,
            TOP - 6,
            TOP - 6,
            escape(subject.name())
        );
    }
    for (r, (row, cells)) in grid.rows.iter().zip(&grid.cells).enumerate() {
        let y = TOP + r * CELL_H;
        let _ = writeln!(
            svg,
            r#"<text x="10" y="{}">{}</text>"#,
            y + CELL_H - 6,
            escape(row)
        );
        for (c, cell) in cells.iter().enumerate() {
            let Some(cell) = cell else { continue };
            let Some(case) = case(&cell.name) else {
                continue;
            };
            let s = case.status;
            let mut title = match &cell.message {
                Some(message) => format!("{}: {s}: {message}", cell.name),
                None => format!("{}: {s}", cell.name),
            };
            let stroke = if unresolved.contains(cell.name.as_str()) {
                title.push_str(" (saw a violation of another invariant that no case of it fails)");
                UNRESOLVED
            } else {
                "white"
            };
            let _ = writeln!(
                svg,
                r#"<rect x="{}" y="{y}" width="{}" height="{}" fill="{}" stroke="{stroke}" stroke-width="2"><title>{}</title></rect>"#,
                LEFT + c * CELL_W,
                CELL_W,
                CELL_H,
                fill(case),
                escape(&title)
            );
        }
    }
    let _ = writeln!(
        svg,
        r#"<text x="10" y="{}" fill="dimgray">Hover a cell for its case, status and message. report.json is the source of truth: `commcheck-report verify` checks it.</text>"#,
        height - 14
    );
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot; ");
    }
}
