//! Certifies the bundled reference backends: one named test per
//! (invariant, subject) pair. `cargo test` runs it for the CPU backend.

fn main() {
    commcheck::main(commcheck_reference::cpu::CpuHarness::new())
}
