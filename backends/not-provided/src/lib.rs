//! The `eredu_nn` surface that the communication contract does not need,
//! answered "not provided" for commcheck's reference backends.
//!
//! `eredu_nn::NeuralBackend`, `eredu_nn::Tensor` and the operator traits
//! have many required methods a backend of the communication contract never
//! runs (convolutions, attention, the operator modules, ...). A reference
//! backend states what it implements and names the rest once; these macros
//! expand the named methods from eredu's own signatures, each returning
//! `Err(error(operation))` with the backend's error constructor:
//!
//! - [`tensor_not_provided!`], inside `impl eredu_nn::Tensor for T`, for
//!   required methods of `Tensor`;
//! - [`neural_backend_not_provided!`], inside `impl eredu_nn::NeuralBackend
//!   for B`, for required methods of `NeuralBackend`;
//! - [`operator_not_provided!`], at item level, for an operator handle type
//!   that fills the linear, embedding, normalization and rotary slots of a
//!   backend that provides none of them: the type, with no parameters, and
//!   its five trait implementations.
//!
//! Each method is listed by its name in the trait; the operation named in
//! the error is the method's name, or the string given after `as`. Methods
//! the trait provides a default for keep their default (they are not in the
//! lists), and a name that is not a required method of the trait is a
//! compile error.
//!
//! ```
//! use commcheck_not_provided::{neural_backend_not_provided, operator_not_provided, tensor_not_provided};
//! use eredu_nn::{Error, NeuralBackend, Tensor};
//!
//! fn not_provided(operation: &str) -> Error {
//!     Error::backend(format!("{operation} is not provided here"))
//! }
//!
//! /// A tensor that is all shape.
//! #[derive(Debug, Clone)]
//! struct Shape(Vec<i32>);
//!
//! impl Tensor for Shape {
//!     type Context = ();
//!
//!     fn shape(&self) -> &[i32] {
//!         &self.0
//!     }
//!
//!     fn reshape(&self, shape: &[i32], _context: &()) -> Result<Self, Error> {
//!         Ok(Shape(shape.to_vec()))
//!     }
//!
//!     tensor_not_provided! {
//!         error: not_provided;
//!         unloaded_f32, from_f32_slice, add, subtract, multiply, multiply_scalar, divide,
//!         square, maximum_scalar, transpose_axes, swap_axes, transpose, expand_dims,
//!         squeeze_axes, index, take_axis, concatenate, stack, matmul, sum_axis,
//!         argmin_axis, pad, conv1d, conv_transpose1d, linear, layer_norm, gelu, elu,
//!         rope, scaled_dot_product_attention,
//!     }
//! }
//!
//! operator_not_provided! {
//!     /// No operator at all.
//!     pub struct NoOperator for Shape;
//!     error: not_provided;
//! }
//!
//! struct Backend;
//!
//! impl NeuralBackend for Backend {
//!     type Tensor = Shape;
//!     type Linear = NoOperator;
//!     type Embedding = NoOperator;
//!     type Normalization = NoOperator;
//!     type Rotary = NoOperator;
//!     type ParallelContext = ();
//!
//!     neural_backend_not_provided! {
//!         error: not_provided;
//!         linear, embedding, normalization, rotary, silu as "SiLU", gated_product,
//!         attention, sliding_window_attention, causal_mask, row_parallel_linear,
//!     }
//! }
//!
//! let value = Shape(vec![2, 3]);
//! assert_eq!(value.reshape(&[6], &()).unwrap().shape(), &[6]);
//! let error = value.transpose(&()).unwrap_err();
//! assert_eq!(error.to_string(), "transpose is not provided here");
//! let error = Backend::causal_mask(4, 0, None, &()).unwrap_err();
//! assert_eq!(error.to_string(), "causal_mask is not provided here");
//! let error = Backend::silu(value, &()).unwrap_err();
//! assert_eq!(error.to_string(), "SiLU is not provided here");
//! ```

/// The crate the expansions name (so a backend needs no import of its own).
#[doc(hidden)]
pub use eredu_nn as __eredu_nn;

