//! Certifies `eredu-backend-mlx` in one process: worlds of one rank on MLX's
//! singleton group (MLX keeps one group per process; see
//! `certify_processes.rs` for worlds across the processes of `mpirun`).

use commcheck_mlx::MlxHarness;

fn main() {
    commcheck::main(MlxHarness::new())
}
