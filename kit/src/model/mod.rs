//! Model-based sequence tests: random sequences of operations on one
//! backend, each step compared with a reference model of what every
//! submission's completion and resources must be.
//!
//! A sequence runs in a fresh world of two ranks (or up to four:
//! [`check_sequence_sized`], every rank but 0 a late peer). Rank 0 executes the
//! [`Op`]s; rank 1 is the *late peer* of the completion matrix: it joins a
//! collective round only when the sequence releases it ([`Op::Release`]),
//! so collective work is kept pending with no instrument at all, while local
//! work is kept pending with the hold instrument. Submissions are the
//! completion matrix's standard ones (inputs dropped at once, outputs kept
//! until [`Op::DropOutputs`]).
//!
//! After every step, [`check_sequence`] compares the backend with the model:
//! the operation's own result (`is_complete`, `wait`, `wait_bounded`, ...),
//! then every submission through the instruments the harness provides
//! (liveness probes, drop flags of `retain_until_complete`, the observer).
//! The first disagreement is returned as a [`Divergence`] naming the step and
//! the SPEC ID it violates. Operations the model cannot follow in the current
//! state (a `wait` on work that would never finish, say) are skipped. A
//! harness without an instrument gets fewer checks, never a false alarm:
//! only what was observed is compared, and [`Stats::instruments`] says which
//! instrument-based checks ran. The last step drains the
//! world: every hold and round is released, every handle dropped, and every
//! resource must then be released (RET-6, RET-7).
//!
//! Invariants exercised: RET-1..RET-8, EXC-2..EXC-10, CAN-1..CAN-9
//! (CAN-2's lower bound only: no speed is asserted), SUB-1..SUB-4 (RET-2,
//! EXC-10, SUB-2 and SUB-4 through the operations of input format 2:
//! [`Op::DropLane`], [`Op::EmptyLocal`], [`Op::SubmitLazy`],
//! [`Op::Refused`], and the one-operation shapes [`Op::DropQueued`] and
//! [`Op::OrderedPair`], `extra.rs`), and every
//! operation invariant of the claimed operations: their value semantics
//! (SUM-1, GAT-1, ...) on the standard submissions, and on parameterised
//! ones ([`Work::UnevenGather`], [`Work::AllToAll`], [`Work::Broadcast`],
//! [`Work::Agree`], [`Work::SendReceive`]): uneven and zero counts whose
//! extents differ from element counts (GAT-2, A2A-1), every broadcast root
//! and an out-of-range one (BRD-1, BRD-2), per-rank agreement votes (AGR-1),
//! bundles whose headers match or differ (P2P-1, P2P-2) and the sender's
//! wire log (P2P-3). After every step, `resources_releasable()` is read on
//! every submission whose answer the model knows (on its completion, else on
//! a second handle, [`crate::Harness::second_handle`], or the observer's
//! reading after `wait_bounded` consumed it): `true` while the work is live
//! is EXC-8 (after a timeout, a cancellation request or an error alike), a
//! value of `retain_until_complete` dropped inside the call is EXC-8, and
//! `false` after success is EXC-9. A collective refused after a bounded
//! wait on local dependencies alone left work unfinished is RET-8.
//!
//! # Schedulers
//! The model (the reference state, the per-step expectations and checks,
//! the late peer's protocol) never spawns, sleeps, reads a clock or blocks
//! by itself: it does all of that through a [`Scheduler`]. [`check_sequence`]
//! runs it in the kit's std world ([`StdThreads`]: `std` threads under the
//! kit's watchdog); [`check_sequence_on`] runs the same model on any other
//! scheduler, such as shuttle's randomized and PCT schedulers with a virtual
//! clock (`shuttle-tests/` explores the CPU backend that way).
//!
//! Files, one concern each: the operations ([`Op`], `op.rs`) and their
//! strategies (`strategy.rs`); the reference model (`reference.rs`); the
//! step executor (`runner.rs`) and the operations with their checks, by
//! invariant family (`submit.rs`, `complete.rs`: EXC, `bounded.rs`: CAN,
//! `handles.rs`: RET-4, RET-6, SUB), the checks after every step
//! (`observe.rs`) and the final drain (`drain.rs`: RET-6, RET-7); which SPEC
//! ID a divergence names (`blame.rs`); what rank 0 keeps of each submission
//! (`live.rs`); the late peer (`peer.rs`) and the plan the ranks share
//! (`plan.rs`); rank 0's script (`subject.rs`); the scheduler
//! (`scheduler.rs`); and the two drivers (`std_world.rs`, `scheduled.rs`).
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use commcheck::model::{check_sequence, Mode, Op, Timeout, Work};
//!
//! /// A collective, quarantined at its deadline while its peer is late,
//! /// then released: its resources must survive until it really completes.
//! fn quarantine_then_release<H: commcheck::Harness>(harness: H) {
//!     let ops = vec![
//!         Op::Submit { work: Work::Operation(0), lane: 0, fault: false },
//!         Op::WaitBounded { sub: 0, timeout: Timeout::Short, mode: Mode::Quarantine },
//!         Op::Release { sub: 0 },
//!     ];
//!     match check_sequence(Arc::new(harness), &ops) {
//!         Ok(stats) => println!("{} operations executed", stats.executed),
//!         Err(divergence) => panic!("{divergence}"),
//!     }
//! }
//! ```
//! `cargo test --test sequences` runs this kind of check against the CPU
//! reference backend, as a property test over [`sequence_strategy`].
//!
//! # Property tests and fuzzing
//! [`sequence_strategy`] generates sequences for `proptest` (shrinking
//! removes operations and lowers indices; `Display` on [`Sequence`] prints a
//! `vec![...]` literal to replay). For cargo-fuzz, [`crate::fuzz`] decodes
//! sequences from fuzzer bytes with a versioned format (a stored input
//! decodes the same way forever) and runs them: a vendor's target is
//! `fuzz_target!(|data: &[u8]| commcheck::fuzz::run(&MyHarness::new(), data));`.
//! [`Sequence`] and [`Op`] also implement `arbitrary::Arbitrary` (derived:
//! its encoding may change with `arbitrary` releases, so stored inputs use
//! [`crate::fuzz`]), and [`Sequence::from_bytes`] caps the length.

mod blame;
mod bounded;
mod complete;
mod drain;
mod extra;
mod handles;
mod live;
mod observe;
mod op;
mod outcome;
mod peer;
mod plan;
mod reference;
mod runner;
mod scheduled;
mod scheduler;
mod std_world;
mod strategy;
mod subject;
mod submit;
pub(crate) mod variant;

pub use op::{Header, Mode, Op, Sequence, Timeout, Work};
pub use outcome::{Divergence, Options, Stats};
pub use scheduled::check_sequence_on;
pub use scheduler::{Event, Join, Progress, Scheduler, StdThreads};
pub use std_world::{check_sequence, check_sequence_sized, check_sequence_with};
pub use strategy::{op_strategy, sequence_strategy, work_strategy};

pub(crate) use peer::teardown_mode;
pub(crate) use scheduler::lock;
