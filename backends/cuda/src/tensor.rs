//! Tensors: values of one [`Element`] type (`f32`, `f16`, `bf16`) in
//! device memory, with the event after which they are ready. Construction,
//! read-back, elementwise arithmetic, reshape and 2-D matrix multiplication
//! (`f32` only) are real (kernels on the context's stream); the rest of
//! `eredu_nn::Tensor` fails with an error saying it is not provided (a
//! communication backend never needs it). Communication moves every
//! element type (bit for bit) and sums each (16-bit types in `f32`,
//! rounded once).

use crate::device::CudaDevice;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::{DeviceMemory, Event, Launch};
use eredu_nn::*;
use std::sync::{Arc, Mutex};

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

/// Elements of `shape`, or why it is not a shape.
pub(crate) fn elements(operation: &'static str, shape: &[i32]) -> Result<usize, CudaError> {
    shape.iter().try_fold(1usize, |count, &dim| {
        usize::try_from(dim)
            .ok()
            .and_then(|dim| count.checked_mul(dim))
            .ok_or_else(|| CudaError::Invalid {
                operation,
                expected: "a shape of non-negative extents".into(),
                got: format!("{shape:?}"),
            })
    })
}

/// The element type of a [`CudaTensor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Element {
    /// IEEE 754 binary32.
    #[default]
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (the upper half of a binary32).
    Bf16,
}

impl Element {
    /// Every element type.
    pub const ALL: [Element; 3] = [Element::F32, Element::F16, Element::Bf16];

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

    /// Halves (16-bit units, the copy kernels' unit) per element.
    pub(crate) const fn halves(self) -> u64 {
        self.size() as u64 / 2
    }

    /// Its code in the kernels (`COMMCHECK_F32`, `_F16`, `_BF16`).
    pub(crate) const fn code(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Bf16 => 2,
        }
    }

    /// Little-endian `bytes` of this type, widened to `f32`.
    fn widen(self, bytes: &[u8]) -> Vec<f32> {
        match self {
            Self::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Self::F16 => bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Self::Bf16 => bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }
}

impl std::fmt::Display for Element {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The device buffer behind one or more tensors.
pub(crate) struct Storage {
    memory: DeviceMemory,
    element: Element,
    len: usize,
    ready: Mutex<Option<Arc<Event>>>,
    device: CudaDevice,
    id: u64,
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.device.storage_freed(self.id);
    }
}

/// A tensor of the CUDA backend.
#[derive(Clone)]
pub struct CudaTensor {
    storage: Arc<Storage>,
    shape: Vec<i32>,
}

impl std::fmt::Debug for CudaTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaTensor")
            .field("storage", &self.storage.id)
            .field("element", &self.storage.element)
            .field("shape", &self.shape)
            .finish()
    }
}

impl CudaTensor {
    /// A tensor of `element`s whose values a work item will write (ready
    /// with its event).
    pub(crate) fn pending(
        device: &CudaDevice,
        element: Element,
        shape: Vec<i32>,
    ) -> Result<Self, CudaError> {
        let len = elements("tensor allocation", &shape)?;
        let memory = device.alloc(len.saturating_mul(element.size()))?;
        let id = device.next_id();
        device.storage_born(id);
        Ok(Self {
            storage: Arc::new(Storage {
                memory,
                element,
                len,
                ready: Mutex::new(None),
                device: device.clone(),
                id,
            }),
            shape,
        })
    }

    /// A tensor holding `values` (copied to the device before this returns).
    pub fn from_host(
        device: &CudaDevice,
        values: &[f32],
        shape: &[i32],
    ) -> Result<Self, CudaError> {
        let len = elements("tensor from host values", shape)?;
        if len != values.len() {
            return Err(CudaError::Invalid {
                operation: "tensor from host values",
                expected: format!("{len} values for shape {shape:?}"),
                got: format!("{} values", values.len()),
            });
        }
        let tensor = Self::pending(device, Element::F32, shape.to_vec())?;
        if !values.is_empty() {
            tensor.storage.memory.write(values)?;
        }
        Ok(tensor)
    }

    /// A tensor of `element`s whose little-endian bytes are `bytes` (copied
    /// to the device before this returns): how `f16` and `bf16` tensors are
    /// made (`half`'s `to_le_bytes` gives the bytes).
    pub fn from_bytes(
        device: &CudaDevice,
        element: Element,
        bytes: &[u8],
        shape: &[i32],
    ) -> Result<Self, CudaError> {
        let len = elements("tensor from bytes", shape)?;
        if Some(bytes.len()) != len.checked_mul(element.size()) {
            return Err(CudaError::Invalid {
                operation: "tensor from bytes",
                expected: format!(
                    "{len} {element} elements ({} bytes) for shape {shape:?}",
                    len.saturating_mul(element.size())
                ),
                got: format!("{} bytes", bytes.len()),
            });
        }
        let tensor = Self::pending(device, element, shape.to_vec())?;
        if !bytes.is_empty() {
            tensor.storage.memory.write(bytes)?;
        }
        Ok(tensor)
    }

