//! `eredu_nn::NeuralBackend` on the CUDA backend: the communication
//! contract needs none of its operators, so each fails with an error saying
//! it is not provided (tensor arithmetic the kit uses is in
//! [`crate::tensor`]). The failing methods and the operator handle are
//! expanded from eredu's signatures by [`commcheck_not_provided`].

use commcheck_not_provided::{neural_backend_not_provided, operator_not_provided};
use eredu_nn::{Error, NeuralBackend};

use crate::error::CudaError;
use crate::tensor::CudaTensor;
use crate::CudaBackend;

fn not_provided(operation: &'static str) -> Error {
    Error::backend(CudaError::NotProvided { operation })
}

operator_not_provided! {
    /// Operator handle of the linear, embedding, normalization and rotary
    /// slots: their constructors fail, so no handle is ever made.
    pub struct CudaOperator for CudaTensor;
    error: not_provided;
}

impl NeuralBackend for CudaBackend {
    type Tensor = CudaTensor;
    type Linear = CudaOperator;
    type Embedding = CudaOperator;
    type Normalization = CudaOperator;
    type Rotary = CudaOperator;
    type ParallelContext = ();

    neural_backend_not_provided! {
        error: not_provided;
        linear,
        embedding,
        normalization,
        rotary,
        silu,
        gated_product,
        attention,
        sliding_window_attention,
        causal_mask,
        row_parallel_linear,
    }
}
