//! Context-wide settings made once when a device is opened: cudarc's
//! event tracking off, and freed memory kept in the device's default pool.

use crate::error::CudaError;
use cudarc::driver::{result, sys};

/// Turns off cudarc's event tracking for memory created from now on: this
/// crate orders streams itself (events, the retention registry), and
/// cudarc's tracking would make a drop wait for a gated stream.
pub fn disable_event_tracking(context: &cudarc::driver::CudaContext) {
    // SAFETY: the crate allocates through `DeviceMemory` only, never a
    // `CudaSlice`, and orders every cross-stream use with events itself.
    unsafe { context.disable_event_tracking() }
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
