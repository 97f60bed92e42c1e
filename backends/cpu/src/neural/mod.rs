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
//!
//! One file per operator family ([`construction`], [`elementwise`],
//! [`layout`], [`indexing`], [`joining`], [`matmul`], [`reduction`]), on the
//! shapes and strided reads they share ([`shape`], [`reads`]); [`tensor`] and
//! [`backend`] implement the `eredu_nn` traits over them, and every method
//! that is not provided is expanded from eredu's signatures by
//! [`commcheck_not_provided`], answering with [`not_provided`].

mod backend;
mod construction;
mod elementwise;
mod indexing;
mod joining;
mod layout;
mod matmul;
mod reads;
mod reduction;
mod shape;
mod tensor;
#[cfg(test)]
mod test_support;

use eredu_nn::Error;

/// The error of an operation this backend deliberately does not implement.
fn not_provided(operation: &str) -> Error {
    Error::backend(format!(
        "{operation} is not provided by the CPU reference backend"
    ))
}
