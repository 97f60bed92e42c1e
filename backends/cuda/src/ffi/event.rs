//! CUDA events with any flags (completions need `BLOCKING_SYNC |
//! DISABLE_TIMING`, which cudarc's event type cannot express): record,
//! stream waits, queries, host waits and timing.

use crate::error::CudaError;
use cudarc::driver::{sys, CudaStream, DriverError};
use std::sync::Arc;

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
