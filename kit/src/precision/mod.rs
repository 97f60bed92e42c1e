//! The output-mutation matrix: can the value checks' data tell a plausible
//! wrong answer from the right one?
//!
//! For every value check (SUM-1, GAT-1, GAT-2, A2A-1, P2P-1, BRD-1, AGR-1,
//! and the matrix's `same_values`, which judges the outputs of the standard
//! submissions of the RET, EXC and CAN checks), the kit builds the
//! steps its suites run, in every dtype and on every world size of the
//! check, computes plausible wrong outputs from the correct ones (layout,
//! stride and member-order confusions, off-by-one roots, offsets and
//! counts, stale, zero and partial writes, the wrong element size), and
//! feeds each to the check's own verifier. A mutation is *rejected* when, on
//! every world and seed where it applies, some step's verifier refuses it.
//! No backend runs: this is the data's own mutant proof. (BRD-2 owes an
//! error, never a value: its verifier refuses every value, so it has no
//! row.)
//!
//! The matrix is assembled by `assembly` from the steps every check's suite
//! builds (`steps` adds P2P-1's bundles and the standard submissions) and
//! each check's named mutations (`mutations`), which come from `output`
//! (any value check), `sums` (SUM-1), `blocks` (GAT-1, GAT-2, A2A-1),
//! `broadcast` (BRD-1) and `transfer` (P2P-1); `agreement` adds AGR-1's
//! rows, `report` holds the rows and their table.
//!
//! ```
//! let matrix = commcheck::precision::mutation_matrix();
//! assert!(matrix.accepted().is_empty(), "{matrix}");
//! ```

mod agreement;
mod assembly;
mod blocks;
mod broadcast;
mod mutations;
mod output;
mod report;
mod steps;
mod sums;
mod transfer;

pub use assembly::mutation_matrix;
pub use report::{MatrixRow, MutationMatrix};
