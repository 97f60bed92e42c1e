//! Pinned host memory mapped into the device, pooled and never freed while
//! the device lives: the words the host and the device exchange (gates,
//! cancel, started and error words, plans, copy tables, headers), with the
//! stream waits and writes on them (`cuStreamWaitValue32_v2`,
//! `cuStreamWriteValue32_v2`).

use crate::error::CudaError;
use cudarc::driver::{result, sys, CudaStream, DeviceRepr, DriverError};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Pinned host memory mapped into the device: the host writes (gates,
/// cancel words, descriptors, headers), the device reads, or the device
/// writes (error words) and the host reads once the work's event completed.
/// Chunks are allocated once and recycled forever ([`HostPool`]): freeing
/// pinned memory may synchronise the context, which a held stream would
/// turn into a hang.
#[derive(Debug)]
struct Chunk {
    host: NonNull<u8>,
    device: sys::CUdeviceptr,
    bytes: usize,
    context: Arc<cudarc::driver::CudaContext>,
}

// SAFETY: the chunk is pinned host memory owned by this value; every access
// goes through `HostSlot`, atomically or into slots one owner holds.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    fn new(context: &Arc<cudarc::driver::CudaContext>, bytes: usize) -> Result<Self, CudaError> {
        context
            .bind_to_thread()
            .map_err(CudaError::driver("cuCtxSetCurrent"))?;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a pinned allocation of `bytes` (positive) in the bound context.
        let host = unsafe { result::malloc_host(bytes, flags) }
            .map_err(CudaError::driver("cuMemHostAlloc"))?;
        let host = NonNull::new(host.cast::<u8>()).ok_or(CudaError::Driver {
            call: "cuMemHostAlloc",
            source: DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        })?;
        // SAFETY: `bytes` bytes at `host` are ours and writable.
        unsafe { std::ptr::write_bytes(host.as_ptr(), 0, bytes) };
        let mut device = 0;
        // SAFETY: `host` came from cuMemHostAlloc with DEVICEMAP in this
        // context; `device` is a live local.
        let mapped =
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.as_ptr().cast(), 0) }
                .result();
        let chunk = Self {
            host,
            device,
            bytes,
            context: Arc::clone(context),
        };
        mapped.map_err(CudaError::driver("cuMemHostGetDevicePointer"))?;
        Ok(chunk)
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if self.context.bind_to_thread().is_ok() {
            // SAFETY: freed once, when the pool goes: every slot was returned,
            // so nothing on the device uses it any more.
            let _ = unsafe { result::free_host(self.host.as_ptr().cast()) };
        }
    }
}

/// The recycling pool of mapped host memory: slots of 64 bytes (words)
/// and 4 KiB (descriptors, copy tables, headers), carved from 1 MiB chunks;
/// larger requests get a chunk of their own, recycled by size.
#[derive(Debug)]
pub struct HostPool {
    context: Arc<cudarc::driver::CudaContext>,
    free: std::sync::Mutex<PoolFree>,
}

#[derive(Debug, Default)]
struct PoolFree {
    chunks: Vec<Arc<Chunk>>,
    small: Vec<(Arc<Chunk>, usize)>,
    large: Vec<(Arc<Chunk>, usize)>,
    dedicated: Vec<Arc<Chunk>>,
}

const SMALL: usize = 64;
const LARGE: usize = 4096;
const CHUNK: usize = 1 << 20;

impl HostPool {
    /// An empty pool for `context`.
    pub fn new(context: &Arc<cudarc::driver::CudaContext>) -> Arc<Self> {
        Arc::new(Self {
            context: Arc::clone(context),
            free: std::sync::Mutex::new(PoolFree::default()),
        })
    }

    /// A zeroed slot of at least `bytes` bytes.
    pub fn slot(self: &Arc<Self>, bytes: usize) -> Result<HostSlot, CudaError> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let (chunk, offset, len) = if bytes <= LARGE {
            let size = if bytes <= SMALL { SMALL } else { LARGE };
            let list = if size == SMALL {
                &mut free.small
            } else {
                &mut free.large
            };
            if list.is_empty() {
                let chunk = Arc::new(Chunk::new(&self.context, CHUNK)?);
                for offset in (0..CHUNK).step_by(size) {
                    list.push((Arc::clone(&chunk), offset));
                }
                free.chunks.push(chunk);
            }
            let list = if size == SMALL {
                &mut free.small
            } else {
                &mut free.large
            };
            let (chunk, offset) = list.pop().ok_or(CudaError::Driver {
                call: "cuMemHostAlloc",
                source: DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
            })?;
            (chunk, offset, size)
        } else {
            let size = bytes.next_power_of_two();
            let position = free.dedicated.iter().position(|chunk| chunk.bytes == size);
            let chunk = match position {
                Some(i) => free.dedicated.swap_remove(i),
                None => Arc::new(Chunk::new(&self.context, size)?),
            };
            (chunk, 0, size)
        };
        drop(free);
        let slot = HostSlot {
            chunk,
            offset,
            len,
            pool: Arc::clone(self),
        };
        slot.fill(0);
        Ok(slot)
    }
}

