//! Tensors: host arrays behind reference-counted native storage.
//!
//! A storage is *native* in the sense the contract cares about: the ledger
//! records it from allocation to drop, so a liveness probe can tell whether
//! it is still allocated (RET-1, RET-3, RET-5). Values are lazy: tensor
//! operations build deferred storages that read their inputs only when they
//! are evaluated, by `submit`, `submit_local_dependencies`, a collective that
//! consumes them, or an explicit `to_f32_vec`.
//!
//! Evaluation inside a work item is cooperative with `NativeCancel`: each
//! deferred value checks the running work's cancel token ([`crate::cancel`])
//! before it is computed, and long kernels check it as they go. A value whose
//! computation was aborted that way stays deferred (never half-written, never
//! a sticky failure): later evaluation, by other work or a read, computes it
//! afresh.

use half::slice::HalfFloatSliceExt;
use std::fmt;
use std::sync::Arc;

use crate::cancel;
use crate::error::CpuError;
use crate::ledger::{Ledger, StorageId};
use crate::sync::rt::{Mutex, MutexGuard};

/// A deferred computation. It can run more than once: an evaluation aborted
/// by a cancellation leaves the value deferred, to be computed again later.
type Deferred = Box<dyn Fn() -> Result<Vec<f32>, CpuError> + Send>;

/// Host values, shared without copying between a storage and the work that reads it.
pub(crate) type Values = Arc<Vec<f32>>;

enum Cell {
    /// Values are on the host.
    Ready(Values),
    /// Values will be computed on first evaluation.
    Deferred(Deferred),
    /// Output of communication work that has not published yet.
    Pending,
    /// Evaluation or the producing work failed; the failure is sticky.
    Failed(CpuError),
}

/// One allocation of native tensor memory.
pub(crate) struct Storage {
    id: StorageId,
    ledger: Arc<Ledger>,
    cell: Mutex<Cell>,
}

impl Storage {
    fn new(ledger: &Arc<Ledger>, cell: Cell) -> Arc<Self> {
        Arc::new(Self {
            id: ledger.storage_allocated(),
            ledger: Arc::clone(ledger),
            cell: Mutex::new(cell),
        })
    }

    fn cell(&self) -> MutexGuard<'_, Cell> {
        match self.cell.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub(crate) fn id(&self) -> StorageId {
        self.id
    }

    /// Evaluates a deferred value in place and shares the values.
    pub(crate) fn force(&self) -> Result<Values, CpuError> {
        let mut cell = self.cell();
        self.force_locked(&mut cell)?;
        match &*cell {
            Cell::Ready(values) => Ok(Arc::clone(values)),
            Cell::Failed(error) => Err(error.clone()),
            Cell::Pending | Cell::Deferred(_) => Err(self.not_ready()),
        }
    }

    /// Evaluates a deferred value in place without copying it out.
    pub(crate) fn evaluate(&self) -> Result<(), CpuError> {
        let mut cell = self.cell();
        self.force_locked(&mut cell)
    }

    /// Computes a deferred value, unless the running work was cancelled.
    ///
    /// The storage's lock is held throughout, so nobody observes the value
    /// half-computed. When the running work's cancellation aborts the
    /// computation (here or in an input's), the value stays deferred and the
    /// cancellation error propagates; any other failure is sticky.
    fn force_locked(&self, cell: &mut Cell) -> Result<(), CpuError> {
        if let Cell::Deferred(compute) = cell {
            match cancel::checkpoint().and_then(|()| compute()) {
                Ok(values) => *cell = Cell::Ready(Arc::new(values)),
                Err(error) if cancel::is_own_abort(&error) => return Err(error),
                Err(error) => *cell = Cell::Failed(error),
            }
        }
        match cell {
            Cell::Failed(error) => Err(error.clone()),
            Cell::Pending => Err(self.not_ready()),
            _ => Ok(()),
        }
    }

    /// The shared values if they are on the host already; never evaluates.
    pub(crate) fn ready_values(&self) -> Option<Values> {
        match &*self.cell() {
            Cell::Ready(values) => Some(Arc::clone(values)),
            _ => None,
        }
    }

    /// Whether the value waits for communication work to publish it.
    pub(crate) fn is_pending(&self) -> bool {
        matches!(&*self.cell(), Cell::Pending)
    }

    pub(crate) fn is_materialised(&self) -> bool {
        matches!(&*self.cell(), Cell::Ready(_))
    }

    /// Whether the value is final: on the host, or failed for good. Reading
    /// or evaluating a settled value never computes, waits or blocks (a
    /// settled cell never changes again).
    pub(crate) fn is_settled(&self) -> bool {
        matches!(&*self.cell(), Cell::Ready(_) | Cell::Failed(_))
    }

    /// Publishes the result of communication work.
    pub(crate) fn publish(&self, result: Result<Values, CpuError>) {
        *self.cell() = match result {
            Ok(values) => Cell::Ready(values),
            Err(error) => Cell::Failed(error),
        };
    }

