//! Certifies the CUDA reference backend with no instruments, as a vendor
//! without any would: `cargo test --features cuda --test
//! certify_cuda_black_box`. The backend is eager and asynchronous (kernels
//! are enqueued at submission on streams), the design the kit's black-box
//! rules must serve: pending work comes from late peers, errors from the
//! public API. Without a usable GPU every case is not-supported with the
//! reason (`COMMCHECK_REQUIRE_CUDA=1` makes them fail).

fn main() {
    commcheck::main(
        commcheck_reference::cuda::CudaHarness::new()
            .with_instruments(commcheck::Instruments::NONE),
    )
}
