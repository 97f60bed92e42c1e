//! The FFI edge: every `unsafe` block of the crate is here, each with a
//! `SAFETY` note. Everything above this module is safe Rust.
#![allow(unsafe_code)]

use crate::error::CudaError;
use cudarc::driver::{
    result, sys, CudaFunction, CudaStream, DeviceRepr, DriverError, LaunchConfig, PushKernelArg,
};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The most stream-ranks one kernel addresses (`COMMCHECK_MAX_RANKS` in
/// `kernels/commcheck.cu`).
pub const MAX_RANKS: usize = 64;

/// Whether some `libcuda` loads (cudarc's own search, which never panics).
pub fn driver_library_present() -> bool {
    // SAFETY: only tries `dlopen` on cudarc's candidate names; no symbol is
    // called.
    unsafe { sys::is_culib_present() }
}

/// Whether some `libnvrtc` loads.
pub fn nvrtc_library_present() -> bool {
    // SAFETY: as above, for NVRTC's candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// `cuDriverGetVersion` (needs no `cuInit`). Call only when
/// [`driver_library_present`] is true: cudarc panics on a missing library.
pub fn driver_version() -> Result<i32, DriverError> {
    let mut version = 0;
    // SAFETY: the library is present (the caller checked); the pointer is to
    // a live local.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result()?;
    Ok(version)
}

/// `nvrtcVersion`. Call only when [`nvrtc_library_present`] is true.
pub fn nvrtc_version() -> Result<(i32, i32), cudarc::nvrtc::result::NvrtcError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (the caller checked); both pointers are
    // to live locals.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result()?;
    Ok((major, minor))
}

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

/// The input and output addresses of every rank of one all-reduce
/// (`struct commcheck_ranks` in `kernels/commcheck.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RankAddresses {
    /// Each rank's input.
    pub inputs: [u64; MAX_RANKS],
    /// Each rank's output.
    pub outputs: [u64; MAX_RANKS],
}

// SAFETY: a `repr(C)` struct of 128 device addresses, the layout of
// `struct commcheck_ranks`.
unsafe impl DeviceRepr for RankAddresses {}

/// One strided copy (`struct commcheck_segment`), in halves (16-bit units:
/// an `f32` element is two, an `f16` or `bf16` one).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Segment {
    /// Source address.
    pub source: u64,
    /// Destination address.
    pub destination: u64,
    /// Rows.
    pub rows: u64,
    /// Halves per row.
    pub row_len: u64,
    /// Halves between source rows.
    pub source_stride: u64,
    /// Halves between destination rows.
    pub destination_stride: u64,
}

// SAFETY: a `repr(C)` struct of six 64-bit fields, the layout of
// `struct commcheck_segment`.
unsafe impl DeviceRepr for Segment {}

/// Elements every all-reduce share but the last is a multiple of.
pub const SHARE_ALIGN: usize = 256;

/// Rank `rank`'s share `[begin, end)` of an all-reduce of `len` elements
/// over `ranks` ranks: shares are multiples of 256 elements (aligned
/// accesses, four floats per thread), the last one shorter or empty.
pub fn share(len: usize, ranks: usize, rank: usize) -> (u64, u64) {
    let share = len.div_ceil(ranks.max(1)).next_multiple_of(SHARE_ALIGN);
    let begin = rank.saturating_mul(share).min(len);
    let end = rank.saturating_add(1).saturating_mul(share).min(len);
    (begin as u64, end as u64)
}