/// One slot of the device's pool of mapped host memory, returned to the pool on drop. Whoever
/// holds it keeps it until no device work reads or writes it any more (the
/// backend keeps slots with the work's state until its event completed).
#[derive(Debug)]
pub struct HostSlot {
    chunk: Arc<Chunk>,
    offset: usize,
    len: usize,
    pool: Arc<HostPool>,
}

impl HostSlot {
    fn ptr(&self) -> *mut u8 {
        // SAFETY: `offset` lies within the chunk (set by the pool).
        unsafe { self.chunk.host.as_ptr().add(self.offset) }
    }

    /// The slot's device address.
    pub fn address(&self) -> u64 {
        self.chunk.device + self.offset as u64
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes (never: slots are at least 64 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first four bytes as an atomic word.
    pub fn word(&self) -> &AtomicU32 {
        // SAFETY: slots are 64-byte aligned and at least 64 bytes; the
        // memory lives as long as `self` (the chunk is kept alive by it).
        unsafe { &*self.ptr().cast::<AtomicU32>() }
    }

    /// Stores `value` in the first word (seen by the device's next read).
    pub fn store(&self, value: u32) {
        self.word().store(value, Ordering::SeqCst);
    }

    /// The first word.
    pub fn load(&self) -> u32 {
        self.word().load(Ordering::SeqCst)
    }

    /// Sets every byte to `byte`.
    pub fn fill(&self, byte: u8) {
        // SAFETY: `len` bytes at `ptr` belong to this slot.
        unsafe { std::ptr::write_bytes(self.ptr(), byte, self.len) };
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// Copies `bytes` to the start of the slot (at most its length).
    pub fn write_bytes(&self, bytes: &[u8]) -> Result<(), CudaError> {
        if bytes.len() > self.len {
            return Err(CudaError::Invalid {
                operation: "host slot write",
                expected: format!("at most {} bytes", self.len),
                got: format!("{} bytes", bytes.len()),
            });
        }
        // SAFETY: the range fits in the slot (checked); source and slot do
        // not overlap (the slot is pinned memory no slice borrows).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr(), bytes.len()) };
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(())
    }

    /// Copies a `repr(C)` value to the start of the slot.
    pub fn write_value<T: DeviceRepr + Copy>(&self, value: &T) -> Result<(), CudaError> {
        let size = std::mem::size_of::<T>();
        if size > self.len {
            return Err(CudaError::Invalid {
                operation: "host slot write",
                expected: format!("at most {} bytes", self.len),
                got: format!("{size} bytes"),
            });
        }
        // SAFETY: the value fits (checked); slots are 64-byte aligned, enough
        // for any `DeviceRepr` value; source and slot do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(value, self.ptr().cast::<T>(), 1) };
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(())
    }

    /// Makes `stream` wait until the first word is at least `value`
    /// (`cuStreamWaitValue32_v2`): only a host store opens it.
    pub fn wait_on(&self, stream: &CudaStream, value: u32) -> Result<(), CudaError> {
        self.pool
            .context
            .bind_to_thread()
            .map_err(CudaError::driver("cuCtxSetCurrent"))?;
        let flags = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
        // SAFETY: the address maps this live slot, which outlives the wait
        // (its holder keeps it until the stream's work completed).
        unsafe { sys::cuStreamWaitValue32_v2(stream.cu_stream(), self.address(), value, flags) }
            .result()
            .map_err(CudaError::driver("cuStreamWaitValue32_v2"))
    }

    /// Makes `stream` store `value` into the first word when it gets there
    /// (`cuStreamWriteValue32_v2`, ordered after the stream's earlier work).
    pub fn write_on(&self, stream: &CudaStream, value: u32) -> Result<(), CudaError> {
        self.pool
            .context
            .bind_to_thread()
            .map_err(CudaError::driver("cuCtxSetCurrent"))?;
        let flags = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        // SAFETY: as in `wait_on`.
        unsafe { sys::cuStreamWriteValue32_v2(stream.cu_stream(), self.address(), value, flags) }
            .result()
            .map_err(CudaError::driver("cuStreamWriteValue32_v2"))
    }
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        let mut free = self.pool.free.lock().unwrap_or_else(|p| p.into_inner());
        let chunk = Arc::clone(&self.chunk);
        match self.len {
            SMALL => free.small.push((chunk, self.offset)),
            LARGE => free.large.push((chunk, self.offset)),
            _ => free.dedicated.push(chunk),
        }
    }
}
