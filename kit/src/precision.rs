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
//! ```
//! let matrix = commcheck::precision::mutation_matrix();
//! assert!(matrix.accepted().is_empty(), "{matrix}");
//! ```

use crate::dtype::Dtype;
use crate::operation::Operation;
use crate::suites::scenario::{around, judge, sum, Expected, Scenario, Semantics};
use crate::suites::{a2a, agr, brd, gat, p2p, sum as sum_suite};

/// Seeds every row is tried with (a case's seed picks its data).
const SEEDS: [u64; 3] = [0, 1, 0x00c0_ffee];

/// The sweep's largest message stands for itself at this many elements:
/// its data is the same function of (member, index) at every length, and
/// no mutation of the catalogue depends on the length past a 4096-element
/// chunk, so the matrix stays quick.
const LARGEST: usize = (1 << 16) + 3;

/// World sizes of the value checks.
const WORLDS: [usize; 5] = [1, 2, 3, 4, 8];

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

/// A wrong output for one member of a scenario: `None` where the mutation
/// does not apply to that scenario.
type Mutate = fn(&Scenario, usize, &Expected) -> Option<Vec<f32>>;

/// A check's catalogue: its mutations, named.
type Catalogue = &'static [(&'static str, Mutate)];

/// How a check's suite builds its steps (seed, world size, dtype, sweep).
type Steps = fn(u64, usize, Dtype, &[usize]) -> Vec<Scenario>;