/// A kernel launch with its arguments, one variant per kernel of
/// `kernels/commcheck.cu`, fields in the kernel's parameter order. Every
/// address is a live device (or mapped host) address its caller retains
/// until the stream's work has completed.
#[derive(Debug, Clone, Copy)]
pub enum Launch {
    /// `commcheck_all_reduce_sum`.
    AllReduceSum {
        /// Address of a [`RankAddresses`] (device or mapped host memory).
        ranks: u64,
        /// How many ranks.
        count: u32,
        /// First element of this rank's share.
        begin: u64,
        /// One past its last element.
        end: u64,
        /// The element type's kernel code (`Element::code`).
        element: u32,
    },
    /// `commcheck_copy_segments`.
    CopySegments {
        /// Address of a segment table: a `u64` count, then the [`Segment`]s.
        table: u64,
        /// Halves (16-bit units) in all segments, if known (sizes the grid;
        /// 0: the largest grid).
        elements: u64,
    },
    /// `commcheck_receive`.
    Receive {
        /// Address of a word holding the message's address.
        plan: u64,
        /// Where the value starts in the message.
        offset: u64,
        /// Header bytes at its front.
        header_len: u64,
        /// The expected header bytes.
        expected: u64,
        /// Where the payload goes.
        payload: u64,
        /// Payload halves (16-bit units: two per `f32`).
        len: u64,
    },
    /// `commcheck_frame`.
    Frame {
        /// The header bytes.
        header: u64,
        /// How many.
        header_len: u64,
        /// The payload.
        payload: u64,
        /// Payload halves (16-bit units: two per `f32`).
        len: u64,
        /// The message buffer.
        message: u64,
    },
    /// `commcheck_elementwise`.
    Elementwise {
        /// Left operand.
        a: u64,
        /// Right operand (unused when scaling).
        b: u64,
        /// Output.
        out: u64,
        /// Floats.
        len: u64,
        /// 0 add, 1 subtract, 2 multiply, 3 scale.
        op: u32,
        /// The scale factor.
        factor: f32,
    },
    /// `commcheck_matmul`.
    Matmul {
        /// Left operand, m×k.
        a: u64,
        /// Right operand, k×n.
        b: u64,
        /// Output, m×n.
        out: u64,
        /// Rows.
        m: u64,
        /// Inner extent.
        k: u64,
        /// Columns.
        n: u64,
    },
    /// `commcheck_spin`.
    Spin {
        /// Clock cycles to spin.
        cycles: u64,
    },
    /// `commcheck_fault`.
    Fault {
        /// The code to write.
        code: i32,
    },
}

impl Launch {
    /// The kernel's name in `kernels/commcheck.cu`.
    pub fn kernel(&self) -> &'static str {
        match self {
            Self::AllReduceSum { .. } => "commcheck_all_reduce_sum",
            Self::CopySegments { .. } => "commcheck_copy_segments",
            Self::Receive { .. } => "commcheck_receive",
            Self::Frame { .. } => "commcheck_frame",
            Self::Elementwise { .. } => "commcheck_elementwise",
            Self::Matmul { .. } => "commcheck_matmul",
            Self::Spin { .. } => "commcheck_spin",
            Self::Fault { .. } => "commcheck_fault",
        }
    }

    /// Elements the launch walks (sizes its grid).
    pub fn elements(&self) -> u64 {
        match *self {
            Self::AllReduceSum {
                begin,
                end,
                element: 0,
                ..
            } => end.saturating_sub(begin).div_ceil(4),
            Self::AllReduceSum { begin, end, .. } => end.saturating_sub(begin),
            Self::CopySegments { elements: 0, .. } => u64::MAX,
            Self::CopySegments { elements, .. } => elements,
            Self::Receive {
                len, header_len, ..
            } => len.max(header_len),
            Self::Frame {
                len, header_len, ..
            } => len.max(header_len),
            Self::Elementwise { len, .. } => len,
            Self::Matmul { m, n, .. } => m.saturating_mul(n),
            Self::Spin { .. } | Self::Fault { .. } => 1,
        }
    }
}

/// One kernel argument.
#[derive(Debug, Clone, Copy)]
enum Arg {
    U64(u64),
    U32(u32),
    I32(i32),
    F32(f32),
}

