//! A2A: A2A: variable all-to-all.
//!
//! (Being written.)

use crate::case::Row;
use crate::harness::{Backend, Harness};

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: eredu_runtime::backend::VariableAllToAllBackend,
{
    Vec::new()
}
