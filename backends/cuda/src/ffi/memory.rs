//! Device memory: allocated, copied and freed stream-ordered on the
//! device's memory stream (never gated), so that no free or copy waits for a
//! held stream.

use crate::error::CudaError;
use cudarc::driver::{result, sys, CudaStream, DeviceRepr};
use std::sync::Arc;

/// Device memory, allocated and freed stream-ordered on one stream (the
/// device's *memory stream*, never gated), so that neither ever waits for
/// other streams' work (`cuMemFree` may synchronise the device).
#[derive(Debug)]
pub struct DeviceMemory {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    stream: Arc<CudaStream>,
}

// SAFETY: the allocation is a device address owned by this value alone; the
// driver API may be called from any thread once the context is bound.
unsafe impl Send for DeviceMemory {}
// SAFETY: shared access only reads the address and issues driver calls.
unsafe impl Sync for DeviceMemory {}

impl DeviceMemory {
    /// Allocates `bytes` (at least one) on `stream` and waits for the
    /// allocation, so that any stream may use it at once.
    pub fn alloc(stream: &Arc<CudaStream>, bytes: usize) -> Result<Self, CudaError> {
        let context = stream.context();
        context
            .bind_to_thread()
            .map_err(CudaError::driver("cuCtxSetCurrent"))?;
        let (free, total) = result::mem_get_info().map_err(CudaError::driver("cuMemGetInfo"))?;
        if bytes > free {
            return Err(CudaError::OutOfMemory {
                requested: bytes,
                free,
                total,
            });
        }
        // SAFETY: the stream belongs to the bound context; the size is
        // positive.
        let ptr = unsafe { result::malloc_async(stream.cu_stream(), bytes.max(1)) }
            .map_err(CudaError::driver("cuMemAllocAsync"))?;
        let memory = Self {
            ptr,
            bytes,
            stream: Arc::clone(stream),
        };
        stream
            .synchronize()
            .map_err(CudaError::driver("cuStreamSynchronize (allocation)"))?;
        Ok(memory)
    }

    /// The device address.
    pub fn address(&self) -> u64 {
        self.ptr
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copies `data` to the start of the allocation and waits until it is
    /// there: the copy goes on the memory stream, which is then synchronised
    /// (a plain `cuMemcpyHtoD` from pageable memory may return before its
    /// DMA finished, and a kernel on another stream would read stale bytes).
    pub fn write<T: DeviceRepr>(&self, data: &[T]) -> Result<(), CudaError> {
        assert_fits::<T>(data.len(), self.bytes)?;
        self.bind()?;
        // SAFETY: `data` fits in the allocation (checked); the allocation is
        // live while `self` is; `data` outlives the copy (the stream is
        // synchronised before this returns).
        unsafe { result::memcpy_htod_async(self.ptr, data, self.stream.cu_stream()) }
            .map_err(CudaError::driver("cuMemcpyHtoDAsync"))?;
        self.stream
            .synchronize()
            .map_err(CudaError::driver("cuStreamSynchronize (write)"))
    }

    /// Copies the first `len` elements back (on the memory stream, waited
    /// for; the caller makes sure the producer completed).
    pub fn read<T: DeviceRepr + Default + Clone>(&self, len: usize) -> Result<Vec<T>, CudaError> {
        assert_fits::<T>(len, self.bytes)?;
        self.bind()?;
        let mut out = vec![T::default(); len];
        // SAFETY: `len` elements fit in the allocation (checked) and in
        // `out`, which outlives the copy (synchronised before returning).
        unsafe { result::memcpy_dtoh_async(&mut out, self.ptr, self.stream.cu_stream()) }
            .map_err(CudaError::driver("cuMemcpyDtoHAsync"))?;
        self.stream
            .synchronize()
            .map_err(CudaError::driver("cuStreamSynchronize (read)"))?;
        Ok(out)
    }

    /// Sets every byte to zero, on `stream` (stream-ordered).
    pub fn zero_on(&self, stream: &CudaStream) -> Result<(), CudaError> {
        self.bind()?;
        // SAFETY: the range is the whole live allocation.
        unsafe { result::memset_d8_async(self.ptr, 0, self.bytes, stream.cu_stream()) }
            .map_err(CudaError::driver("cuMemsetD8Async"))
    }

    /// Copies `bytes` from `source` into `self` on `stream` (a
    /// device-to-device copy: not cancellable, it drains).
    pub fn copy_from_on(
        &self,
        source: &DeviceMemory,
        bytes: usize,
        stream: &CudaStream,
    ) -> Result<(), CudaError> {
        if bytes > self.bytes || bytes > source.bytes {
            return Err(CudaError::OutOfMemory {
                requested: bytes,
                free: self.bytes.min(source.bytes),
                total: self.bytes.min(source.bytes),
            });
        }
        self.bind()?;
        // SAFETY: both ranges lie within live allocations (checked); the
        // caller keeps both alive until the stream's work completes.
        unsafe { result::memcpy_dtod_async(self.ptr, source.ptr, bytes, stream.cu_stream()) }
            .map_err(CudaError::driver("cuMemcpyDtoDAsync"))
    }

    fn bind(&self) -> Result<(), CudaError> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(CudaError::driver("cuCtxSetCurrent"))
    }
}

fn assert_fits<T>(len: usize, bytes: usize) -> Result<(), CudaError> {
    let needed = len.saturating_mul(std::mem::size_of::<T>());
    if needed > bytes {
        return Err(CudaError::OutOfMemory {
            requested: needed,
            free: bytes,
            total: bytes,
        });
    }
    Ok(())
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        if self.bind().is_ok() {
            // SAFETY: the allocation is freed once, stream-ordered after
            // everything already on the memory stream; users of the memory
            // on other streams have completed (the backend drops memory only
            // after the work's event completed).
            let _ = unsafe { result::free_async(self.ptr, self.stream.cu_stream()) };
        }
    }
}
