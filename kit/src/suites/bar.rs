//! BAR: BAR: barrier.
//!
//! (Being written.)

use crate::case::Row;
use crate::harness::{Backend, Harness};

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: eredu_runtime::backend::BarrierBackend,
{
    Vec::new()
}
