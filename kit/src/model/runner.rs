//! Rank 0's step executor: runs each operation of a sequence against the
//! backend, keeps the reference model in step, and compares the two after
//! every step.
//!
//! Each operation's own result (`is_complete`, `wait`, `wait_bounded`, ...)
//! is compared with the model as it is made; the operations live beside
//! their checks, one family per file: submitting and releasing
//! ([`super::submit`]), completion through the API (`super::complete`:
//! EXC-2..EXC-6), bounded waits (`super::bounded`: CAN-1..CAN-9), handles,
//! lanes, ordering and retention (`super::handles`: RET-4, RET-6, SUB-1,
//! SUB-3). After every step, every submission is then observed through the
//! instruments the harness provides (`super::observe`), and the sequence
//! ends with the final drain (`super::drain`: RET-6, RET-7). Here: which
//! submission an operation acts on, and whether the model can follow it.

use std::borrow::Borrow;
use std::sync::Arc;
use std::time::Duration;

use eredu_core::BoundedCompletion;

use super::blame::Breach;
use super::live::{Live, Releasing};
use super::op::{Mode, Op};
use super::outcome::{Options, Stats};
use super::plan::Plan;
use super::reference::{Model, Status};
use super::scheduler::Scheduler;
use crate::harness::{
    CommCompletion, Executor, Harness, Instruments, Observer, OwnedExecutor, WorkState,
};
use crate::matrix::{Driver, Handle};
use crate::world::RankCtx;

/// At most this many lanes (the rank's executor and its forks).
pub(super) const MAX_LANES: usize = 4;

