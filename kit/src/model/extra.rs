//! The operations of input format 2 that run beside the model's
//! submissions and are checked where they happen: dropping a forked lane's
//! executor with work queued on it (RET-2, checked when that work is waited
//! for: `complete.rs`), empty local dependencies (EXC-10), `submit` of lazy
//! values (SUB-2), and a refused submission (SUB-4).
//!
//! The last three run only on an *idle* lane (not dropped, every earlier
//! submission on it released and ended, its `order_after` gates passed, no
//! fault armed on it), where new work starts at once: what the contract says of them
//! then does not depend on the model's other submissions, which they leave
//! untouched.

use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend};

use super::blame::{breach, harness_breach, Breach};
use super::runner::Runner;
use super::scheduler::soon;
use crate::check::slack;
use crate::harness::{Backend, Harness, Tensor};
use crate::matrix::Handle;

/// Values of the tensors these operations submit (exact in `f32`, as is
/// twice each of them).
const VALUES: [f32; 4] = [1.5, -2.0, 3.25, 0.5];

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    /// Lane `lane` (modulo the lanes) when it is idle (see the module docs).
    fn idle_lane(&self, lane: u8) -> Option<usize> {
        let lane = usize::from(lane) % self.lanes();
        // A hold is on the executor, not on one work item: a lane whose
        // held work ended by other means (a native cancellation) stays held
        // until that submission is released.
        let unheld = self
            .model
            .subs
            .iter()
            .all(|record| record.lane != lane || record.released);
        let idle = !self.dropped(lane)
            && unheld
            && !self.model.lane_faulted(lane)
            && self
                .model
                .fault_lands_here(lane, |i| self.observed_ended(i));
        idle.then_some(lane)
    }

    /// The invariant to name when new work on idle `lane` did not
    /// complete: `own`, unless work on another lane is unfinished: then the
    /// likeliest cause is that the lanes share one queue (SUB-1: forked
    /// lanes are independent), and the message says which.
    fn stuck_id(&self, lane: usize, own: &'static str) -> (&'static str, String) {
        let busy = (0..self.model.subs.len()).find(|&i| {
            let record = &self.model.subs[i];
            record.lane != lane
                && (!record.released || (!self.model.ended(i) && !self.observed_ended(i)))
        });
        match busy {
            Some(other) => (
                "SUB-1",
                format!(
                    "; lane {lane} had no unfinished work, but submission {other} on lane {} had: the lanes do not run independently",
                    self.model.subs[other].lane
                ),
            ),
            None => (own, String::new()),
        }
    }

    /// `Op::DropLane`: drops the owned executor of a fork still held
    /// (`lane` modulo their number); `false` when none is.
    pub(super) fn drop_lane(&mut self, lane: u8) -> bool {
        let held: Vec<usize> = (0..self.forks.len())
            .filter(|&fork| self.forks[fork].is_some())
            .collect();
        if held.is_empty() {
            return false;
        }
        let fork = held[usize::from(lane) % held.len()];
        drop(self.forks[fork].take());
        true
    }

    /// A fork still held, forking one when none is (`None` when no lane
    /// can be added): lane `1 + fork`.
    fn held_fork(&mut self, pick: u8) -> Result<Option<usize>, Breach> {
        let held = |runner: &Self| -> Vec<usize> {
            (0..runner.forks.len())
                .filter(|&fork| runner.forks[fork].is_some())
                .collect()
        };
        if held(self).is_empty() && !self.fork(1)? {
            return Ok(None);
        }
        let held = held(self);
        Ok(held.get(usize::from(pick) % held.len().max(1)).copied())
    }

    /// `Op::DropQueued`: [`Op::Submit`](super::Op::Submit) of plain work
    /// on a fork (forked first when none is held), then
    /// [`Op::DropLane`](super::Op::DropLane) of that fork: RET-2's shape in
    /// one operation. The work is released by a later `Release` or the
    /// final drain, and must then complete.
    pub(super) fn drop_queued(&mut self, lane: u8) -> Result<bool, Breach> {
        let Some(fork) = self.held_fork(lane)? else {
            return Ok(false);
        };
        if !self.submit(super::op::Work::Submit, (fork + 1) as u8, false)? {
            return Ok(false);
        }
        drop(self.forks[fork].take());
        Ok(true)
    }

    /// `Op::OrderedPair`: plain work on `lane` (the producer, held), the
    /// next lane still held ordered after it (`order_after`; forked first
    /// when there is none), plain work on that lane (the consumer), and the
    /// consumer's release: SUB-3's shape in one operation. The consumer must not
    /// complete before its producer is released.
    pub(super) fn ordered_pair(&mut self, lane: u8) -> Result<bool, Breach> {
        let producer = self.live.len();
        if !self.submit(super::op::Work::Submit, lane, false)? || self.live.len() == producer {
            return Ok(false);
        }
        // The consumer's lane: the first other lane still held, forked
        // when there is none.
        let own = self.model.subs[producer].lane;
        let other = |runner: &Self| {
            (1..runner.lanes()).find(|k| !runner.dropped((own + k) % runner.lanes()))
        };
        if other(self).is_none() {
            self.fork(1)?;
        }
        let Some(k) = other(self) else {
            return Ok(true);
        };
        if !self.order_after(producer, (k - 1) as u8)? {
            return Ok(true);
        }
        let consumer_lane = (own + k) % self.lanes();
        let consumer = self.live.len();
        if !self.submit(super::op::Work::Submit, consumer_lane as u8, false)?
            || self.live.len() == consumer
        {
            return Ok(true);
        }
        self.release_and_settle(consumer, std::time::Duration::ZERO);
        Ok(true)
    }

    /// Polls `completion` until it reports completion, for up to
    /// `slack::RELEASE`: `Err` with what it reported otherwise.
    fn completes(&self, completion: &Handle<H>) -> Result<(), String> {
        let mut last = Ok(false);
        let done = soon(&*self.scheduler, slack::RELEASE, || {
            last = completion.is_complete();
            !matches!(last, Ok(false))
        });
        match (done, last) {
            (true, Ok(_)) => Ok(()),
            (_, Err(error)) => Err(format!("it failed: {error}")),
            (false, Ok(_)) => Err(format!("it did not complete within {:?}", slack::RELEASE)),
        }
    }

    /// Tears down work that did not complete, so it does not outlive the
    /// sequence.
    fn tear_down_stray(&self, completion: Handle<H>) {
        if let Ok(policy) = eredu_core::BoundedCompletionWait::new(
            std::time::Duration::from_millis(1),
            super::peer::teardown_mode::<H>(),
        ) {
            let _ = completion.wait_bounded(self.ctx, policy);
        }
    }

    /// `Op::EmptyLocal`: `submit_local_dependencies` with no tensors on an
    /// idle lane completes promptly (EXC-10).
    pub(super) fn empty_local(&mut self, lane: u8) -> Result<bool, Breach> {
        let Some(lane) = self.idle_lane(lane) else {
            return Ok(false);
        };
        let submitted = Backend::<H>::submit_local_dependencies(
            std::iter::empty::<&Tensor<H>>(),
            self.lane(lane),
        );
        let completion = match submitted {
            Ok(submission) => Handle::<H>::Communication(submission.completion),
            Err(error) => {
                return Err(breach(
                    "EXC-10",
                    format!(
                    "submit_local_dependencies with no tensors on idle lane {lane} failed: {error}"
                ),
                ))
            }
        };
        if let Err(problem) = self.completes(&completion) {
            self.tear_down_stray(completion);
            let (id, cause) = self.stuck_id(lane, "EXC-10");
            return Err(breach(
                id,
                format!("submit_local_dependencies with no tensors on idle lane {lane}: {problem}; expected it to complete promptly{cause}"),
            ));
        }
        Ok(true)
    }

    /// `Op::SubmitLazy`: `submit` of a lazy value (twice a materialised
    /// one) on an idle lane; once complete, the value reads back
    /// materialised and exact (SUB-2). Skipped when the tensor context
    /// builds no lazy value.
    pub(super) fn submit_lazy(&mut self, lane: u8) -> Result<bool, Breach> {
        let Some(lane) = self.idle_lane(lane) else {
            return Ok(false);
        };
        let Ok(base) = self.ctx.tensor(&VALUES, &[VALUES.len()]) else {
            return Ok(false);
        };
        let Ok(lazy) = <Tensor<H> as eredu_nn::Tensor>::multiply_scalar(
            &base,
            2.0,
            self.ctx.context_on(self.lane(lane)),
        ) else {
            return Ok(false);
        };
        let expected: Vec<f32> = VALUES.iter().map(|v| v * 2.0).collect();
        let completion = Backend::<H>::submit(self.lane(lane), [&lazy])
            .map(Handle::Plain)
            .map_err(|error| {
                breach(
                    "SUB-2",
                    format!("submit of a lazy value on idle lane {lane} failed: {error}"),
                )
            })?;
        if let Err(problem) = self.completes(&completion) {
            self.tear_down_stray(completion);
            let (id, cause) = self.stuck_id(lane, "SUB-2");
            return Err(breach(
                id,
                format!("submit of a lazy value on idle lane {lane}: {problem}{cause}"),
            ));
        }
        let got = self
            .ctx
            .harness()
            .read(self.ctx.state(), &lazy)
            .map_err(|error| {
                breach("SUB-2", format!("a lazy value given to submit on lane {lane} is not materialised after its submission completed ({error})"))
            })?;
        let exact = got.len() == expected.len()
            && got
                .iter()
                .zip(&expected)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        if !exact {
            return Err(breach(
                "SUB-2",
                format!("a lazy value given to submit on lane {lane} reads back as {got:?} after its submission completed, expected {expected:?}"),
            ));
        }
        Ok(true)
    }

    /// `Op::Refused`: with the submission-fault instrument armed on an idle
    /// lane (held, where the hold instrument exists, so wrongly queued work
    /// would stay live), a submission returns `Err`, and once the caller
    /// dropped its input the input's storage is freed (SUB-4). Needs the
    /// submission-fault and probe instruments; skipped without them.
    pub(super) fn refused_submission(&mut self, local: bool, lane: u8) -> Result<bool, Breach> {
        if !(self.instruments.submission_fault && self.instruments.probe) {
            return Ok(false);
        }
        let Some(lane) = self.idle_lane(lane) else {
            return Ok(false);
        };
        let api = if local {
            "submit_local_dependencies"
        } else {
            "submit"
        };
        let Ok(input) = self.ctx.tensor(&VALUES, &[VALUES.len()]) else {
            return Ok(false);
        };
        let Ok(probe) = self.ctx.probe(&input) else {
            return Ok(false);
        };
        let hold = match self.instruments.hold {
            true => self.ctx.hold(self.lane(lane)).ok(),
            false => None,
        };
        if self.ctx.fail_next_submission(self.lane(lane)).is_err() {
            return Ok(false);
        }
        let executor = self.lane(lane);
        let accepted = if local {
            Backend::<H>::submit_local_dependencies([&input], executor)
                .map(|submission| Handle::<H>::Communication(submission.completion))
                .ok()
        } else {
            Backend::<H>::submit(executor, [&input])
                .map(Handle::Plain)
                .ok()
        };
        drop(input);
        if let Some(completion) = accepted {
            drop(hold);
            self.tear_down_stray(completion);
            return Err(harness_breach(format!(
                "the submission fault instrument was armed on lane {lane}, but {api} returned Ok"
            )));
        }
        let freed = soon(&*self.scheduler, slack::RELEASE_RESOURCES, || {
            !probe.is_live()
        });
        drop(hold);
        if !freed {
            return Err(breach(
                "SUB-4",
                format!("{api} on lane {lane} returned Err (submission fault armed, lane held), but its input's storage was still allocated {:?} after the caller dropped it: the refused submission left live work behind", slack::RELEASE_RESOURCES),
            ));
        }
        Ok(true)
    }
}
