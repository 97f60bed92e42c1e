//! `eredu_nn::NeuralBackend` on [`CpuBackend`]: SiLU and the gated
//! products (SiLU or approximate-GELU activations) are real, deferred like
//! every tensor operation; the operator modules (linear, embedding,
//! normalization, rotary: [`CpuOperator`]), attention, causal masks and
//! row-parallel projections are not provided (see [`super::not_provided`]).

use commcheck_not_provided::{neural_backend_not_provided, operator_not_provided};
use eredu_nn::{Error, GatedProductActivation, GatedProductPolicy, NeuralBackend};

use super::elementwise::{map_values, zip_values};
use super::not_provided;
use crate::executor::CpuExecutor;
use crate::tensor::CpuTensor;
use crate::CpuBackend;

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

/// Tanh-approximated Gaussian error linear unit.
fn gelu_approximate(value: f32) -> f32 {
    let inner = (2.0 / std::f32::consts::PI).sqrt() * (value + 0.044_715 * value.powi(3));
    0.5 * value * (1.0 + inner.tanh())
}

/// Logistic-sigmoid-weighted linear unit.
fn silu(value: f32) -> f32 {
    value / (1.0 + (-value).exp())
}

operator_not_provided! {
    /// Operator handle of the CPU reference backend's linear, embedding,
    /// normalization and rotary slots.
    ///
    /// The backend provides none of these kernels: its constructors fail, so no
    /// handle is ever made outside this module, and a handle holds no parameters.
    pub struct CpuOperator for CpuTensor;
    error: not_provided;
}

impl NeuralBackend for CpuBackend {
    type Tensor = CpuTensor;
    type Linear = CpuOperator;
    type Embedding = CpuOperator;
    type Normalization = CpuOperator;
    type Rotary = CpuOperator;
    type ParallelContext = ();

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

    neural_backend_not_provided! {
        error: not_provided;
        linear as "linear operator",
        embedding as "embedding operator",
        normalization as "normalization operator",
        rotary as "rotary operator",
        attention,
        sliding_window_attention,
        causal_mask,
        row_parallel_linear,
    }
}

#[cfg(test)]
mod tests {
    use eredu_nn::{
        EmbeddingOperator, EmbeddingSpec, GatedProductActivation, GatedProductPolicy,
        LinearFormatSpec, LinearOperator, LinearSpec, NeuralBackend, NormalizationConstructionSpec,
        NormalizationOperator, ParameterSpec, RotaryAlgorithm, RotaryOperator, RotaryPosition,
        RotarySpec,
    };

    use super::super::test_support::*;
    use super::CpuOperator;
    use crate::CpuBackend;

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