/// Required methods of `eredu_nn::Tensor`, each failing with
/// `$error(operation)`; expands inside `impl eredu_nn::Tensor for T`.
///
/// ```text
/// tensor_not_provided! {
///     error: path::to::constructor;     // fn(&'static str) -> eredu_nn::Error
///     conv1d, gelu as "the GELU", ...   // method names in the trait
/// }
/// ```
///
/// See the [crate documentation](crate) for an example. A name that is not a
/// required method of `Tensor` does not compile:
///
/// ```compile_fail
/// # use eredu_nn::{Error, Tensor};
/// # fn not_provided(operation: &str) -> Error { Error::backend(operation) }
/// # #[derive(Debug, Clone)]
/// # struct Nothing;
/// impl Tensor for Nothing {
///     type Context = ();
///     fn shape(&self) -> &[i32] {
///         &[]
///     }
///     commcheck_not_provided::tensor_not_provided! {
///         error: not_provided;
///         unloaded_f32, from_f32_slice, add, subtract, multiply, multiply_scalar, divide,
///         square, maximum_scalar, reshape, transpose_axes, swap_axes, transpose,
///         expand_dims, squeeze_axes, index, take_axis, concatenate, stack, matmul,
///         sum_axis, argmin_axis, pad, conv1d, conv_transpose1d, linear, layer_norm, gelu,
///         elu, rope, scaled_dot_product_attention,
///         mean_axis, // provided by the trait: an error
///     }
/// }
/// ```
#[macro_export]
macro_rules! tensor_not_provided {
    (error: $error:path; $($method:ident $(as $operation:literal)?),* $(,)?) => {
        $($crate::__tensor_method!($method, $error, $crate::__operation!($method $(, $operation)?));)*
    };
}

/// Required methods of `eredu_nn::NeuralBackend`, each failing with
/// `$error(operation)`; expands inside `impl eredu_nn::NeuralBackend for B`.
///
/// ```text
/// neural_backend_not_provided! {
///     error: path::to::constructor;              // fn(&'static str) -> eredu_nn::Error
///     linear as "linear operator", attention, ...  // method names in the trait
/// }
/// ```
///
/// See the [crate documentation](crate) for an example.
#[macro_export]
macro_rules! neural_backend_not_provided {
    (error: $error:path; $($method:ident $(as $operation:literal)?),* $(,)?) => {
        $($crate::__neural_backend_method!($method, $error, $crate::__operation!($method $(, $operation)?));)*
    };
}

