//! CAN: CAN: bounded completion and cancellation teardown.
//!
//! (Being written.)

use crate::case::Row;
use crate::harness::Harness;

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>> {
    Vec::new()
}
