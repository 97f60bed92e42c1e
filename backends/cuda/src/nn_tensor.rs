//! `eredu_nn::Tensor` for [`CudaTensor`]: construction, read-back,
//! elementwise arithmetic, reshape and 2-D matrix multiplication (`f32`
//! only) enqueue real work on the context's executor; the rest fails with
//! an error saying it is not provided (a communication backend never needs
//! it).

use crate::element::Element;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::Launch;
use crate::tensor::{elements, CudaTensor};
use eredu_nn::*;
use std::sync::Arc;

fn not_provided(operation: &'static str) -> Error {
    Error::backend(CudaError::NotProvided { operation })
}

fn invalid(operation: &'static str, expected: impl Into<String>, got: impl Into<String>) -> Error {
    Error::backend(CudaError::Invalid {
        operation,
        expected: expected.into(),
        got: got.into(),
    })
}

impl CudaTensor {
    fn elementwise(
        &self,
        rhs: Option<&Self>,
        op: u32,
        factor: f32,
        operation: &'static str,
        context: &CudaExecutor,
    ) -> Result<Self, Error> {
        if let Some(rhs) = rhs {
            if rhs.shape != self.shape {
                return Err(invalid(
                    operation,
                    format!("operands of one shape, {:?}", self.shape),
                    format!("{:?}", rhs.shape),
                ));
            }
        }
        let run = || -> Result<Self, CudaError> {
            self.require_f32(operation)?;
            if let Some(rhs) = rhs {
                rhs.require_f32(operation)?;
            }
            let out = Self::pending(context.device(), Element::F32, self.shape.clone())?;
            let mut enqueue = context.begin(operation)?;
            enqueue.wait_for(self)?;
            if let Some(rhs) = rhs {
                enqueue.wait_for(rhs)?;
                enqueue.retain(Box::new(rhs.storage()));
            }
            enqueue.retain(Box::new(self.storage()));
            enqueue.begin_device_part()?;
            enqueue.launch(Launch::Elementwise {
                a: self.address(),
                b: rhs.map_or(self.address(), Self::address),
                out: out.address(),
                len: self.storage.len as u64,
                op,
                factor,
            })?;
            enqueue.output(&out);
            enqueue.finish(Vec::new())?;
            Ok(out)
        };
        run().map_err(Error::backend)
    }
}

#[allow(unused_variables)]
impl Tensor for CudaTensor {
    type Context = CudaExecutor;

    fn shape(&self) -> &[i32] {
        &self.shape
    }

    fn unloaded_f32(shape: &[i32], context: &CudaExecutor) -> Result<Self, Error> {
        let len = elements("unloaded_f32", shape).map_err(Error::backend)?;
        Self::from_host(context.device(), &vec![0.0; len], shape).map_err(Error::backend)
    }

    fn from_f32_slice(
        values: &[f32],
        shape: &[i32],
        context: &CudaExecutor,
    ) -> Result<Self, Error> {
        Self::from_host(context.device(), values, shape).map_err(Error::backend)
    }

    fn to_f32_vec(&self, context: &CudaExecutor) -> Result<Vec<f32>, Error> {
        self.read().map_err(Error::backend)
    }

    fn full_f32(value: f32, shape: &[i32], context: &CudaExecutor) -> Result<Self, Error> {
        let len = elements("full_f32", shape).map_err(Error::backend)?;
        Self::from_host(context.device(), &vec![value; len], shape).map_err(Error::backend)
    }

    fn add(&self, rhs: &Self, context: &CudaExecutor) -> Result<Self, Error> {
        self.elementwise(Some(rhs), 0, 0.0, "add", context)
    }

    fn subtract(&self, rhs: &Self, context: &CudaExecutor) -> Result<Self, Error> {
        self.elementwise(Some(rhs), 1, 0.0, "subtract", context)
    }

    fn multiply(&self, rhs: &Self, context: &CudaExecutor) -> Result<Self, Error> {
        self.elementwise(Some(rhs), 2, 0.0, "multiply", context)
    }

    fn multiply_scalar(&self, rhs: f32, context: &CudaExecutor) -> Result<Self, Error> {
        self.elementwise(None, 3, rhs, "multiply_scalar", context)
    }

    fn reshape(&self, shape: &[i32], context: &CudaExecutor) -> Result<Self, Error> {
        let len = elements("reshape", shape).map_err(Error::backend)?;
        if len != self.storage.len {
            return Err(invalid(
                "reshape",
                format!("a shape of {} elements", self.storage.len),
                format!("{shape:?}"),
            ));
        }
        Ok(Self {
            storage: Arc::clone(&self.storage),
            shape: shape.to_vec(),
        })
    }

    fn matmul(lhs: &Self, rhs: &Self, context: &CudaExecutor) -> Result<Self, Error> {
        let (m, k, k2, n) = match (lhs.shape.as_slice(), rhs.shape.as_slice()) {
            (&[m, k], &[k2, n]) => (m, k, k2, n),
            (a, b) => {
                return Err(invalid(
                    "matmul",
                    "two 2-D operands",
                    format!("shapes {a:?} and {b:?}"),
                ))
            }
        };
        if k != k2 {
            return Err(invalid(
                "matmul",
                "operands shaped [m, k] and [k, n]",
                format!("shapes {:?} and {:?}", lhs.shape, rhs.shape),
            ));
        }
        let run = || -> Result<Self, CudaError> {
            lhs.require_f32("matmul")?;
            rhs.require_f32("matmul")?;
            let out = Self::pending(context.device(), Element::F32, vec![m, n])?;
            let mut enqueue = context.begin("matmul")?;
            enqueue.wait_for(lhs)?;
            enqueue.wait_for(rhs)?;
            enqueue.retain(Box::new(lhs.storage()));
            enqueue.retain(Box::new(rhs.storage()));
            enqueue.begin_device_part()?;
            enqueue.launch(Launch::Matmul {
                a: lhs.address(),
                b: rhs.address(),
                out: out.address(),
                m: m as u64,
                k: k as u64,
                n: n as u64,
            })?;
            enqueue.output(&out);
            enqueue.finish(Vec::new())?;
            Ok(out)
        };
        run().map_err(Error::backend)
    }

    commcheck_not_provided::tensor_not_provided! {
        error: not_provided;
        divide,
        square,
        maximum_scalar,
        transpose_axes,
        swap_axes,
        transpose,
        expand_dims,
        squeeze_axes,
        index,
        take_axis,
        concatenate,
        stack,
        sum_axis,
        argmin_axis,
        pad,
        conv1d,
        conv_transpose1d,
        linear,
        layer_norm,
        gelu,
        elu,
        rope,
        scaled_dot_product_attention,
    }
}