/// An operator handle for the linear, embedding, normalization and rotary
/// slots of a backend that provides none of these kernels.
///
/// Defines the struct (`Debug`, `Clone`, a private unit field, so no handle
/// is made outside its module) and implements `Parameterized` (no
/// parameters), `LinearOperator`, `EmbeddingOperator`,
/// `NormalizationOperator` and `RotaryOperator` for it, over the tensor type
/// given after `for`. Every operator method fails with `$error(operation)`,
/// the operations being `linear operator forward`, `embedding operator
/// forward`, `embedding operator as_linear`, `normalization operator
/// forward` and `rotary operator forward`.
///
/// ```text
/// operator_not_provided! {
///     /// Documentation of the handle.
///     pub struct Operator for Tensor;
///     error: path::to::constructor;
/// }
/// ```
///
/// See the [crate documentation](crate) for an example.
#[macro_export]
macro_rules! operator_not_provided {
    (
        $(#[$attribute:meta])*
        $visibility:vis struct $name:ident for $tensor:ty;
        error: $error:path $(;)?
    ) => {
        $(#[$attribute])*
        #[derive(Debug, Clone)]
        $visibility struct $name {
            _sealed: (),
        }

        impl $crate::__eredu_nn::Parameterized<$tensor> for $name {
            fn visit_parameters<'a, V>(&'a self, _visitor: &mut V)
            where
                V: $crate::__eredu_nn::ParameterVisitor<'a, $tensor>,
            {
            }

            fn visit_parameters_mut<'a, V>(&'a mut self, _visitor: &mut V)
            where
                V: $crate::__eredu_nn::ParameterVisitorMut<'a, $tensor>,
            {
            }

            fn set_trainable(&mut self, _trainable: bool) {}
        }

        impl $crate::__eredu_nn::LinearOperator<$tensor> for $name {
            $crate::__fails!($error, "linear operator forward", fn forward(
                &mut self,
                _: &$tensor,
                _: &<$tensor as $crate::__eredu_nn::Tensor>::Context,
            ) -> $tensor);
        }

        impl $crate::__eredu_nn::EmbeddingOperator<$tensor> for $name {
            $crate::__fails!($error, "embedding operator forward", fn forward(
                &mut self,
                _: &$tensor,
                _: &<$tensor as $crate::__eredu_nn::Tensor>::Context,
            ) -> $tensor);
            $crate::__fails!($error, "embedding operator as_linear", fn as_linear(
                &mut self,
                _: &$tensor,
                _: &<$tensor as $crate::__eredu_nn::Tensor>::Context,
            ) -> $tensor);
        }

        impl $crate::__eredu_nn::NormalizationOperator<$tensor> for $name {
            $crate::__fails!($error, "normalization operator forward", fn forward(
                &mut self,
                _: &$tensor,
                _: &<$tensor as $crate::__eredu_nn::Tensor>::Context,
            ) -> $tensor);
        }

        impl $crate::__eredu_nn::RotaryOperator<$tensor> for $name {
            $crate::__fails!($error, "rotary operator forward", fn forward(
                &mut self,
                _: &$tensor,
                _: $crate::__eredu_nn::RotaryPosition<'_, $tensor>,
                _: &<$tensor as $crate::__eredu_nn::Tensor>::Context,
            ) -> $tensor);
        }
    };
}

/// The operation a not-provided method names: its own name, or the one given.
#[doc(hidden)]
#[macro_export]
macro_rules! __operation {
    ($method:ident) => {
        ::core::stringify!($method)
    };
    ($method:ident, $operation:literal) => {
        $operation
    };
}

/// One method that fails with `$error($operation)`, whatever its arguments.
#[doc(hidden)]
#[macro_export]
macro_rules! __fails {
    ($error:path, $operation:expr, fn $name:ident($($parameters:tt)*) -> $output:ty) => {
        fn $name($($parameters)*) -> ::core::result::Result<$output, $crate::__eredu_nn::Error> {
            ::core::result::Result::Err($error($operation))
        }
    };
}

