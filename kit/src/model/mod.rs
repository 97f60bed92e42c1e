//! Model-based sequence tests: random sequences of operations on one
//! backend, each step compared with a reference model of what every
//! submission's completion and resources must be.
//!
//! A sequence runs in a fresh world of two ranks. Rank 0 executes the
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
//! Invariants exercised: RET-1, RET-3..RET-8, EXC-2..EXC-9, CAN-1..CAN-9
//! (CAN-2's lower bound only: no speed is asserted), SUB-1..SUB-3, and every
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

mod op;
mod peer;
mod reference;
mod runner;
mod strategy;
pub(crate) mod variant;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use op::{Header, Mode, Op, Sequence, Timeout, Work};
pub(crate) use peer::teardown_mode;
pub use strategy::{op_strategy, sequence_strategy, work_strategy};

use crate::harness::{Harness, Instruments};
use crate::world::{run_world, RankCtx, Script, WorldEnd};
use runner::{Breach, Runner};

/// How [`check_sequence_with`] runs a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Watchdog of the whole sequence: a hang (a `wait` that never returns)
    /// becomes a divergence at the step that hung.
    pub limit: Duration,
    /// Pause after each submission and release, giving work time to start
    /// (and wrongly complete, or publish an injected fault) before the next
    /// observation. Zero (the default) keeps the hot path free of sleeps: the
    /// per-step checks still catch whatever happened by then, and long random
    /// runs catch the rest; a small value (1 ms) makes timing-window defects
    /// show deterministically, which keeps their shrinking stable.
    pub settle: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            limit: Duration::from_secs(30),
            settle: Duration::ZERO,
        }
    }
}

/// What a sequence that matched the model did, and what it could check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Operations that acted on the backend.
    pub executed: usize,
    /// Operations the model could not follow in their state, skipped.
    pub skipped: usize,
    /// Submissions made.
    pub submissions: usize,
    /// The instruments the harness provided. Checks that need a missing one
    /// (probes: retention; observer: work state; ledger: the final drain;
    /// hold: pending local work; fault: error paths) did not run, so an `Ok`
    /// vouches only for what these allowed to be observed.
    pub instruments: Instruments,
}

/// The first disagreement between the backend and the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the step in the sequence; the sequence's length for the
    /// final drain.
    pub step: usize,
    /// The operation of that step (`None` for the final drain or the world).
    pub op: Option<Op>,
    /// The SPEC ID violated; `None` when the harness (not the backend)
    /// failed, or a hang or crash could not be attributed.
    pub id: Option<&'static str>,
    /// What was expected and what happened.
    pub message: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.op {
            Some(op) => write!(f, "step {} ({op}): ", self.step)?,
            None => write!(f, "step {} (final drain): ", self.step)?,
        }
        match self.id {
            Some(id) => write!(f, "{id}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for Divergence {}

/// Where rank 0 is, for the watchdog's report.
#[derive(Debug, Default)]
struct Progress {
    step: usize,
    op: Option<Op>,
    hint: Option<&'static str>,
}

/// What rank 0 leaves for the caller.
#[derive(Default)]
struct Shared {
    progress: Progress,
    outcome: Option<Result<Stats, Divergence>>,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Runs `ops` against `harness` with default [`Options`]; the first
/// divergence from the reference model, or what the sequence did.
pub fn check_sequence<H: Harness>(harness: Arc<H>, ops: &[Op]) -> Result<Stats, Divergence> {
    check_sequence_with(harness, ops, Options::default())
}

/// Runs `ops` against `harness` in a fresh two-rank world under a watchdog
/// and compares the backend with the reference model after every step.
pub fn check_sequence_with<H: Harness>(
    harness: Arc<H>,
    ops: &[Op],
    options: Options,
) -> Result<Stats, Divergence> {
    let ops: Arc<[Op]> = ops.into();
    let shared = Arc::new(Mutex::new(Shared::default()));
    let plan = Arc::new(peer::Plan::default());
    let script: Script<H> = {
        let (ops, shared) = (Arc::clone(&ops), Arc::clone(&shared));
        Arc::new(move |ctx: &RankCtx<'_, H>| {
            if ctx.rank() == 0 {
                let outcome = subject(ctx, &ops, options, &shared, Arc::clone(&plan));
                lock(&shared).outcome = Some(outcome);
                Ok(())
            } else {
                peer::late_peer(ctx, &plan)
            }
        })
    };
    let end = run_world(harness, 2, 0, options.limit, script, &Default::default());
    let mut shared = lock(&shared);
    let Progress { step, op, hint } = std::mem::take(&mut shared.progress);
    let world_failure = |id, message| Divergence {
        step,
        op,
        id,
        message,
    };
    match end {
        WorldEnd::Finished(checks) => match shared.outcome.take() {
            Some(Err(divergence)) => Err(divergence),
            Some(Ok(stats)) => match checks.into_iter().find_map(Result::err) {
                None => Ok(stats),
                Some(finding) => Err(world_failure(None, format!("world: {finding:?}"))),
            },
            None => Err(world_failure(
                None,
                format!("rank 0 never ran the sequence: {:?}", checks),
            )),
        },
        WorldEnd::Crashed { rank, message } => {
            Err(world_failure(hint, format!("rank {rank} {message}")))
        }
        WorldEnd::TimedOut { ranks, stacks } => Err(world_failure(
            hint,
            format!(
                "rank(s) {ranks:?} did not return, and nothing moved for {:?} (hang){}",
                options.limit,
                crate::world::where_they_were(&ranks, &stacks)
            ),
        )),
        WorldEnd::Overran { ranks, ran, .. } => Err(world_failure(
            hint,
            format!("rank(s) {ranks:?} still running after {ran:?}, though not hung: too slow here to check"),
        )),
        WorldEnd::Blocked {
            rank,
            what,
            invariant,
            limit,
        } => Err(Divergence {
            step,
            op,
            id: crate::spec::invariant(&invariant).map(|known| known.id),
            message: format!("{what} on rank {rank} had not returned after {limit:?}"),
        }),
    }
}

/// Raises the peer's `DONE` signal however rank 0 leaves (even unwinding).
struct Done<'c, 'w, H: Harness>(&'c RankCtx<'w, H>);

impl<H: Harness> Drop for Done<'_, '_, H> {
    fn drop(&mut self) {
        self.0.signal(peer::DONE);
    }
}

/// Rank 0: every step, then the final drain.
fn subject<H: Harness>(
    ctx: &RankCtx<'_, H>,
    ops: &[Op],
    options: Options,
    shared: &Mutex<Shared>,
    plan: Arc<peer::Plan>,
) -> Result<Stats, Divergence> {
    let _done = Done(ctx);
    let mut runner = Runner::new(ctx, options, plan);
    let diverged = |runner: &mut Runner<'_, '_, H>, step, op, breach: Breach| {
        runner.abandon();
        Err(Divergence {
            step,
            op,
            id: breach.id,
            message: breach.message,
        })
    };
    for (step, &op) in ops.iter().enumerate() {
        lock(shared).progress = Progress {
            step,
            op: Some(op),
            hint: Runner::<H>::hang_hint(op),
        };
        if let Err(breach) = runner.step(op) {
            return diverged(&mut runner, step, Some(op), breach);
        }
    }
    lock(shared).progress = Progress {
        step: ops.len(),
        op: None,
        hint: Some("EXC-4"),
    };
    match runner.drain() {
        Ok(()) => Ok(runner.stats),
        Err(breach) => diverged(&mut runner, ops.len(), None, breach),
    }
}