/// The matrix, computed (no backend involved).
pub fn mutation_matrix() -> MutationMatrix {
    let mut rows = Vec::new();
    let sweep_of = |dtype: Dtype, size: usize| -> Vec<usize> {
        let (counts, _) = crate::suites::scenario::sweep_for_world(dtype, &[], None, size);
        counts.into_iter().map(|count| count.min(LARGEST)).collect()
    };
    let checks: [(&'static str, Steps, Catalogue); 6] = [
        ("SUM-1", sum_suite::scenarios, SUM),
        ("GAT-1", gat::even_scenarios, GATHER),
        ("GAT-2", gat::uneven_scenarios, UNEVEN),
        ("A2A-1", a2a::scenarios, ALL_TO_ALL),
        ("BRD-1", brd::scenarios, BROADCAST),
        ("P2P-1", p2p_scenarios, TRANSFER),
    ];
    for (check, steps, mutations) in checks {
        for dtype in Dtype::ALL {
            let cases: Vec<Vec<Scenario>> = WORLDS
                .iter()
                .filter(|&&size| size > 1 || check != "P2P-1")
                .flat_map(|&size| {
                    SEEDS.map(|seed| steps(seed, size, dtype, &sweep_of(dtype, size)))
                })
                .collect();
            let all: Vec<(&'static str, Mutate)> =
                mutations.iter().chain(COMMON).copied().collect();
            rows.extend(tally((check, dtype), &cases, &all, judge_scenario));
        }
    }
    let standard = standard_cases();
    rows.extend(tally(
        ("same_values", Dtype::F32),
        &standard,
        STANDARD,
        same_values,
    ));
    rows.extend(agreement_rows());
    MutationMatrix { rows }
}

/// Judges a wrong output by the value checks' verifier.
fn judge_scenario(_: &Scenario, expected: &Expected, got: &[f32]) -> bool {
    judge(expected, &expected.shape, got).is_some()
}

/// Judges by the matrix's verifier ([`Operation::same_values`]).
fn same_values(scenario: &Scenario, expected: &Expected, got: &[f32]) -> bool {
    let operation = match scenario.semantics {
        Semantics::Sum => Operation::AllReduceSum,
        Semantics::Gather { .. } => Operation::AllGatherEven,
        Semantics::AllToAll { .. } => Operation::VariableAllToAll,
        Semantics::Broadcast { .. } => Operation::Broadcast,
    };
    !operation.same_values(got, &expected.values)
}

/// The rows of one check in one dtype: over every case, whether each
/// mutation arose and was refused (each expectation computed once).
fn tally(
    (check, dtype): (&'static str, Dtype),
    cases: &[Vec<Scenario>],
    mutations: &[(&'static str, Mutate)],
    refuses: fn(&Scenario, &Expected, &[f32]) -> bool,
) -> Vec<MatrixRow> {
    let mut rows: Vec<MatrixRow> = mutations
        .iter()
        .map(|(mutation, _)| MatrixRow {
            check,
            dtype,
            mutation,
            cases: 0,
            rejected: 0,
            applies: false,
        })
        .collect();
    for steps in cases {
        let mut seen = vec![(false, false); mutations.len()];
        for scenario in steps {
            for member in 0..scenario.size() {
                let expected = scenario.expected(member);
                let right = bits(&expected.values);
                for (k, (_, mutate)) in mutations.iter().enumerate() {
                    let Some(wrong) = mutate(scenario, member, &expected) else {
                        continue;
                    };
                    rows[k].applies = true;
                    if bits(&wrong) != right {
                        seen[k].0 = true;
                        seen[k].1 |= refuses(scenario, &expected, &wrong);
                    }
                }
            }
        }
        for (row, (changed, refused)) in rows.iter_mut().zip(seen) {
            row.cases += usize::from(changed);
            row.rejected += usize::from(changed && refused);
        }
    }
    rows
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

// ---------------------------------------------------------------------------
// The catalogue.

/// Wrong outputs every value check can produce, whatever it computes
/// (after each check's own ones).
const COMMON: &[(&str, Mutate)] = &[
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

const SUM: &[(&str, Mutate)] = &[
    ("one member left out (the last)", sum_without_last),
    ("one member counted twice (the first)", sum_first_twice),
    (
        "16-bit inputs decoded in the other 16-bit format",
        sum_other_half_format,
    ),
    STALE,
];

const GATHER: &[(&str, Mutate)] = &[
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

const UNEVEN: &[(&str, Mutate)] = &[
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

const ALL_TO_ALL: &[(&str, Mutate)] = &[
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

const BROADCAST: &[(&str, Mutate)] = &[
    ("root off by one (the next member's input)", root_shifted),
    ("root off by one (the previous member's input)", root_before),
    STALE,
];

/// P2P-1 steps are bundles: member `i` of the scenario is value `i`.
const TRANSFER: &[(&str, Mutate)] = &[
    ("bundle order reversed", bundle_reversed),
    ("bundle order rotated by one", bundle_rotated),
    (
        "stale: the receiver's placeholder returned",
        placeholder_returned,
    ),
];

/// The standard submissions' outputs, judged by `same_values`.
const STANDARD: &[(&str, Mutate)] = &[
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

// Output-level mutations.

/// `values` cut or padded with zeros to `len`.
fn fitted(mut values: Vec<f32>, len: usize) -> Vec<f32> {
    values.resize(len, 0.0);
    values
}

fn transposed(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let (shape, values) = (expected.shape.clone(), expected.values.clone());
    let (first, rest) = (*shape.first()?, shape.iter().skip(1).product::<usize>());
    (shape.len() >= 2).then(|| {
        (0..values.len())
            .map(|i| values[(i % first) * rest + i / first])
            .collect()
    })
}

fn column_major(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let (shape, values) = (expected.shape.clone(), expected.values.clone());
    if shape.len() < 2 {
        return None;
    }
    // Element `i` of the column-major stream is written at row-major index i.
    let strides: Vec<usize> = (0..shape.len())
        .map(|a| shape[a + 1..].iter().product())
        .collect();
    Some(
        (0..values.len())
            .map(|i| {
                let mut rest = i;
                let mut at = 0;
                for axis in 0..shape.len() {
                    at += (rest % shape[axis]) * strides[axis];
                    rest /= shape[axis];
                }
                values[at]
            })
            .collect(),
    )
}

fn stale(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    let len = expected.values.len();
    Some(fitted(scenario.inputs[member].clone(), len))
}

fn zeros(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    Some(vec![0.0; expected.values.len()])
}

fn last_untouched(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let mut values = expected.values.clone();
    *values.last_mut()? = 0.0;
    Some(values)
}

fn chunk_untouched(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let mut values = expected.values.clone();
    let len = values.len();
    let chunk = len.div_ceil(4).clamp(1, 4096);
    values
        .iter_mut()
        .skip(len / 2)
        .take(chunk)
        .for_each(|v| *v = 0.0);
    Some(values)
}

fn element_size_halved(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let mut values = expected.values.clone();
    let half = values.len().div_ceil(2);
    values.iter_mut().skip(half).for_each(|v| *v = 0.0);
    Some(values)
}

fn element_size_doubled(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let values = &expected.values;
    Some(
        (0..values.len())
            .map(|i| values.get(2 * i).copied().unwrap_or(0.0))
            .collect(),
    )
}

// Sums.

fn sum_of(scenario: &Scenario, inputs: &[Vec<f32>]) -> Option<Vec<f32>> {
    (scenario.semantics == Semantics::Sum)
        .then(|| sum(scenario.dtype, inputs, scenario.shapes[0].clone()).values)
        .map(|values| {
            values
                .into_iter()
                .map(|v| scenario.dtype.round(v))
                .collect()
        })
}

fn sum_without_last(scenario: &Scenario, _: usize, _: &Expected) -> Option<Vec<f32>> {
    let n = scenario.size();
    (n > 1).then_some(())?;
    sum_of(scenario, &scenario.inputs[..n - 1])
}

fn sum_first_twice(scenario: &Scenario, _: usize, _: &Expected) -> Option<Vec<f32>> {
    let mut inputs = scenario.inputs.clone();
    inputs.push(inputs.first()?.clone());
    sum_of(scenario, &inputs)
}

fn sum_other_half_format(scenario: &Scenario, _: usize, _: &Expected) -> Option<Vec<f32>> {
    let decode: fn(f32) -> f32 = match scenario.dtype {
        Dtype::F16 => |v| half::bf16::from_bits(half::f16::from_f32(v).to_bits()).to_f32(),
        Dtype::Bf16 => |v| half::f16::from_bits(half::bf16::from_f32(v).to_bits()).to_f32(),
        _ => return None,
    };
    let inputs: Vec<Vec<f32>> = scenario
        .inputs
        .iter()
        .map(|m| m.iter().map(|&v| decode(v)).collect())
        .collect();
    sum_of(scenario, &inputs)
}

// Gathers and all-to-all: the output is blocks, one per member (peer).

/// The axis and each member's block extent of a gather or all-to-all, for
/// `member`'s output.
fn layout(scenario: &Scenario, member: usize) -> Option<(usize, Vec<usize>)> {
    match &scenario.semantics {
        Semantics::Gather { axis } => {
            Some((*axis, scenario.shapes.iter().map(|s| s[*axis]).collect()))
        }
        Semantics::AllToAll { axis, matrix } => {
            Some((*axis, matrix.iter().map(|row| row[member]).collect()))
        }
        _ => None,
    }
}

/// `member`'s right output split into its blocks (one per member or peer,
/// each with its extent along the axis), with the output's shape and axis.
struct Blocks {
    shape: Vec<usize>,
    axis: usize,
    len: usize,
    blocks: Vec<(Vec<f32>, usize)>,
}

fn split(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Blocks> {
    let (axis, extents) = layout(scenario, member)?;
    let (shape, values) = (expected.shape.clone(), expected.values.clone());
    let (outer, _, inner) = around(&shape, axis);
    let mut blocks: Vec<(Vec<f32>, usize)> = extents.iter().map(|&e| (Vec::new(), e)).collect();
    let mut at = 0;
    for _ in 0..outer {
        for (block, extent) in &mut blocks {
            block.extend_from_slice(values.get(at..at + *extent * inner)?);
            at += *extent * inner;
        }
    }
    Some(Blocks {
        shape,
        axis,
        len: values.len(),
        blocks,
    })
}

/// `member`'s output rebuilt from its blocks as `pick` rearranges them.
fn reblocked(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
    pick: impl Fn(Vec<(Vec<f32>, usize)>) -> Vec<(Vec<f32>, usize)>,
) -> Option<Vec<f32>> {
    let Blocks {
        shape,
        axis,
        len,
        blocks,
    } = split(scenario, member, expected)?;
    let blocks = pick(blocks);
    let borrowed: Vec<(&[f32], usize)> = blocks.iter().map(|(v, e)| (v.as_slice(), *e)).collect();
    Some(fitted(
        crate::suites::scenario::concat(&shape, axis, &borrowed),
        len,
    ))
}

fn blocks_reversed(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    match scenario.semantics {
        Semantics::Gather { .. } | Semantics::AllToAll { .. } => {
            reblocked(scenario, member, expected, |mut b| {
                b.reverse();
                b
            })
        }
        _ => None,
    }
}

fn blocks_rotated(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    reblocked(scenario, member, expected, |mut b| {
        if !b.is_empty() {
            b.rotate_left(1);
        }
        b
    })
}

fn block_repeated(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    reblocked(scenario, member, expected, |mut b| {
        if b.len() > 1 && b[0].1 == b[1].1 {
            b[1] = b[0].clone();
        }
        b
    })
}

fn block_missing(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    reblocked(scenario, member, expected, |mut b| {
        if let Some(last) = b.last_mut() {
            last.0.iter_mut().for_each(|v| *v = 0.0);
        }
        b
    })
}

fn extents_swapped(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    let Blocks {
        shape,
        axis,
        len,
        blocks,
    } = split(scenario, member, expected)?;
    let (outer, _, inner) = around(&shape, axis);
    // Row o of the copy takes `extent × outer` values of each block at o:
    // the strides of the outer and inner extents exchanged.
    let mut out = Vec::with_capacity(len);
    for row in 0..inner {
        for (data, extent) in &blocks {
            let run = extent * outer;
            out.extend(data.iter().skip(row * run).take(run));
        }
    }
    Some(fitted(out, len))
}

fn blocks_offset(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    let (axis, _) = layout(scenario, member)?;
    let (shape, values) = (expected.shape.clone(), expected.values.clone());
    let (outer, extent, inner) = around(&shape, axis);
    let row = extent * inner;
    (row > inner).then_some(())?;
    Some(
        (0..values.len())
            .map(|i| {
                let (o, within) = (i / row.max(1), i % row.max(1));
                values[o * row + (within + inner) % row]
            })
            .take(outer * row)
            .collect(),
    )
}

fn counts_shifted(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    let Blocks {
        shape,
        axis,
        len,
        blocks,
    } = split(scenario, member, expected)?;
    let (outer, _, inner) = around(&shape, axis);
    let n = blocks.len();
    (n > 1).then_some(())?;
    // Block k's data read with block k+1's extent.
    let mut out = Vec::with_capacity(len);
    for row in 0..outer {
        for (k, (data, extent)) in blocks.iter().enumerate() {
            let wrong = blocks[(k + 1) % n].1 * inner;
            let mut taken: Vec<f32> = data
                .iter()
                .skip(row * extent * inner)
                .take(wrong)
                .copied()
                .collect();
            taken.resize(wrong, 0.0);
            out.extend(taken);
        }
    }
    Some(fitted(out, len))
}

fn counts_as_elements(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    let Blocks {
        shape,
        axis,
        len,
        blocks,
    } = split(scenario, member, expected)?;
    (around(&shape, axis).2 > 1).then_some(())?;
    // Each block's first `count` elements, end to end.
    let out: Vec<f32> = blocks
        .iter()
        .flat_map(|(data, count)| data.iter().take(*count).copied())
        .collect();
    Some(fitted(out, len))
}

fn send_offset_shifted(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let Semantics::AllToAll { axis, matrix } = &scenario.semantics else {
        return None;
    };
    let (_, values) =
        crate::suites::scenario::all_to_all(scenario, *axis, matrix, member, |sends, peer, to| {
            (
                sends.iter().take(to).sum::<usize>() + 1,
                sends.get(to).copied().unwrap_or(0),
                peer,
            )
        });
    Some(fitted(values, expected.values.len()))
}

fn matrix_transposed(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    let Semantics::AllToAll { axis, matrix } = &scenario.semantics else {
        return None;
    };
    let transposed: Vec<Vec<usize>> = (0..matrix.len())
        .map(|i| matrix.iter().map(|row| row[i]).collect())
        .collect();
    let (_, values) = crate::suites::scenario::all_to_all(
        scenario,
        *axis,
        &transposed,
        member,
        |sends, peer, to| {
            (
                sends.iter().take(to).sum(),
                sends.get(to).copied().unwrap_or(0),
                peer,
            )
        },
    );
    Some(fitted(values, expected.values.len()))
}

// Broadcast.

fn root_shifted(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    root_moved(scenario, member, expected, 1)
}

fn root_before(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    root_moved(
        scenario,
        member,
        expected,
        scenario.size().saturating_sub(1),
    )
}

fn root_moved(scenario: &Scenario, _: usize, expected: &Expected, by: usize) -> Option<Vec<f32>> {
    let Semantics::Broadcast { root } = scenario.semantics else {
        return None;
    };
    let n = scenario.size();
    (n > 1).then_some(())?;
    let len = expected.values.len();
    Some(fitted(scenario.inputs[(root + by) % n].clone(), len))
}

// Point to point: a bundle as a scenario whose members are the values.

/// P2P-1's bundles as scenarios: member `i` holds value `i` of the bundle
/// (as sent), the "root" names the value the receiver's output `i` should
/// be; every member is judged as the receiver of its own value.
fn p2p_scenarios(seed: u64, size: usize, dtype: Dtype, sweep: &[usize]) -> Vec<Scenario> {
    p2p::p2p1_links(seed, size, p2p::p2p1_first_id(dtype), sweep)
        .into_iter()
        .flat_map(|link| {
            let payloads: Vec<Vec<f32>> = link
                .shapes
                .iter()
                .enumerate()
                .map(|(index, shape)| p2p::payload(dtype, seed, link.id, index, shape))
                .collect();
            (0..link.shapes.len()).map(move |index| Scenario {
                label: format!("value {index} of route {}", link.id),
                dtype,
                semantics: Semantics::Broadcast { root: index },
                shapes: link.shapes.clone(),
                inputs: payloads.clone(),
            })
        })
        .collect()
}

/// The receiver's output `index` (the scenario's root) taken from another
/// value of the bundle (cut or padded to the output's length).
fn bundle_value(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
    by: usize,
) -> Option<Vec<f32>> {
    let Semantics::Broadcast { root } = scenario.semantics else {
        return None;
    };
    (member == root && scenario.size() > 1).then_some(())?;
    let other = (root + by) % scenario.size();
    let len = expected.values.len();
    Some(fitted(scenario.inputs[other].clone(), len))
}

fn bundle_reversed(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    let Semantics::Broadcast { root } = scenario.semantics else {
        return None;
    };
    let n = scenario.size();
    bundle_value(scenario, member, expected, (2 * n - 1 - 2 * root) % n)
}

fn bundle_rotated(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    bundle_value(scenario, member, expected, 1)
}

fn placeholder_returned(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let shape = &scenario.shapes[member];
    let len = expected.values.len();
    Some(fitted(
        p2p::placeholder(shape)
            .into_iter()
            .map(|v| scenario.dtype.round(v))
            .collect(),
        len,
    ))
}

// The matrix's standard submissions.

fn standard_cases() -> Vec<Vec<Scenario>> {
    use crate::matrix::values;
    [2usize, 3, 4, 8]
        .into_iter()
        .map(|n| {
            let scenario = |label: &str, semantics, shapes: Vec<Vec<usize>>, inputs| Scenario {
                label: label.to_owned(),
                dtype: Dtype::F32,
                semantics,
                shapes,
                inputs,
            };
            let counts: Vec<usize> = (0..n).map(|r| r + 1).collect();
            vec![
                scenario(
                    "all_reduce_sum",
                    Semantics::Sum,
                    vec![vec![4]; n],
                    (0..n).map(|r| values(r, 4)).collect(),
                ),
                scenario(
                    "all_gather_even",
                    Semantics::Gather { axis: 0 },
                    vec![vec![2]; n],
                    (0..n).map(|r| values(r, 2)).collect(),
                ),
                scenario(
                    "all_gather_uneven",
                    Semantics::Gather { axis: 0 },
                    counts.iter().map(|&c| vec![c]).collect(),
                    (0..n).map(|r| values(r, counts[r])).collect(),
                ),
                scenario(
                    "variable_all_to_all",
                    Semantics::AllToAll {
                        axis: 0,
                        matrix: vec![vec![1; n]; n],
                    },
                    vec![vec![n]; n],
                    (0..n).map(|r| values(r, n)).collect(),
                ),
                scenario(
                    "broadcast",
                    Semantics::Broadcast { root: n - 1 },
                    vec![vec![4]; n],
                    (0..n)
                        .map(|r| {
                            if r == n - 1 {
                                values(r, 4)
                            } else {
                                vec![0.0; 4]
                            }
                        })
                        .collect(),
                ),
            ]
        })
        .collect()
}

// AGR-1 and BRD-2: verdicts, not tensors.

fn agreement_rows() -> Vec<MatrixRow> {
    type Agree = fn(&[bool], usize) -> bool;
    let mutations: [(&'static str, Agree); 6] = [
        ("a disjunction instead of a conjunction", |s, _| {
            s.iter().any(|&x| x)
        }),
        ("the member's own status", |s, m| s[m]),
        ("member 0's status", |s, _| s[0]),
        ("the last member ignored", |s, _| {
            s[..s.len() - 1].iter().all(|&x| x)
        }),
        ("always true", |_, _| true),
        ("always false", |_, _| false),
    ];
    mutations
        .into_iter()
        .map(|(mutation, agree)| {
            let (mut cases, mut rejected) = (0, 0);
            for n in WORLDS {
                let patterns = agr::patterns(n);
                // The mutation arises where its answer differs from the
                // right one; AGR-1's verifier refuses an answer that is not
                // the conjunction of the statuses.
                let right = |s: &Vec<bool>| s.iter().all(|&x| x);
                let changed = patterns
                    .iter()
                    .any(|s| (0..n).any(|m| agree(s, m) != right(s)));
                let refused = patterns
                    .iter()
                    .any(|s| (0..n).any(|m| !agr::agrees(s, agree(s, m))));
                cases += usize::from(changed);
                rejected += usize::from(changed && refused);
            }
            MatrixRow {
                check: "AGR-1",
                dtype: Dtype::F32,
                mutation,
                cases,
                rejected,
                applies: true,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_old_middle_axis_gather_could_not_tell_swapped_extents() {
        // [2, 3, 2] on axis 1: outer and inner extents are equal, so the
        // stride confusion yields the right bytes (the GAT-1 blind spot).
        let scenario = Scenario {
            label: "old".into(),
            dtype: Dtype::F32,
            semantics: Semantics::Gather { axis: 1 },
            shapes: vec![vec![2, 3, 2]; 2],
            inputs: (0..2)
                .map(|m| crate::suites::scenario::elements(Dtype::F32, 0, 1, m, 12))
                .collect(),
        };
        let wrong = extents_swapped(&scenario, 0, &scenario.expected(0)).unwrap();
        assert_eq!(bits(&wrong), bits(&scenario.expected(0).values));
        let mut new = scenario.clone();
        new.shapes = vec![vec![2, 3, 4]; 2];
        new.inputs = (0..2)
            .map(|m| crate::suites::scenario::elements(Dtype::F32, 0, 1, m, 24))
            .collect();
        let expected = new.expected(0);
        let wrong = extents_swapped(&new, 0, &expected).unwrap();
        assert!(judge_scenario(&new, &expected, &wrong));
    }
}