/// The required methods of `eredu_nn::Tensor` (eredu-nn 0.2), by name.
#[doc(hidden)]
#[macro_export]
macro_rules! __tensor_method {
    (unloaded_f32, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn unloaded_f32(_: &[i32], _: &Self::Context) -> Self);
    };
    (from_f32_slice, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn from_f32_slice(
            _: &[f32],
            _: &[i32],
            _: &Self::Context,
        ) -> Self);
    };
    (add, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn add(&self, _: &Self, _: &Self::Context) -> Self);
    };
    (subtract, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn subtract(&self, _: &Self, _: &Self::Context) -> Self);
    };
    (multiply, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn multiply(&self, _: &Self, _: &Self::Context) -> Self);
    };
    (multiply_scalar, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn multiply_scalar(&self, _: f32, _: &Self::Context) -> Self);
    };
    (divide, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn divide(&self, _: &Self, _: &Self::Context) -> Self);
    };
    (square, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn square(&self, _: &Self::Context) -> Self);
    };
    (maximum_scalar, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn maximum_scalar(&self, _: f32, _: &Self::Context) -> Self);
    };
    (reshape, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn reshape(&self, _: &[i32], _: &Self::Context) -> Self);
    };
    (transpose_axes, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn transpose_axes(&self, _: &[i32], _: &Self::Context) -> Self);
    };
    (swap_axes, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn swap_axes(&self, _: i32, _: i32, _: &Self::Context) -> Self);
    };
    (transpose, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn transpose(&self, _: &Self::Context) -> Self);
    };
    (expand_dims, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn expand_dims(&self, _: i32, _: &Self::Context) -> Self);
    };
    (squeeze_axes, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn squeeze_axes(&self, _: &[i32], _: &Self::Context) -> Self);
    };
    (index, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn index(
            &self,
            _: &[$crate::__eredu_nn::Index],
            _: &Self::Context,
        ) -> Self);
    };
    (take_axis, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn take_axis(
            &self,
            _: &Self,
            _: i32,
            _: &Self::Context,
        ) -> Self);
    };
    (concatenate, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn concatenate(_: &[Self], _: i32, _: &Self::Context) -> Self);
    };
    (stack, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn stack(_: &[Self], _: i32, _: &Self::Context) -> Self);
    };
    (matmul, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn matmul(_: &Self, _: &Self, _: &Self::Context) -> Self);
    };
    (sum_axis, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn sum_axis(
            _: &Self,
            _: i32,
            _: bool,
            _: &Self::Context,
        ) -> Self);
    };
    (argmin_axis, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn argmin_axis(
            _: &Self,
            _: i32,
            _: bool,
            _: &Self::Context,
        ) -> Self);
    };
    (pad, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn pad(
            _: &Self,
            _: &[(i32, i32)],
            _: $crate::__eredu_nn::PadMode,
            _: &Self::Context,
        ) -> Self);
    };
    (conv1d, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn conv1d(
            _: &Self,
            _: &Self,
            _: i32,
            _: i32,
            _: i32,
            _: i32,
            _: &Self::Context,
        ) -> Self);
    };
    (conv_transpose1d, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn conv_transpose1d(
            _: &Self,
            _: &Self,
            _: i32,
            _: i32,
            _: i32,
            _: i32,
            _: i32,
            _: &Self::Context,
        ) -> Self);
    };
    (linear, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn linear(
            _: &Self,
            _: &Self,
            _: ::core::option::Option<&Self>,
            _: &Self::Context,
        ) -> Self);
    };
    (layer_norm, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn layer_norm(
            _: &Self,
            _: ::core::option::Option<&Self>,
            _: ::core::option::Option<&Self>,
            _: f32,
            _: &Self::Context,
        ) -> Self);
    };
    (gelu, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn gelu(_: &Self, _: &Self::Context) -> Self);
    };
    (elu, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn elu(_: &Self, _: f32, _: &Self::Context) -> Self);
    };
    (rope, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn rope(
            _: &Self,
            _: i32,
            _: bool,
            _: f32,
            _: f32,
            _: i32,
            _: &Self::Context,
        ) -> Self);
    };
    (scaled_dot_product_attention, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn scaled_dot_product_attention(
            _: &Self,
            _: &Self,
            _: &Self,
            _: f32,
            _: $crate::__eredu_nn::AttentionMask<'_, Self>,
            _: &Self::Context,
        ) -> Self);
    };
    ($other:ident, $error:path, $operation:expr) => {
        ::core::compile_error!(::core::concat!(
            "`",
            ::core::stringify!($other),
            "` is not a required method of eredu_nn::Tensor"
        ));
    };
}