/// Launches `launch` (whose kernel is `function`) on `stream`, with the
/// cancel and error words appended where the kernel takes them. The caller
/// keeps every address live until the stream's work has completed.
pub fn launch(
    stream: &CudaStream,
    function: &CudaFunction,
    config: LaunchConfig,
    launch: Launch,
    cancel: u64,
    error: u64,
) -> Result<(), CudaError> {
    use Arg::{F32, I32, U32, U64};
    let args: Vec<Arg> = match launch {
        Launch::AllReduceSum {
            ranks,
            count,
            begin,
            end,
            element,
        } => vec![
            U64(ranks),
            U32(count),
            U64(begin),
            U64(end),
            U32(element),
            U64(cancel),
            U64(error),
        ],
        Launch::CopySegments { table, .. } => vec![U64(table), U64(cancel), U64(error)],
        Launch::Receive {
            plan,
            offset,
            header_len,
            expected,
            payload,
            len,
        } => vec![
            U64(plan),
            U64(offset),
            U64(header_len),
            U64(expected),
            U64(payload),
            U64(len),
            U64(cancel),
            U64(error),
        ],
        Launch::Frame {
            header,
            header_len,
            payload,
            len,
            message,
        } => vec![
            U64(header),
            U64(header_len),
            U64(payload),
            U64(len),
            U64(message),
            U64(cancel),
            U64(error),
        ],
        Launch::Elementwise {
            a,
            b,
            out,
            len,
            op,
            factor,
        } => vec![
            U64(a),
            U64(b),
            U64(out),
            U64(len),
            U32(op),
            F32(factor),
            U64(cancel),
            U64(error),
        ],
        Launch::Matmul { a, b, out, m, k, n } => vec![
            U64(a),
            U64(b),
            U64(out),
            U64(m),
            U64(k),
            U64(n),
            U64(cancel),
            U64(error),
        ],
        Launch::Spin { cycles } => vec![U64(cycles), U64(cancel), U64(error)],
        Launch::Fault { code } => vec![U64(error), I32(code)],
    };
    let mut builder = stream.launch_builder(function);
    for arg in &args {
        match arg {
            U64(value) => builder.arg(value),
            U32(value) => builder.arg(value),
            I32(value) => builder.arg(value),
            F32(value) => builder.arg(value),
        };
    }
    // SAFETY: `args` lists exactly the parameters of `launch.kernel()` in
    // `kernels/commcheck.cu`, in order and with their C types (pointers as
    // 64-bit addresses); `function` is that kernel (the device looks it up
    // by `Launch::kernel`); `args` outlives the launch call, which copies
    // the values; the addresses are live allocations the caller retains
    // until the work completes.
    unsafe { builder.launch(config) }
        .map(|_| ())
        .map_err(CudaError::driver("cuLaunchKernel"))
}

/// Turns off cudarc's event tracking for memory created from now on: this
/// crate orders streams itself (events, the retention registry), and
/// cudarc's tracking would make a drop wait for a gated stream.
pub fn disable_event_tracking(context: &cudarc::driver::CudaContext) {
    // SAFETY: the crate allocates through `DeviceMemory` only, never a
    // `CudaSlice`, and orders every cross-stream use with events itself.
    unsafe { context.disable_event_tracking() }
}

/// A CUDA event with any flag set (cudarc types the flags as one enum
/// value; completions need `BLOCKING_SYNC | DISABLE_TIMING`).
#[derive(Debug)]
pub struct Event {
    event: sys::CUevent,
    context: Arc<cudarc::driver::CudaContext>,
}

// SAFETY: an event handle may be used from any thread of its context.
unsafe impl Send for Event {}
// SAFETY: record, query and synchronize are thread-safe driver calls.
unsafe impl Sync for Event {}

impl Event {
    /// `BLOCKING_SYNC | DISABLE_TIMING`: a wait sleeps, a query is cheap.
    pub const COMPLETION: u32 = sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32
        | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    /// With timing (benchmarks).
    pub const TIMED: u32 = sys::CUevent_flags::CU_EVENT_DEFAULT as u32;

