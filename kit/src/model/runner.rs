//! Rank 0: executes a sequence against the backend, keeps the reference
//! model in step, and compares the two after every step.
//!
//! Each operation's own result (`is_complete`, `wait`, `wait_bounded`, ...)
//! is compared with the model as it is made. After every step, every
//! submission is then observed through the instruments the harness provides,
//! in an order that cannot produce false alarms: liveness probes and drop
//! flags first, the observer last (a correct backend frees nothing before its
//! work is terminal, so "freed, then terminal" is consistent and "freed,
//! then live" is not). Parts that need a missing instrument are skipped.

use std::borrow::Borrow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait};
use eredu_runtime::backend::SubmissionBackend;

use super::op::{Mode, Op, Timeout, Work};
use super::peer::{self, Plan};
use super::reference::{
    Fate, HandleState, Model, NewSubmission, Reason, Record, Seen, Status, Via,
};
use super::variant::Vary;
use super::{Options, Stats};
use crate::check::{slack, Finding};
use crate::harness::{
    Backend, CommCompletion, Executor, Harness, Instruments, Observer, OwnedExecutor, Probe,
    Tensor, WorkState,
};
use crate::matrix::{self, Driver, Handle, Pending, PendingVia, Subject, Submitted, Verify};
use crate::world::RankCtx;

/// At most this many lanes (the rank's executor and its forks).
const MAX_LANES: usize = 4;

/// Deadlines from this one on are CAN-8's edge: a backend that adds them to
/// an `Instant` may overflow.
const OVERFLOW_EDGE: Duration = Duration::from_secs(365 * 24 * 3600);

/// A divergence found on rank 0, before the step index is attached.
#[derive(Debug)]
pub(crate) struct Breach {
    /// The SPEC ID violated; `None` for a harness failure.
    pub(crate) id: Option<&'static str>,
    pub(crate) message: String,
}

fn breach(id: &'static str, message: String) -> Breach {
    Breach {
        id: Some(id),
        message,
    }
}

fn harness_breach(message: String) -> Breach {
    Breach { id: None, message }
}

fn from_finding(finding: Finding, id: &'static str, what: &str) -> Breach {
    match finding {
        Finding::Violation(message) => breach(id, format!("{what}: {message}")),
        Finding::NotSupported(message)
        | Finding::Harness(message)
        | Finding::Inconclusive(message) => harness_breach(format!("{what}: {message}")),
    }
}

/// The invariant an unexpected failure of clean work violates: the
/// operation's own value semantics (SUB-2 for local work).
fn value_id(subject: Subject) -> &'static str {
    use crate::operation::Operation::*;
    match subject.operation() {
        None => "SUB-2",
        Some(AllReduceSum) => "SUM-1",
        Some(AllGatherEven) => "GAT-1",
        Some(AllGatherUneven) => "GAT-2",
        Some(VariableAllToAll) => "A2A-1",
        Some(SendReceive) => "P2P-1",
        Some(Broadcast) => "BRD-1",
        Some(Barrier) => "BAR-1",
        Some(AgreeSuccess) => "AGR-1",
    }
}

/// What a blocked submission is waiting for, for messages.
fn why(reason: Reason) -> String {
    match reason {
        Reason::Hold => "a hold on its lane was not released".into(),
        Reason::Peer => "its late peer had not joined".into(),
        Reason::Order { producer } => {
            format!("it is ordered after submission {producer}, which could not have completed")
        }
    }
}

/// The invariant broken by work that finished although it was blocked.
fn early_id(subject: Subject, reason: Reason) -> Option<&'static str> {
    match reason {
        // A hold that does not hold is the harness's fault, not the backend's.
        Reason::Hold => None,
        Reason::Peer => Some(value_id(subject)),
        Reason::Order { .. } => Some("SUB-3"),
    }
}

/// Which kind of resource was found released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freed {
    Input,
    Output,
    Retained,
}

/// The invariant broken by releasing `freed` while the work is live, given
/// what the sequence did to the submission (most specific first).
fn freed_id(record: &Record, freed: Freed) -> &'static str {
    // An `Err` from `wait_bounded` also hands live work to the policy's
    // disposition (quarantine included): its error path is CAN-7's.
    if record.bounded_error {
        "CAN-7"
    } else if record.quarantined {
        "CAN-6"
    } else if record.handle == HandleState::Dropped {
        "RET-4"
    } else if record.faulted || record.error_seen {
        "EXC-7"
    } else {
        match freed {
            Freed::Retained => "RET-6",
            Freed::Output => "RET-5",
            Freed::Input if record.subject.operation().is_none() => "RET-1",
            Freed::Input => "RET-3",
        }
    }
}

