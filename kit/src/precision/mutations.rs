//! The catalogue: each check's plausible wrong outputs, named (SUM-1,
//! GAT-1, GAT-2, A2A-1, BRD-1, P2P-1, `same_values`), and those every value
//! check can produce whatever it computes.

use super::blocks::{
    block_missing, block_repeated, blocks_offset, blocks_reversed, blocks_rotated,
    counts_as_elements, counts_shifted, extents_swapped, matrix_transposed, send_offset_shifted,
};
use super::broadcast::{root_before, root_shifted};
use super::output::{
    chunk_untouched, column_major, element_size_doubled, element_size_halved, last_untouched,
    stale, transposed, zeros,
};
use super::sums::{sum_first_twice, sum_other_half_format, sum_without_last};
use super::transfer::{bundle_by_size, bundle_reversed, bundle_rotated, placeholder_returned};
use crate::suites::scenario::{Expected, Scenario};

/// A wrong output for one member of a scenario: `None` where the mutation
/// does not apply to that scenario.
pub(super) type Mutate = fn(&Scenario, usize, &Expected) -> Option<Vec<f32>>;

/// A check's catalogue: its mutations, named.
pub(super) type Catalogue = &'static [(&'static str, Mutate)];

/// Wrong outputs every value check can produce, whatever it computes
/// (after each check's own ones).
pub(super) const COMMON: &[(&str, Mutate)] = &[
    (
        "transposed output (first axis swapped with the rest)",
        transposed,
    ),
    ("column-major order (every axis reversed)", column_major),
    ("zeros", zeros),
    ("partial write: the last element untouched", last_untouched),
    (
        "partial write: a chunk in the middle untouched",
        chunk_untouched,
    ),
    (
        "element size halved: the second half untouched",
        element_size_halved,
    ),
    (
        "element size doubled: every other element read",
        element_size_doubled,
    ),
];

const STALE: (&str, Mutate) = ("stale: the member's own input returned", stale);

pub(super) const SUM: &[(&str, Mutate)] = &[
    ("one member left out (the last)", sum_without_last),
    ("one member counted twice (the first)", sum_first_twice),
    (
        "16-bit inputs decoded in the other 16-bit format",
        sum_other_half_format,
    ),
    STALE,
];

pub(super) const GATHER: &[(&str, Mutate)] = &[
    ("member order reversed", blocks_reversed),
    ("member order rotated by one", blocks_rotated),
    (
        "a member's block written over the next one's",
        block_repeated,
    ),
    ("one member missing (its block zeros)", block_missing),
    ("outer and inner extents swapped (strides)", extents_swapped),
    ("blocks one position off along the axis", blocks_offset),
    STALE,
];

pub(super) const UNEVEN: &[(&str, Mutate)] = &[
    ("member order reversed", blocks_reversed),
    ("member order rotated by one", blocks_rotated),
    ("one member missing (its block zeros)", block_missing),
    ("outer and inner extents swapped (strides)", extents_swapped),
    (
        "counts off by one member (count i read as i + 1's)",
        counts_shifted,
    ),
    ("counts read as element counts", counts_as_elements),
    STALE,
];

pub(super) const ALL_TO_ALL: &[(&str, Mutate)] = &[
    ("peer order reversed", blocks_reversed),
    ("peer order rotated by one", blocks_rotated),
    ("one peer missing (its slice zeros)", block_missing),
    ("outer and inner extents swapped (strides)", extents_swapped),
    ("send offsets one position off", send_offset_shifted),
    ("receive counts off by one peer", counts_shifted),
    ("counts read as element counts", counts_as_elements),
    ("slices of the send matrix's transpose", matrix_transposed),
    STALE,
];

pub(super) const BROADCAST: &[(&str, Mutate)] = &[
    ("root off by one (the next member's input)", root_shifted),
    ("root off by one (the previous member's input)", root_before),
    STALE,
];

/// P2P-1 steps are bundles: member `i` of the scenario is value `i`.
pub(super) const TRANSFER: &[(&str, Mutate)] = &[
    ("bundle order reversed", bundle_reversed),
    ("bundle order rotated by one", bundle_rotated),
    ("bundle placed by size (smallest first)", bundle_by_size),
    (
        "stale: the receiver's placeholder returned",
        placeholder_returned,
    ),
];

/// The standard submissions' outputs, judged by `same_values`.
pub(super) const STANDARD: &[(&str, Mutate)] = &[
    ("member order reversed", blocks_reversed),
    ("member order rotated by one", blocks_rotated),
    ("one member left out (the last)", sum_without_last),
    ("one member counted twice (the first)", sum_first_twice),
    ("root off by one (the next member's input)", root_shifted),
    ("stale: the member's own input returned", stale),
    ("zeros", zeros),
    ("partial write: the last element untouched", last_untouched),
    (
        "element size doubled: every other element read",
        element_size_doubled,
    ),
];
