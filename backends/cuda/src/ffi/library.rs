//! Whether the CUDA libraries load, and their versions: the first calls
//! the backend makes, before any context exists (`crate::availability`
//! turns them into the errors a machine without CUDA gets).

use cudarc::driver::{sys, DriverError};

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