    /// Creates an event with `flags`.
    pub fn new(context: &Arc<cudarc::driver::CudaContext>, flags: u32) -> Result<Self, CudaError> {
        context
            .bind_to_thread()
            .map_err(CudaError::driver("cuCtxSetCurrent"))?;
        let mut event = std::ptr::null_mut();
        // SAFETY: `event` is a live local; the flags are the driver's bits.
        unsafe { sys::cuEventCreate(&mut event, flags) }
            .result()
            .map_err(CudaError::driver("cuEventCreate"))?;
        Ok(Self {
            event,
            context: Arc::clone(context),
        })
    }

    /// Records the event after everything enqueued on `stream` so far.
    pub fn record(&self, stream: &CudaStream) -> Result<(), CudaError> {
        self.bind()?;
        // SAFETY: both handles are live and of the same context.
        unsafe { sys::cuEventRecord(self.event, stream.cu_stream()) }
            .result()
            .map_err(CudaError::driver("cuEventRecord"))
    }

    /// Makes `stream` wait for the event's work (no host wait).
    pub fn make_wait(&self, stream: &CudaStream) -> Result<(), CudaError> {
        self.bind()?;
        // SAFETY: both handles are live and of the same context.
        unsafe { sys::cuStreamWaitEvent(stream.cu_stream(), self.event, 0) }
            .result()
            .map_err(CudaError::driver("cuStreamWaitEvent"))
    }

    /// Whether the recorded work completed (`cuEventQuery`: never blocks).
    pub fn query(&self) -> Result<bool, CudaError> {
        self.bind()?;
        // SAFETY: the handle is live.
        match unsafe { sys::cuEventQuery(self.event) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(CudaError::Driver {
                call: "cuEventQuery",
                source: DriverError(other),
            }),
        }
    }

    /// Waits for the recorded work (sleeps with `BLOCKING_SYNC`).
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.bind()?;
        // SAFETY: the handle is live.
        unsafe { sys::cuEventSynchronize(self.event) }
            .result()
            .map_err(CudaError::driver("cuEventSynchronize"))
    }

    /// Milliseconds from `start` to this event (both [`Event::TIMED`]).
    pub fn elapsed_since(&self, start: &Event) -> Result<f32, CudaError> {
        self.bind()?;
        let mut ms = 0f32;
        // SAFETY: both handles are live; `ms` is a live local.
        unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.event, self.event) }
            .result()
            .map_err(CudaError::driver("cuEventElapsedTime"))?;
        Ok(ms)
    }

    fn bind(&self) -> Result<(), CudaError> {
        self.context
            .bind_to_thread()
            .map_err(CudaError::driver("cuCtxSetCurrent"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.bind().is_ok() {
            // SAFETY: destroyed once; a recorded event may be destroyed
            // before its work completes (the driver releases it later).
            let _ = unsafe { sys::cuEventDestroy_v2(self.event) };
        }
    }
}

/// Keeps freed memory in the device's default pool (release threshold
/// `u64::MAX`) instead of returning it to the driver at synchronisations:
/// allocation after free is then cheap, and a kernel of a planted defect
/// that touches freed memory reads garbage instead of poisoning the
/// process's CUDA state with an illegal address.
pub fn keep_pool_memory(context: &cudarc::driver::CudaContext) -> Result<(), CudaError> {
    context
        .bind_to_thread()
        .map_err(CudaError::driver("cuCtxSetCurrent"))?;
    // SAFETY: the device handle comes from a live context.
    let pool = unsafe { result::device::get_default_mem_pool(context.cu_device()) }
        .map_err(CudaError::driver("cuDeviceGetDefaultMemPool"))?;
    let mut threshold = u64::MAX;
    // SAFETY: the pool is the device's default pool; the value is the u64
    // this attribute takes, live for the call.
    unsafe {
        result::mem_pool::set_attribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    }
    .map_err(CudaError::driver("cuMemPoolSetAttribute"))
}
