//! GAT: GAT: gathers.
//!
//! (Being written.)

use crate::case::Row;
use crate::harness::{Backend, Harness};

pub(crate) fn even_rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: eredu_runtime::backend::EvenGatherBackend,
{
    Vec::new()
}

pub(crate) fn uneven_rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: eredu_runtime::backend::UnevenGatherBackend,
{
    Vec::new()
}
