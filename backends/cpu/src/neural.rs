//! TEMPORARY stand-in, replaced by the real implementation.
#![allow(unused)]
use eredu_nn::*;
use crate::tensor::CpuTensor;
use crate::executor::CpuExecutor;
#[derive(Clone, Debug)] pub struct CpuOperator;
impl Parameterized<CpuTensor> for CpuOperator { fn visit_parameters<'a, V>(&'a self, _: &mut V) where V: ParameterVisitor<'a, CpuTensor> {} fn visit_parameters_mut<'a, V>(&'a mut self, _: &mut V) where V: ParameterVisitorMut<'a, CpuTensor> {} fn set_trainable(&mut self, _: bool) {} }
impl LinearOperator<CpuTensor> for CpuOperator { fn forward(&mut self, _: &CpuTensor, _: &CpuExecutor) -> Result<CpuTensor, Error> { Err(Error::backend("t")) } }
impl EmbeddingOperator<CpuTensor> for CpuOperator { fn forward(&mut self, _: &CpuTensor, _: &CpuExecutor) -> Result<CpuTensor, Error> { Err(Error::backend("t")) } fn as_linear(&mut self, _: &CpuTensor, _: &CpuExecutor) -> Result<CpuTensor, Error> { Err(Error::backend("t")) } }
impl NormalizationOperator<CpuTensor> for CpuOperator { fn forward(&mut self, _: &CpuTensor, _: &CpuExecutor) -> Result<CpuTensor, Error> { Err(Error::backend("t")) } }
impl RotaryOperator<CpuTensor> for CpuOperator { fn forward(&mut self, _: &CpuTensor, _: RotaryPosition<'_, CpuTensor>, _: &CpuExecutor) -> Result<CpuTensor, Error> { Err(Error::backend("t")) } }
impl eredu_nn::Tensor for CpuTensor {
type Context = CpuExecutor;
fn shape(&self) -> &[i32] { self.dims() }
fn unloaded_f32(_: &[i32], _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn from_f32_slice(_: &[f32], _: &[i32], _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn add(&self, _: &Self, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn subtract(&self, _: &Self, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn multiply(&self, _: &Self, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn multiply_scalar(&self, _: f32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn divide(&self, _: &Self, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn square(&self, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn maximum_scalar(&self, _: f32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn reshape(&self, _: &[i32], _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn transpose_axes(&self, _: &[i32], _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn swap_axes(&self, _: i32, _: i32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn transpose(&self, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn expand_dims(&self, _: i32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn squeeze_axes(&self, _: &[i32], _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn index(&self, _: &[eredu_nn::Index], _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn take_axis(&self, _: &Self, _: i32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn concatenate(_: &[Self], _: i32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn stack(_: &[Self], _: i32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn matmul(_: &Self, _: &Self, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn sum_axis(_: &Self, _: i32, _: bool, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn argmin_axis(_: &Self, _: i32, _: bool, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn pad(_: &Self, _: &[(i32, i32)], _: PadMode, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn conv1d(_: &Self, _: &Self, _: i32, _: i32, _: i32, _: i32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn conv_transpose1d(_: &Self, _: &Self, _: i32, _: i32, _: i32, _: i32, _: i32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn linear(_: &Self, _: &Self, _: Option<&Self>, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn layer_norm(_: &Self, _: Option<&Self>, _: Option<&Self>, _: f32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn gelu(_: &Self, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn elu(_: &Self, _: f32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn rope(_: &Self, _: i32, _: bool, _: f32, _: f32, _: i32, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn scaled_dot_product_attention(_: &Self, _: &Self, _: &Self, _: f32, _: AttentionMask<'_, Self>, _: &<Self as eredu_nn::Tensor>::Context) -> Result<Self, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
}
impl NeuralBackend for crate::CpuBackend {
type Tensor = CpuTensor;
type Linear = CpuOperator;
type Embedding = CpuOperator;
type Normalization = CpuOperator;
type Rotary = CpuOperator;
type ParallelContext = ();
fn linear(_: LinearSpec, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Linear, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn embedding(_: EmbeddingSpec, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Embedding, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn normalization(_: NormalizationConstructionSpec, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Normalization, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn rotary(_: RotarySpec, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Rotary, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn silu(_: <Self as NeuralBackend>::Tensor, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Tensor, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn gated_product(_: <Self as NeuralBackend>::Tensor, _: <Self as NeuralBackend>::Tensor, _: GatedProductPolicy, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Tensor, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn attention(_: <Self as NeuralBackend>::Tensor, _: <Self as NeuralBackend>::Tensor, _: <Self as NeuralBackend>::Tensor, _: f32, _: Option<&<Self as NeuralBackend>::Tensor>, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Tensor, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn sliding_window_attention(_: <Self as NeuralBackend>::Tensor, _: <Self as NeuralBackend>::Tensor, _: <Self as NeuralBackend>::Tensor, _: f32, _: i32, _: i32, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Tensor, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn causal_mask(_: i32, _: i32, _: Option<i32>, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Tensor, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
fn row_parallel_linear(_: &mut <Self as NeuralBackend>::Linear, _: &<Self as NeuralBackend>::Tensor, _: &<Self as NeuralBackend>::ParallelContext, _: &<<Self as NeuralBackend>::Tensor as eredu_nn::Tensor>::Context) -> Result<<Self as NeuralBackend>::Tensor, eredu_nn::Error> { Err(eredu_nn::Error::backend("temporary")) }
}
