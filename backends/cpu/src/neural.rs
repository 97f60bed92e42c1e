//! The `eredu_nn` tensor and neural-backend contracts on the CPU reference backend.
//!
//! Construction, read-back, elementwise arithmetic, layout and indexing,
//! concatenation, matrix multiplication, reductions, padding, SiLU and gated
//! products are real row-major `f32` implementations: shapes are checked when
//! the operation is called and the arithmetic is deferred until the result is
//! evaluated (inside a work item, cooperatively with its `NativeCancel`: see
//! [`crate::cancel`]). Heavy neural kernels that the communication contract never needs
//! (convolutions, normalization, rotary positions, attention, the operator
//! modules) fail with an error saying they are not provided.
//!
//! Index tensors (`take_axis` input, `argmin_axis` output) hold integral `f32`
//! values, because `f32` is the backend's only storage type.

use std::sync::Arc;

use eredu_nn::{
    AttentionMask, EmbeddingOperator, EmbeddingSpec, Error, GatedProductActivation,
    GatedProductPolicy, Index, LinearOperator, LinearSpec, NeuralBackend,
    NormalizationConstructionSpec, NormalizationOperator, PadMode, ParameterVisitor,
    ParameterVisitorMut, Parameterized, RotaryOperator, RotaryPosition, RotarySpec, Tensor,
};

use crate::cancel;
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::ledger::Ledger;
use crate::tensor::{element_count, CpuTensor};
use crate::CpuBackend;

/// Multiply-adds a long kernel performs between two looks at the running
/// work's cancel token (a few tens of microseconds of work).
const CANCEL_CHECK_WORK: usize = 1 << 16;

/// Largest extent whose every index is exactly representable as an `f32`.
const MAX_F32_INDEX_EXTENT: usize = 1 << 24;

/// The error of an operation this backend deliberately does not implement.
fn not_provided(operation: &str) -> Error {
    Error::backend(format!(
        "{operation} is not provided by the CPU reference backend"
    ))
}

/// Error for a value computation that contradicts its validated shapes.
fn inconsistent(operation: &'static str, got: impl Into<String>) -> CpuError {
    CpuError::invalid(operation, "input values matching their shapes", got)
}

/// Resolves `axis` (negative counts from the end) against `rank` axes.
fn resolve_axis(operation: &'static str, axis: i32, rank: usize) -> Result<usize, CpuError> {
    let signed_rank = i64::try_from(rank).unwrap_or(i64::MAX);
    let resolved = if axis < 0 {
        i64::from(axis) + signed_rank
    } else {
        i64::from(axis)
    };
    if (0..signed_rank).contains(&resolved) {
        usize::try_from(resolved).map_err(|_| inconsistent(operation, "an unaddressable axis"))
    } else {
        Err(CpuError::invalid(
            operation,
            format!("an axis in [-{rank}, {rank})"),
            format!("axis {axis}"),
        ))
    }
}

/// Converts a computed extent back to the `i32` shape representation.
fn to_dim(operation: &'static str, extent: usize) -> Result<i32, CpuError> {
    i32::try_from(extent).map_err(|_| {
        CpuError::invalid(
            operation,
            "an extent that fits in i32",
            format!("extent {extent}"),
        )
    })
}

/// Row-major strides of `extents`.
fn strides(extents: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; extents.len()];
    for axis in (0..extents.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1].saturating_mul(extents[axis + 1]);
    }
    strides
}

/// Splits `extents` around `axis` into (outer, axis extent, inner) counts.
///
/// Counts saturate; they are exact whenever the tensor has any elements.
fn split_at_axis(extents: &[usize], axis: usize) -> (usize, usize, usize) {
    let product = |extents: &[usize]| extents.iter().fold(1usize, |a, &b| a.saturating_mul(b));
    let outer = product(extents.get(..axis).unwrap_or(extents));
    let extent = extents.get(axis).copied().unwrap_or(1);
    let inner = product(extents.get(axis + 1..).unwrap_or(&[]));
    (outer, extent, inner)
}