    /// Its values widened to `f32` (exact for every element type), once
    /// ready (waits for its producer).
    pub fn read(&self) -> Result<Vec<f32>, CudaError> {
        match self.storage.element {
            Element::F32 => {
                self.synchronize()?;
                if self.storage.len == 0 {
                    return Ok(Vec::new());
                }
                self.storage.memory.read::<f32>(self.storage.len)
            }
            element => Ok(element.widen(&self.read_bytes()?)),
        }
    }

    /// Its little-endian bytes, once ready (waits for its producer).
    pub fn read_bytes(&self) -> Result<Vec<u8>, CudaError> {
        self.synchronize()?;
        let bytes = self.storage.len * self.storage.element.size();
        if bytes == 0 {
            return Ok(Vec::new());
        }
        self.storage.memory.read::<u8>(bytes)
    }

    fn synchronize(&self) -> Result<(), CudaError> {
        match self.ready() {
            Some(ready) => ready.synchronize(),
            None => Ok(()),
        }
    }

    /// Its element type.
    pub fn element(&self) -> Element {
        self.storage.element
    }

    /// `Ok` when it holds `f32`s; otherwise an error saying `operation`
    /// takes `f32` tensors only.
    fn require_f32(&self, operation: &'static str) -> Result<(), CudaError> {
        match self.storage.element {
            Element::F32 => Ok(()),
            other => Err(CudaError::Invalid {
                operation,
                expected: "f32 tensors".into(),
                got: format!("a {other} tensor"),
            }),
        }
    }

    /// The identity of its device buffer (the liveness probe's key).
    pub fn storage_id(&self) -> u64 {
        self.storage.id
    }

    /// Its element count.
    pub fn len(&self) -> usize {
        self.storage.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.storage.len == 0
    }

    /// Its device address.
    pub(crate) fn address(&self) -> u64 {
        self.storage.memory.address()
    }

    /// The event after which its values are ready (`None`: ready now).
    pub(crate) fn ready(&self) -> Option<Arc<Event>> {
        self.storage
            .ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn set_ready(&self, event: Arc<Event>) {
        *self.storage.ready.lock().unwrap_or_else(|p| p.into_inner()) = Some(event);
    }

    /// The storage, for retention.
    pub(crate) fn storage(&self) -> Arc<Storage> {
        Arc::clone(&self.storage)
    }

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

    fn divide(&self, rhs: &Self, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("divide"))
    }

    fn square(&self, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("square"))
    }

    fn maximum_scalar(&self, rhs: f32, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("maximum_scalar"))
    }

    fn transpose_axes(&self, axes: &[i32], context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("transpose_axes"))
    }

    fn swap_axes(&self, left: i32, right: i32, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("swap_axes"))
    }

    fn transpose(&self, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("transpose"))
    }

    fn expand_dims(&self, axis: i32, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("expand_dims"))
    }

    fn squeeze_axes(&self, axes: &[i32], context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("squeeze_axes"))
    }

    fn index(&self, indexes: &[Index], context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("index"))
    }

    fn take_axis(&self, indexes: &Self, axis: i32, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("take_axis"))
    }

    fn concatenate(values: &[Self], axis: i32, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("concatenate"))
    }

    fn stack(values: &[Self], axis: i32, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("stack"))
    }

    fn sum_axis(
        value: &Self,
        axis: i32,
        keep_dims: bool,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("sum_axis"))
    }

    fn argmin_axis(
        value: &Self,
        axis: i32,
        keep_dims: bool,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("argmin_axis"))
    }

    fn pad(
        value: &Self,
        widths: &[(i32, i32)],
        mode: PadMode,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("pad"))
    }

    fn conv1d(
        input: &Self,
        weight: &Self,
        stride: i32,
        padding: i32,
        dilation: i32,
        groups: i32,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("conv1d"))
    }

    fn conv_transpose1d(
        input: &Self,
        weight: &Self,
        stride: i32,
        padding: i32,
        dilation: i32,
        output_padding: i32,
        groups: i32,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("conv_transpose1d"))
    }

    fn linear(
        input: &Self,
        weight: &Self,
        bias: Option<&Self>,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("linear"))
    }

    fn layer_norm(
        input: &Self,
        weight: Option<&Self>,
        bias: Option<&Self>,
        epsilon: f32,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("layer_norm"))
    }

    fn gelu(input: &Self, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("gelu"))
    }

    fn elu(input: &Self, alpha: f32, context: &Self::Context) -> Result<Self, Error> {
        Err(not_provided("elu"))
    }

    fn rope(
        input: &Self,
        dimensions: i32,
        traditional: bool,
        base: f32,
        scale: f32,
        offset: i32,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("rope"))
    }

    fn scaled_dot_product_attention(
        queries: &Self,
        keys: &Self,
        values: &Self,
        scale: f32,
        mask: AttentionMask<'_, Self>,
        context: &Self::Context,
    ) -> Result<Self, Error> {
        Err(not_provided("scaled_dot_product_attention"))
    }
}
