//! The layouts the kernels share with the host (`kernels/commcheck.cu`):
//! the rank-address table of the all-reduce, the strided copy segment, and
//! how an all-reduce splits into 256-element-aligned shares.

use cudarc::driver::DeviceRepr;

/// The most stream-ranks one kernel addresses (`COMMCHECK_MAX_RANKS` in
/// `kernels/commcheck.cu`).
pub const MAX_RANKS: usize = 64;

/// The input and output addresses of every rank of one all-reduce
/// (`struct commcheck_ranks` in `kernels/commcheck.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RankAddresses {
    /// Each rank's input.
    pub inputs: [u64; MAX_RANKS],
    /// Each rank's output.
    pub outputs: [u64; MAX_RANKS],
}

// SAFETY: a `repr(C)` struct of 128 device addresses, the layout of
// `struct commcheck_ranks`.
unsafe impl DeviceRepr for RankAddresses {}

/// One strided copy (`struct commcheck_segment`), in halves (16-bit units:
/// an `f32` element is two, an `f16` or `bf16` one).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Segment {
    /// Source address.
    pub source: u64,
    /// Destination address.
    pub destination: u64,
    /// Rows.
    pub rows: u64,
    /// Halves per row.
    pub row_len: u64,
    /// Halves between source rows.
    pub source_stride: u64,
    /// Halves between destination rows.
    pub destination_stride: u64,
}

// SAFETY: a `repr(C)` struct of six 64-bit fields, the layout of
// `struct commcheck_segment`.
unsafe impl DeviceRepr for Segment {}

/// Elements every all-reduce share but the last is a multiple of.
pub const SHARE_ALIGN: usize = 256;

/// Rank `rank`'s share `[begin, end)` of an all-reduce of `len` elements
/// over `ranks` ranks: shares are multiples of 256 elements (aligned
/// accesses, four floats per thread), the last one shorter or empty.
pub fn share(len: usize, ranks: usize, rank: usize) -> (u64, u64) {
    let share = len.div_ceil(ranks.max(1)).next_multiple_of(SHARE_ALIGN);
    let begin = rank.saturating_mul(share).min(len);
    let end = rank.saturating_add(1).saturating_mul(share).min(len);
    (begin as u64, end as u64)
}