/// Builds a deferred result after checking that its shape is valid. On an
/// eager device ([`crate::Personality::Eager`]) the values are computed
/// here, on the calling thread, and a failure is the call's; only a value
/// that reads the output of communication not yet completed stays deferred.
fn lazy(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    shape: Vec<i32>,
    compute: impl Fn() -> Result<Vec<f32>, CpuError> + Send + 'static,
) -> Result<CpuTensor, CpuError> {
    element_count(operation, &shape)?;
    if ledger.eager() {
        match compute() {
            Ok(values) => return Ok(CpuTensor::sharing(ledger, shape, Arc::new(values))),
            Err(CpuError::NotMaterialised { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(CpuTensor::deferred(ledger, shape, compute))
}

/// Which source coordinate each output coordinate of one axis reads.
enum Picks {
    /// Output coordinate `c` reads source coordinate `start + c`.
    Span { start: usize },
    /// The source axis of `extent` with `before` padding coordinates ahead of
    /// it and some after it; padding reads zero, or the nearest edge if `edge`.
    Padded {
        before: usize,
        extent: usize,
        edge: bool,
    },
    /// Output coordinate `c` reads source coordinate `list[c]`.
    Listed(Vec<usize>),
}

/// How one output axis of `extent` reads a source axis of `stride`.
struct AxisRead {
    stride: usize,
    extent: usize,
    picks: Picks,
}

impl AxisRead {
    /// Reads source coordinates `start..end` in order.
    fn range(stride: usize, start: usize, end: usize) -> Self {
        Self {
            stride,
            extent: end.saturating_sub(start),
            picks: Picks::Span { start },
        }
    }

    /// Reads an unchanged source axis.
    fn whole(stride: usize, extent: usize) -> Self {
        Self::range(stride, 0, extent)
    }

    /// Repeats one source element `extent` times.
    fn broadcast(extent: usize) -> Self {
        Self::whole(0, extent)
    }

    /// Reads the listed source coordinates in order.
    fn listed(stride: usize, list: Vec<usize>) -> Self {
        Self {
            stride,
            extent: list.len(),
            picks: Picks::Listed(list),
        }
    }

    /// Reads a source axis of `extent` padded by `(before, after)` coordinates.
    fn padded(
        stride: usize,
        extent: usize,
        (before, after): (usize, usize),
        mode: PadMode,
    ) -> Self {
        Self {
            stride,
            extent: before.saturating_add(extent).saturating_add(after),
            picks: Picks::Padded {
                before,
                extent,
                edge: mode == PadMode::Edge,
            },
        }
    }

    /// Source coordinate read by output coordinate `c`; `None` reads zero.
    fn source(&self, c: usize) -> Option<usize> {
        match &self.picks {
            Picks::Span { start } => Some(start.saturating_add(c)),
            Picks::Padded {
                before,
                extent,
                edge,
            } => match c.checked_sub(*before).filter(|inside| inside < extent) {
                Some(inside) => Some(inside),
                None if !edge => None,
                None if c < *before => Some(0),
                None => Some(extent.saturating_sub(1)),
            },
            Picks::Listed(list) => list.get(c).copied(),
        }
    }
}

/// Copies `source` into a new row-major array whose axes read as `reads` say.
fn gather(
    operation: &'static str,
    source: &[f32],
    reads: &[AxisRead],
) -> Result<Vec<f32>, CpuError> {
    let total = reads
        .iter()
        .try_fold(1usize, |total, read| total.checked_mul(read.extent))
        .ok_or_else(|| inconsistent(operation, "an element count that overflows usize"))?;
    let mut output = Vec::with_capacity(total);
    let mut coordinates = vec![0usize; reads.len()];
    for _ in 0..total {
        let offset =
            reads
                .iter()
                .zip(&coordinates)
                .try_fold(0usize, |offset, (read, &coordinate)| {
                    read.source(coordinate)
                        .map(|pick| offset.saturating_add(pick.saturating_mul(read.stride)))
                });
        output.push(match offset {
            Some(offset) => *source.get(offset).ok_or_else(|| {
                inconsistent(
                    operation,
                    format!("offset {offset} in {} values", source.len()),
                )
            })?,
            None => 0.0,
        });
        for (coordinate, read) in coordinates.iter_mut().zip(reads).rev() {
            *coordinate += 1;
            if *coordinate < read.extent {
                break;
            }
            *coordinate = 0;
        }
    }
    Ok(output)
}

/// The NumPy broadcast of two shapes.
fn broadcast_shape(
    operation: &'static str,
    lhs: &[i32],
    rhs: &[i32],
) -> Result<Vec<i32>, CpuError> {
    let rank = lhs.len().max(rhs.len());
    let from_end = |shape: &[i32], back: usize| {
        shape
            .len()
            .checked_sub(back)
            .and_then(|axis| shape.get(axis))
            .copied()
            .unwrap_or(1)
    };
    (1..=rank)
        .rev()
        .map(|back| match (from_end(lhs, back), from_end(rhs, back)) {
            (left, right) if left == right => Ok(left),
            (1, other) | (other, 1) => Ok(other),
            _ => Err(CpuError::invalid(
                operation,
                "equal or broadcast-compatible shapes",
                format!("shapes {lhs:?} and {rhs:?}"),
            )),
        })
        .collect()
}

/// Reads that broadcast `source` extents to `target` extents (aligned at the end).
fn broadcast_reads(source: &[usize], target: &[usize]) -> Vec<AxisRead> {
    let source_strides = strides(source);
    let lead = target.len().saturating_sub(source.len());
    target
        .iter()
        .enumerate()
        .map(|(axis, &extent)| {
            axis.checked_sub(lead)
                .filter(|&source_axis| source.get(source_axis) == Some(&extent))
                .and_then(|source_axis| source_strides.get(source_axis))
                .map_or_else(
                    || AxisRead::broadcast(extent),
                    |&stride| AxisRead::whole(stride, extent),
                )
        })
        .collect()
}

/// Values of `tensor` broadcast to `target` extents.
fn broadcast_values(
    operation: &'static str,
    tensor: &CpuTensor,
    target: &[usize],
) -> Result<Vec<f32>, CpuError> {
    let values = tensor.values()?;
    if tensor.extents() == target {
        return Ok(values);
    }
    gather(
        operation,
        &values,
        &broadcast_reads(&tensor.extents(), target),
    )
}

/// A deferred tensor holding `input`'s values under a new shape.
fn relabel(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    input: &CpuTensor,
    shape: Vec<i32>,
) -> Result<CpuTensor, CpuError> {
    let input = input.clone();
    lazy(operation, ledger, shape, move || input.values())
}

/// A deferred tensor that gathers `input`'s values as `reads` say.
fn regather(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    input: &CpuTensor,
    shape: Vec<i32>,
    reads: Vec<AxisRead>,
) -> Result<CpuTensor, CpuError> {
    let input = input.clone();
    lazy(operation, ledger, shape, move || {
        gather(operation, &input.values()?, &reads)
    })
}

/// A deferred elementwise map of `input`.
fn map_values(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    input: &CpuTensor,
    function: impl Fn(f32) -> f32 + Send + 'static,
) -> Result<CpuTensor, CpuError> {
    let input = input.clone();
    lazy(operation, ledger, input.dims().to_vec(), move || {
        Ok(input.values()?.into_iter().map(&function).collect())
    })
}

/// A deferred elementwise combination of two broadcast-compatible tensors.
fn zip_values(
    operation: &'static str,
    ledger: &Arc<Ledger>,
    lhs: &CpuTensor,
    rhs: &CpuTensor,
    function: impl Fn(f32, f32) -> f32 + Send + 'static,
) -> Result<CpuTensor, CpuError> {
    let shape = broadcast_shape(operation, lhs.dims(), rhs.dims())?;
    let extents: Vec<usize> = shape.iter().map(|&dim| dim.max(0) as usize).collect();
    let (lhs, rhs) = (lhs.clone(), rhs.clone());
    lazy(operation, ledger, shape, move || {
        let left = broadcast_values(operation, &lhs, &extents)?;
        let right = broadcast_values(operation, &rhs, &extents)?;
        Ok(left
            .into_iter()
            .zip(right)
            .map(|(left, right)| function(left, right))
            .collect())
    })
}

/// Concatenates, for each of `outer` blocks, the next `chunk` values of every part.
fn interleave(
    operation: &'static str,
    parts: &[(CpuTensor, usize)],
    outer: usize,
) -> Result<Vec<f32>, CpuError> {
    let values = parts
        .iter()
        .map(|(tensor, chunk)| Ok((tensor.values()?, *chunk)))
        .collect::<Result<Vec<_>, CpuError>>()?;
    let mut output = Vec::with_capacity(values.iter().map(|(part, _)| part.len()).sum());
    for block in 0..outer {
        for (part, chunk) in &values {
            let piece = part
                .get(block * chunk..(block + 1) * chunk)
                .ok_or_else(|| inconsistent(operation, format!("{} values", part.len())))?;
            output.extend_from_slice(piece);
        }
    }
    Ok(output)
}

/// Shape of a reduction over `axis`.
fn reduced_shape(shape: &[i32], axis: usize, keep_dims: bool) -> Vec<i32> {
    let mut reduced = shape.to_vec();
    if keep_dims {
        reduced[axis] = 1;
    } else {
        reduced.remove(axis);
    }
    reduced
}

/// Resolves one axis of `index`, returning its output extent (none for `At`)
/// and how it reads the source.
fn index_axis(
    index: Index,
    extent: usize,
    stride: usize,
) -> Result<(Option<usize>, AxisRead), CpuError> {
    let signed = i64::try_from(extent).unwrap_or(i64::MAX);
    let wrap = |value: i32| {
        let value = i64::from(value);
        if value < 0 {
            value + signed
        } else {
            value
        }
    };
    let position = |value: i64| usize::try_from(value).unwrap_or(0);
    match index {
        Index::Full => Ok((Some(extent), AxisRead::whole(stride, extent))),
        Index::At(at) => {
            let resolved = wrap(at);
            if !(0..signed).contains(&resolved) {
                return Err(CpuError::invalid(
                    "index",
                    format!("a position in [-{extent}, {extent})"),
                    format!("At({at}) on an axis of extent {extent}"),
                ));
            }
            let resolved = position(resolved);
            Ok((None, AxisRead::range(stride, resolved, resolved + 1)))
        }
        Index::Range(start, end) => {
            let (first, last) = (wrap(start), wrap(end));
            if first < 0 || first > last || last > signed {
                return Err(CpuError::invalid(
                    "index",
                    format!("0 <= start <= end <= {extent} after wrapping negative bounds"),
                    format!("Range({start}, {end}) on an axis of extent {extent}"),
                ));
            }
            let (first, last) = (position(first), position(last));
            Ok((Some(last - first), AxisRead::range(stride, first, last)))
        }
    }
}

/// Resolves one `take_axis` index value against an axis of `extent`.
fn take_position(value: f32, extent: usize) -> Result<usize, CpuError> {
    let signed = i64::try_from(extent).unwrap_or(i64::MAX);
    let integral = value.is_finite() && value.fract() == 0.0 && value.abs() <= 9.0e15;
    let resolved = match value as i64 {
        whole if whole < 0 => whole + signed,
        whole => whole,
    };
    if integral && (0..signed).contains(&resolved) {
        usize::try_from(resolved).map_err(|_| inconsistent("take_axis", "an unaddressable index"))
    } else {
        Err(CpuError::invalid(
            "take_axis",
            format!("integral indexes in [-{extent}, {extent})"),
            format!("index {value}"),
        ))
    }
}

/// `gate` and `up` combined under a validated gated-product policy.
fn gated_product_function(
    policy: GatedProductPolicy,
) -> Result<impl Fn(f32, f32) -> f32 + Send + 'static, Error> {
    policy.validate()?;
    let activation = policy.activation();
    if !matches!(
        activation,
        GatedProductActivation::Silu | GatedProductActivation::GeluApproximate
    ) {
        return Err(not_provided(&format!(
            "gated_product activation {activation:?}"
        )));
    }
    let multiplier = policy.sigmoid_multiplier();
    let gate_bound = policy.gate_upper_bound();
    let up_bound = policy.up_absolute_bound();
    let offset = policy.up_offset();
    Ok(move |gate: f32, up: f32| {
        let gate = match gate_bound {
            Some(bound) if gate > bound => bound,
            _ => gate,
        };
        let up = match up_bound {
            Some(bound) if up > bound => bound,
            Some(bound) if up < -bound => -bound,
            _ => up,
        };
        let activated = match activation {
            GatedProductActivation::GeluApproximate => gelu_approximate(gate),
            _ => gate / (1.0 + (-multiplier * gate).exp()),
        };
        activated * (up + offset)
    })
}

/// Whether `candidate` replaces `best` as the minimum; the first NaN wins, as in NumPy.
fn precedes_minimum(candidate: f32, best: f32) -> bool {
    !best.is_nan() && (candidate < best || candidate.is_nan())
}

/// Tanh-approximated Gaussian error linear unit.
fn gelu_approximate(value: f32) -> f32 {
    let inner = (2.0 / std::f32::consts::PI).sqrt() * (value + 0.044_715 * value.powi(3));
    0.5 * value * (1.0 + inner.tanh())
}

/// A materialised tensor of `shape` with every element `value`.
fn filled(
    operation: &'static str,
    value: f32,
    shape: &[i32],
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let count = element_count(operation, shape)?;
    CpuTensor::ready(context.ledger(), operation, vec![value; count], shape)
}

/// Logistic-sigmoid-weighted linear unit.
fn silu(value: f32) -> f32 {
    value / (1.0 + (-value).exp())
}

impl Tensor for CpuTensor {
    type Context = CpuExecutor;

    fn shape(&self) -> &[i32] {
        self.dims()
    }

    fn unloaded_f32(shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(filled("unloaded_f32", 0.0, shape, context)?)
    }

    fn from_f32_slice(values: &[f32], shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(Self::ready(
            context.ledger(),
            "from_f32_slice",
            values.to_vec(),
            shape,
        )?)
    }

    fn to_f32_vec(&self, _context: &CpuExecutor) -> Result<Vec<f32>, Error> {
        Ok(self.values()?)
    }

    fn full_f32(value: f32, shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        Ok(filled("full_f32", value, shape, context)?)
    }

    fn zeros_like(&self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(filled("zeros_like", 0.0, self.dims(), context)?)
    }

    fn add(&self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(zip_values("add", context.ledger(), self, rhs, |a, b| {
            a + b
        })?)
    }

    fn subtract(&self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(zip_values(
            "subtract",
            context.ledger(),
            self,
            rhs,
            |a, b| a - b,
        )?)
    }

    fn multiply(&self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(zip_values(
            "multiply",
            context.ledger(),
            self,
            rhs,
            |a, b| a * b,
        )?)
    }

    fn multiply_scalar(&self, rhs: f32, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(map_values(
            "multiply_scalar",
            context.ledger(),
            self,
            move |value| value * rhs,
        )?)
    }

    fn divide(&self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(zip_values(
            "divide",
            context.ledger(),
            self,
            rhs,
            |a, b| a / b,
        )?)
    }

    fn square(&self, context: &CpuExecutor) -> Result<Self, Error> {
        Ok(map_values("square", context.ledger(), self, |value| {
            value * value
        })?)
    }

    fn maximum_scalar(&self, rhs: f32, context: &CpuExecutor) -> Result<Self, Error> {
        let maximum = move |value: f32| if value < rhs { rhs } else { value };
        Ok(map_values(
            "maximum_scalar",
            context.ledger(),
            self,
            maximum,
        )?)
    }

    fn reshape(&self, shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        let count = element_count("reshape", shape)?;
        if count != self.len() {
            return Err(CpuError::invalid(
                "reshape",
                format!("a shape of {} elements like {:?}", self.len(), self.dims()),
                format!("shape {shape:?} of {count} elements"),
            )
            .into());
        }
        Ok(relabel("reshape", context.ledger(), self, shape.to_vec())?)
    }

    fn broadcast_to(&self, shape: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        let compatible = broadcast_shape("broadcast_to", self.dims(), shape)? == shape
            && self.dims().len() <= shape.len();
        if !compatible {
            return Err(CpuError::invalid(
                "broadcast_to",
                format!("a target shape that {:?} broadcasts to", self.dims()),
                format!("shape {shape:?}"),
            )
            .into());
        }
        element_count("broadcast_to", shape)?;
        let target: Vec<usize> = shape.iter().map(|&dim| dim.max(0) as usize).collect();
        let reads = broadcast_reads(&self.extents(), &target);
        Ok(regather(
            "broadcast_to",
            context.ledger(),
            self,
            shape.to_vec(),
            reads,
        )?)
    }

    fn transpose_axes(&self, axes: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        let rank = self.dims().len();
        let permutation = axes
            .iter()
            .map(|&axis| resolve_axis("transpose_axes", axis, rank))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = vec![false; rank];
        let is_permutation = permutation.len() == rank
            && permutation
                .iter()
                .all(|&axis| !std::mem::replace(&mut seen[axis], true));
        if !is_permutation {
            return Err(CpuError::invalid(
                "transpose_axes",
                format!(
                    "a permutation of the {rank} axes of shape {:?}",
                    self.dims()
                ),
                format!("axes {axes:?}"),
            )
            .into());
        }
        let extents = self.extents();
        let source_strides = strides(&extents);
        let shape = permutation.iter().map(|&axis| self.dims()[axis]).collect();
        let reads = permutation
            .iter()
            .map(|&axis| AxisRead::whole(source_strides[axis], extents[axis]))
            .collect();
        Ok(regather(
            "transpose_axes",
            context.ledger(),
            self,
            shape,
            reads,
        )?)
    }

    fn swap_axes(&self, left: i32, right: i32, context: &CpuExecutor) -> Result<Self, Error> {
        let rank = self.dims().len();
        let left = resolve_axis("swap_axes", left, rank)?;
        let right = resolve_axis("swap_axes", right, rank)?;
        let mut axes: Vec<i32> = (0..rank).map(|axis| axis as i32).collect();
        axes.swap(left, right);
        self.transpose_axes(&axes, context)
    }

    fn transpose(&self, context: &CpuExecutor) -> Result<Self, Error> {
        if self.dims().len() != 2 {
            return Err(CpuError::invalid(
                "transpose",
                "a rank-two tensor",
                format!("shape {:?}", self.dims()),
            )
            .into());
        }
        self.transpose_axes(&[1, 0], context)
    }

    fn expand_dims(&self, axis: i32, context: &CpuExecutor) -> Result<Self, Error> {
        let rank = self.dims().len();
        let axis = resolve_axis("expand_dims", axis, rank + 1)?;
        let mut shape = self.dims().to_vec();
        shape.insert(axis, 1);
        Ok(relabel("expand_dims", context.ledger(), self, shape)?)
    }

    fn squeeze_axes(&self, axes: &[i32], context: &CpuExecutor) -> Result<Self, Error> {
        let rank = self.dims().len();
        let mut remove = vec![false; rank];
        for &axis in axes {
            let resolved = resolve_axis("squeeze_axes", axis, rank)?;
            if self.dims()[resolved] != 1 || std::mem::replace(&mut remove[resolved], true) {
                return Err(CpuError::invalid(
                    "squeeze_axes",
                    format!("distinct unit axes of shape {:?}", self.dims()),
                    format!("axes {axes:?}"),
                )
                .into());
            }
        }
        let shape = self
            .dims()
            .iter()
            .zip(&remove)
            .filter(|(_, &removed)| !removed)
            .map(|(&dim, _)| dim)
            .collect();
        Ok(relabel("squeeze_axes", context.ledger(), self, shape)?)
    }

    fn index(&self, indexes: &[Index], context: &CpuExecutor) -> Result<Self, Error> {
        let extents = self.extents();
        if indexes.len() > extents.len() {
            return Err(CpuError::invalid(
                "index",
                format!(
                    "at most {} indexes for shape {:?}",
                    extents.len(),
                    self.dims()
                ),
                format!("{} indexes", indexes.len()),
            )
            .into());
        }
        let mut shape = Vec::with_capacity(extents.len());
        let mut reads = Vec::with_capacity(extents.len());
        for (axis, (&extent, stride)) in extents.iter().zip(strides(&extents)).enumerate() {
            let index = indexes.get(axis).copied().unwrap_or(Index::Full);
            let (kept, read) = index_axis(index, extent, stride)?;
            if let Some(kept) = kept {
                shape.push(to_dim("index", kept)?);
            }
            reads.push(read);
        }
        Ok(regather("index", context.ledger(), self, shape, reads)?)
    }

    fn take_axis(&self, indexes: &Self, axis: i32, context: &CpuExecutor) -> Result<Self, Error> {
        let rank = self.dims().len();
        let axis = resolve_axis("take_axis", axis, rank)?;
        let mut shape = self.dims()[..axis].to_vec();
        shape.extend_from_slice(indexes.dims());
        shape.extend_from_slice(&self.dims()[axis + 1..]);
        element_count("take_axis", &shape)?;
        let (input, indexes) = (self.clone(), indexes.clone());
        Ok(lazy("take_axis", context.ledger(), shape, move || {
            let extents = input.extents();
            let source_strides = strides(&extents);
            let positions = indexes
                .values()?
                .into_iter()
                .map(|value| take_position(value, extents[axis]))
                .collect::<Result<Vec<_>, _>>()?;
            let mut reads: Vec<AxisRead> = extents
                .iter()
                .zip(&source_strides)
                .map(|(&extent, &stride)| AxisRead::whole(stride, extent))
                .collect();
            reads[axis] = AxisRead::listed(source_strides[axis], positions);
            gather("take_axis", &input.values()?, &reads)
        })?)
    }

    fn concatenate(values: &[Self], axis: i32, context: &CpuExecutor) -> Result<Self, Error> {
        let first = values
            .first()
            .ok_or_else(|| CpuError::invalid("concatenate", "at least one tensor", "no tensors"))?;
        let axis = resolve_axis("concatenate", axis, first.dims().len())?;
        let mut shape = first.dims().to_vec();
        shape[axis] = 0;
        for value in values {
            let matches = value.dims().len() == shape.len()
                && value
                    .dims()
                    .iter()
                    .zip(first.dims())
                    .enumerate()
                    .all(|(other, (dim, expected))| other == axis || dim == expected);
            if !matches {
                return Err(CpuError::invalid(
                    "concatenate",
                    format!(
                        "shapes equal to {:?} except along axis {axis}",
                        first.dims()
                    ),
                    format!("shape {:?}", value.dims()),
                )
                .into());
            }
            shape[axis] = shape[axis].checked_add(value.dims()[axis]).ok_or_else(|| {
                CpuError::invalid("concatenate", "an extent that fits in i32", "an overflow")
            })?;
        }
        let (outer, _, inner) = split_at_axis(&first.extents(), axis);
        let parts: Vec<(Self, usize)> = values
            .iter()
            .map(|value| (value.clone(), value.extents()[axis].saturating_mul(inner)))
            .collect();
        Ok(lazy("concatenate", context.ledger(), shape, move || {
            interleave("concatenate", &parts, outer)
        })?)
    }

    fn stack(values: &[Self], axis: i32, context: &CpuExecutor) -> Result<Self, Error> {
        let first = values
            .first()
            .ok_or_else(|| CpuError::invalid("stack", "at least one tensor", "no tensors"))?;
        let axis = resolve_axis("stack", axis, first.dims().len() + 1)?;
        if let Some(other) = values.iter().find(|value| value.dims() != first.dims()) {
            return Err(CpuError::invalid(
                "stack",
                format!("every shape equal to {:?}", first.dims()),
                format!("shape {:?}", other.dims()),
            )
            .into());
        }
        let mut shape = first.dims().to_vec();
        shape.insert(axis, to_dim("stack", values.len())?);
        element_count("stack", &shape)?;
        let (outer, extent, inner) = split_at_axis(&first.extents(), axis);
        let chunk = extent.saturating_mul(inner);
        let parts: Vec<(Self, usize)> = values.iter().map(|value| (value.clone(), chunk)).collect();
        Ok(lazy("stack", context.ledger(), shape, move || {
            interleave("stack", &parts, outer)
        })?)
    }

    fn matmul(lhs: &Self, rhs: &Self, context: &CpuExecutor) -> Result<Self, Error> {
        let (left, right) = (lhs.dims(), rhs.dims());
        let shapes_fit =
            left.len() >= 2 && right.len() >= 2 && left[left.len() - 1] == right[right.len() - 2];
        if !shapes_fit {
            return Err(CpuError::invalid(
                "matmul",
                "operands of rank >= 2 shaped [..., m, k] and [..., k, n]",
                format!("shapes {left:?} and {right:?}"),
            )
            .into());
        }
        let (m, k, n) = (
            left[left.len() - 2],
            left[left.len() - 1],
            right[right.len() - 1],
        );
        let mut shape =
            broadcast_shape("matmul", &left[..left.len() - 2], &right[..right.len() - 2])?;
        let batch = element_count("matmul", &shape)?;
        shape.extend([m, n]);
        element_count("matmul", &shape)?;
        let operand = |rows: i32, columns: i32| {
            let mut extents: Vec<usize> = shape[..shape.len() - 2]
                .iter()
                .map(|&dim| dim.max(0) as usize)
                .collect();
            extents.extend([rows.max(0) as usize, columns.max(0) as usize]);
            extents
        };
        let (left_extents, right_extents) = (operand(m, k), operand(k, n));
        let (m, k, n) = (m as usize, k as usize, n as usize);
        let (lhs, rhs) = (lhs.clone(), rhs.clone());
        Ok(lazy("matmul", context.ledger(), shape, move || {
            let left = broadcast_values("matmul", &lhs, &left_extents)?;
            let right = broadcast_values("matmul", &rhs, &right_extents)?;
            let mut output = vec![0.0; batch * m * n];
            if m * n * k == 0 {
                return Ok(output);
            }
            // Rows between two looks at the running work's cancel token.
            let rows_per_check = (CANCEL_CHECK_WORK / (n * k)).max(1);
            let mut rows = 0usize;
            for ((out, a), b) in output
                .chunks_exact_mut(m * n)
                .zip(left.chunks_exact(m * k))
                .zip(right.chunks_exact(k * n))
            {
                for (out_row, a_row) in out.chunks_exact_mut(n).zip(a.chunks_exact(k)) {
                    if rows % rows_per_check == 0 {
                        cancel::checkpoint()?;
                    }
                    rows += 1;
                    for (&a_value, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
                        for (out_value, &b_value) in out_row.iter_mut().zip(b_row) {
                            *out_value += a_value * b_value;
                        }
                    }
                }
            }
            Ok(output)
        })?)
    }

    fn sum_axis(
        value: &Self,
        axis: i32,
        keep_dims: bool,
        context: &CpuExecutor,
    ) -> Result<Self, Error> {
        let axis = resolve_axis("sum_axis", axis, value.dims().len())?;
        let (outer, extent, inner) = split_at_axis(&value.extents(), axis);
        let input = value.clone();
        let shape = reduced_shape(value.dims(), axis, keep_dims);
        Ok(lazy("sum_axis", context.ledger(), shape, move || {
            let values = input.values()?;
            let mut output = vec![0.0; outer.saturating_mul(inner)];
            if output.is_empty() || extent == 0 {
                return Ok(output);
            }
            for (out, block) in output
                .chunks_exact_mut(inner)
                .zip(values.chunks_exact(extent * inner))
            {
                for row in block.chunks_exact(inner) {
                    for (sum, &value) in out.iter_mut().zip(row) {
                        *sum += value;
                    }
                }
            }
            Ok(output)
        })?)
    }

    fn argmin_axis(
        value: &Self,
        axis: i32,
        keep_dims: bool,
        context: &CpuExecutor,
    ) -> Result<Self, Error> {
        let axis = resolve_axis("argmin_axis", axis, value.dims().len())?;
        let (outer, extent, inner) = split_at_axis(&value.extents(), axis);
        if extent == 0 || extent > MAX_F32_INDEX_EXTENT {
            return Err(CpuError::invalid(
                "argmin_axis",
                format!("a reduced axis of extent 1..={MAX_F32_INDEX_EXTENT}"),
                format!("axis {axis} of shape {:?}", value.dims()),
            )
            .into());
        }
        let input = value.clone();
        let shape = reduced_shape(value.dims(), axis, keep_dims);
        Ok(lazy("argmin_axis", context.ledger(), shape, move || {
            let values = input.values()?;
            let mut output = Vec::with_capacity(outer.saturating_mul(inner));
            if outer == 0 || inner == 0 {
                return Ok(output);
            }
            for block in values.chunks_exact(extent * inner) {
                let mut rows = block.chunks_exact(inner);
                let first = rows.next().unwrap_or_default();
                let mut best: Vec<(usize, f32)> = first.iter().map(|&value| (0, value)).collect();
                for (position, row) in (1..).zip(rows) {
                    for (slot, &candidate) in best.iter_mut().zip(row) {
                        if precedes_minimum(candidate, slot.1) {
                            *slot = (position, candidate);
                        }
                    }
                }
                output.extend(best.into_iter().map(|(position, _)| position as f32));
            }
            Ok(output)
        })?)
    }

    fn pad(
        value: &Self,
        widths: &[(i32, i32)],
        mode: PadMode,
        context: &CpuExecutor,
    ) -> Result<Self, Error> {
        let extents = value.extents();
        let invalid = |expected: String| {
            Error::from(CpuError::invalid(
                "pad",
                expected,
                format!("widths {widths:?} for shape {:?}", value.dims()),
            ))
        };
        if widths.len() != extents.len() {
            return Err(invalid(format!("{} (before, after) widths", extents.len())));
        }
        let mut shape = Vec::with_capacity(extents.len());
        let mut reads = Vec::with_capacity(extents.len());
        for ((&extent, stride), &(before, after)) in
            extents.iter().zip(strides(&extents)).zip(widths)
        {
            let (Ok(before), Ok(after)) = (usize::try_from(before), usize::try_from(after)) else {
                return Err(invalid("non-negative widths".into()));
            };
            if mode == PadMode::Edge && extent == 0 && before + after > 0 {
                return Err(invalid(
                    "non-empty axes wherever edge padding is added".into(),
                ));
            }
            shape.push(to_dim("pad", before + extent + after)?);
            reads.push(AxisRead::padded(stride, extent, (before, after), mode));
        }
        element_count("pad", &shape)?;
        Ok(regather("pad", context.ledger(), value, shape, reads)?)
    }

    fn conv1d(
        _input: &Self,
        _weight: &Self,
        _stride: i32,
        _padding: i32,
        _dilation: i32,
        _groups: i32,
        _context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Err(not_provided("conv1d"))
    }

    fn conv_transpose1d(
        _input: &Self,
        _weight: &Self,
        _stride: i32,
        _padding: i32,
        _dilation: i32,
        _output_padding: i32,
        _groups: i32,
        _context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Err(not_provided("conv_transpose1d"))
    }

    fn linear(
        _input: &Self,
        _weight: &Self,
        _bias: Option<&Self>,
        _context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Err(not_provided("linear"))
    }

    fn layer_norm(
        _input: &Self,
        _weight: Option<&Self>,
        _bias: Option<&Self>,
        _epsilon: f32,
        _context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Err(not_provided("layer_norm"))
    }

    fn gelu(_input: &Self, _context: &CpuExecutor) -> Result<Self, Error> {
        Err(not_provided("gelu"))
    }

    fn elu(_input: &Self, _alpha: f32, _context: &CpuExecutor) -> Result<Self, Error> {
        Err(not_provided("elu"))
    }

    fn rope(
        _input: &Self,
        _dimensions: i32,
        _traditional: bool,
        _base: f32,
        _scale: f32,
        _offset: i32,
        _context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Err(not_provided("rope"))
    }

    fn scaled_dot_product_attention(
        _queries: &Self,
        _keys: &Self,
        _values: &Self,
        _scale: f32,
        _mask: AttentionMask<'_, Self>,
        _context: &CpuExecutor,
    ) -> Result<Self, Error> {
        Err(not_provided("scaled_dot_product_attention"))
    }
}

/// Operator handle of the CPU reference backend's linear, embedding,
/// normalization and rotary slots.
///
/// The backend provides none of these kernels: its constructors fail, so no
/// handle is ever made outside this module, and a handle holds no parameters.
#[derive(Debug, Clone)]
pub struct CpuOperator {
    _sealed: (),
}

impl Parameterized<CpuTensor> for CpuOperator {
    fn visit_parameters<'a, V>(&'a self, _visitor: &mut V)
    where
        V: ParameterVisitor<'a, CpuTensor>,
    {
    }

    fn visit_parameters_mut<'a, V>(&'a mut self, _visitor: &mut V)
    where
        V: ParameterVisitorMut<'a, CpuTensor>,
    {
    }

    fn set_trainable(&mut self, _trainable: bool) {}
}

impl LinearOperator<CpuTensor> for CpuOperator {
    fn forward(&mut self, _input: &CpuTensor, _context: &CpuExecutor) -> Result<CpuTensor, Error> {
        Err(not_provided("linear operator forward"))
    }
}

impl EmbeddingOperator<CpuTensor> for CpuOperator {
    fn forward(&mut self, _input: &CpuTensor, _context: &CpuExecutor) -> Result<CpuTensor, Error> {
        Err(not_provided("embedding operator forward"))
    }

    fn as_linear(
        &mut self,
        _input: &CpuTensor,
        _context: &CpuExecutor,
    ) -> Result<CpuTensor, Error> {
        Err(not_provided("embedding operator as_linear"))
    }
}

impl NormalizationOperator<CpuTensor> for CpuOperator {
    fn forward(&mut self, _input: &CpuTensor, _context: &CpuExecutor) -> Result<CpuTensor, Error> {
        Err(not_provided("normalization operator forward"))
    }
}

impl RotaryOperator<CpuTensor> for CpuOperator {
    fn forward(
        &mut self,
        _input: &CpuTensor,
        _position: RotaryPosition<'_, CpuTensor>,
        _context: &CpuExecutor,
    ) -> Result<CpuTensor, Error> {
        Err(not_provided("rotary operator forward"))
    }
}

impl NeuralBackend for CpuBackend {
    type Tensor = CpuTensor;
    type Linear = CpuOperator;
    type Embedding = CpuOperator;
    type Normalization = CpuOperator;
    type Rotary = CpuOperator;
    type ParallelContext = ();

    fn linear(_spec: LinearSpec, _context: &CpuExecutor) -> Result<CpuOperator, Error> {
        Err(not_provided("linear operator"))
    }

    fn embedding(_spec: EmbeddingSpec, _context: &CpuExecutor) -> Result<CpuOperator, Error> {
        Err(not_provided("embedding operator"))
    }

    fn normalization(
        _spec: NormalizationConstructionSpec,
        _context: &CpuExecutor,
    ) -> Result<CpuOperator, Error> {
        Err(not_provided("normalization operator"))
    }

    fn rotary(_spec: RotarySpec, _context: &CpuExecutor) -> Result<CpuOperator, Error> {
        Err(not_provided("rotary operator"))
    }

    fn silu(input: CpuTensor, context: &CpuExecutor) -> Result<CpuTensor, Error> {
        Ok(map_values("silu", context.ledger(), &input, silu)?)
    }

    fn gated_product(
        gate: CpuTensor,
        up: CpuTensor,
        policy: GatedProductPolicy,
        context: &CpuExecutor,
    ) -> Result<CpuTensor, Error> {
        let function = gated_product_function(policy)?;
        Ok(zip_values(
            "gated_product",
            context.ledger(),
            &gate,
            &up,
            function,
        )?)
    }

    fn attention(
        _queries: CpuTensor,
        _keys: CpuTensor,
        _values: CpuTensor,
        _scale: f32,
        _mask: Option<&CpuTensor>,
        _context: &CpuExecutor,
    ) -> Result<CpuTensor, Error> {
        Err(not_provided("attention"))
    }

    fn sliding_window_attention(
        _queries: CpuTensor,
        _keys: CpuTensor,
        _values: CpuTensor,
        _scale: f32,
        _window: i32,
        _position_offset: i32,
        _context: &CpuExecutor,
    ) -> Result<CpuTensor, Error> {
        Err(not_provided("sliding_window_attention"))
    }

    fn causal_mask(
        _sequence: i32,
        _offset: i32,
        _window: Option<i32>,
        _context: &CpuExecutor,
    ) -> Result<CpuTensor, Error> {
        Err(not_provided("causal_mask"))
    }

    fn row_parallel_linear(
        _linear: &mut CpuOperator,
        _input: &CpuTensor,
        _parallel: &(),
        _context: &CpuExecutor,
    ) -> Result<CpuTensor, Error> {
        Err(not_provided("row_parallel_linear"))
    }
}

#[cfg(test)]
mod tests {
    use eredu_nn::{
        EmbeddingOperator, EmbeddingSpec, GatedProductActivation, GatedProductPolicy, Index,
        LinearFormatSpec, LinearOperator, LinearSpec, NeuralBackend, NormalizationConstructionSpec,
        NormalizationOperator, PadMode, ParameterSpec, RotaryAlgorithm, RotaryOperator,
        RotaryPosition, RotarySpec, Tensor,
    };

    use super::CpuOperator;
    use crate::executor::CpuExecutor;
    use crate::tensor::CpuTensor;
    use crate::CpuBackend;

    fn ctx() -> CpuExecutor {
        crate::device::CpuDevice::new().executor()
    }

    fn tensor(ctx: &CpuExecutor, values: &[f32], shape: &[i32]) -> CpuTensor {
        CpuTensor::from_f32_slice(values, shape, ctx).expect("valid test tensor")
    }

    /// A tensor holding 0, 1, 2, … in row-major order.
    fn iota(ctx: &CpuExecutor, shape: &[i32]) -> CpuTensor {
        let count: i32 = shape.iter().product();
        let values: Vec<f32> = (0..count).map(|value| value as f32).collect();
        tensor(ctx, &values, shape)
    }

    fn read(value: &CpuTensor, ctx: &CpuExecutor) -> Vec<f32> {
        value.to_f32_vec(ctx).expect("tensor evaluates")
    }

    fn check(value: &CpuTensor, ctx: &CpuExecutor, shape: &[i32], expected: &[f32]) {
        assert_eq!(value.shape(), shape);
        assert_eq!(read(value, ctx), expected);
    }

    fn close(actual: &[f32], expected: &[f32]) {
        assert_eq!(actual.len(), expected.len());
        for (actual, expected) in actual.iter().zip(expected) {
            assert!((actual - expected).abs() < 1e-6, "{actual} != {expected}");
        }
    }

    fn error<T: std::fmt::Debug>(result: Result<T, eredu_nn::Error>) -> String {
        result.expect_err("operation must fail").to_string()
    }

    fn assert_not_provided<T: std::fmt::Debug>(result: Result<T, eredu_nn::Error>, name: &str) {
        assert_eq!(
            error(result),
            format!("{name} is not provided by the CPU reference backend")
        );
    }

    #[test]
    fn construction_and_read_back() {
        let ctx = ctx();
        check(
            &tensor(&ctx, &[1.0, 2.0], &[2, 1]),
            &ctx,
            &[2, 1],
            &[1.0, 2.0],
        );
        check(
            &CpuTensor::unloaded_f32(&[2, 2], &ctx).expect("allocates"),
            &ctx,
            &[2, 2],
            &[0.0; 4],
        );
        let filled = CpuTensor::full_f32(1.5, &[3], &ctx).expect("fills");
        check(&filled, &ctx, &[3], &[1.5; 3]);
        check(
            &filled.zeros_like(&ctx).expect("zeros"),
            &ctx,
            &[3],
            &[0.0; 3],
        );
        let scalar = tensor(&ctx, &[7.0], &[]);
        check(&scalar, &ctx, &[], &[7.0]);
        let message = error(CpuTensor::from_f32_slice(&[1.0; 3], &[2, 2], &ctx));
        assert!(message.contains("from_f32_slice") && message.contains("3 values"));
        assert!(error(CpuTensor::full_f32(0.0, &[-1], &ctx)).contains("non-negative extents"));
    }

    #[test]
    fn elementwise_arithmetic() {
        let ctx = ctx();
        let lhs = tensor(&ctx, &[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let rhs = tensor(&ctx, &[4.0, 3.0, 2.0, 8.0], &[2, 2]);
        check(
            &lhs.add(&rhs, &ctx).expect("add"),
            &ctx,
            &[2, 2],
            &[5.0, 5.0, 5.0, 12.0],
        );
        check(
            &lhs.subtract(&rhs, &ctx).expect("subtract"),
            &ctx,
            &[2, 2],
            &[-3.0, -1.0, 1.0, -4.0],
        );
        check(
            &lhs.multiply(&rhs, &ctx).expect("multiply"),
            &ctx,
            &[2, 2],
            &[4.0, 6.0, 6.0, 32.0],
        );
        check(
            &lhs.divide(&rhs, &ctx).expect("divide"),
            &ctx,
            &[2, 2],
            &[0.25, 2.0 / 3.0, 1.5, 0.5],
        );
    }

    #[test]
    fn elementwise_operations_broadcast() {
        let ctx = ctx();
        let matrix = iota(&ctx, &[2, 3]);
        let row = tensor(&ctx, &[10.0, 20.0, 30.0], &[3]);
        check(
            &matrix.add(&row, &ctx).expect("add"),
            &ctx,
            &[2, 3],
            &[10.0, 21.0, 32.0, 13.0, 24.0, 35.0],
        );
        let column = tensor(&ctx, &[1.0, 2.0], &[2, 1]);
        let line = tensor(&ctx, &[1.0, 10.0, 100.0], &[1, 3]);
        check(
            &column.multiply(&line, &ctx).expect("multiply"),
            &ctx,
            &[2, 3],
            &[1.0, 10.0, 100.0, 2.0, 20.0, 200.0],
        );
        let scalar = tensor(&ctx, &[2.0], &[]);
        check(
            &matrix.divide(&scalar, &ctx).expect("divide"),
            &ctx,
            &[2, 3],
            &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5],
        );
    }

    #[test]
    fn elementwise_rejects_incompatible_shapes() {
        let ctx = ctx();
        let message = error(iota(&ctx, &[2, 3]).add(&iota(&ctx, &[2]), &ctx));
        assert!(message.contains("add"), "{message}");
        assert!(message.contains("[2, 3] and [2]"), "{message}");
    }

    #[test]
    fn scalar_maps() {
        let ctx = ctx();
        let value = tensor(&ctx, &[-2.0, 0.5, 3.0], &[3]);
        check(
            &value.multiply_scalar(2.0, &ctx).expect("multiply_scalar"),
            &ctx,
            &[3],
            &[-4.0, 1.0, 6.0],
        );
        check(
            &value.square(&ctx).expect("square"),
            &ctx,
            &[3],
            &[4.0, 0.25, 9.0],
        );
        check(
            &value.maximum_scalar(1.0, &ctx).expect("maximum_scalar"),
            &ctx,
            &[3],
            &[1.0, 1.0, 3.0],
        );
    }

    #[test]
    fn results_stay_deferred_until_read() {
        let ctx = ctx();
        let sum = iota(&ctx, &[2]).add(&iota(&ctx, &[2]), &ctx).expect("add");
        let doubled = sum.multiply_scalar(2.0, &ctx).expect("multiply_scalar");
        assert!(!sum.is_materialised() && !doubled.is_materialised());
        assert_eq!(read(&doubled, &ctx), [0.0, 4.0]);
        assert!(sum.is_materialised() && doubled.is_materialised());
    }

    #[test]
    fn reshape_keeps_row_major_order() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        check(
            &value.reshape(&[3, 1, 2], &ctx).expect("reshape"),
            &ctx,
            &[3, 1, 2],
            &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        );
    }

    #[test]
    fn reshape_rejects_other_element_counts() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        let message = error(value.reshape(&[4, 2], &ctx));
        assert!(message.contains("reshape") && message.contains("6 elements"));
        assert!(message.contains("[4, 2] of 8 elements"), "{message}");
        let message = error(value.reshape(&[-1, 3], &ctx));
        assert!(message.contains("reshape") && message.contains("non-negative extents"));
    }

    #[test]
    fn transpose_axes_permutes_three_dimensions() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3, 4]);
        let expected = [
            0.0, 4.0, 8.0, 12.0, 16.0, 20.0, 1.0, 5.0, 9.0, 13.0, 17.0, 21.0, 2.0, 6.0, 10.0, 14.0,
            18.0, 22.0, 3.0, 7.0, 11.0, 15.0, 19.0, 23.0,
        ];
        let permuted = value.transpose_axes(&[2, 0, 1], &ctx).expect("permutes");
        check(&permuted, &ctx, &[4, 2, 3], &expected);
        let negative = value.transpose_axes(&[-1, 0, -2], &ctx).expect("permutes");
        check(&negative, &ctx, &[4, 2, 3], &expected);
    }

    #[test]
    fn transpose_axes_rejects_non_permutations() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3, 4]);
        for axes in [&[0, 0, 1][..], &[0, 1], &[0, 1, 2, 3]] {
            let message = error(value.transpose_axes(axes, &ctx));
            assert!(message.contains("transpose_axes"), "{message}");
        }
        assert!(error(value.transpose_axes(&[0, 1, 3], &ctx)).contains("axis in [-3, 3)"));
    }

    #[test]
    fn swap_axes_and_transpose() {
        let ctx = ctx();
        let matrix = iota(&ctx, &[2, 3]);
        let expected = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0];
        check(
            &matrix.transpose(&ctx).expect("transpose"),
            &ctx,
            &[3, 2],
            &expected,
        );
        let cube = iota(&ctx, &[2, 1, 3]);
        let swapped = cube.swap_axes(0, -1, &ctx).expect("swap_axes");
        check(&swapped, &ctx, &[3, 1, 2], &expected);
        assert!(error(cube.transpose(&ctx)).contains("a rank-two tensor"));
        assert!(error(cube.swap_axes(0, 3, &ctx)).contains("swap_axes"));
    }

    #[test]
    fn expand_and_squeeze_unit_axes() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        let values = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        check(
            &value.expand_dims(-1, &ctx).expect("expand"),
            &ctx,
            &[2, 3, 1],
            &values,
        );
        check(
            &value.expand_dims(0, &ctx).expect("expand"),
            &ctx,
            &[1, 2, 3],
            &values,
        );
        assert!(error(value.expand_dims(3, &ctx)).contains("expand_dims"));
        let padded = iota(&ctx, &[1, 2, 1, 3]);
        check(
            &padded.squeeze_axes(&[0, -2], &ctx).expect("squeeze"),
            &ctx,
            &[2, 3],
            &values,
        );
        for axes in [&[1][..], &[0, 0], &[4]] {
            assert!(error(padded.squeeze_axes(axes, &ctx)).contains("squeeze_axes"));
        }
    }

    #[test]
    fn index_selects_positions_and_ranges() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3, 4]);
        let row = value
            .index(&[Index::At(1), Index::Range(1, 3)], &ctx)
            .expect("index");
        check(
            &row,
            &ctx,
            &[2, 4],
            &[16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0],
        );
        let tail = value
            .index(&[Index::Full, Index::At(-1), Index::Range(-2, 4)], &ctx)
            .expect("index");
        check(&tail, &ctx, &[2, 2], &[10.0, 11.0, 22.0, 23.0]);
    }

    #[test]
    fn index_rejects_out_of_range_selections() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        let message = error(value.index(&[Index::Full, Index::At(3)], &ctx));
        assert!(
            message.contains("At(3) on an axis of extent 3"),
            "{message}"
        );
        let message = error(value.index(&[Index::Range(2, 1)], &ctx));
        assert!(message.contains("Range(2, 1)"), "{message}");
        let message = error(value.index(&[Index::Full; 3], &ctx));
        assert!(message.contains("at most 2 indexes"), "{message}");
    }

    #[test]
    fn take_axis_gathers_along_a_middle_axis() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3, 2]);
        let rows = tensor(&ctx, &[2.0, 0.0, 2.0], &[3]);
        check(
            &value.take_axis(&rows, 1, &ctx).expect("take_axis"),
            &ctx,
            &[2, 3, 2],
            &[
                4.0, 5.0, 0.0, 1.0, 4.0, 5.0, 10.0, 11.0, 6.0, 7.0, 10.0, 11.0,
            ],
        );
        let matrix = iota(&ctx, &[3, 2]);
        let nested = tensor(&ctx, &[1.0, -1.0], &[2, 1]);
        check(
            &matrix.take_axis(&nested, 0, &ctx).expect("take_axis"),
            &ctx,
            &[2, 1, 2],
            &[2.0, 3.0, 4.0, 5.0],
        );
    }

    #[test]
    fn take_axis_rejects_bad_indexes_when_read() {
        let ctx = ctx();
        let matrix = iota(&ctx, &[3, 2]);
        for bad in [3.0, 0.5, -4.0] {
            let taken = matrix
                .take_axis(&tensor(&ctx, &[bad], &[1]), 0, &ctx)
                .expect("shapes are valid");
            let message = error(taken.to_f32_vec(&ctx));
            assert!(message.contains("take_axis"), "{message}");
            assert!(message.contains("integral indexes in [-3, 3)"), "{message}");
        }
        assert!(error(matrix.take_axis(&iota(&ctx, &[1]), 2, &ctx)).contains("take_axis"));
    }

    #[test]
    fn concatenate_joins_along_a_middle_axis() {
        let ctx = ctx();
        let first = iota(&ctx, &[2, 1, 2]);
        let second_values: Vec<f32> = (10..18).map(|value| value as f32).collect();
        let second = tensor(&ctx, &second_values, &[2, 2, 2]);
        let expected = [
            0.0, 1.0, 10.0, 11.0, 12.0, 13.0, 2.0, 3.0, 14.0, 15.0, 16.0, 17.0,
        ];
        let parts = [first.clone(), second.clone()];
        for axis in [1, -2] {
            let joined = CpuTensor::concatenate(&parts, axis, &ctx).expect("concatenate");
            check(&joined, &ctx, &[2, 3, 2], &expected);
        }
        let message = error(CpuTensor::concatenate(&parts, 0, &ctx));
        assert!(message.contains("except along axis 0"), "{message}");
        assert!(error(CpuTensor::concatenate(&[], 0, &ctx)).contains("at least one tensor"));
        let flat = iota(&ctx, &[4]);
        assert!(error(CpuTensor::concatenate(&[first, flat], 0, &ctx)).contains("concatenate"));
    }

    #[test]
    fn stack_inserts_a_new_axis() {
        let ctx = ctx();
        let parts = [
            tensor(&ctx, &[0.0, 1.0, 2.0], &[3]),
            tensor(&ctx, &[3.0, 4.0, 5.0], &[3]),
        ];
        let stacked = CpuTensor::stack(&parts, 0, &ctx).expect("stack");
        check(&stacked, &ctx, &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let interleaved = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0];
        for axis in [1, -1] {
            let stacked = CpuTensor::stack(&parts, axis, &ctx).expect("stack");
            check(&stacked, &ctx, &[3, 2], &interleaved);
        }
        let mismatched = [parts[0].clone(), iota(&ctx, &[2])];
        assert!(error(CpuTensor::stack(&mismatched, 0, &ctx)).contains("every shape equal"));
        assert!(error(CpuTensor::stack(&parts, 2, &ctx)).contains("stack"));
    }

    #[test]
    fn matmul_multiplies_matrices() {
        let ctx = ctx();
        let lhs = tensor(&ctx, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let rhs = tensor(&ctx, &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0], &[3, 2]);
        check(
            &CpuTensor::matmul(&lhs, &rhs, &ctx).expect("matmul"),
            &ctx,
            &[2, 2],
            &[58.0, 64.0, 139.0, 154.0],
        );
    }

    #[test]
    fn matmul_broadcasts_batches() {
        let ctx = ctx();
        let lhs = tensor(&ctx, &[1.0, 2.0, 3.0, 4.0], &[2, 1, 2]);
        let rhs = tensor(&ctx, &[5.0, 6.0], &[2, 1]);
        check(
            &CpuTensor::matmul(&lhs, &rhs, &ctx).expect("matmul"),
            &ctx,
            &[2, 1, 1],
            &[17.0, 39.0],
        );
        let message = error(CpuTensor::matmul(&lhs, &lhs, &ctx));
        assert!(message.contains("matmul") && message.contains("[2, 1, 2]"));
        assert!(error(CpuTensor::matmul(&iota(&ctx, &[2]), &rhs, &ctx)).contains("rank >= 2"));
    }

    #[test]
    fn sum_axis_reduces() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 3]);
        check(
            &CpuTensor::sum_axis(&value, 0, false, &ctx).expect("sum"),
            &ctx,
            &[3],
            &[3.0, 5.0, 7.0],
        );
        check(
            &CpuTensor::sum_axis(&value, -1, true, &ctx).expect("sum"),
            &ctx,
            &[2, 1],
            &[3.0, 12.0],
        );
        check(
            &CpuTensor::mean_axis(&value, 1, false, &ctx).expect("mean"),
            &ctx,
            &[2],
            &[1.0, 4.0],
        );
        assert!(error(CpuTensor::sum_axis(&value, 2, false, &ctx)).contains("sum_axis"));
    }

    #[test]
    fn argmin_axis_returns_first_minimum_positions() {
        let ctx = ctx();
        let value = tensor(&ctx, &[3.0, 1.0, 2.0, 0.0, 5.0, 0.0], &[2, 3]);
        check(
            &CpuTensor::argmin_axis(&value, 1, false, &ctx).expect("argmin"),
            &ctx,
            &[2],
            &[1.0, 0.0],
        );
        check(
            &CpuTensor::argmin_axis(&value, 0, true, &ctx).expect("argmin"),
            &ctx,
            &[1, 3],
            &[1.0, 0.0, 1.0],
        );
        let empty = iota(&ctx, &[2, 0]);
        assert!(error(CpuTensor::argmin_axis(&empty, 1, false, &ctx)).contains("argmin_axis"));
    }

    #[test]
    fn pad_with_constants_and_edges() {
        let ctx = ctx();
        let value = tensor(&ctx, &[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        check(
            &CpuTensor::pad(&value, &[(1, 0), (0, 1)], PadMode::Constant, &ctx).expect("pad"),
            &ctx,
            &[3, 3],
            &[0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 3.0, 4.0, 0.0],
        );
        check(
            &CpuTensor::pad(&value, &[(0, 1), (1, 0)], PadMode::Edge, &ctx).expect("pad"),
            &ctx,
            &[3, 3],
            &[1.0, 1.0, 2.0, 3.0, 3.0, 4.0, 3.0, 3.0, 4.0],
        );
        let message = error(CpuTensor::pad(&value, &[(1, 1)], PadMode::Constant, &ctx));
        assert!(message.contains("2 (before, after) widths"), "{message}");
        let message = error(CpuTensor::pad(
            &value,
            &[(0, 0), (-1, 0)],
            PadMode::Edge,
            &ctx,
        ));
        assert!(message.contains("non-negative widths"), "{message}");
    }

    #[test]
    fn broadcast_to_repeats_values() {
        let ctx = ctx();
        let row = tensor(&ctx, &[1.0, 2.0], &[2]);
        check(
            &row.broadcast_to(&[2, 2], &ctx).expect("broadcast"),
            &ctx,
            &[2, 2],
            &[1.0, 2.0, 1.0, 2.0],
        );
        assert!(error(row.broadcast_to(&[3], &ctx)).contains("broadcast_to"));
    }

    #[test]
    fn silu_activates() {
        let ctx = ctx();
        let value = tensor(&ctx, &[0.0, 1.0, -1.0], &[3]);
        let activated = CpuBackend::silu(value, &ctx).expect("silu");
        close(&read(&activated, &ctx), &[0.0, 0.731_058_6, -0.268_941_43]);
    }

    #[test]
    fn gated_product_follows_its_policy() {
        let ctx = ctx();
        let silu = |value: f32| value / (1.0 + (-value).exp());
        let gate = tensor(&ctx, &[1.0, 2.0], &[2]);
        let up = tensor(&ctx, &[3.0, -4.0], &[2]);
        let product = |policy| {
            let value = CpuBackend::gated_product(gate.clone(), up.clone(), policy, &ctx)
                .expect("gated_product");
            read(&value, &ctx)
        };
        close(
            &product(GatedProductPolicy::ordinary_silu()),
            &[silu(1.0) * 3.0, silu(2.0) * -4.0],
        );
        let bounded = GatedProductPolicy::bounded_silu(1.5).expect("valid policy");
        close(&product(bounded), &[silu(1.0) * 1.5, silu(1.5) * -1.5]);
        let shifted = GatedProductPolicy::new(GatedProductActivation::Silu, None, None, 2.0, 1.0)
            .expect("valid policy");
        let sigmoid = |value: f32| 1.0 / (1.0 + (-value).exp());
        close(
            &product(shifted),
            &[sigmoid(2.0) * 4.0, 2.0 * sigmoid(4.0) * -3.0],
        );
        let message = error(CpuBackend::gated_product(
            gate.clone(),
            iota(&ctx, &[3]),
            GatedProductPolicy::ordinary_silu(),
            &ctx,
        ));
        assert!(message.contains("gated_product"), "{message}");
    }

    #[test]
    fn empty_and_oversized_shapes_do_not_panic() {
        let ctx = ctx();
        let empty = iota(&ctx, &[0, 3]);
        check(
            &empty.transpose(&ctx).expect("transpose"),
            &ctx,
            &[3, 0],
            &[],
        );
        check(
            &CpuTensor::sum_axis(&empty, 0, false, &ctx).expect("sum"),
            &ctx,
            &[3],
            &[0.0; 3],
        );
        let no_columns = iota(&ctx, &[2, 0]);
        let no_rows = iota(&ctx, &[0, 2]);
        check(
            &CpuTensor::matmul(&no_columns, &no_rows, &ctx).expect("matmul"),
            &ctx,
            &[2, 2],
            &[0.0; 4],
        );
        let joined = CpuTensor::concatenate(&[empty.clone(), iota(&ctx, &[1, 3])], 0, &ctx)
            .expect("concatenate");
        check(&joined, &ctx, &[1, 3], &[0.0, 1.0, 2.0]);
        let padded = CpuTensor::pad(&empty, &[(1, 0), (0, 0)], PadMode::Constant, &ctx);
        check(&padded.expect("pad"), &ctx, &[1, 3], &[0.0; 3]);
        let vast = CpuTensor::unloaded_f32(&[0, i32::MAX, i32::MAX, i32::MAX], &ctx)
            .expect("an empty tensor");
        let message = error(CpuTensor::sum_axis(&vast, 0, false, &ctx));
        assert!(message.contains("fits in usize"), "{message}");
        assert!(error(
            vast.transpose_axes(&[3, 2, 1, 0], &ctx)
                .and_then(|t| t.to_f32_vec(&ctx))
        )
        .is_empty()
        .eq(&false));
    }

    #[test]
    fn conv1d_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 2, 1]);
        assert_not_provided(
            CpuTensor::conv1d(&value, &value, 1, 0, 1, 1, &ctx),
            "conv1d",
        );
    }

    #[test]
    fn conv_transpose1d_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 2, 1]);
        assert_not_provided(
            CpuTensor::conv_transpose1d(&value, &value, 1, 0, 1, 0, 1, &ctx),
            "conv_transpose1d",
        );
    }

    #[test]
    fn linear_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 2]);
        assert_not_provided(CpuTensor::linear(&value, &value, None, &ctx), "linear");
    }

    #[test]
    fn layer_norm_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[2, 2]);
        assert_not_provided(
            CpuTensor::layer_norm(&value, None, None, 1e-5, &ctx),
            "layer_norm",
        );
    }

    #[test]
    fn gelu_is_not_provided() {
        let ctx = ctx();
        assert_not_provided(CpuTensor::gelu(&iota(&ctx, &[2]), &ctx), "gelu");
    }

    #[test]
    fn elu_is_not_provided() {
        let ctx = ctx();
        assert_not_provided(CpuTensor::elu(&iota(&ctx, &[2]), 1.0, &ctx), "elu");
    }

    #[test]
    fn rope_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 1, 2, 4]);
        assert_not_provided(
            CpuTensor::rope(&value, 4, false, 10_000.0, 1.0, 0, &ctx),
            "rope",
        );
    }

    #[test]
    fn scaled_dot_product_attention_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 1, 2, 2]);
        assert_not_provided(
            CpuTensor::scaled_dot_product_attention(
                &value,
                &value,
                &value,
                1.0,
                eredu_nn::AttentionMask::Causal,
                &ctx,
            ),
            "scaled_dot_product_attention",
        );
    }

    #[test]
    fn attention_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 1, 2, 2]);
        assert_not_provided(
            CpuBackend::attention(value.clone(), value.clone(), value, 1.0, None, &ctx),
            "attention",
        );
    }

    #[test]
    fn sliding_window_attention_is_not_provided() {
        let ctx = ctx();
        let value = iota(&ctx, &[1, 1, 2, 2]);
        assert_not_provided(
            CpuBackend::sliding_window_attention(
                value.clone(),
                value.clone(),
                value,
                1.0,
                1,
                0,
                &ctx,
            ),
            "sliding_window_attention",
        );
    }

    #[test]
    fn causal_mask_is_not_provided() {
        let ctx = ctx();
        assert_not_provided(CpuBackend::causal_mask(4, 0, None, &ctx), "causal_mask");
    }

    #[test]
    fn row_parallel_linear_is_not_provided() {
        let ctx = ctx();
        let mut operator = CpuOperator { _sealed: () };
        assert_not_provided(
            CpuBackend::row_parallel_linear(&mut operator, &iota(&ctx, &[2]), &(), &ctx),
            "row_parallel_linear",
        );
    }

    fn dense_format() -> LinearFormatSpec {
        LinearFormatSpec::unscaled(None.into()).expect("dense format")
    }

    fn parameter(id: &str) -> ParameterSpec {
        ParameterSpec::trainable(id).expect("valid parameter identity")
    }

    #[test]
    fn linear_operator_is_not_provided() {
        let ctx = ctx();
        let spec = LinearSpec {
            input: 2,
            output: 2,
            weight: parameter("weight"),
            bias: None,
            format: dense_format(),
        };
        assert_not_provided(CpuBackend::linear(spec, &ctx), "linear operator");
        let mut operator = CpuOperator { _sealed: () };
        assert_not_provided(
            LinearOperator::forward(&mut operator, &iota(&ctx, &[2]), &ctx),
            "linear operator forward",
        );
    }

    #[test]
    fn embedding_operator_is_not_provided() {
        let ctx = ctx();
        let spec = EmbeddingSpec {
            vocabulary: 4,
            dimensions: 2,
            weight: parameter("embedding"),
            format: dense_format(),
        };
        assert_not_provided(CpuBackend::embedding(spec, &ctx), "embedding operator");
        let mut operator = CpuOperator { _sealed: () };
        let tokens = iota(&ctx, &[2]);
        assert_not_provided(
            EmbeddingOperator::forward(&mut operator, &tokens, &ctx),
            "embedding operator forward",
        );
        assert_not_provided(
            operator.as_linear(&tokens, &ctx),
            "embedding operator as_linear",
        );
    }

    #[test]
    fn normalization_operator_is_not_provided() {
        let ctx = ctx();
        let spec = NormalizationConstructionSpec::learned(2, 1e-5, parameter("norm"));
        assert_not_provided(
            CpuBackend::normalization(spec, &ctx),
            "normalization operator",
        );
        let mut operator = CpuOperator { _sealed: () };
        assert_not_provided(
            NormalizationOperator::forward(&mut operator, &iota(&ctx, &[2]), &ctx),
            "normalization operator forward",
        );
    }

    #[test]
    fn rotary_operator_is_not_provided() {
        let ctx = ctx();
        let spec = RotarySpec {
            dimensions: 4,
            base: 10_000.0,
            traditional: false,
            algorithm: RotaryAlgorithm::Default,
        };
        assert_not_provided(CpuBackend::rotary(spec, &ctx), "rotary operator");
        let mut operator = CpuOperator { _sealed: () };
        assert_not_provided(
            RotaryOperator::forward(
                &mut operator,
                &iota(&ctx, &[1, 4]),
                RotaryPosition::Offset(0),
                &ctx,
            ),
            "rotary operator forward",
        );
    }
}
