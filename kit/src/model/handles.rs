//! Handles, lanes, ordering and retention: `Op::DropOutputs`,
//! `Op::DropCompletion` (RET-4's situation), `Op::Fork` (SUB-1: exactly the
//! lanes asked for), `Op::OrderAfter` (SUB-3) and `Op::Retain` (RET-6's drop
//! flags).

use std::borrow::Borrow;

use eredu_runtime::backend::SubmissionBackend;

use super::blame::{breach, harness_breach, Breach};
use super::live::{DropFlag, Flag};
use super::reference::HandleState;
use super::runner::{Runner, MAX_LANES};
use crate::harness::{Backend, Executor, Harness, Tensor};
use crate::matrix::Handle;

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    /// A completed, resource-free stand-in for a completion taken out of a
    /// pending submission, made on a lane of its own.
    pub(super) fn stand_in(&mut self) -> Result<Handle<H>, Breach> {
        if self.scratch.is_none() {
            let mut lanes = Backend::<H>::fork_executors(self.ctx.executor(), 1)
                .map_err(|e| breach("SUB-1", format!("fork_executors(executor, 1) failed: {e}")))?;
            self.scratch = Some(lanes.pop().ok_or_else(|| {
                breach(
                    "SUB-1",
                    "fork_executors(executor, 1) returned no executor".into(),
                )
            })?);
        }
        let scratch: &Executor<H> = match &self.scratch {
            Some(lane) => lane.borrow(),
            None => return Err(harness_breach("no scratch lane".into())),
        };
        Backend::<H>::submit(scratch, std::iter::empty::<&Tensor<H>>())
            .map(Handle::Plain)
            .map_err(|e| breach("SUB-2", format!("submit with no values failed: {e}")))
    }

    /// Takes submission `index`'s completion out of the caller's hands.
    pub(super) fn take_completion(&mut self, index: usize) -> Result<Handle<H>, Breach> {
        if let Some(direct) = self.live[index].direct.take() {
            return Ok(direct);
        }
        let stand_in = self.stand_in()?;
        match &mut self.live[index].pending {
            Some(pending) => Ok(std::mem::replace(
                &mut pending.submitted.completion,
                stand_in,
            )),
            None => Err(harness_breach(format!(
                "{}: no completion to take",
                self.describe(index)
            ))),
        }
    }

    /// `Op::DropOutputs`.
    pub(super) fn drop_outputs(&mut self, index: usize) -> bool {
        let dropped = self.live[index].verify.take().is_some();
        self.model.subs[index].outputs_held = false;
        dropped
    }

    /// `Op::DropCompletion`, except on doomed work (which only native
    /// cancellation through its completion can end).
    pub(super) fn drop_completion(&mut self, index: usize) -> Result<bool, Breach> {
        if self.model.subs[index].handle != HandleState::Held || self.status(index).doomed {
            return Ok(false);
        }
        drop(self.take_completion(index)?);
        self.model.subs[index].handle = HandleState::Dropped;
        Ok(true)
    }

    /// `Op::Fork`: exactly `count` new lanes (SUB-1).
    pub(super) fn fork(&mut self, count: usize) -> Result<bool, Breach> {
        if self.lanes() + count > MAX_LANES {
            return Ok(false);
        }
        let lanes = Backend::<H>::fork_executors(self.ctx.executor(), count).map_err(|e| {
            breach(
                "SUB-1",
                format!("fork_executors(executor, {count}) failed: {e}"),
            )
        })?;
        if lanes.len() != count {
            return Err(breach(
                "SUB-1",
                format!(
                    "fork_executors(executor, {count}) returned {} executors",
                    lanes.len()
                ),
            ));
        }
        for lane in lanes {
            self.forks.push(Some(lane));
            self.model.fork();
        }
        Ok(true)
    }

    /// The plain completion of submission `index`, while the caller holds it.
    pub(super) fn plain(&self, index: usize) -> Option<&crate::harness::PlainCompletion<H>> {
        match self.live[index].completion(self.model.subs[index].handle) {
            Some(Handle::Plain(completion)) => Some(completion),
            _ => None,
        }
    }

    /// `Op::OrderAfter`: later work on a lane follows submission `index`.
    /// The lane is counted from the producer's, skipping it when there are
    /// others (ordering after work on the same in-order lane shows nothing).
    pub(super) fn order_after(&mut self, index: usize, lane: u8) -> Result<bool, Breach> {
        let lanes = self.lanes();
        let own = self.model.subs[index].lane;
        let lane = match lanes {
            1 => 0,
            _ => (own + 1 + usize::from(lane) % (lanes - 1)) % lanes,
        };
        let Some(producer) = self.plain(index) else {
            return Ok(false);
        };
        if self.dropped(lane) {
            return Ok(false);
        }
        Backend::<H>::order_after(producer, self.lane(lane)).map_err(|e| {
            breach(
                "SUB-3",
                format!("order_after(submission {index}, lane {lane}) failed: {e}"),
            )
        })?;
        self.model.order_after(index, lane);
        Ok(true)
    }

    /// `Op::Retain`: a drop flag retained until submission `index` completes.
    pub(super) fn retain(&mut self, index: usize) -> Result<bool, Breach> {
        let Some(completion) = self.plain(index) else {
            return Ok(false);
        };
        if self.dropped(self.model.subs[index].lane) {
            return Ok(false);
        }
        let flag = Flag::default();
        let executor = self.lane(self.model.subs[index].lane);
        Backend::<H>::retain_until_complete(
            executor,
            completion,
            DropFlag(flag.clone(), self.releasing.clone()),
        )
        .map_err(|e| {
            breach(
                "RET-6",
                format!("retain_until_complete on submission {index} failed: {e}"),
            )
        })?;
        self.live[index].flags.push(flag);
        Ok(true)
    }
}
