//! Certifies the CUDA reference backend: `cargo test --features cuda`. One
//! named test per (invariant, subject) pair, as for the CPU backend; without
//! a usable GPU every case is not-supported with the reason
//! (`COMMCHECK_REQUIRE_CUDA=1` makes them fail).

fn main() {
    commcheck::main(commcheck_reference::cuda::CudaHarness::new())
}
