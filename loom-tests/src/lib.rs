//! Loom models of the CPU reference backend's completion state machine
//! (`backends/cpu/src/core.rs`).
//!
//! The models live in `tests/core/` (one test binary, `core`: the
//! exploration in `explore.rs`, the mirrors in `mirrors.rs`, the models by
//! what they race in `waiting.rs`, `deadlines.rs` and `retention.rs`) and
//! exist only under `--cfg commcheck_loom`; CI runs them with the workspace's
//! `loom` profile (`.ci/run`), which optimises loom, its coroutines, the CPU
//! backend and these models as release does, and builds the rest of the
//! backend's dependencies as dev does (compiled, not explored):
//!
//! ```sh
//! RUSTFLAGS="--cfg commcheck_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p commcheck-loom-tests --profile loom
//! ```
//!
//! # What a run checks
//! Every model runs twice:
//!
//! - on the shipped core, where loom must find no failing interleaving
//!   (test `<model>`);
//! - with a *mutant* planted (test `mutant_<model>_<mutant>`), where loom
//!   must find a failing interleaving and the failure must name the SPEC
//!   invariant the mutant breaks. A mutant loom does not catch, or one
//!   caught for another invariant, fails the test.
//!
//! Assertion messages name the invariant (`"CAN-5 violated: ..."`). Loom
//! reports a deadlock (every thread blocked) in its own words; the suite
//! reports it as a violation of the model's liveness invariant (every
//! blocking call of a model is expected to return: `wait()` for EXC-4,
//! `wait_bounded` for CAN-2, ...), with loom's message appended.
//!
//! Each test prints one line on stderr (outside libtest's capture), counted
//! with a `std` atomic at the start of each execution of the model closure:
//!
//! ```text
//! loom <model>: N interleavings (preemption bound B)
//! loom <model> with Core(<Mutant>): caught in interleaving N (preemption bound B): <ID> violated: ...
//! ```
//!
//! # Models
//!
//! | Model | Race | SPEC | Mutant (breaks) |
//! |---|---|---|---|
//! | `waiters_are_woken_by_every_change` | `wait()` and a bounded wait for the release vs start, finish, release | EXC-4, EXC-5, CAN-5 | `StaleWaitCheck`: `wait_for` checks and blocks under two lock acquisitions, a lost wake-up (EXC-4) |
//! | `observers_race_completion` | `is_complete` / `resources_releasable` vs the worker and a NativeCancel request | EXC-2, EXC-3, EXC-8 | `CancelCheckThenAct`: `request_cancel` tears down work that started after it read the phase (EXC-8) |
//! | `last_handle_races_completion` | the user drops its completion while the executor, holding its own handle, runs the work | RET-4, RET-7 | the backend's `Defect::DropReleasesPending`, replayed on the core (RET-4) |
//! | `finish_races_cancel` | `wait_bounded(NativeCancel)` whose deadline fires vs completion | CAN-1, CAN-3, CAN-5, RET-7 | `StartCheckThenAct`: `start` runs work torn down after it checked the phase (CAN-5) |
//! | `quarantine_races_completion` | `wait_bounded(QuarantineUntilComplete)` whose deadline fires vs completion | CAN-1, CAN-3, CAN-6, RET-7 | `QuarantineReleases`: the hand-off releases the retained values (CAN-6); `QuarantineCancels`: the hand-off also requests cancellation (CAN-3) |
//! | `published_errors_stay` | an error published while the work is live vs two observers | EXC-6, EXC-7 | `ReportErrorOnce`: `observe` takes the error out of the state (EXC-6) |
//! | `retain_races_finish` | `retain_until_complete` vs start and finish | RET-6 | `RetainRejectsRunning`: `retain` hands the value back once the work started (RET-6) |
//! | `completed_at_birth` | work complete at submission vs retain, cancel and waits | EXC-10, EXC-5, RET-6 | `BornUnreleased`: `Core::completed` is born unreleased, so the wait for the release never returns (EXC-10) |
//!
//! The deadline race: the first disposition wins. `Completed` is reported
//! only for work that succeeded; `DeadlineExceeded` reports the policy's
//! mode, and the core recorded that disposition and no other (NativeCancel:
//! cancellation requested, teardown finished, terminal, released, and the
//! work never changes state afterwards; quarantine: quarantined, no
//! cancellation requested, and the work runs to completion).
//!
//! The core mutants are variants of `commcheck_cpu::loom_core::Mutant`,
//! compiled only under `--cfg commcheck_loom` and planted per core with
//! `Core::with_mutant`; a normal build of the backend has neither the type
//! nor the field, and runs the same code as before.
//!
//! # Preemption bounds and deeper runs
//! The default run bounds loom's preemptions per model
//! (`Builder::preemption_bound`): 4 for the models with three threads, 5 for those
//! with two. All 18 tests then take a few seconds (about 3 s of test time on
//! two shared cores), well inside CI's budget, and every mutant is caught.
//!
//! - `LOOM_MAX_PREEMPTIONS=N` (read by loom itself) sets the bound of every
//!   model;
//! - `COMMCHECK_LOOM_DEEP=1` (unless `LOOM_MAX_PREEMPTIONS` is set) lifts
//!   the bound: loom explores every interleaving. About 8½ minutes on two
//!   shared cores (the largest models, `waiters_are_woken_by_every_change`,
//!   `observers_race_completion` and `published_errors_stay`, explore 2.8,
//!   1.0 and 0.5 million interleavings), for a nightly job:
//!
//! ```sh
//! COMMCHECK_LOOM_DEEP=1 RUSTFLAGS="--cfg commcheck_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p commcheck-loom-tests --profile loom
//! ```
//!
//! Loom's other variables (`LOOM_MAX_BRANCHES`, `LOOM_MAX_DURATION`,
//! `LOOM_MAX_PERMUTATIONS`, `LOOM_LOG`, ...) apply as usual; a duration or
//! permutation limit ends a run early and the count says how far it got.
//!
//! # What is not modelled
//! Loom explores the core alone: only `core.rs` runs on loom's primitives.
//! The completion's and the executor's side of each race is *re-stated* in
//! `tests/core/mirrors.rs` over the core's public operations, without planted
//! defects, and is not the backend's code:
//!
//! - `CpuCompletion::{is_complete, resources_releasable, wait,
//!   wait_bounded}` and its disposition (`dispose`), `CpuDevice::{finish,
//!   torn_down, quarantine}` and the executor's running of an item are
//!   mirrors; a change to those files is not seen by loom until the mirror
//!   follows it;
//! - handle drop is not in `core.rs`: the model drops the handles (the
//!   user's and the executor's `Arc<Core>`) and replays `CpuCompletion`'s
//!   `Drop`, which goes through the core only under the planted RET-4 defect;
//!   that replay is the model's mutant;
//! - the quarantine owner is a list of handles purged once after the work
//!   completed (`CpuDevice::ledger`'s purge); purges racing the hand-off,
//!   and the quarantine-owner code itself, are not modelled;
//! - deadlines: the deadline has passed when the bounded wait first looks at
//!   the state, so where it fires is where loom schedules the waiting thread.
//!   Loom's `Condvar::wait_timeout` never times out and loom has no clock, so
//!   elapsed time (CAN-2's bound, CAN-8's edge deadlines) is not modelled,
//!   nor is the polling fast path of `Core::wait_for` (compiled out under
//!   loom);
//! - loom never preempts inside the core's critical sections (they contain
//!   no loom operation), so `try_observe` always gets the lock: the
//!   contended answer of `resources_releasable` (`false`) is not explored;
//! - the other planted defects (`commcheck_cpu::Defect`), lazy launch,
//!   fenced groups (RET-8), groups, routes, executor queues and holds, and
//!   the resource ledger are out of scope here (the kit's suites exercise
//!   them on the whole backend).
