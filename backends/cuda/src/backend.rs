//! The backend type itself: a name for the eredu trait implementations
//! (`eredu_nn::NeuralBackend` in [`crate::neural`], the submission and
//! communication traits in [`crate::ops`]). It holds no state, so it
//! depends on nothing; the modules that implement traits for it depend on
//! it.

/// The CUDA reference backend. All state lives in devices, executors,
/// groups and routes; the backend type only names the trait
/// implementations.
#[derive(Debug, Clone, Copy, Default)]
pub struct CudaBackend;
