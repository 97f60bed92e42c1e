//! Bounded waits: `Op::WaitBounded`, its outcome checked against the model
//! and the policy (CAN-1..CAN-4, CAN-9, EXC-6), and what the disposition left
//! behind: natively cancelled work has finished its teardown (CAN-5, CAN-7),
//! quarantined work lives on (CAN-6).

use eredu_core::{BoundedCompletionOutcome, BoundedCompletionWait};

use super::blame::{breach, harness_breach, why, Breach};
use super::op::{Mode, Op, Timeout};
use super::reference::{HandleState, Record, Seen, Status};
use super::runner::Runner;
use crate::harness::{Harness, Probe};
use crate::matrix::Handle;

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    /// `Op::WaitBounded` (see [`Runner::applies`]).
    pub(super) fn wait_bounded(
        &mut self,
        index: usize,
        timeout: Timeout,
        mode: Mode,
    ) -> Result<bool, Breach> {
        let record = self.model.subs[index].clone();
        let status = self.status(index);
        if !self.applies(
            Op::WaitBounded {
                sub: 0,
                timeout,
                mode,
            },
            index,
            status,
        ) {
            return Ok(false);
        }
        let policy = BoundedCompletionWait::new(timeout.duration(), mode.cancellation())
            .map_err(|e| harness_breach(format!("bounded wait policy: {e}")))?;
        let second = match self.live[index].completion(record.handle) {
            Some(Handle::Communication(completion)) => self
                .ctx
                .harness()
                .second_handle(completion)
                .map(Handle::Communication),
            _ => None,
        };
        self.live[index].second = second;
        let completion = self.take_completion(index)?;
        self.model.subs[index].handle = HandleState::Consumed;
        self.bounded_outcome(index, &record, status, completion, policy)?;
        Ok(true)
    }

    pub(super) fn bounded_outcome(
        &mut self,
        index: usize,
        record: &Record,
        status: Status,
        completion: Handle<H>,
        policy: BoundedCompletionWait,
    ) -> Result<(), Breach> {
        let started = self.scheduler.now();
        let outcome = completion.wait_bounded(self.ctx, policy);
        let elapsed = self.scheduler.now().saturating_sub(started);
        let who = self.describe(index);
        let mode = policy.cancellation();
        if !matches!(outcome, Some(Ok(BoundedCompletionOutcome::Completed))) {
            match record.round {
                Some(_) => self.fenced = true,
                None => self.local_deadline = true,
            }
        }
        match outcome {
            None => Ok(()),
            Some(Ok(BoundedCompletionOutcome::Completed)) => {
                if record.error_seen {
                    return Err(breach("EXC-6", format!("{who}: wait_bounded returned Completed after an error had been reported; errors are sticky")));
                }
                if record.faulted {
                    return Err(self.faulted_success(
                        index,
                        "CAN-9",
                        "wait_bounded returned Completed",
                    ));
                }
                if let Some(reason) = status.blocked {
                    return Err(breach(
                        "CAN-1",
                        format!(
                            "{who}: wait_bounded returned Completed while {}",
                            why(reason)
                        ),
                    ));
                }
                if let Some(id) = self.must_fail(index, record, status, "CAN-9") {
                    return Err(breach(id, format!("{who}: wait_bounded returned Completed for work the contract says must fail")));
                }
                self.completed_per_observer(index, "CAN-1", "wait_bounded returned Completed")?;
                self.model.subs[index].seen = Seen::Completed;
                self.verify(index)
            }
            Some(Ok(BoundedCompletionOutcome::DeadlineExceeded { cancellation })) => {
                if cancellation != mode {
                    return Err(breach("CAN-3", format!("{who}: wait_bounded reported DeadlineExceeded {{ cancellation: {cancellation:?} }} under a {mode:?} policy")));
                }
                if elapsed < policy.timeout() {
                    return Err(breach("CAN-2", format!("{who}: wait_bounded returned DeadlineExceeded after {elapsed:?}, before its {:?} timeout", policy.timeout())));
                }
                if let Seen::Completed = record.seen {
                    return Err(breach("CAN-1", format!("{who}: wait_bounded returned DeadlineExceeded for work that had already reported completion")));
                }
                self.disposed(
                    index,
                    record,
                    mode == eredu_core::CompletionCancellationMode::NativeCancel,
                    "DeadlineExceeded",
                )
            }
            Some(Err(error)) => {
                if let Seen::Completed = record.seen {
                    return Err(breach("CAN-1", format!("{who}: wait_bounded returned Err({error}) for work that had already reported completion")));
                }
                if !status.may_fail && !record.error_seen {
                    return Err(breach("CAN-4", format!("{who}: wait_bounded under supported {mode:?} returned Err for work with no injected fault (expected Completed or DeadlineExceeded): {error}")));
                }
                self.model.subs[index].error_seen = true;
                self.model.subs[index].bounded_error = true;
                self.disposed(
                    index,
                    record,
                    mode == eredu_core::CompletionCancellationMode::NativeCancel,
                    "Err",
                )
            }
        }
    }

    /// After `wait_bounded` gave up: natively cancelled work has finished its
    /// teardown (CAN-5, CAN-7); quarantined work lives on (CAN-6).
    pub(super) fn disposed(
        &mut self,
        index: usize,
        record: &Record,
        native: bool,
        returned: &str,
    ) -> Result<(), Breach> {
        if !native {
            self.model.subs[index].quarantined = true;
            return Ok(());
        }
        let who = self.describe(index);
        let id = if returned == "Err" { "CAN-7" } else { "CAN-5" };
        if let Some(state) = self.observer_state(index) {
            if !state.is_terminal() {
                return Err(breach(id, format!("{who}: native work was still {state:?} right after wait_bounded returned {returned} under NativeCancel: teardown had not finished")));
            }
        }
        if returned != "Err" {
            let live = &self.live[index];
            let outputs: &[Probe] = if record.outputs_held {
                &[]
            } else {
                &live.outputs
            };
            let still = live
                .inputs
                .iter()
                .chain(outputs)
                .filter(|p| p.is_live())
                .count();
            if still > 0 {
                return Err(breach("CAN-5", format!("{who}: {still} probed storage(s) with no caller handle were still allocated right after wait_bounded returned DeadlineExceeded under NativeCancel: teardown had not released them")));
            }
        }
        self.model.subs[index].seen = Seen::TornDown;
        if let Some(round) = record.round {
            self.give_up(round);
        }
        Ok(())
    }
}