/// What happened to a submission, for messages about its resources.
fn history(record: &Record) -> &'static str {
    if record.bounded_error {
        "after wait_bounded returned Err"
    } else if record.quarantined {
        "after wait_bounded handed it to quarantine"
    } else if record.handle == HandleState::Dropped {
        "after its completion was dropped"
    } else if record.faulted {
        "after its injected fault"
    } else {
        "with only the completion retaining it"
    }
}

/// What the evidence cannot tell apart, when [`freed_id`] blamed an injected
/// fault (EXC-7) for a resource no observation ever found retained.
fn ambiguity(record: &Record, retained_seen: bool) -> &'static str {
    let fault = !record.bounded_error
        && !record.quarantined
        && record.handle != HandleState::Dropped
        && record.faulted
        && !record.error_seen;
    if fault && !retained_seen {
        "; it was already gone at the first observation, so a backend that never retained it \
         (RET-1, RET-3, RET-5 or RET-6) looks the same from outside"
    } else {
        ""
    }
}

/// Polls `condition` until it holds or `limit` passes: yields for the first
/// millisecond (released resources usually go within microseconds), then
/// sleeps briefly between polls.
pub(crate) fn soon(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if condition() {
            return true;
        }
        let elapsed = start.elapsed();
        if elapsed >= limit {
            return false;
        }
        if elapsed < Duration::from_millis(1) {
            std::thread::yield_now();
        } else {
            crate::world::pause(Duration::from_micros(200));
        }
    }
}

