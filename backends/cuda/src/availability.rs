//! Whether CUDA is here: the driver library, its version, a device, NVRTC.
//! Finding none of them is an answer ([`CudaError`]), never a panic: cudarc
//! panics when a missing library's symbol is first called, so nothing calls
//! it before the library was found.

use crate::error::{CudaError, CudaVersion, SettingError};
use crate::ffi;

/// The CUDA version whose driver API this crate calls (cudarc's
/// `cuda-13000`): driver 580 or later.
pub const DRIVER_NEEDED: CudaVersion = CudaVersion {
    major: 13,
    minor: 0,
};

/// The newest NVRTC whose PTX loads on [`DRIVER_NEEDED`]: the embedded PTX
/// is written by NVRTC 13.0 (PyPI `nvidia-cuda-nvrtc==13.0.*`).
pub const NVRTC_PINNED: CudaVersion = DRIVER_NEEDED;

/// `COMMCHECK_REQUIRE_CUDA`: with `1`, CUDA cases fail where CUDA is
/// missing instead of being not-supported.
pub const REQUIRE_CUDA: &str = "COMMCHECK_REQUIRE_CUDA";

/// The driver's CUDA version, or why there is no usable driver.
pub fn driver() -> Result<CudaVersion, CudaError> {
    if !ffi::driver_library_present() {
        return Err(CudaError::LibraryMissing {
            library: "libcuda (the NVIDIA driver)",
            searched: candidates("cuda"),
            hint: "it comes with the NVIDIA driver; a machine without an NVIDIA GPU has none",
        });
    }
    let found = CudaVersion::from_driver(
        ffi::driver_version().map_err(CudaError::driver("cuDriverGetVersion"))?,
    );
    if found < DRIVER_NEEDED {
        return Err(CudaError::DriverTooOld {
            found,
            needed: DRIVER_NEEDED,
        });
    }
    Ok(found)
}

/// NVRTC's version, or why it cannot compile the kernels.
pub fn nvrtc() -> Result<CudaVersion, CudaError> {
    if !ffi::nvrtc_library_present() {
        return Err(CudaError::LibraryMissing {
            library: "libnvrtc (NVRTC)",
            searched: candidates("nvrtc"),
            hint: "the PyPI wheel nvidia-cuda-nvrtc==13.0.* ships libnvrtc.so.13 in nvidia/cu13/lib: put that folder on LD_LIBRARY_PATH",
        });
    }
    let (major, minor) = ffi::nvrtc_version().map_err(|e| CudaError::Compile {
        name: "nvrtcVersion",
        log: e.to_string(),
    })?;
    let found = CudaVersion {
        major: major.max(0) as u32,
        minor: minor.max(0) as u32,
    };
    if found > NVRTC_PINNED {
        return Err(CudaError::NvrtcTooNew {
            nvrtc: found,
            driver: NVRTC_PINNED,
        });
    }
    Ok(found)
}

/// Whether `COMMCHECK_REQUIRE_CUDA` asks for CUDA (`1`) or not (unset,
/// empty or `0`); any other value is an error, never a silent default.
pub fn cuda_required() -> Result<bool, SettingError> {
    match std::env::var(REQUIRE_CUDA) {
        Err(std::env::VarError::NotPresent) => Ok(false),
        Ok(value) if value.is_empty() || value == "0" => Ok(false),
        Ok(value) if value == "1" => Ok(true),
        Ok(value) => Err(SettingError {
            name: REQUIRE_CUDA,
            value,
            expected: "1 (CUDA cases fail without a GPU) or 0/unset (they are not-supported)",
        }),
        Err(std::env::VarError::NotUnicode(value)) => Err(SettingError {
            name: REQUIRE_CUDA,
            value: value.to_string_lossy().into_owned(),
            expected: "1 or 0",
        }),
    }
}

/// cudarc's file names for `library`, in its order, each once.
fn candidates(library: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    cudarc::get_lib_name_candidates(library)
        .into_iter()
        .filter(|name| seen.insert(name.clone()))
        .collect()
}