/// The required methods of `eredu_nn::NeuralBackend` (eredu-nn 0.2), by name.
#[doc(hidden)]
#[macro_export]
macro_rules! __neural_backend_method {
    (linear, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn linear(
            _: $crate::__eredu_nn::LinearSpec,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Linear);
    };
    (embedding, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn embedding(
            _: $crate::__eredu_nn::EmbeddingSpec,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Embedding);
    };
    (normalization, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn normalization(
            _: $crate::__eredu_nn::NormalizationConstructionSpec,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Normalization);
    };
    (rotary, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn rotary(
            _: $crate::__eredu_nn::RotarySpec,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Rotary);
    };
    (silu, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn silu(
            _: Self::Tensor,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Tensor);
    };
    (gated_product, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn gated_product(
            _: Self::Tensor,
            _: Self::Tensor,
            _: $crate::__eredu_nn::GatedProductPolicy,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Tensor);
    };
    (attention, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn attention(
            _: Self::Tensor,
            _: Self::Tensor,
            _: Self::Tensor,
            _: f32,
            _: ::core::option::Option<&Self::Tensor>,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Tensor);
    };
    (sliding_window_attention, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn sliding_window_attention(
            _: Self::Tensor,
            _: Self::Tensor,
            _: Self::Tensor,
            _: f32,
            _: i32,
            _: i32,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Tensor);
    };
    (causal_mask, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn causal_mask(
            _: i32,
            _: i32,
            _: ::core::option::Option<i32>,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Tensor);
    };
    (row_parallel_linear, $error:path, $operation:expr) => {
        $crate::__fails!($error, $operation, fn row_parallel_linear(
            _: &mut Self::Linear,
            _: &Self::Tensor,
            _: &Self::ParallelContext,
            _: &<Self::Tensor as $crate::__eredu_nn::Tensor>::Context,
        ) -> Self::Tensor);
    };
    ($other:ident, $error:path, $operation:expr) => {
        ::core::compile_error!(::core::concat!(
            "`",
            ::core::stringify!($other),
            "` is not a required method of eredu_nn::NeuralBackend"
        ));
    };
}

#[cfg(test)]
mod tests {
    use eredu_nn::{Error, Index, NeuralBackend, PadMode, Tensor};

    fn not_provided(operation: &'static str) -> Error {
        Error::backend(format!("no {operation}"))
    }

    /// A tensor that provides nothing but its (empty) shape.
    #[derive(Debug, Clone)]
    struct Nothing;

    impl Tensor for Nothing {
        type Context = ();

        fn shape(&self) -> &[i32] {
            &[]
        }

        tensor_not_provided! {
            error: not_provided;
            unloaded_f32, from_f32_slice, add, subtract, multiply, multiply_scalar, divide,
            square, maximum_scalar, reshape, transpose_axes, swap_axes, transpose, expand_dims,
            squeeze_axes, index, take_axis, concatenate, stack, matmul, sum_axis, argmin_axis,
            pad as "padding", conv1d, conv_transpose1d, linear, layer_norm, gelu, elu, rope,
            scaled_dot_product_attention
        }
    }

    operator_not_provided! {
        /// No operators.
        struct NoOperator for Nothing;
        error: not_provided;
    }

    struct Backend;

    impl NeuralBackend for Backend {
        type Tensor = Nothing;
        type Linear = NoOperator;
        type Embedding = NoOperator;
        type Normalization = NoOperator;
        type Rotary = NoOperator;
        type ParallelContext = ();

        neural_backend_not_provided! {
            error: not_provided;
            linear, embedding, normalization, rotary, silu, gated_product, attention,
            sliding_window_attention, causal_mask as "a causal mask", row_parallel_linear
        }
    }

    fn message<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
        result.expect_err("not provided").to_string()
    }

    #[test]
    fn each_method_names_its_operation() {
        assert_eq!(message(Nothing.reshape(&[1], &())), "no reshape");
        assert_eq!(message(Nothing.index(&[Index::Full], &())), "no index");
        assert_eq!(
            message(Nothing::matmul(&Nothing, &Nothing, &())),
            "no matmul"
        );
        assert_eq!(
            message(Nothing::pad(&Nothing, &[], PadMode::Constant, &())),
            "no padding"
        );
        assert_eq!(message(Backend::silu(Nothing, &())), "no silu");
        assert_eq!(
            message(Backend::causal_mask(1, 0, None, &())),
            "no a causal mask"
        );
        let mut operator = NoOperator { _sealed: () };
        assert_eq!(
            message(eredu_nn::LinearOperator::forward(
                &mut operator,
                &Nothing,
                &()
            )),
            "no linear operator forward"
        );
        assert_eq!(
            message(eredu_nn::EmbeddingOperator::as_linear(
                &mut operator,
                &Nothing,
                &()
            )),
            "no embedding operator as_linear"
        );
        assert_eq!(
            message(Backend::row_parallel_linear(
                &mut operator,
                &Nothing,
                &(),
                &()
            )),
            "no row_parallel_linear"
        );
    }
}
