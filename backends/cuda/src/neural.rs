//! `eredu_nn::NeuralBackend` on the CUDA backend: the communication
//! contract needs none of its operators, so each fails with an error saying
//! it is not provided (tensor arithmetic the kit uses is in
//! [`crate::tensor`]).

use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::tensor::CudaTensor;
use crate::CudaBackend;
use eredu_nn::*;

fn not_provided(operation: &'static str) -> Error {
    Error::backend(CudaError::NotProvided { operation })
}

/// Operator handle of the linear, embedding, normalization and rotary
/// slots: their constructors fail, so no handle is ever made.
#[derive(Debug, Clone)]
pub struct CudaOperator {
    _sealed: (),
}

impl Parameterized<CudaTensor> for CudaOperator {
    fn visit_parameters<'a, V>(&'a self, _visitor: &mut V)
    where
        V: ParameterVisitor<'a, CudaTensor>,
    {
    }

    fn visit_parameters_mut<'a, V>(&'a mut self, _visitor: &mut V)
    where
        V: ParameterVisitorMut<'a, CudaTensor>,
    {
    }

    fn set_trainable(&mut self, _trainable: bool) {}
}

impl LinearOperator<CudaTensor> for CudaOperator {
    fn forward(
        &mut self,
        _input: &CudaTensor,
        _context: &CudaExecutor,
    ) -> Result<CudaTensor, Error> {
        Err(not_provided("linear operator forward"))
    }
}

impl EmbeddingOperator<CudaTensor> for CudaOperator {
    fn forward(
        &mut self,
        _input: &CudaTensor,
        _context: &CudaExecutor,
    ) -> Result<CudaTensor, Error> {
        Err(not_provided("embedding operator forward"))
    }

    fn as_linear(
        &mut self,
        _input: &CudaTensor,
        _context: &CudaExecutor,
    ) -> Result<CudaTensor, Error> {
        Err(not_provided("embedding operator as_linear"))
    }
}

impl NormalizationOperator<CudaTensor> for CudaOperator {
    fn forward(
        &mut self,
        _input: &CudaTensor,
        _context: &CudaExecutor,
    ) -> Result<CudaTensor, Error> {
        Err(not_provided("normalization operator forward"))
    }
}

impl RotaryOperator<CudaTensor> for CudaOperator {
    fn forward(
        &mut self,
        _input: &CudaTensor,
        _position: RotaryPosition<'_, CudaTensor>,
        _context: &CudaExecutor,
    ) -> Result<CudaTensor, Error> {
        Err(not_provided("rotary operator forward"))
    }
}

#[allow(unused_variables)]
impl NeuralBackend for CudaBackend {
    type Tensor = CudaTensor;
    type Linear = CudaOperator;
    type Embedding = CudaOperator;
    type Normalization = CudaOperator;
    type Rotary = CudaOperator;
    type ParallelContext = ();

    fn linear(
        spec: LinearSpec,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<CudaOperator, Error> {
        Err(not_provided("linear"))
    }

    fn embedding(
        spec: EmbeddingSpec,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<CudaOperator, Error> {
        Err(not_provided("embedding"))
    }

    fn normalization(
        spec: NormalizationConstructionSpec,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<CudaOperator, Error> {
        Err(not_provided("normalization"))
    }

    fn rotary(
        spec: RotarySpec,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<CudaOperator, Error> {
        Err(not_provided("rotary"))
    }

    fn silu(
        input: Self::Tensor,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<Self::Tensor, Error> {
        Err(not_provided("silu"))
    }

    fn gated_product(
        gate: Self::Tensor,
        up: Self::Tensor,
        policy: GatedProductPolicy,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<Self::Tensor, Error> {
        Err(not_provided("gated_product"))
    }

    fn attention(
        queries: Self::Tensor,
        keys: Self::Tensor,
        values: Self::Tensor,
        scale: f32,
        mask: Option<&Self::Tensor>,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<Self::Tensor, Error> {
        Err(not_provided("attention"))
    }

    fn sliding_window_attention(
        queries: Self::Tensor,
        keys: Self::Tensor,
        values: Self::Tensor,
        scale: f32,
        window: i32,
        position_offset: i32,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<Self::Tensor, Error> {
        Err(not_provided("sliding_window_attention"))
    }

    fn causal_mask(
        sequence: i32,
        offset: i32,
        window: Option<i32>,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<Self::Tensor, Error> {
        Err(not_provided("causal_mask"))
    }

    fn row_parallel_linear(
        linear: &mut CudaOperator,
        input: &Self::Tensor,
        parallel: &Self::ParallelContext,
        context: &<Self::Tensor as Tensor>::Context,
    ) -> Result<Self::Tensor, Error> {
        Err(not_provided("row_parallel_linear"))
    }
}
