//! The embedded PTX is what NVRTC 13.0 makes of `kernels/commcheck.cu`
//! (no GPU needed), and it defines every kernel the crate loads. Without
//! NVRTC the regeneration is ignored, saying why (never a pass);
//! `COMMCHECK_REQUIRE_NVRTC=1` (CI) makes that a failure, and
//! `COMMCHECK_BLESS=1` rewrites the embedded copy.

use commcheck_cuda::{compile_kernels, CudaError, ARCH, KERNELS, PTX, PTX_PATH};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

mod support;

fn env_flag(name: &str) -> Result<bool, Failed> {
    match std::env::var(name).as_deref() {
        Err(_) | Ok("") | Ok("0") => Ok(false),
        Ok("1") => Ok(true),
        Ok(other) => Err(format!("{name}={other:?}: expected 1 or 0").into()),
    }
}

fn regenerated() -> Result<Completion, Failed> {
    let ptx = match compile_kernels() {
        Ok(ptx) => ptx,
        Err(error @ CudaError::LibraryMissing { .. }) if !env_flag("COMMCHECK_REQUIRE_NVRTC")? => {
            return support::not_supported(&error.to_string())
        }
        Err(error) => return Err(error.to_string().into()),
    };
    if env_flag("COMMCHECK_BLESS")? {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PTX_PATH);
        std::fs::write(&path, &ptx).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(Completion::Completed);
    }
    if ptx != PTX {
        let line = ptx
            .lines()
            .zip(PTX.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "length".to_string(), |i| format!("line {}", i + 1));
        return Err(format!(
            "{PTX_PATH} differs from NVRTC's PTX of kernels/commcheck.cu (first at {line}): \
             rerun with COMMCHECK_BLESS=1 after changing the kernels"
        )
        .into());
    }
    Ok(Completion::Completed)
}

fn defines_every_kernel() -> Result<Completion, Failed> {
    let target = format!(".target sm_{}", ARCH.trim_start_matches("compute_"));
    if !PTX.lines().any(|line| line.trim() == target) {
        return Err(format!("{PTX_PATH} is not for {ARCH}: no `{target}` line").into());
    }
    for kernel in KERNELS {
        let entry = format!(".entry {kernel}(");
        if !PTX.contains(&entry) {
            return Err(format!("{PTX_PATH} has no `{entry}`").into());
        }
    }
    Ok(Completion::Completed)
}

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        // Listed ignored where NVRTC is missing and not required.
        Trial::ignorable_test("ptx::embedded_equals_nvrtc_output", regenerated).with_ignored_flag(
            commcheck_cuda::nvrtc().is_err()
                && !env_flag("COMMCHECK_REQUIRE_NVRTC").unwrap_or(true),
        ),
        Trial::ignorable_test("ptx::defines_every_kernel", defines_every_kernel),
    ];
    libtest_mimic::run(&args, trials).exit();
}
