//! The end of a sequence: the final drain (release everything, tear down
//! doomed work, wait for the rest, drop every handle, then everything must
//! be released: RET-6, RET-7, and the ledger drains), and what rank 0 does
//! after a divergence (lets everything end without checking anything).

use std::time::Duration;

use eredu_core::BoundedCompletionWait;

use super::blame::{breach, harness_breach, out_of_time, Breach};
use super::live::Live;
use super::op::{Mode, Timeout};
use super::peer;
use super::reference::HandleState;
use super::runner::Runner;
use super::scheduler::soon;
use crate::check::slack;
use crate::harness::Harness;
use crate::matrix::Handle;

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    pub(super) fn release_everything(&mut self) {
        for index in 0..self.live.len() {
            self.release(index);
        }
    }

    /// The final step: release everything, tear down doomed work, wait for
    /// the rest, drop every handle, and check that everything is released
    /// (RET-6, RET-7) and the ledger drains once the peer is finished.
    pub(crate) fn drain(&mut self) -> Result<(), Breach> {
        self.release_everything();
        self.plan.done();
        for index in 0..self.live.len() {
            let held = self.model.subs[index].handle == HandleState::Held;
            if held && self.status(index).doomed && !self.model.ended(index) {
                self.tear_down(index)?;
            }
        }
        for index in 0..self.live.len() {
            if self.model.subs[index].handle == HandleState::Held && !self.wait(index)? {
                return Err(harness_breach(format!(
                    "{}: the model does not expect it to finish after every hold and round was released",
                    self.describe(index)
                )));
            }
        }
        for index in 0..self.live.len() {
            self.finish_with(index);
        }
        self.no_destructor_inside_releasable()?;
        self.released_in_time()?;
        if !self.plan.await_finished(slack::RELEASE * 2) {
            return Err(out_of_time(format!(
                "the late peer's side had not finished {:?} after everything was released",
                slack::RELEASE * 2
            )));
        }
        if let Some((id, message)) = self.plan.first_violation() {
            return Err(breach(id, format!("the late peer's side: {message}")));
        }
        self.ledger_drains()
    }

    /// Natively cancels doomed work at the end (its peer never joins).
    pub(super) fn tear_down(&mut self, index: usize) -> Result<(), Breach> {
        if self.wait_bounded(index, Timeout::Short, Mode::NativeCancel)? {
            Ok(())
        } else {
            Err(harness_breach(format!(
                "{}: doomed work cannot be torn down (NativeCancel unsupported or out of reach)",
                self.describe(index)
            )))
        }
    }

    /// Drops every caller-side handle of submission `index`.
    pub(super) fn finish_with(&mut self, index: usize) {
        let live = &mut self.live[index];
        drop(live.verify.take());
        drop(live.direct.take());
        drop(live.pending.take());
        drop(live.second.take());
        self.model.subs[index].outputs_held = false;
        if self.model.subs[index].handle == HandleState::Held {
            self.model.subs[index].handle = HandleState::Dropped;
        }
    }

    /// RET-6 / RET-7: once every submission ended and every handle is gone,
    /// every probed storage is freed and every retained value dropped.
    pub(super) fn released_in_time(&self) -> Result<(), Breach> {
        let released = soon(&*self.scheduler, slack::RELEASE_RESOURCES, || {
            self.live.iter().all(Live::all_released)
        });
        if released {
            return Ok(());
        }
        let Some(index) = self.live.iter().position(|live| !live.all_released()) else {
            return Ok(());
        };
        let live = &self.live[index];
        let id = if live.probes().all(|p| !p.is_live()) {
            "RET-6"
        } else {
            "RET-7"
        };
        Err(breach(id, format!(
            "{}: {} storage(s) still allocated and {} retained value(s) still alive {:?} after its work ended and every handle was dropped",
            self.describe(index),
            live.probes().filter(|p| p.is_live()).count(),
            live.flags.iter().filter(|f| !f.dropped()).count(),
            slack::RELEASE_RESOURCES
        )))
    }

    /// RET-7: the ledger shows no pending or quarantined work at the end.
    pub(super) fn ledger_drains(&self) -> Result<(), Breach> {
        if !self.instruments.ledger {
            return Ok(());
        }
        let ledger = || self.ctx.harness().ledger(self.ctx.state());
        let drained = soon(&*self.scheduler, slack::RELEASE_RESOURCES, || {
            ledger().is_none_or(|l| l.pending_work == 0 && l.quarantined == 0)
        });
        if drained {
            return Ok(());
        }
        Err(breach("RET-7", format!(
            "the ledger still shows live work {:?} after every submission of both ranks ended and every handle was dropped: {:?}",
            slack::RELEASE_RESOURCES,
            ledger()
        )))
    }

    /// After a divergence: lets everything end without checking anything,
    /// so no work of this world outlives it.
    pub(crate) fn abandon(&mut self) {
        self.release_everything();
        for round in 0..self.model.rounds.len() {
            self.plan.abandon(round);
        }
        self.plan.done();
        let mode = peer::teardown_mode::<H>();
        for index in 0..self.live.len() {
            let bounded = self.live[index]
                .completion(self.model.subs[index].handle)
                .is_some_and(Handle::is_bounded);
            if bounded && !self.model.ended(index) {
                if let (Ok(completion), Ok(policy)) = (
                    self.take_completion(index),
                    BoundedCompletionWait::new(Duration::from_millis(1), mode),
                ) {
                    self.model.subs[index].handle = HandleState::Consumed;
                    let _ = completion.wait_bounded(self.ctx, policy);
                }
            }
            self.finish_with(index);
        }
    }
}
