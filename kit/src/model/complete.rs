//! Completion through the API: `Op::IsComplete` and `Op::Wait`, each
//! result compared with the model as it is made (EXC-2..EXC-6: no early or
//! non-monotonic completion, `wait` returns for due work, errors are sticky),
//! and the outputs' values once the work completed (the operation's value
//! invariant: SUM-1, GAT-1, ...).

use super::blame::{
    breach, early_id, from_finding, must_fail, value_id, why, Breach, UNPLACED_FAULT,
};
use super::reference::{Record, Seen, Status};
use super::runner::Runner;
use super::scheduler::soon;
use crate::check::slack;
use crate::harness::{Harness, WorkState};

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    /// The observer must report `Completed` after the API reported success.
    /// The invariant broken when a call (`is_complete`, `wait`,
    /// `wait_bounded`, whose own invariant is `reporting`) reports success
    /// for work the contract says must fail: the operation's own invariant
    /// (the failure was never detected), unless the observer saw the work
    /// fail, in which case the backend knew and the call misreported it.
    /// Without an observer the two cannot be told apart from outside; the
    /// operation's invariant is named, as the one the caller observed broken.
    pub(super) fn must_fail(
        &self,
        index: usize,
        record: &Record,
        status: Status,
        reporting: &'static str,
    ) -> Option<&'static str> {
        let id = must_fail(record, status)?;
        match self.observer_state(index) {
            Some(WorkState::Failed) => Some(reporting),
            _ => Some(id),
        }
    }

    /// A call (whose own invariant is `id`) reported success for work whose
    /// injected fault makes it fail: `id`, unless the observer shows the
    /// work itself completed, in which case the fault never reached it (a
    /// lazily launched submission lets the fault land on later work) and no
    /// invariant is named; the work that took the fault fails as clean work
    /// ([`Self::clean_failure`]).
    pub(super) fn faulted_success(&self, index: usize, id: &'static str, what: &str) -> Breach {
        let who = self.describe(index);
        match self.observer_state(index) {
            Some(WorkState::Completed) => Breach {
                id: None,
                message: format!(
                    "{who}: {what} for work whose injected fault should make it fail, and the observer \
                     says it completed: the fault did not reach this work (it may have landed on later \
                     work, as with a lazily launched submission); {UNPLACED_FAULT}"
                ),
            },
            _ => breach(
                id,
                format!("{who}: {what} for work whose injected fault makes it fail"),
            ),
        }
    }

    pub(super) fn completed_per_observer(
        &self,
        index: usize,
        id: &'static str,
        what: &str,
    ) -> Result<(), Breach> {
        match self.observer_state(index) {
            Some(state) if state != WorkState::Completed => Err(breach(
                id,
                format!(
                    "{}: {what} while the observer reported {state:?}",
                    self.describe(index)
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Checks the outputs' values (the completed work's value semantics).
    /// Not those of doomed work: it may have met a stale contribution of the
    /// cancelled round (whose parameters, votes say, may differ), so the
    /// contract defines no value for it.
    pub(super) fn verify(&mut self, index: usize) -> Result<(), Breach> {
        let Some(verify) = self.live[index].verify.take() else {
            return Ok(());
        };
        self.model.subs[index].outputs_held = false;
        if self.status(index).doomed {
            return Ok(());
        }
        let subject = self.model.subs[index].subject;
        let seen_before = self.ctx.attributed_count();
        verify(self.ctx).map_err(|finding| {
            from_finding(
                finding,
                value_id(subject),
                &format!("{} after completion", self.describe(index)),
            )
        })?;
        // A wrong value is recorded against its value invariant: in a
        // sequence, that is the divergence.
        match self.ctx.attributed_since(seen_before).into_iter().next() {
            Some(wrong) => Err(breach(
                value_id(subject),
                format!(
                    "{} after completion: {}",
                    self.describe(index),
                    wrong.message
                ),
            )),
            None => Ok(()),
        }
    }

    /// `Op::IsComplete`.
    pub(super) fn is_complete(&mut self, index: usize) -> Result<bool, Breach> {
        let record = self.model.subs[index].clone();
        let Some(completion) = self.live[index].completion(record.handle) else {
            return Ok(false);
        };
        let status = self.status(index);
        let result = completion.is_complete();
        let who = self.describe(index);
        match result {
            Ok(true) => {
                self.is_complete_true(index, &record, status)?;
                if record.seen == Seen::Nothing {
                    self.model.subs[index].seen = Seen::Completed;
                }
                self.model.subs[index].said_complete = true;
            }
            Ok(false) => match record.seen {
                Seen::Completed if record.said_complete => {
                    return Err(breach("EXC-3", format!("{who}: is_complete() returned Ok(false) after it had returned Ok(true)")))
                }
                Seen::Completed => {
                    return Err(breach("EXC-5", format!("{who}: is_complete() returned Ok(false) after wait() had returned Ok(())")))
                }
                _ if record.error_seen => {
                    return Err(breach("EXC-6", format!("{who}: is_complete() returned Ok(false) after an error had been reported; errors are sticky")))
                }
                _ => {}
            },
            Err(error) => {
                if let Seen::Completed = record.seen {
                    let id = if record.said_complete { "EXC-3" } else { "EXC-5" };
                    return Err(breach(id, format!("{who}: is_complete() returned Err({error}) after completion had been reported")));
                }
                if !status.may_fail {
                    return Err(self.clean_failure(
                        index,
                        format!("{who}: is_complete() reported an error for work with no injected fault: {error}"),
                    ));
                }
                self.model.subs[index].error_seen = true;
            }
        }
        Ok(true)
    }

    /// `is_complete()` said `Ok(true)`: allowed only for work that really completed.
    pub(super) fn is_complete_true(
        &self,
        index: usize,
        record: &Record,
        status: Status,
    ) -> Result<(), Breach> {
        let who = self.describe(index);
        if record.error_seen {
            return Err(breach("EXC-6", format!("{who}: is_complete() returned Ok(true) after an error had been reported; errors are sticky")));
        }
        if record.faulted {
            return Err(self.faulted_success(index, "EXC-2", "is_complete() returned Ok(true)"));
        }
        if let Some(reason) = status.blocked {
            let id = match self.observer_state(index) {
                Some(WorkState::Completed) => early_id(record.subject, reason),
                _ => Some("EXC-2"),
            };
            return Err(Breach {
                id,
                message: format!(
                    "{who}: is_complete() returned Ok(true) while {} (observer: {:?})",
                    why(reason),
                    self.observer_state(index)
                ),
            });
        }
        if let Some(id) = self.must_fail(index, record, status, "EXC-2") {
            return Err(breach(
                id,
                format!(
                    "{who}: is_complete() returned Ok(true) for work the contract says must fail"
                ),
            ));
        }
        self.completed_per_observer(index, "EXC-2", "is_complete() returned Ok(true)")
    }

    /// `Op::Wait`: only on work the model says will finish.
    pub(super) fn wait(&mut self, index: usize) -> Result<bool, Breach> {
        let record = self.model.subs[index].clone();
        let status = self.status(index);
        let Some(completion) = self.live[index].completion(record.handle) else {
            return Ok(false);
        };
        if !status.due {
            return Ok(false);
        }
        // RET-2: work whose lane's executor was dropped must still end
        // (read on the observer, so a backend that abandoned it is named
        // instead of hanging in `wait()`).
        if self.dropped(record.lane) && self.live[index].observer.is_some() {
            let ended = soon(&*self.scheduler, slack::RELEASE, || {
                self.observed_ended(index)
            });
            if !ended {
                return Err(breach(
                    "RET-2",
                    format!(
                        "{}: released work whose lane's executor was dropped while it was queued did not end within {:?}: the completion must keep its executor alive",
                        self.describe(index),
                        slack::RELEASE
                    ),
                ));
            }
        }
        let result = completion.wait();
        let who = self.describe(index);
        match result {
            Ok(()) => {
                if record.error_seen {
                    return Err(breach("EXC-6", format!("{who}: wait() returned Ok(()) after an error had been reported; errors are sticky")));
                }
                if let Some(id) = self.must_fail(index, &record, status, "EXC-4") {
                    return Err(breach(
                        id,
                        format!(
                            "{who}: wait() returned Ok(()) for work the contract says must fail"
                        ),
                    ));
                }
                if record.faulted {
                    return Err(self.faulted_success(index, "EXC-4", "wait() returned Ok(())"));
                }
                self.completed_per_observer(index, "EXC-4", "wait() returned Ok(())")?;
                self.model.subs[index].seen = Seen::Completed;
                self.verify(index)?;
            }
            Err(error) => {
                if let Seen::Completed = record.seen {
                    return Err(breach("EXC-3", format!("{who}: wait() returned Err({error}) after completion had been reported")));
                }
                if !status.may_fail {
                    return Err(self.clean_failure(
                        index,
                        format!("{who}: wait() failed on work with no injected fault: {error}"),
                    ));
                }
                self.model.subs[index].error_seen = true;
            }
        }
        Ok(true)
    }
}
