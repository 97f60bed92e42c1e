//! Errors of the CUDA backend, each saying what was expected and what
//! happened.

use cudarc::driver::DriverError;
use std::fmt;
use std::time::Duration;

/// A CUDA version as the driver and NVRTC report it (`13000` is 13.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CudaVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl CudaVersion {
    /// The version the driver API reports as one number (`13000` is 13.0).
    pub fn from_driver(number: i32) -> Self {
        let number = number.max(0) as u32;
        Self {
            major: number / 1000,
            minor: (number % 1000) / 10,
        }
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Everything that can go wrong between this crate and CUDA, and every
/// failure its operations report (the backend's `CommunicationError`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CudaError {
    /// A shared library could not be loaded under any of the names searched.
    #[error("{library} could not be loaded: searched {searched:?} on the loader's path ({hint})")]
    LibraryMissing {
        /// `libcuda` (the driver) or `libnvrtc`.
        library: &'static str,
        /// Every file name tried.
        searched: Vec<String>,
        /// Where it usually comes from.
        hint: &'static str,
    },
    /// The driver is older than the CUDA API this crate was built against.
    #[error("the CUDA driver supports CUDA {found}; commcheck-cuda calls the CUDA {needed} driver API (driver 580 or later)")]
    DriverTooOld {
        /// What the driver reports.
        found: CudaVersion,
        /// What this crate needs.
        needed: CudaVersion,
    },
    /// NVRTC is newer than the driver: its PTX would not load.
    #[error("NVRTC {nvrtc} is newer than the driver's CUDA {driver}: PTX it writes would not load (use NVRTC {driver} or older)")]
    NvrtcTooNew {
        /// NVRTC's version.
        nvrtc: CudaVersion,
        /// The driver's CUDA version.
        driver: CudaVersion,
    },
    /// The driver loaded but reports no device.
    #[error("the CUDA driver {driver} found no device")]
    NoDevice {
        /// The driver's CUDA version.
        driver: CudaVersion,
    },
    /// A driver call failed.
    #[error("{call} failed: {source}")]
    Driver {
        /// The driver call or the step that made it.
        call: &'static str,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// NVRTC could not compile the kernels.
    #[error("NVRTC could not compile {name}: {log}")]
    Compile {
        /// The source file.
        name: &'static str,
        /// NVRTC's log.
        log: String,
    },
    /// A world of more stream-ranks than a kernel can address.
    #[error(
        "a world of {requested} stream-ranks was asked for; the kernels address at most {max}"
    )]
    TooManyRanks {
        /// The size asked for.
        requested: usize,
        /// The largest size.
        max: usize,
    },
    /// An allocation larger than the device's free memory.
    #[error("an allocation of {requested} bytes was asked for; the device has {free} bytes free of {total}")]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Free bytes.
        free: usize,
        /// Total bytes.
        total: usize,
    },
    /// Work did not finish in time.
    #[error("{what} did not finish within {after:?}")]
    TimedOut {
        /// What was waited for.
        what: &'static str,
        /// How long.
        after: Duration,
    },
    /// Work failed on the device: its error word says why.
    #[error("{operation} failed on the device: {meaning} (error word {code})")]
    Device {
        /// The operation.
        operation: &'static str,
        /// The code its kernels wrote.
        code: i32,
        /// What the code means.
        meaning: &'static str,
    },
    /// An argument the operation cannot take (bad input): what it expected
    /// and what it got.
    #[error("{operation}: invalid argument: expected {expected}, got {got}")]
    Invalid {
        /// The operation.
        operation: &'static str,
        /// What it takes.
        expected: String,
        /// What it was given.
        got: String,
    },
    /// Members of one collective disagree (shapes, counts, roots).
    #[error("{operation}: members disagree: {message}")]
    Mismatch {
        /// The operation.
        operation: &'static str,
        /// Which member, and how.
        message: String,
    },
    /// The work was cancelled (a `NativeCancel` deadline, its own or a
    /// peer's).
    #[error("{operation} was cancelled: {reason}")]
    Cancelled {
        /// The operation.
        operation: &'static str,
        /// Whose deadline.
        reason: String,
    },
    /// The fault instrument failed the work.
    #[error("{operation} failed: injected fault (the fault instrument)")]
    InjectedFault {
        /// The operation.
        operation: &'static str,
    },
    /// The fault instrument refused the submission.
    #[error("{operation} was refused: injected submission failure (the fault instrument)")]
    SubmissionRefused {
        /// The operation.
        operation: &'static str,
    },
    /// Every pooled stream is in use (the pool never exceeds the device's
    /// hardware queues, so that a held stream never holds another).
    #[error("{operation}: all {streams} streams of the device are in use (CUDA_DEVICE_MAX_CONNECTIONS={connections}); drop executors or raise it (at most 32)")]
    StreamsExhausted {
        /// The operation.
        operation: &'static str,
        /// The pool's size.
        streams: usize,
        /// The hardware queues the pool is sized for.
        connections: usize,
    },
    /// Something this backend deliberately does not provide.
    #[error("{operation} is not provided by the CUDA reference backend")]
    NotProvided {
        /// The operation.
        operation: &'static str,
    },
}

impl CudaError {
    /// Wraps a driver error with the call that returned it.
    pub fn driver(call: &'static str) -> impl FnOnce(DriverError) -> Self {
        move |source| Self::Driver { call, source }
    }
}

/// A setting (environment variable) with a value it does not take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{name}={value:?} is not a valid setting: expected {expected}")]
pub struct SettingError {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// What it takes.
    pub expected: &'static str,
}