    fn not_ready(&self) -> CpuError {
        CpuError::NotMaterialised {
            storage: self.id.value(),
            reason: "its producing communication has not completed".into(),
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.ledger.storage_freed(self.id);
    }
}

/// A tensor's element type.
///
/// Values are kept widened to `f32` (every `f16` and `bf16` value is exactly
/// an `f32`), so data movement is bit for bit in the element type; a sum of
/// 16-bit tensors is computed in `f32` and rounded to the element type once.
/// Tensor arithmetic (the `eredu_nn::Tensor` operations) computes and
/// returns `f32` tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Element {
    /// IEEE 754 binary32.
    #[default]
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16.
    Bf16,
}

impl Element {
    /// Its name in messages (`f32`, `f16`, `bf16`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
        }
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::Bf16 => 2,
        }
    }

    /// `value` rounded to the nearest value of the element type.
    pub fn round(self, value: f32) -> f32 {
        match self {
            Self::F32 => value,
            Self::F16 => half::f16::from_f32(value).to_f32(),
            Self::Bf16 => half::bf16::from_f32(value).to_f32(),
        }
    }

    /// Whether `value` is exactly a value of the element type.
    pub fn represents(self, value: f32) -> bool {
        value.is_nan() || self.round(value).to_bits() == value.to_bits()
    }

    /// Rounds every value of `values` to the nearest value of the element
    /// type, as [`Element::round`] does one (`f16` a block at a time, in the
    /// vector conversions where the processor has them).
    pub fn round_all(self, values: &mut [f32]) {
        match self {
            Self::F32 => {}
            Self::F16 => {
                let mut halves = [half::f16::ZERO; BLOCK];
                for chunk in values.chunks_mut(BLOCK) {
                    let halves = &mut halves[..chunk.len()];
                    halves.convert_from_f32_slice(chunk);
                    halves.convert_to_f32_slice(chunk);
                }
            }
            Self::Bf16 => values.iter_mut().for_each(|v| *v = self.round(*v)),
        }
    }

    /// The index of the first value of `values` that is not exactly a value
    /// of the element type ([`Element::represents`]), if any.
    pub fn first_unrepresented(self, values: &[f32]) -> Option<usize> {
        match self {
            Self::F32 => None,
            Self::F16 => {
                let mut back = [0f32; BLOCK];
                values.chunks(BLOCK).enumerate().find_map(|(block, chunk)| {
                    let back = &mut back[..chunk.len()];
                    back.copy_from_slice(chunk);
                    self.round_all(back);
                    chunk
                        .iter()
                        .zip(back.iter())
                        .position(|(v, b)| !v.is_nan() && v.to_bits() != b.to_bits())
                        .map(|at| block * BLOCK + at)
                })
            }
            Self::Bf16 => values.iter().position(|&v| !self.represents(v)),
        }
    }
}

/// Values converted at a time by [`Element::round_all`] and
/// [`Element::first_unrepresented`].
const BLOCK: usize = 1024;

/// The CPU backend's tensor handle: a logical shape, an element type and
/// shared native storage.
///
/// Cloning a tensor clones the handle, not the storage.
#[derive(Clone)]
pub struct CpuTensor {
    shape: Vec<i32>,
    element: Element,
    storage: Arc<Storage>,
}

impl fmt::Debug for CpuTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuTensor")
            .field("shape", &self.shape)
            .field("element", &self.element)
            .field("storage", &self.storage.id.value())
            .field("materialised", &self.storage.is_materialised())
            .finish()
    }
}

impl CpuTensor {
    /// Creates a materialised tensor, checking that `values` fills `shape`.
    pub(crate) fn ready(
        ledger: &Arc<Ledger>,
        operation: &'static str,
        values: Vec<f32>,
        shape: &[i32],
    ) -> Result<Self, CpuError> {
        let elements = element_count(operation, shape)?;
        if elements != values.len() {
            return Err(CpuError::invalid(
                operation,
                format!("{elements} values for shape {shape:?}"),
                format!("{} values", values.len()),
            ));
        }
        Ok(Self {
            shape: shape.to_vec(),
            element: Element::F32,
            storage: Storage::new(ledger, Cell::Ready(Arc::new(values))),
        })
    }

    /// Creates a materialised tensor on a new storage that shares `values`
    /// (immutable once on the host) with another storage, without copying.
    pub(crate) fn sharing(ledger: &Arc<Ledger>, shape: Vec<i32>, values: Values) -> Self {
        Self {
            shape,
            element: Element::F32,
            storage: Storage::new(ledger, Cell::Ready(values)),
        }
    }

    /// Creates a tensor whose values are computed on first evaluation.
    pub(crate) fn deferred(
        ledger: &Arc<Ledger>,
        shape: Vec<i32>,
        compute: impl Fn() -> Result<Vec<f32>, CpuError> + Send + 'static,
    ) -> Self {
        Self {
            shape,
            element: Element::F32,
            storage: Storage::new(ledger, Cell::Deferred(Box::new(compute))),
        }
    }

