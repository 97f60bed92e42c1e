//! The CPU reference backend as a whole under shuttle's randomized and PCT
//! schedulers: executors (worker threads), the group rendezvous, routes,
//! the quarantine owner and the completion core, driven by sequences of the
//! kit's model operations.
//!
//! Loom exhausts the completion core (`loom-tests/`) but cannot explore the
//! whole backend. Shuttle explores it by sampling: every thread (the two
//! ranks and every executor's worker) is a coroutine shuttle schedules, and
//! every primitive the backend synchronises with is a scheduling point.
//! The backend gets shuttle's primitives through its `sync` facade under
//! `--cfg commcheck_shuttle` (`backends/cpu/src/sync.rs`; time is virtual
//! there, see its `rt` module). Everything here exists only under that cfg;
//! run it in release mode:
//!
//! ```sh
//! RUSTFLAGS="--cfg commcheck_shuttle" CARGO_TARGET_DIR=target/shuttle \
//!     cargo test -p commcheck-shuttle-tests --release -- --nocapture
//! ```
//!
//! - `world`: the workload, which is the kit's own sequence model. Sequences
//!   come from the kit's strategy (`commcheck::model::sequence_strategy`) and
//!   run through `commcheck::model::check_sequence_on`, the same model,
//!   checks and divergences as `commcheck::model::check_sequence`, on the
//!   kit's `Scheduler` implemented with shuttle's threads, condition
//!   variables and virtual clock (`world::Shuttle`): rank 0 runs the
//!   sequence, rank 1 is the late peer, and a divergence panics with the
//!   SPEC ID it violates. This crate keeps no model of its own: only that
//!   scheduler, the harness of the CPU backend on a device of choice
//!   (`harness`: a device, its group, its routes) and the driver below.
//! - `explore`: runs a workload under `RandomScheduler` or `PctScheduler`
//!   with fixed seeds (what `shuttle::check_random` and `shuttle::check_pct`
//!   do, with a seed), counts executions, scheduling decisions and distinct
//!   schedules, and turns a failing execution into a message that names a
//!   SPEC ID (a deadlock or livelock is blamed as the kit's watchdog blames
//!   a hang).
//!
//! `tests/backend.rs` runs the clean backend (it must pass), a device
//! with a planted lost wake-up in its executors
//! (`CpuDevice::with_planted_race`, which shuttle must find), and the kit's
//! planted defects the sequences reach (each must be found by its SPEC ID). `COMMCHECK_SHUTTLE_SEQUENCES`,
//! `COMMCHECK_SHUTTLE_ITERATIONS` and `COMMCHECK_SHUTTLE_SEED` deepen or vary
//! a run (nightly); a failure prints the sequence as a `vec![...]` literal,
//! the scheduler's seed and shuttle's schedule, which `shuttle::replay`
//! replays deterministically.
//!
//! `README.md` beside this crate tells a vendor how to run a backend of
//! their own under shuttle the same way.
#![cfg(commcheck_shuttle)]

pub mod explore;
pub mod harness;
pub mod world;
