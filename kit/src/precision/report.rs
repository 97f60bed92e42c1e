//! The output-mutation matrix as a result: one row per (check, dtype,
//! mutation) of SUM-1, GAT-1, GAT-2, A2A-1, BRD-1, P2P-1, AGR-1 and
//! `same_values`, whether its wrong output arose and was rejected, and the
//! table `--nocapture` prints.

use crate::dtype::Dtype;

/// One (check, dtype, mutation) of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixRow {
    /// The check whose verifier judged the wrong outputs (an invariant ID,
    /// or `same_values`).
    pub check: &'static str,
    /// The dtype of the steps.
    pub dtype: Dtype,
    /// What the wrong output is.
    pub mutation: &'static str,
    /// The (world size, seed) cases where the mutation changed an output.
    pub cases: usize,
    /// Of those, the cases where the verifier refused it at some step.
    pub rejected: usize,
    /// Whether the mutation applies to any step of the check in this dtype
    /// (a 16-bit format confusion does not apply to `f32`; a layout
    /// confusion does not apply to 1-D outputs). A row that does not apply
    /// is shown, and neither rejected nor accepted.
    pub applies: bool,
}

impl MatrixRow {
    /// Whether the check's data and verifier tell this wrong answer from the
    /// right one wherever it can arise (and it arises somewhere).
    pub fn is_rejected(&self) -> bool {
        self.cases > 0 && self.rejected == self.cases
    }

    /// Whether the data fails to tell this wrong answer from the right one
    /// on some case (or the mutation applies but never changes an output).
    pub fn is_accepted(&self) -> bool {
        self.applies && !self.is_rejected()
    }
}

/// Every row of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutationMatrix {
    /// In check, dtype and mutation order.
    pub rows: Vec<MatrixRow>,
}

impl MutationMatrix {
    /// The rows whose mutation some case's data could not tell from the
    /// right answer (or that never arose).
    pub fn accepted(&self) -> Vec<&MatrixRow> {
        self.rows.iter().filter(|row| row.is_accepted()).collect()
    }
}

impl std::fmt::Display for MutationMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<11} {:<5} {:<58} verdict",
            "check", "dtype", "mutation"
        )?;
        for row in &self.rows {
            let verdict = if !row.applies {
                "does not apply".to_owned()
            } else if row.is_rejected() {
                format!("rejected ({} of {} cases)", row.rejected, row.cases)
            } else if row.cases == 0 {
                "NEVER ARISES".to_owned()
            } else {
                format!(
                    "ACCEPTED ({} of {} cases rejected it)",
                    row.rejected, row.cases
                )
            };
            writeln!(
                f,
                "{:<11} {:<5} {:<58} {verdict}",
                row.check, row.dtype, row.mutation
            )?;
        }
        Ok(())
    }
}