    /// Creates the output of communication work, published at completion.
    pub(crate) fn pending(ledger: &Arc<Ledger>, shape: Vec<i32>) -> Self {
        Self {
            shape,
            element: Element::F32,
            storage: Storage::new(ledger, Cell::Pending),
        }
    }

    /// The same tensor, of element type `element`.
    pub(crate) fn of(mut self, element: Element) -> Self {
        self.element = element;
        self
    }

    /// The element type.
    pub fn element(&self) -> Element {
        self.element
    }

    /// Logical shape.
    pub fn dims(&self) -> &[i32] {
        &self.shape
    }

    /// Identity of the native storage, for liveness probes.
    pub fn storage_id(&self) -> StorageId {
        self.storage.id
    }

    /// Host values if already materialised; never evaluates or waits.
    ///
    /// This is the kit's read-back: a value that `submit` should have
    /// materialised but did not reads as `None` (SUB-2).
    pub fn read_materialised(&self) -> Option<Vec<f32>> {
        self.with_materialised(<[f32]>::to_vec)
    }

    /// `read` applied to the host values if already materialised, without
    /// copying them out; never evaluates or waits (as
    /// [`CpuTensor::read_materialised`]).
    pub fn with_materialised<R>(&self, read: impl FnOnce(&[f32]) -> R) -> Option<R> {
        self.storage.ready_values().map(|values| read(&values))
    }

    /// Whether the values are on the host.
    pub fn is_materialised(&self) -> bool {
        self.storage.is_materialised()
    }

    /// Evaluates (if deferred) and copies the values out.
    pub fn values(&self) -> Result<Vec<f32>, CpuError> {
        self.storage.force().map(Arc::unwrap_or_clone)
    }

    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// Shape as `usize` extents.
    pub(crate) fn extents(&self) -> Vec<usize> {
        self.shape.iter().map(|&d| d.max(0) as usize).collect()
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.extents().iter().product()
    }
}

/// Number of elements of `shape`, rejecting negative extents and overflow.
pub(crate) fn element_count(operation: &'static str, shape: &[i32]) -> Result<usize, CpuError> {
    shape.iter().try_fold(1usize, |total, &dim| {
        if dim < 0 {
            return Err(CpuError::invalid(
                operation,
                "non-negative extents",
                format!("shape {shape:?}"),
            ));
        }
        total.checked_mul(dim as usize).ok_or_else(|| {
            CpuError::invalid(
                operation,
                "an element count that fits in usize",
                format!("shape {shape:?}"),
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::{Element, BLOCK};

    /// Every class of `f32` bit pattern (zeros, subnormals of both widths,
    /// the rounding boundaries, infinities, NaNs with payloads), then a
    /// pseudo-random sweep of the rest.
    fn patterns() -> Vec<f32> {
        let mut bits: Vec<u32> = vec![
            0,
            0x8000_0000,
            1,
            0x0000_1000,
            0x3380_0000,
            0x3380_0001,
            0x387f_e000,
            0x387f_f000,
            0x477f_e000,
            0x477f_f000,
            0x477f_efff,
            0x7f7f_ffff,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0x7f80_0001,
            0xffc1_2345,
            0x3f80_1000,
            0x3f80_3000,
            0x3f80_8000,
            0x3f81_8000,
        ];
        let mut state = 0x9e37_79b9_u32;
        for _ in 0..3 * BLOCK + 17 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            bits.push(state);
        }
        bits.into_iter().map(f32::from_bits).collect()
    }

    #[test]
    fn rounding_a_block_is_rounding_each_value() {
        for element in [Element::F32, Element::F16, Element::Bf16] {
            let values = patterns();
            let mut all = values.clone();
            element.round_all(&mut all);
            for (value, rounded) in values.iter().zip(&all) {
                assert_eq!(
                    element.round(*value).to_bits(),
                    rounded.to_bits(),
                    "{element:?} {:#010x}",
                    value.to_bits()
                );
            }
        }
    }

    #[test]
    fn the_first_unrepresented_value_is_found_in_any_block() {
        for element in [Element::F32, Element::F16, Element::Bf16] {
            let values = patterns();
            let each = values.iter().position(|&v| !element.represents(v));
            assert_eq!(element.first_unrepresented(&values), each, "{element:?}");
            // Representable everywhere but one place, in a later block.
            let mut rounded = values.clone();
            element.round_all(&mut rounded);
            assert_eq!(element.first_unrepresented(&rounded), None, "{element:?}");
            if element != Element::F32 {
                rounded[2 * BLOCK + 5] = 1.0 + f32::EPSILON;
                assert_eq!(
                    element.first_unrepresented(&rounded),
                    Some(2 * BLOCK + 5),
                    "{element:?}"
                );
            }
        }
    }
}
