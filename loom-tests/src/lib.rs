//! Loom models of the CPU reference backend's completion state machine.
//!
//! The models live in `tests/` and exist only under `--cfg commcheck_loom`;
//! run them in release mode:
//!
//! ```sh
//! RUSTFLAGS="--cfg commcheck_loom" cargo test -p commcheck-loom-tests --release
//! ```
