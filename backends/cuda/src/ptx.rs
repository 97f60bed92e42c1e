//! The kernels: CUDA C in `kernels/commcheck.cu`, compiled ahead of time by
//! NVRTC 13.0 for `compute_75` and embedded as PTX (the driver JIT-compiles
//! it for the device at load). `tests/ptx.rs` regenerates the PTX and checks
//! it equals the embedded copy; `COMMCHECK_BLESS=1` rewrites it.

use crate::availability;
use crate::error::CudaError;

/// The kernels' CUDA C source.
pub const SOURCE: &str = include_str!("../kernels/commcheck.cu");

/// The embedded PTX, written by [`compile`].
pub const PTX: &str = include_str!("../kernels/commcheck.ptx");

/// The virtual architecture of the PTX (Turing; the oldest CUDA 13 supports).
pub const ARCH: &str = "compute_75";

/// Where the embedded PTX lives, relative to the crate.
pub const PTX_PATH: &str = "kernels/commcheck.ptx";

/// Every kernel in [`SOURCE`], by name.
pub const KERNELS: [&str; 9] = [
    "commcheck_all_reduce_sum",
    "commcheck_copy_segments",
    "commcheck_receive",
    "commcheck_frame",
    "commcheck_elementwise",
    "commcheck_matmul",
    "commcheck_spin",
    "commcheck_fault",
    "commcheck_trap",
];

/// Compiles [`SOURCE`] with NVRTC (no GPU needed), as the embedded PTX was.
pub fn compile() -> Result<String, CudaError> {
    availability::nvrtc()?;
    let options = cudarc::nvrtc::CompileOptions {
        arch: Some(ARCH),
        name: Some("commcheck.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(SOURCE, options)
        .map(|ptx| ptx.to_src())
        .map_err(|e| CudaError::Compile {
            name: "kernels/commcheck.cu",
            log: e.to_string(),
        })
}