/// Rank 0's state while running one sequence.
pub(crate) struct Runner<'c, 'w, H: Harness> {
    pub(super) ctx: &'c RankCtx<'w, H>,
    /// How time passes and what rank 0 blocks on.
    pub(super) scheduler: Arc<dyn Scheduler>,
    /// Which thread is inside a `resources_releasable` call (EXC-8).
    pub(super) releasing: Releasing,
    pub(super) instruments: Instruments,
    pub(super) drivers: Vec<Driver<H>>,
    pub(super) model: Model,
    pub(super) live: Vec<Live<'c, 'w, H>>,
    /// Forked lanes (lane `i` is `forks[i - 1]`; lane 0 is the rank's
    /// executor); `None` once dropped ([`Op::DropLane`]).
    pub(super) forks: Vec<Option<OwnedExecutor<H>>>,
    /// A lane for stand-in completions, never held or faulted.
    pub(super) scratch: Option<OwnedExecutor<H>>,
    pub(super) options: Options,
    /// What rank 1 submits in each round, and each round's fate.
    pub(super) plan: &'c Plan,
    /// A bounded wait left a collective round unfinished (quarantined, torn
    /// down or failed while live): the backend may refuse new work on the
    /// group from then on (eredu neither requires nor forbids that fence).
    pub(super) fenced: bool,
    /// A bounded wait on local dependencies ended without completion: they
    /// select no group, so that alone never fences one (RET-8).
    pub(super) local_deadline: bool,
    pub(crate) stats: Stats,
}

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    pub(crate) fn new(
        ctx: &'c RankCtx<'w, H>,
        options: Options,
        plan: &'c Plan,
        scheduler: Arc<dyn Scheduler>,
    ) -> Self {
        let instruments = ctx.harness().instruments();
        Self {
            ctx,
            releasing: Releasing::new(Arc::clone(&scheduler)),
            scheduler,
            instruments,
            drivers: ctx.harness().claims().drivers(),
            model: Model::new(),
            live: Vec::new(),
            forks: Vec::new(),
            scratch: None,
            options,
            plan,
            fenced: false,
            local_deadline: false,
            stats: Stats {
                instruments,
                ..Stats::default()
            },
        }
    }

    /// Lane `lane`'s executor. Callers skip dropped lanes
    /// ([`Self::dropped`]); a dropped one reads as the rank's executor.
    pub(super) fn lane(&self, lane: usize) -> &Executor<H> {
        match lane.checked_sub(1).and_then(|fork| self.forks.get(fork)) {
            Some(Some(fork)) => fork.borrow(),
            _ => self.ctx.executor(),
        }
    }

    /// Whether lane `lane`'s executor was dropped ([`Op::DropLane`]).
    pub(super) fn dropped(&self, lane: usize) -> bool {
        lane.checked_sub(1)
            .and_then(|fork| self.forks.get(fork))
            .is_some_and(Option::is_none)
    }

    pub(super) fn lanes(&self) -> usize {
        self.forks.len() + 1
    }

    pub(super) fn describe(&self, index: usize) -> String {
        let record = &self.model.subs[index];
        format!(
            "{} (submission {index}, lane {})",
            record.subject, record.lane
        )
    }

    pub(super) fn status(&self, index: usize) -> Status {
        self.model.statuses()[index]
    }

    pub(super) fn observer_state(&self, index: usize) -> Option<WorkState> {
        self.live[index].observer.as_ref().map(Observer::state)
    }

    /// Runs one operation, then compares every submission with the model.
    pub(crate) fn step(&mut self, op: Op) -> Result<(), Breach> {
        if self.apply(op)? {
            self.stats.executed += 1;
        } else {
            self.stats.skipped += 1;
        }
        self.observe()
    }

    fn apply(&mut self, op: Op) -> Result<bool, Breach> {
        match op {
            Op::Submit { work, lane, fault } => self.submit(work, lane, fault),
            Op::Fork { count } => self.fork(usize::from(count % 3)),
            Op::DropLane { lane } => Ok(self.drop_lane(lane)),
            Op::EmptyLocal { lane } => self.empty_local(lane),
            Op::SubmitLazy { lane } => self.submit_lazy(lane),
            Op::Refused { local, lane } => self.refused_submission(local, lane),
            Op::DropQueued { lane } => self.drop_queued(lane),
            Op::OrderedPair { lane } => self.ordered_pair(lane),
            other => match self.pick(other) {
                Some(index) => self.apply_to(index, other),
                None => Ok(false),
            },
        }
    }

    /// The submission `op` acts on: `sub` modulo the number of submissions
    /// when the operation applies to it, else the next one (cyclically) it
    /// applies to; `None` when it applies to none.
    fn pick(&self, op: Op) -> Option<usize> {
        let op = match op {
            Op::LateRelease { sub, .. } => Op::Release { sub },
            other => other,
        };
        let count = self.live.len();
        let start = usize::from(op_sub(op)) % count.max(1);
        let statuses = self.model.statuses();
        (0..count)
            .map(|k| (start + k) % count)
            .find(|&index| self.applies(op, index, statuses[index]))
    }

    /// Whether the model can follow `op` on submission `index`: a release
    /// not yet made, a handle still held, a `wait` only on work that will
    /// finish, a bounded wait the backend supports (an unbounded deadline only
    /// on work that will finish, no quarantine of doomed work, which would
    /// never end, and no native cancellation of a round while a later round's
    /// completion is out of reach), plain completions for `order_after` and
    /// `retain_until_complete`, and no dropped handle on doomed work.
    pub(super) fn applies(&self, op: Op, index: usize, status: Status) -> bool {
        let record = &self.model.subs[index];
        let completion = self.live[index].completion(record.handle);
        let plain = matches!(completion, Some(Handle::Plain(_)));
        match op {
            Op::Release { .. } => !record.released,
            Op::IsComplete { .. } => completion.is_some(),
            Op::Wait { .. } => completion.is_some() && status.due,
            Op::WaitBounded { timeout, mode, .. } => {
                let supported = <CommCompletion<H> as BoundedCompletion>::supports_cancellation(
                    mode.cancellation(),
                );
                let reachable = match (mode, record.round) {
                    (Mode::NativeCancel, Some(round)) => self.model.can_poison(round),
                    _ => true,
                };
                completion.is_some_and(Handle::is_bounded)
                    && supported
                    && reachable
                    && (timeout.bounded() || status.due)
                    && !(status.doomed && mode == Mode::Quarantine)
            }
            Op::DropOutputs { .. } => self.live[index].verify.is_some(),
            Op::DropCompletion { .. } => completion.is_some() && !status.doomed,
            Op::OrderAfter { .. } | Op::Retain { .. } => plain,
            Op::Submit { .. }
            | Op::Fork { .. }
            | Op::LateRelease { .. }
            | Op::DropLane { .. }
            | Op::EmptyLocal { .. }
            | Op::SubmitLazy { .. }
            | Op::Refused { .. }
            | Op::DropQueued { .. }
            | Op::OrderedPair { .. } => false,
        }
    }

    /// An operation on submission `index`.
    fn apply_to(&mut self, index: usize, op: Op) -> Result<bool, Breach> {
        match op {
            Op::Release { .. } => Ok(self.release_and_settle(index, Duration::ZERO)),
            Op::LateRelease { delay, .. } => {
                Ok(self.release_and_settle(index, Duration::from_micros(10 * u64::from(delay))))
            }
            Op::IsComplete { .. } => self.is_complete(index),
            Op::Wait { .. } => self.wait(index),
            Op::WaitBounded { timeout, mode, .. } => self.wait_bounded(index, timeout, mode),
            Op::DropOutputs { .. } => Ok(self.drop_outputs(index)),
            Op::DropCompletion { .. } => self.drop_completion(index),
            Op::OrderAfter { lane, .. } => self.order_after(index, lane),
            Op::Retain { .. } => self.retain(index),
            Op::Submit { .. }
            | Op::Fork { .. }
            | Op::DropLane { .. }
            | Op::EmptyLocal { .. }
            | Op::SubmitLazy { .. }
            | Op::Refused { .. }
            | Op::DropQueued { .. }
            | Op::OrderedPair { .. } => Ok(false),
        }
    }
}

/// The `sub` field of an operation (0 for those without one).
fn op_sub(op: Op) -> u8 {
    match op {
        Op::Release { sub }
        | Op::LateRelease { sub, .. }
        | Op::IsComplete { sub }
        | Op::Wait { sub }
        | Op::WaitBounded { sub, .. }
        | Op::DropOutputs { sub }
        | Op::DropCompletion { sub }
        | Op::OrderAfter { sub, .. }
        | Op::Retain { sub } => sub,
        Op::Submit { .. }
        | Op::Fork { .. }
        | Op::DropLane { .. }
        | Op::EmptyLocal { .. }
        | Op::SubmitLazy { .. }
        | Op::Refused { .. }
        | Op::DropQueued { .. }
        | Op::OrderedPair { .. } => 0,
    }
}
