//! Tensors: values of one [`Element`] type (`f32`, `f16`, `bf16`) in
//! device memory, with the event after which they are ready. Construction,
//! read-back, elementwise arithmetic, reshape and 2-D matrix multiplication
//! (`f32` only) are real (kernels on the context's stream); the rest of
//! `eredu_nn::Tensor` fails with an error saying it is not provided (a
//! communication backend never needs it). Communication moves every
//! element type (bit for bit) and sums each (16-bit types in `f32`,
//! rounded once).
//!
//! The `eredu_nn::Tensor` implementation, which enqueues work on an
//! executor, is `nn_tensor`, above the executor: this module knows devices and
//! memory, never executors.

use crate::device::CudaDevice;
use crate::element::Element;
use crate::error::CudaError;
use crate::ffi::{DeviceMemory, Event};
use std::sync::{Arc, Mutex};

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

/// The device buffer behind one or more tensors.
pub(crate) struct Storage {
    pub(crate) memory: DeviceMemory,
    pub(crate) element: Element,
    pub(crate) len: usize,
    pub(crate) ready: Mutex<Option<Arc<Event>>>,
    pub(crate) device: CudaDevice,
    pub(crate) id: u64,
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.device.storage_freed(self.id);
    }
}

/// A tensor of the CUDA backend.
#[derive(Clone)]
pub struct CudaTensor {
    pub(crate) storage: Arc<Storage>,
    pub(crate) shape: Vec<i32>,
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
    pub(crate) fn require_f32(&self, operation: &'static str) -> Result<(), CudaError> {
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
}
