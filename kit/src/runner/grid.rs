//! The invariant × subject grid of a run: one row per invariant, one column
//! per subject, each cell the verdict of that case (blank where the
//! catalogue has no such case). The closing summary of `cargo test` prints
//! it as text ([`Grid::to_text`]); `commcheck-report` draws it, coloured,
//! in `report.svg`.
//!
//! ```
//! use commcheck::runner::grid::Grid;
//! use commcheck::{Subject, Verdict};
//!
//! let grid = Grid::of([
//!     ("EXC-1", Subject::Submit, Verdict::Pass, "EXC-1::submit", None),
//!     ("RET-1", Subject::Submit, Verdict::NotSupported, "RET-1::submit", Some("needs the hold")),
//! ]);
//! assert_eq!(grid.rows.len(), 2);
//! let text = grid.to_text();
//! assert!(text.lines().any(|line| line.starts_with("EXC-1") && line.ends_with('+')));
//! assert!(text.lines().any(|line| line.starts_with("RET-1") && line.ends_with('.')));
//! ```

use crate::matrix::Subject;
use crate::results::Verdict;

/// One cell: a case and its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The case name.
    pub name: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// Its message, if any.
    pub message: Option<String>,
}

/// The grid: `rows` (invariant IDs, catalogue order) × `columns`
/// (subjects, catalogue order).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grid {
    /// Invariant IDs.
    pub rows: Vec<String>,
    /// Subjects.
    pub columns: Vec<Subject>,
    /// `cells[row][column]`, `None` where there is no such case.
    pub cells: Vec<Vec<Option<Cell>>>,
}

/// The symbol of a verdict in the text grid.
pub fn symbol(verdict: Verdict) -> char {
    match verdict {
        Verdict::Pass => '+',
        Verdict::Fail => 'X',
        Verdict::NotSupported => '.',
        Verdict::Inconclusive => '?',
        Verdict::Timeout => 'T',
        Verdict::Crash => '!',
        Verdict::Flaky => '~',
    }
}

/// The text grid's legend.
pub const LEGEND: &str =
    "+ pass, X fail, . not-supported, ? inconclusive, T timeout, ! crash, ~ flaky, blank: no such case";

/// A short code for a subject's column (two letters).
fn code(subject: Subject) -> &'static str {
    use crate::operation::Operation as O;
    match subject {
        Subject::LocalDependencies => "ld",
        Subject::Submit => "sb",
        Subject::ForkExecutors => "fk",
        Subject::OrderAfter => "oa",
        Subject::Operation(operation) => match operation {
            O::AllReduceSum => "ar",
            O::AllGatherEven => "ge",
            O::AllGatherUneven => "gu",
            O::VariableAllToAll => "aa",
            O::SendReceive => "pp",
            O::Broadcast => "bc",
            O::Barrier => "br",
            O::AgreeSuccess => "ag",
        },
    }
}

impl Grid {
    /// The grid of `cases`: `(invariant, subject, verdict, case name,
    /// message)` each, in catalogue order (rows and columns appear in the
    /// order first met).
    pub fn of<'a>(
        cases: impl IntoIterator<Item = (&'a str, Subject, Verdict, &'a str, Option<&'a str>)>,
    ) -> Self {
        let mut grid = Self::default();
        let mut placed = Vec::new();
        for (invariant, subject, verdict, name, message) in cases {
            let row = match grid.rows.iter().position(|r| r == invariant) {
                Some(row) => row,
                None => {
                    grid.rows.push(invariant.to_owned());
                    grid.rows.len() - 1
                }
            };
            if !grid.columns.contains(&subject) {
                grid.columns.push(subject);
            }
            let cell = Cell {
                name: name.to_owned(),
                verdict,
                message: message.map(str::to_owned),
            };
            placed.push((row, subject, cell));
        }
        grid.columns.sort();
        grid.cells = vec![vec![None; grid.columns.len()]; grid.rows.len()];
        for (row, subject, cell) in placed {
            if let Some(column) = grid.columns.iter().position(|c| *c == subject) {
                grid.cells[row][column] = Some(cell);
            }
        }
        grid
    }

    /// The grid of a run's results.
    pub fn of_results(results: &crate::RunResults) -> Self {
        Self::of(results.cases.iter().map(|c| {
            (
                c.invariant.as_str(),
                c.subject,
                c.verdict,
                c.name.as_str(),
                c.message.as_deref(),
            )
        }))
    }

    /// The grid as text: a header of column codes, the codes' subjects,
    /// then one line per invariant with a symbol per cell ([`symbol`],
    /// [`LEGEND`]).
    pub fn to_text(&self) -> String {
        let width = self.rows.iter().map(String::len).max().unwrap_or(0);
        let mut text = format!("{:width$} ", "");
        for &column in &self.columns {
            text.push_str(&format!(" {}", code(column)));
        }
        text.push('\n');
        for (row, cells) in self.rows.iter().zip(&self.cells) {
            let mut line = format!("{row:width$} ");
            for cell in cells {
                let mark = cell.as_ref().map_or(' ', |c| symbol(c.verdict));
                line.push_str(&format!("  {mark}"));
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        let columns: Vec<String> = self
            .columns
            .iter()
            .map(|&c| format!("{} {}", code(c), c.name()))
            .collect();
        text.push_str(&format!("columns: {}\n", columns.join(", ")));
        text.push_str(&format!("cells: {LEGEND}\n"));
        text
    }
}
