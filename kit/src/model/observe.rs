//! After every step: every submission's observable state compared with the
//! model, through the instruments the harness provides, in an order that
//! cannot produce false alarms: liveness probes and drop flags first, the
//! observer last (a correct backend frees nothing before its work is
//! terminal, so "freed, then terminal" is consistent and "freed, then live"
//! is not). Retention (RET-1, RET-3..RET-6; EXC-7, CAN-6, CAN-7), terminal
//! states (EXC-3, the value invariants, SUB-3), and `resources_releasable()`
//! (EXC-8, EXC-9). Parts that need a missing instrument are skipped.

use std::sync::atomic::Ordering;

use super::blame::{
    ambiguity, breach, early_id, freed_id, history, must_fail, value_id, why, Breach, Freed,
};
use super::live::Live;
use super::reference::{Seen, Status};
use super::runner::Runner;
use super::scheduler::soon;
use crate::check::slack;
use crate::harness::{Harness, Observer, WorkState};
use crate::matrix::Handle;

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    /// Compares every submission's observable state with the model.
    pub(super) fn observe(&mut self) -> Result<(), Breach> {
        let statuses = self.model.statuses();
        for (index, status) in statuses.into_iter().enumerate() {
            // A value dropped inside a `resources_releasable` call (this
            // step's or an earlier one's, on any completion of the device)
            // is EXC-8's evidence before it is any retention rule's: the
            // call dropped it, whatever the work's state.
            self.no_destructor_inside_releasable()?;
            self.observe_one(index, status)?;
            self.releasable_agrees(index, status)?;
        }
        self.no_destructor_inside_releasable()
    }

    /// EXC-8, EXC-9: `resources_releasable()` on submission `index`'s work,
    /// read through the caller's completion, else (after `wait_bounded`
    /// consumed it) a second handle or the observer's reading. `true` while
    /// the work is live (the observer says so after the call, or the model
    /// knows it blocked and healthy) is EXC-8, whatever happened before (a
    /// timeout, a cancellation request, an error); `false` after success
    /// must turn `true` within `slack::RELEASE_RESOURCES` (EXC-9). Where the
    /// model knows neither, any answer is allowed.
    pub(super) fn releasable_agrees(&self, index: usize, status: Status) -> Result<(), Breach> {
        #[derive(Clone, Copy)]
        enum Reader {
            Completion,
            Second,
            Observer,
        }
        let handle = self.model.subs[index].handle;
        let live = &self.live[index];
        let reader = if live.completion(handle).is_some() {
            Reader::Completion
        } else if live.second.is_some() {
            Reader::Second
        } else if live
            .observer
            .as_ref()
            .is_some_and(|o| o.resources_releasable().is_some())
        {
            Reader::Observer
        } else {
            return Ok(());
        };
        let read = |live: &Live<'_, '_, H>| {
            let _inside = self.releasing.enter();
            match reader {
                Reader::Completion => live
                    .completion(handle)
                    .is_some_and(Handle::resources_releasable),
                Reader::Second => live
                    .second
                    .as_ref()
                    .is_some_and(Handle::resources_releasable),
                Reader::Observer => crate::world::polled(
                    "resources_releasable() (observer)",
                    "EXC-8",
                    slack::BLOCKED,
                    || {
                        live.observer
                            .as_ref()
                            .and_then(Observer::resources_releasable)
                            .unwrap_or(false)
                    },
                ),
            }
        };
        let via = match reader {
            Reader::Completion => "on its completion",
            Reader::Second => "on a second handle (Harness::second_handle)",
            Reader::Observer => "(the observer's reading)",
        };
        let record = &self.model.subs[index];
        let who = self.describe(index);
        if read(live) {
            let evidence = match live.observer.as_ref().map(Observer::state) {
                Some(WorkState::Live) => "observer: Live after the call".to_owned(),
                Some(_) => return Ok(()),
                None if status.certainly_live() => match status.blocked {
                    Some(reason) => why(reason),
                    None => "work live".into(),
                },
                None => return Ok(()),
            };
            return Err(breach(
                "EXC-8",
                format!(
                    "{who}: resources_releasable() {via} returned true while its work was live ({evidence}), {}",
                    history(record)
                ),
            ));
        }
        let succeeded = record.seen == Seen::Completed && !record.error_seen && !status.may_fail;
        if succeeded
            && !soon(&*self.scheduler, slack::RELEASE_RESOURCES, || {
                read(&self.live[index])
            })
        {
            return Err(breach(
                "EXC-9",
                format!(
                    "{who}: resources_releasable() {via} was still false {:?} after its work had completed successfully",
                    slack::RELEASE_RESOURCES
                ),
            ));
        }
        Ok(())
    }

    /// EXC-8: no value given to `retain_until_complete` was dropped inside a
    /// `resources_releasable()` call (on any completion of the device).
    pub(super) fn no_destructor_inside_releasable(&self) -> Result<(), Breach> {
        let inside = self.live.iter().enumerate().find(|(_, live)| {
            live.flags
                .iter()
                .any(|flag| flag.inside.load(Ordering::SeqCst))
        });
        match inside {
            Some((index, _)) => Err(breach(
                "EXC-8",
                format!(
                    "{}: a value given to retain_until_complete was dropped inside a resources_releasable() call; the call must run no application destructor",
                    self.describe(index)
                ),
            )),
            None => Ok(()),
        }
    }

    pub(super) fn observe_one(&mut self, index: usize, status: Status) -> Result<(), Breach> {
        let live = &self.live[index];
        // Probes and flags first, the observer last (see the module docs).
        let dead_inputs = live.inputs.iter().filter(|p| !p.is_live()).count();
        let dead_outputs = live.outputs.iter().filter(|p| !p.is_live()).count();
        let dropped = live.flags.iter().filter(|f| f.dropped()).count();
        let state = live.observer.as_ref().map(Observer::state);
        let record = &self.model.subs[index];
        let who = self.describe(index);
        if let (Some(before), Some(now)) = (live.terminal, state) {
            if now != before {
                return Err(breach("EXC-3", format!("{who}: the observer reported {before:?}, later {now:?}: a terminal state changed")));
            }
        }
        if record.outputs_held && dead_outputs > 0 {
            return Err(breach("RET-5", format!("{who}: an output's storage was freed while the caller still held the output tensor")));
        }
        let freed = [
            (dead_inputs, Freed::Input, "input storage(s) were freed"),
            (dead_outputs, Freed::Output, "output storage(s) were freed"),
            (
                dropped,
                Freed::Retained,
                "value(s) given to retain_until_complete were dropped",
            ),
        ]
        .into_iter()
        .find(|(count, _, _)| *count > 0);
        if let Some((count, kind, what)) = freed {
            let work_live = match state {
                Some(state) => state == WorkState::Live,
                None => status.certainly_live(),
            };
            if state == Some(WorkState::Failed) && !status.may_fail && self.dropped(record.lane) {
                // Its executor went first: the completion did not keep it alive.
                return Err(breach(
                    "RET-2",
                    format!("{who}: its work failed although no fault was injected, and {count} {what}, after its lane's executor was dropped while it was queued (the completion must keep it alive), {}", history(record)),
                ));
            }
            if state == Some(WorkState::Failed) && !status.may_fail {
                // The likeliest cause of a clean failure: it lost what it used.
                return Err(breach(
                    freed_id(record, kind),
                    format!("{who}: its work failed although no fault was injected, and {count} {what}, {}", history(record)),
                ));
            }
            if work_live {
                let evidence = match (state, status.blocked) {
                    (Some(state), _) => format!("observer: {state:?}"),
                    (None, Some(reason)) => why(reason),
                    (None, None) => "work live".into(),
                };
                return Err(breach(
                    freed_id(record, kind),
                    format!(
                        "{who}: {count} {what} while its work was live ({evidence}), {}{}",
                        history(record),
                        ambiguity(record, live.retained_seen)
                    ),
                ));
            }
        }
        if freed.is_none() {
            self.live[index].retained_seen = true;
        }
        self.state_agrees(index, status, state)?;
        if state.is_some_and(WorkState::is_terminal) {
            self.live[index].terminal = state;
        }
        Ok(())
    }

    /// The observer's state agrees with the model: blocked work has not
    /// completed, and work that cannot fail has not failed or been cancelled
    /// unless the sequence cancelled it.
    pub(super) fn state_agrees(
        &self,
        index: usize,
        status: Status,
        state: Option<WorkState>,
    ) -> Result<(), Breach> {
        let Some(state) = state else {
            return Ok(());
        };
        let record = &self.model.subs[index];
        let who = self.describe(index);
        if let (Some(reason), WorkState::Completed) = (status.blocked, state) {
            return Err(Breach {
                id: early_id(record.subject, reason),
                message: format!(
                    "{who}: its work completed (observer) although {}",
                    why(reason)
                ),
            });
        }
        if let (Some(id), WorkState::Completed) = (must_fail(record, status), state) {
            return Err(breach(
                id,
                format!(
                    "{who}: its work completed (observer) although the contract says it must fail"
                ),
            ));
        }
        let unexpected_end = matches!(state, WorkState::Failed | WorkState::Cancelled)
            && !status.may_fail
            && record.seen != Seen::TornDown;
        if unexpected_end {
            if !record.quarantined && self.dropped(record.lane) {
                // Its executor went first: the completion did not keep it alive.
                return Err(breach("RET-2", format!("{who}: its work ended {state:?} (observer) although no fault was injected and no NativeCancel was requested, after its lane's executor was dropped while it was queued (the completion must keep it alive)")));
            }
            let id = if record.quarantined {
                "CAN-6"
            } else {
                value_id(record.subject)
            };
            return Err(breach(id, format!("{who}: its work ended {state:?} (observer) although no fault was injected and no NativeCancel was requested")));
        }
        Ok(())
    }
}