thread_local! {
    /// Set while this thread is inside a `resources_releasable` call.
    static INSIDE_RELEASABLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the current thread as inside `resources_releasable` until dropped.
struct Inside;

impl Inside {
    fn enter() -> Self {
        INSIDE_RELEASABLE.with(|inside| inside.set(true));
        Self
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE_RELEASABLE.with(|inside| inside.set(false));
    }
}

/// What a value given to `retain_until_complete` reports: whether it was
/// dropped, and whether that happened inside a `resources_releasable` call
/// on the calling thread (EXC-8: the call runs no application destructor).
#[derive(Clone, Default)]
struct Flag {
    dropped: Arc<AtomicBool>,
    inside: Arc<AtomicBool>,
}

impl Flag {
    fn dropped(&self) -> bool {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// Sets its flags when dropped (a value given to `retain_until_complete`).
struct DropFlag(Flag);

impl Drop for DropFlag {
    fn drop(&mut self) {
        if INSIDE_RELEASABLE.with(std::cell::Cell::get) {
            self.0.inside.store(true, Ordering::SeqCst);
        }
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

/// Backend handles of one submission (the model's record has the rest).
struct Live<'c, 'w, H: Harness> {
    /// Held or late-peer work: the matrix's pending submission.
    pending: Option<Pending<'c, 'w, H>>,
    /// Unheld work.
    direct: Option<Handle<H>>,
    /// Driver index in claim order (collectives).
    driver: usize,
    observer: Option<Observer>,
    inputs: Vec<Probe>,
    outputs: Vec<Probe>,
    verify: Option<Verify<H>>,
    flags: Vec<Flag>,
    /// The terminal state the observer reported, once it did.
    terminal: Option<WorkState>,
    /// An observation found every resource of the submission alive (the
    /// backend was retaining them). Without it, a release blamed on an
    /// injected fault (EXC-7) may as well be a resource never retained.
    retained_seen: bool,
    /// A second handle on the work (`Harness::second_handle`), taken when
    /// `wait_bounded` consumed the completion: EXC-8's timeout clause is
    /// read on it.
    second: Option<Handle<H>>,
}

impl<'c, 'w, H: Harness> Live<'c, 'w, H> {
    fn new(
        pending: Option<Pending<'c, 'w, H>>,
        direct: Option<Submitted<H>>,
        driver: usize,
    ) -> Self {
        let mut live = Self {
            pending,
            direct: None,
            driver,
            observer: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            verify: None,
            flags: Vec::new(),
            terminal: None,
            retained_seen: false,
            second: None,
        };
        let parts = match (&mut live.pending, direct) {
            (Some(pending), _) => Parts::of(&mut pending.submitted),
            (None, Some(mut submitted)) => {
                let parts = Parts::of(&mut submitted);
                live.direct = Some(submitted.completion);
                parts
            }
            (None, None) => Parts::default(),
        };
        live.inputs = parts.inputs;
        live.outputs = parts.outputs;
        live.verify = parts.verify;
        live
    }

    fn completion(&self, state: HandleState) -> Option<&Handle<H>> {
        if state != HandleState::Held {
            return None;
        }
        match &self.pending {
            Some(pending) => Some(&pending.submitted.completion),
            None => self.direct.as_ref(),
        }
    }

    fn probes(&self) -> impl Iterator<Item = &Probe> {
        self.inputs.iter().chain(&self.outputs)
    }

    fn all_released(&self) -> bool {
        self.probes().all(|p| !p.is_live()) && self.flags.iter().all(Flag::dropped)
    }
}

/// What the caller keeps of a submission besides its completion.
struct Parts<H: Harness> {
    inputs: Vec<Probe>,
    outputs: Vec<Probe>,
    verify: Option<Verify<H>>,
}

impl<H: Harness> Default for Parts<H> {
    fn default() -> Self {
        Self {
            inputs: Vec::new(),
            outputs: Vec::new(),
            verify: None,
        }
    }
}

impl<H: Harness> Parts<H> {
    fn of(submitted: &mut Submitted<H>) -> Self {
        Self {
            inputs: std::mem::take(&mut submitted.input_probes),
            outputs: std::mem::take(&mut submitted.output_probes),
            verify: submitted.verify.take(),
        }
    }
}

/// Rank 0's state while running one sequence.
pub(crate) struct Runner<'c, 'w, H: Harness> {
    ctx: &'c RankCtx<'w, H>,
    instruments: Instruments,
    drivers: Vec<Driver<H>>,
    model: Model,
    live: Vec<Live<'c, 'w, H>>,
    /// Forked lanes (lane `i` is `forks[i - 1]`; lane 0 is the rank's executor).
    forks: Vec<OwnedExecutor<H>>,
    /// A lane for stand-in completions, never held or faulted.
    scratch: Option<OwnedExecutor<H>>,
    options: Options,
    /// What rank 1 submits in each round.
    plan: Arc<Plan>,
    /// A bounded wait left a collective round unfinished (quarantined, torn
    /// down or failed while live): the backend may refuse new work on the
    /// group from then on (eredu neither requires nor forbids that fence).
    fenced: bool,
    /// A bounded wait on local dependencies ended without completion: they
    /// select no group, so that alone never fences one (RET-8).
    local_deadline: bool,
    pub(crate) stats: Stats,
}

impl<'c, 'w, H: Harness> Runner<'c, 'w, H> {
    pub(crate) fn new(ctx: &'c RankCtx<'w, H>, options: Options, plan: Arc<Plan>) -> Self {
        let instruments = ctx.harness().instruments();
        Self {
            ctx,
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

    fn lane(&self, lane: usize) -> &Executor<H> {
        match lane.checked_sub(1) {
            Some(fork) => self.forks[fork].borrow(),
            None => self.ctx.executor(),
        }
    }

    fn lanes(&self) -> usize {
        self.forks.len() + 1
    }

    fn describe(&self, index: usize) -> String {
        let record = &self.model.subs[index];
        format!(
            "{} (submission {index}, lane {})",
            record.subject, record.lane
        )
    }

    fn status(&self, index: usize) -> Status {
        self.model.statuses()[index]
    }

    fn observer_state(&self, index: usize) -> Option<WorkState> {
        self.live[index].observer.as_ref().map(Observer::state)
    }

    /// What the watchdog blames if `op` hangs or panics.
    pub(crate) fn hang_hint(op: Op) -> Option<&'static str> {
        match op {
            Op::Wait { .. } => Some("EXC-4"),
            Op::IsComplete { .. } => Some("EXC-1"),
            // A deadline beyond what `Instant` arithmetic may hold (CAN-8's
            // edge), or an ordinary one that was not kept (CAN-2).
            Op::WaitBounded { timeout, .. } if timeout.duration() >= OVERFLOW_EDGE => Some("CAN-8"),
            Op::WaitBounded { .. } => Some("CAN-2"),
            _ => None,
        }
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
    fn applies(&self, op: Op, index: usize, status: Status) -> bool {
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
            Op::Submit { .. } | Op::Fork { .. } | Op::LateRelease { .. } => false,
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
            Op::Submit { .. } | Op::Fork { .. } => Ok(false),
        }
    }

    // -----------------------------------------------------------------------
    // Submitting and releasing.

    /// The driver of `work`, its index in claim order, and its
    /// parameterised submission (for the parameterised kinds); `None` when
    /// the operation is not claimed.
    fn driver(&self, work: Work) -> Option<(Driver<H>, usize, Option<Vary<H>>)> {
        match work {
            Work::LocalDependencies => Some((
                matrix::local_dependencies_driver::<H>(PendingVia::Hold),
                0,
                None,
            )),
            Work::Submit => Some((matrix::submit_driver::<H>(PendingVia::Hold), 0, None)),
            Work::Operation(index) => {
                let index = usize::from(index).checked_rem(self.drivers.len())?;
                Some((self.drivers[index], index, None))
            }
            varied => {
                let (driver, vary) = self.ctx.harness().claims().varied(varied.operation()?)?;
                let index = self
                    .drivers
                    .iter()
                    .position(|d| d.subject == driver.subject)?;
                Some((driver, index, Some(vary)))
            }
        }
    }

    /// The invariant a failure of clean work (no fault, nothing that must
    /// fail) violates: its value invariant, or RET-8 for a collective when
    /// only a bounded wait on local dependencies left work unfinished before
    /// it (the likeliest cause: that deadline fenced the group).
    fn clean_failure_id(&self, subject: Subject) -> &'static str {
        if subject.operation().is_some() && self.local_deadline && !self.fenced {
            "RET-8"
        } else {
            value_id(subject)
        }
    }

    /// A failure of clean work (submission `index`): usually
    /// [`Self::clean_failure_id`]'s invariant. But when a fault injected
    /// into another submission has not shown there, the fault may have
    /// landed here instead, and the value invariant would be the wrong one
    /// to blame. The fault instrument fails "the next native work item on
    /// the executor" it was armed on: when the observer shows the faulted
    /// submission on another lane did not fail, the two lanes share one
    /// queue (SUB-1: forked lanes are independent). On the same lane, or
    /// without an observer to tell, the kit names no invariant: a lazy
    /// launch or the instrument's own reading of "next" would do the same.
    fn clean_failure(&self, index: usize, message: String) -> Breach {
        let record = &self.model.subs[index];
        let unshown = |k: usize| {
            let other = &self.model.subs[k];
            k != index
                && other.faulted
                && !other.error_seen
                && self.observer_state(k) != Some(WorkState::Failed)
        };
        let Some(other) = (0..self.model.subs.len()).find(|&k| unshown(k)) else {
            return breach(self.clean_failure_id(record.subject), message);
        };
        let lane = self.model.subs[other].lane;
        let observed = self.observer_state(other).is_some();
        if observed && lane != record.lane {
            return breach(
                "SUB-1",
                format!(
                    "{message}; the fault injected into submission {other} on lane {lane} did not fail it                      (observer: {:?}): it failed this work on lane {} instead, so the two lanes share one queue",
                    self.observer_state(other),
                    record.lane
                ),
            );
        }
        Breach {
            id: None,
            message: format!(
                "{message}; the fault injected into submission {other} (lane {lane}) has not shown there                  ({}), so it may have landed on this work: a lazily launched submission or the fault                  instrument's reading of \"the next native work item\" would do this; no invariant is named",
                match self.observer_state(other) {
                    Some(state) => format!("observer: {state:?}"),
                    None => "no observer".into(),
                }
            ),
        }
    }

    /// Whether the observer says submission `index`'s work has ended.
    fn observed_ended(&self, index: usize) -> bool {
        self.observer_state(index)
            .is_some_and(WorkState::is_terminal)
    }

    /// `Op::Submit`: the driver's standard submission on `lane`, kept pending
    /// by a hold (local work) or the late peer (operations).
    fn submit(&mut self, work: Work, lane: u8, fault: bool) -> Result<bool, Breach> {
        let Some((driver, driver_index, vary)) = self.driver(work) else {
            return Ok(false);
        };
        let work = work.normalized();
        let must_fail = vary.and(work.must_fail());
        let subject = driver.subject;
        if subject.operation().is_some() && self.model.poisoned() {
            return Ok(false);
        }
        let lane = match subject.operation() {
            Some(_) => self
                .model
                .group_lane(|i| self.observed_ended(i))
                .unwrap_or(usize::from(lane) % self.lanes()),
            None => usize::from(lane) % self.lanes(),
        };
        let faulted = fault
            && self.instruments.fault
            && self
                .model
                .fault_lands_here(lane, |i| self.observed_ended(i))
            && self
                .ctx
                .harness()
                .inject_fault(self.ctx.state(), self.lane(lane));
        let via = match driver.pending {
            PendingVia::Hold if self.instruments.hold => Via::Hold,
            PendingVia::Hold | PendingVia::Lazy => Via::Unheld,
            PendingVia::LatePeer | PendingVia::PeerFed => Via::LatePeer,
        };
        let what = format!("submission {}", self.model.subs.len());
        let round = self.model.rounds.len();
        if subject.operation().is_some() {
            self.plan.set(round, work);
        }
        let submitted = match (via, vary) {
            (Via::Unheld, _) => (driver.submit)(self.ctx, self.lane(lane), matrix::Load::Light)
                .map(|submitted| Live::new(None, Some(submitted), driver_index)),
            (Via::Hold | Via::LatePeer, None) => driver
                .pending_on(self.ctx, self.lane(lane))
                .map(|pending| Live::new(Some(pending), None, driver_index)),
            (Via::Hold | Via::LatePeer, Some(vary)) => driver
                .pending_with(self.ctx, self.lane(lane), |ctx, executor| {
                    vary(ctx, executor, work)
                })
                .map(|pending| Live::new(Some(pending), None, driver_index)),
        };
        let mut live = match submitted {
            Ok(live) => live,
            // A tensor the harness cannot make: nothing was submitted.
            Err(Finding::NotSupported(_)) => return Ok(false),
            // Work that must fail may be refused at submission (a fault
            // armed for it then stays armed for the lane's next work).
            Err(_) if must_fail.is_some() => {
                if faulted {
                    self.model.refused(lane, subject.operation().is_some());
                }
                return Ok(true);
            }
            Err(finding) => return self.refused(finding, subject, lane, faulted, &what),
        };
        if self.instruments.observer {
            live.observer = live
                .completion(HandleState::Held)
                .and_then(|completion| self.ctx.harness().observer(completion.as_ref()));
        }
        let outputs_held = live.verify.is_some();
        self.model.submit(NewSubmission {
            subject,
            lane,
            via,
            faulted,
            must_fail,
            outputs_held,
        });
        self.live.push(live);
        self.stats.submissions += 1;
        self.settle();
        Ok(true)
    }

    /// A submission returned `Err`: a divergence, unless a fault was armed
    /// (a backend may report it at submission); then the lane's later work,
    /// and the group, may fail.
    fn refused(
        &mut self,
        finding: Finding,
        subject: Subject,
        lane: usize,
        faulted: bool,
        what: &str,
    ) -> Result<bool, Breach> {
        let collective = subject.operation().is_some();
        match finding {
            Finding::Violation(_) if faulted => {
                self.model.refused(lane, collective);
                Ok(true)
            }
            // After a bounded wait left a round unfinished, a backend may
            // refuse new work on the group: no more collectives.
            _ if collective && self.fenced => {
                self.model.refused(lane, true);
                Ok(true)
            }
            // Only local dependencies were left unfinished: they select no
            // group, so their deadline must not fence it (RET-8).
            Finding::Violation(message) | Finding::Inconclusive(message)
                if collective && self.local_deadline =>
            {
                Err(breach("RET-8", format!("{subject} ({what}) was refused after a bounded wait on local dependencies ended at its deadline (no collective was left unfinished): {message}")))
            }
            finding => Err(from_finding(
                finding,
                value_id(subject),
                &format!("{subject} ({what}) failed with no fault injected"),
            )),
        }
    }

    /// `Op::Release`: lets the work complete (a late peer `delay` later),
    /// then settles (see [`Options::settle`]).
    fn release_and_settle(&mut self, index: usize, delay: Duration) -> bool {
        if let Some(round) = self.model.subs[index].round {
            self.plan.delay(round, delay);
        }
        let released = self.release(index);
        self.settle();
        released
    }

    fn settle(&self) {
        if !self.options.settle.is_zero() {
            crate::world::pause(self.options.settle);
        }
    }

    /// Lets the work complete: releases the hold or lets the peer join.
    fn release(&mut self, index: usize) -> bool {
        if self.model.subs[index].released {
            return false;
        }
        if let Some(pending) = &mut self.live[index].pending {
            pending.release();
        }
        if let Some((round, fate)) = self.model.release(index) {
            self.publish(round, fate, self.live[index].driver);
        }
        true
    }

    /// Tells the late peer a round's fate.
    fn publish(&self, round: usize, fate: Fate, driver: usize) {
        match fate {
            Fate::Joined => self.ctx.signal(&peer::join(round, driver)),
            Fate::Skipped => self.ctx.signal(&peer::skip(round)),
            Fate::Unreleased => {}
        }
    }

    /// Rank 0 gave up on `round` (torn down): poison the group, skip every
    /// round not joined yet, and have the peer tear down any it joined.
    fn give_up(&mut self, round: usize) {
        self.model.poison(round);
        for later in round..self.model.rounds.len() {
            if self.model.skip(later) {
                self.ctx.signal(&peer::skip(later));
            } else {
                self.ctx.signal(&peer::abandon(later));
            }
        }
    }

    // -----------------------------------------------------------------------
    // Observing completion through the API.

    /// The observer must report `Completed` after the API reported success.
    /// The invariant broken when a call (`is_complete`, `wait`,
    /// `wait_bounded`, whose own invariant is `reporting`) reports success
    /// for work the contract says must fail: the operation's own invariant
    /// (the failure was never detected), unless the observer saw the work
    /// fail, in which case the backend knew and the call misreported it.
    /// Without an observer the two cannot be told apart from outside; the
    /// operation's invariant is named, as the one the caller observed broken.
    fn must_fail(
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
    fn faulted_success(&self, index: usize, id: &'static str, what: &str) -> Breach {
        let who = self.describe(index);
        match self.observer_state(index) {
            Some(WorkState::Completed) => Breach {
                id: None,
                message: format!(
                    "{who}: {what} for work whose injected fault should make it fail, and the observer \
                     says it completed: the fault did not reach this work (it may have landed on later \
                     work, as with a lazily launched submission); no invariant is named"
                ),
            },
            _ => breach(
                id,
                format!("{who}: {what} for work whose injected fault makes it fail"),
            ),
        }
    }

    fn completed_per_observer(
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
    fn verify(&mut self, index: usize) -> Result<(), Breach> {
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
    fn is_complete(&mut self, index: usize) -> Result<bool, Breach> {
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
    fn is_complete_true(
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
    fn wait(&mut self, index: usize) -> Result<bool, Breach> {
        let record = self.model.subs[index].clone();
        let status = self.status(index);
        let Some(completion) = self.live[index].completion(record.handle) else {
            return Ok(false);
        };
        if !status.due {
            return Ok(false);
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

    // -----------------------------------------------------------------------
    // Bounded waits.

    /// `Op::WaitBounded` (see [`Runner::applies`]).
    fn wait_bounded(&mut self, index: usize, timeout: Timeout, mode: Mode) -> Result<bool, Breach> {
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

    fn bounded_outcome(
        &mut self,
        index: usize,
        record: &Record,
        status: Status,
        completion: Handle<H>,
        policy: BoundedCompletionWait,
    ) -> Result<(), Breach> {
        let started = Instant::now();
        let outcome = completion.wait_bounded(self.ctx, policy);
        let elapsed = started.elapsed();
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
    fn disposed(
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

    // -----------------------------------------------------------------------
    // Dropping handles.

    /// A completed, resource-free stand-in for a completion taken out of a
    /// pending submission, made on a lane of its own.
    fn stand_in(&mut self) -> Result<Handle<H>, Breach> {
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
    fn take_completion(&mut self, index: usize) -> Result<Handle<H>, Breach> {
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
    fn drop_outputs(&mut self, index: usize) -> bool {
        let dropped = self.live[index].verify.take().is_some();
        self.model.subs[index].outputs_held = false;
        dropped
    }

    /// `Op::DropCompletion`, except on doomed work (which only native
    /// cancellation through its completion can end).
    fn drop_completion(&mut self, index: usize) -> Result<bool, Breach> {
        if self.model.subs[index].handle != HandleState::Held || self.status(index).doomed {
            return Ok(false);
        }
        drop(self.take_completion(index)?);
        self.model.subs[index].handle = HandleState::Dropped;
        Ok(true)
    }

    // -----------------------------------------------------------------------
    // Lanes, ordering, retention.

    /// `Op::Fork`: exactly `count` new lanes (SUB-1).
    fn fork(&mut self, count: usize) -> Result<bool, Breach> {
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
            self.forks.push(lane);
            self.model.fork();
        }
        Ok(true)
    }

    /// The plain completion of submission `index`, while the caller holds it.
    fn plain(&self, index: usize) -> Option<&crate::harness::PlainCompletion<H>> {
        match self.live[index].completion(self.model.subs[index].handle) {
            Some(Handle::Plain(completion)) => Some(completion),
            _ => None,
        }
    }

    /// `Op::OrderAfter`: later work on a lane follows submission `index`.
    /// The lane is counted from the producer's, skipping it when there are
    /// others (ordering after work on the same in-order lane shows nothing).
    fn order_after(&mut self, index: usize, lane: u8) -> Result<bool, Breach> {
        let lanes = self.lanes();
        let own = self.model.subs[index].lane;
        let lane = match lanes {
            1 => 0,
            _ => (own + 1 + usize::from(lane) % (lanes - 1)) % lanes,
        };
        let Some(producer) = self.plain(index) else {
            return Ok(false);
        };
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
    fn retain(&mut self, index: usize) -> Result<bool, Breach> {
        let Some(completion) = self.plain(index) else {
            return Ok(false);
        };
        let flag = Flag::default();
        let executor = self.lane(self.model.subs[index].lane);
        Backend::<H>::retain_until_complete(executor, completion, DropFlag(flag.clone())).map_err(
            |e| {
                breach(
                    "RET-6",
                    format!("retain_until_complete on submission {index} failed: {e}"),
                )
            },
        )?;
        self.live[index].flags.push(flag);
        Ok(true)
    }

    // -----------------------------------------------------------------------
    // After every step.

    /// Compares every submission's observable state with the model.
    fn observe(&mut self) -> Result<(), Breach> {
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
    fn releasable_agrees(&self, index: usize, status: Status) -> Result<(), Breach> {
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
            let _inside = Inside::enter();
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
        if succeeded && !soon(slack::RELEASE_RESOURCES, || read(&self.live[index])) {
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
    fn no_destructor_inside_releasable(&self) -> Result<(), Breach> {
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

    fn observe_one(&mut self, index: usize, status: Status) -> Result<(), Breach> {
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
    fn state_agrees(
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
            let id = if record.quarantined {
                "CAN-6"
            } else {
                value_id(record.subject)
            };
            return Err(breach(id, format!("{who}: its work ended {state:?} (observer) although no fault was injected and no NativeCancel was requested")));
        }
        Ok(())
    }

    // -----------------------------------------------------------------------
    // The end of a sequence.

    fn release_everything(&mut self) {
        for index in 0..self.live.len() {
            self.release(index);
        }
    }

    /// The final step: release everything, tear down doomed work, wait for
    /// the rest, drop every handle, and check that everything is released
    /// (RET-6, RET-7) and the ledger drains once the peer is finished.
    pub(crate) fn drain(&mut self) -> Result<(), Breach> {
        self.release_everything();
        self.ctx.signal(peer::DONE);
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
        if !self.ctx.await_signal(peer::FINISHED, slack::RELEASE * 2) {
            return Err(harness_breach("the late peer did not finish".into()));
        }
        if let Some((id, message)) = self.plan.first_violation() {
            return Err(breach(id, format!("the late peer's side: {message}")));
        }
        self.ledger_drains()
    }

    /// Natively cancels doomed work at the end (its peer never joins).
    fn tear_down(&mut self, index: usize) -> Result<(), Breach> {
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
    fn finish_with(&mut self, index: usize) {
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
    fn released_in_time(&self) -> Result<(), Breach> {
        let released = soon(slack::RELEASE_RESOURCES, || {
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
    fn ledger_drains(&self) -> Result<(), Breach> {
        if !self.instruments.ledger {
            return Ok(());
        }
        let ledger = || self.ctx.harness().ledger(self.ctx.state());
        let drained = soon(slack::RELEASE_RESOURCES, || {
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
            self.ctx.signal(&peer::abandon(round));
        }
        self.ctx.signal(peer::DONE);
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

/// The SPEC ID a success of submission `record` would violate: work the
/// contract says must fail, unless it is doomed (a round after a cancelled
/// one may meet that round's stale contribution and complete with it).
fn must_fail(record: &Record, status: Status) -> Option<&'static str> {
    record.must_fail.filter(|_| !status.doomed)
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
        Op::Submit { .. } | Op::Fork { .. } => 0,
    }
}
