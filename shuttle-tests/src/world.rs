//! The workload: sequences of the kit's model operations ([`Op`]) replayed
//! against the CPU backend on shuttle threads, checked after every step
//! against a compact reference model.
//!
//! The world is the kit's sequence world: one device, a group of two
//! members and a route from rank 1 to rank 0. Rank 0 is the shuttle main
//! thread and runs the sequence; rank 1 is the *late peer*, another shuttle
//! thread that joins a collective round only when the sequence releases it
//! ([`Op::Release`]); local work is kept pending with the hold instrument.
//! Every executor is a shuttle thread too, so the scheduler interleaves the
//! ranks, their workers, the rendezvous and the routes.
//!
//! The model and the checks follow `commcheck::model` (its reference model
//! and runner are private to the kit, and its world runs on `std` threads,
//! which shuttle cannot schedule): a submission is *blocked* (cannot have
//! finished), *due* (will finish with nothing more done) or neither; it *may
//! fail* only after an injected fault. After every step every submission is
//! observed, liveness probes and drop flags first and the observer last, and
//! a breach panics with the SPEC ID it violates:
//!
//! - retention: nothing a live submission retains is freed (RET-1, RET-3,
//!   RET-4, RET-5, RET-6; EXC-7 after an error, CAN-6 after quarantine, CAN-7
//!   after `Err`), and everything is released at the end (RET-6, RET-7, and
//!   the ledger drains);
//! - exact completion: blocked work never completes (EXC-2, CAN-1, SUB-3,
//!   the operation's value invariant), a terminal state never changes and
//!   `is_complete` is monotonic (EXC-3, EXC-5), `wait` returns for due work
//!   (EXC-4), outputs hold the right values once complete (SUM-1, BRD-1,
//!   P2P-1);
//! - sticky errors: a faulted submission never reports success (EXC-6,
//!   CAN-9), clean work never fails;
//! - bounded waits: the outcome, the reported mode, the deadline on the
//!   virtual clock, and NativeCancel teardown finished on return (CAN-1..5,
//!   CAN-7).
//!
//! A hang (a deadlock shuttle detects, or a livelock its step bound stops)
//! is blamed on what rank 0 was doing, as the kit's watchdog blames it
//! ([`hang_hint`]).
//!
//! The sequence model's restrictions are kept, simplified where the
//! simplification only removes sequences: faults are injected into local
//! work only (a faulted collective poisons the group), collectives are the
//! sum, the barrier, the broadcast and `send_receive`, and a collective is
//! natively cancelled only while it is the last round and its peer has not
//! joined (so no later round is doomed).

use std::cell::RefCell;
use std::sync::Arc;

use commcheck::model::{sequence_strategy, Mode, Op, Timeout, Work};
use commcheck_cpu::shuttle_support::Instant;
use commcheck_cpu::{
    CompletionObserver, CpuBackend, CpuCompletion, CpuDevice, CpuExecutor, CpuGroup, CpuRoute,
    CpuTensor, Defect, Hold, Phase, StorageId,
};
use eredu_core::checkpoint::TensorDtype;
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion};
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, CommunicationBackend, PointToPointBackend, SubmissionBackend,
    SumReductionBackend,
};
use eredu_runtime::{
    BoundaryRoleContract, CommunicationRouteId, RoleExactBoundaryContract, RoleExactBoundaryValue,
};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use shuttle::sync::atomic::{AtomicBool, Ordering};
use shuttle::sync::{Condvar, Mutex};
use shuttle::thread;

/// At most this many lanes on rank 0 (its executor and its forks).
const MAX_LANES: usize = 4;

/// Route id of the standard point-to-point route (rank 1 → rank 0).
const ROUTE: u64 = 7;

/// Yields rank 0 grants released resources (or the ledger) to go before it
/// reports them leaked: far more than a clean release takes.
const SOON: usize = 10_000;

// ---------------------------------------------------------------------------
// Sequences and attribution.

/// `count` sequences of up to `max_len` operations from the kit's own
/// strategy (`commcheck::model::sequence_strategy`, the distribution
/// `tests/sequences.rs` draws from), generated from `seed` outside shuttle.
pub fn sequences(seed: u64, count: usize, max_len: usize) -> Vec<Vec<Op>> {
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&seed.to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = sequence_strategy(max_len);
    (0..count)
        .map(|_| match strategy.new_tree(&mut runner) {
            Ok(tree) => tree.current().0,
            Err(reason) => panic!("the kit's sequence strategy failed: {reason}"),
        })
        .collect()
}

/// Prints `ops` as the `vec![...]` literal `commcheck::model::Sequence` prints.
pub fn literal(ops: &[Op]) -> String {
    commcheck::model::Sequence(ops.to_vec()).to_string()
}

/// What rank 0 is doing, for blaming a hang (the kit's watchdog hints).
#[derive(Debug, Clone, Default)]
struct Progress {
    step: usize,
    op: Option<Op>,
    /// In the final drain or teardown (`op` is `None` there).
    phase: Option<&'static str>,
    hint: Option<&'static str>,
}

std::thread_local! {
    /// Every shuttle thread of an execution runs on the OS thread of the
    /// `Runner`, which reads this after the execution ends.
    static PROGRESS: RefCell<Progress> = RefCell::default();
}

fn progress(update: impl FnOnce(&mut Progress)) {
    PROGRESS.with(|p| update(&mut p.borrow_mut()));
}

pub(crate) fn clear_progress() {
    progress(|p| *p = Progress::default());
}

/// The SPEC ID a hang of `op` is blamed on: the kit's watchdog hints.
pub fn hang_hint(op: Op) -> Option<&'static str> {
    match op {
        Op::Wait { .. } => Some("EXC-4"),
        Op::IsComplete { .. } => Some("EXC-1"),
        Op::WaitBounded {
            timeout: Timeout::Unbounded,
            ..
        } => Some("CAN-8"),
        Op::WaitBounded { .. } => Some("CAN-2"),
        _ => None,
    }
}

/// Whether `message` starts with a SPEC ID (`ABC-1:`).
fn names_id(message: &str) -> bool {
    let Some((id, _)) = message.split_once(':') else {
        return false;
    };
    commcheck::spec::invariant(id).is_some()
}

/// A failing execution's panic message, starting with a SPEC ID: the
/// driver's own breaches name theirs; anything else (shuttle's deadlock or
/// step-bound report, a panic in the backend) is blamed on what rank 0 was
/// doing when the execution failed.
pub(crate) fn attribute(message: &str) -> String {
    if names_id(message) {
        return message.to_owned();
    }
    let p = PROGRESS.with(|p| p.borrow().clone());
    let place = match (p.op, p.phase) {
        (Some(op), _) => format!("step {} ({op})", p.step),
        (None, Some(phase)) => format!("step {} ({phase})", p.step),
        (None, None) => "before the first step".to_owned(),
    };
    match p.hint {
        Some(id) => format!("{id}: {place} never returned (shuttle: {message})"),
        None => format!("(no SPEC ID) {place}: {message}"),
    }
}

/// Panics with a breach of `id`.
macro_rules! breach {
    ($id:expr, $($arg:tt)*) => {
        panic!("{}: {}", $id, format!($($arg)*))
    };
}

// ---------------------------------------------------------------------------
// Submissions.

/// What a submission submits: the kit's standard submissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    LocalDependencies,
    Submit,
    Sum,
    Barrier,
    Broadcast,
    SendReceive,
}

/// Collectives, in the order `Work::Operation(i)` picks them (modulo).
const OPERATIONS: [Subject; 4] = [
    Subject::Sum,
    Subject::Barrier,
    Subject::Broadcast,
    Subject::SendReceive,
];

impl Subject {
    /// What the driver submits for `work`; `None` for the kit's
    /// parameterised submissions, which it does not model (skipped).
    fn of(work: Work) -> Option<Self> {
        match work {
            Work::LocalDependencies => Some(Self::LocalDependencies),
            Work::Submit => Some(Self::Submit),
            Work::Operation(index) => Some(OPERATIONS[usize::from(index) % OPERATIONS.len()]),
            #[allow(unreachable_patterns, reason = "the kit may add submissions")]
            _ => None,
        }
    }

    fn collective(self) -> bool {
        !matches!(self, Self::LocalDependencies | Self::Submit)
    }

    /// The invariant an unexpected failure or wrong value breaks.
    fn value_id(self) -> &'static str {
        match self {
            Self::LocalDependencies | Self::Submit => "SUB-2",
            Self::Sum => "SUM-1",
            Self::Barrier => "BAR-1",
            Self::Broadcast => "BRD-1",
            Self::SendReceive => "P2P-1",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::LocalDependencies => "submit_local_dependencies",
            Self::Submit => "submit",
            Self::Sum => "all_reduce_sum",
            Self::Barrier => "barrier",
            Self::Broadcast => "broadcast",
            Self::SendReceive => "send_receive",
        }
    }
}

/// The kit's standard input values of `rank`.
fn values(rank: usize, len: usize) -> Vec<f32> {
    (0..len).map(|i| (rank * 16 + i + 1) as f32).collect()
}

fn tensor(device: &CpuDevice, values: &[f32]) -> CpuTensor {
    match device.tensor(values, &[values.len() as i32]) {
        Ok(tensor) => tensor,
        Err(error) => panic!("(no SPEC ID) making a tensor failed: {error}"),
    }
}

/// Frames one tensor for the standard route (eredu-runtime's framing).
fn frame(tensor: CpuTensor) -> Vec<RoleExactBoundaryValue<CpuTensor>> {
    let framed = BoundaryRoleContract::new("value-0", TensorDtype::F32, vec![4]).and_then(|role| {
        let roles = vec![role];
        RoleExactBoundaryContract::new("commcheck.shuttle", roles.clone())?.frame_values(
            CommunicationRouteId::new(ROUTE),
            &roles,
            vec![tensor],
        )
    });
    match framed {
        Ok(framed) => framed,
        Err(error) => panic!("(no SPEC ID) framing failed: {error}"),
    }
}

/// How a submission is kept pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Hold,
    LatePeer,
}

/// The most the caller has learnt about a submission's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Nothing,
    Completed,
    TornDown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandleState {
    Held,
    Dropped,
    Consumed,
}

/// Why blocked work cannot have finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Hold,
    Peer,
    Order { producer: usize },
}

fn why(reason: Reason) -> String {
    match reason {
        Reason::Hold => "a hold on its lane was not released".into(),
        Reason::Peer => "its late peer had not joined".into(),
        Reason::Order { producer } => {
            format!("it is ordered after submission {producer}, which could not have completed")
        }
    }
}

/// What rank 1 has been told about a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Unreleased,
    Joined,
    Skipped,
}

/// One submission: its handles and what the model knows of it.
struct Sub {
    subject: Subject,
    lane: usize,
    via: Via,
    round: Option<usize>,
    hold: Option<Hold>,
    completion: Option<CpuCompletion>,
    handle: HandleState,
    observer: CompletionObserver,
    inputs: Vec<StorageId>,
    outputs: Vec<StorageId>,
    /// The caller's output tensors and their expected values, until dropped.
    held_outputs: Option<(Vec<CpuTensor>, Vec<f32>)>,
    flags: Vec<Arc<AtomicBool>>,
    faulted: bool,
    lane_tainted: bool,
    released: bool,
    holds_at_submit: Vec<usize>,
    after: Vec<usize>,
    seen: Seen,
    said_complete: bool,
    error_seen: bool,
    quarantined: bool,
    bounded_error: bool,
    terminal: Option<Phase>,
}

impl Sub {
    fn describe(&self, index: usize) -> String {
        format!(
            "{} (submission {index}, lane {})",
            self.subject.name(),
            self.lane
        )
    }

    fn ended(&self) -> bool {
        self.seen != Seen::Nothing
    }

    fn all_released(&self, device: &CpuDevice) -> bool {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .all(|id| !device.storage_live(*id))
            && self.flags.iter().all(|f| f.load(Ordering::SeqCst))
    }
}

/// The model's verdict on one submission.
#[derive(Debug, Clone, Copy, Default)]
struct Status {
    blocked: Option<Reason>,
    due: bool,
    may_fail: bool,
}

impl Status {
    fn certainly_live(self) -> bool {
        self.blocked.is_some() && !self.may_fail
    }
}

#[derive(Debug, Clone, Default)]
struct Lane {
    gates: Vec<usize>,
    faulted: bool,
}

/// Sets its flag when dropped (a value given to `retain_until_complete`).
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------
// The late peer.

/// What rank 0 tells rank 1.
#[derive(Default)]
struct PeerBox {
    fates: Vec<Option<(Fate, Subject)>>,
    done: bool,
}

#[derive(Default)]
struct Mailbox {
    state: Mutex<PeerBox>,
    changed: Condvar,
}

impl Mailbox {
    fn tell(&self, round: usize, fate: Fate, subject: Subject) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.fates.len() <= round {
            state.fates.resize(round + 1, None);
        }
        state.fates[round] = Some((fate, subject));
        drop(state);
        self.changed.notify_all();
    }

    fn done(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).done = true;
        self.changed.notify_all();
    }

    /// The fate of `round`, or `None` once rank 0 is done without one.
    fn next(&self, round: usize) -> Option<(Fate, Subject)> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(Some(fate)) = state.fates.get(round) {
                return Some(*fate);
            }
            if state.done {
                return None;
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// An output tensor and the values it must hold once its work completed.
type Expected = (CpuTensor, Vec<f32>);

/// What went wrong on rank 1's side of a round: rank 0 judges it, since
/// only rank 0 knows whether its own side may have failed (a fault injected
/// on its lane) and so failed rank 1's.
struct PeerFailure {
    round: usize,
    subject: Subject,
    message: String,
}

/// Rank 1: joins each round when told, in order; at the end waits for its
/// side of every round it joined (rank 0 natively cancels only rounds rank 1
/// never joins) and checks its outputs; returns what failed.
fn late_peer(
    device: CpuDevice,
    group: CpuGroup,
    route: CpuRoute,
    mailbox: Arc<Mailbox>,
) -> Vec<PeerFailure> {
    let executor = device.executor();
    let mut joined: Vec<(usize, Subject, CpuCompletion, Option<Expected>)> = Vec::new();
    for round in 0.. {
        let Some((fate, subject)) = mailbox.next(round) else {
            break;
        };
        if fate != Fate::Joined {
            continue;
        }
        let input = || tensor(&device, &values(1, 4));
        let submitted = match subject {
            Subject::Sum => CpuBackend::all_reduce_sum(input(), &group, &executor).map(|s| {
                let expected = (0..4).map(|i| values(0, 4)[i] + values(1, 4)[i]).collect();
                (s.completion, Some((s.output, expected)))
            }),
            Subject::Broadcast => CpuBackend::broadcast(input(), 1, &group, &executor)
                .map(|s| (s.completion, Some((s.output, values(1, 4))))),
            Subject::Barrier => CpuBackend::barrier(&group, &executor).map(|c| (c, None)),
            Subject::SendReceive => CpuBackend::send_receive(frame(input()), &route, &executor)
                .map(|s| (s.completion, None)),
            Subject::LocalDependencies | Subject::Submit => continue,
        };
        match submitted {
            Ok((completion, output)) => joined.push((round, subject, completion, output)),
            Err(error) => breach!(
                subject.value_id(),
                "rank 1's side of round {round} ({}) was refused: {error}",
                subject.name()
            ),
        }
    }
    let mut failures = Vec::new();
    for (round, subject, completion, output) in joined {
        let message = match (completion.wait(), output) {
            (Err(error), _) => format!("rank 1's side failed: {error}"),
            (Ok(()), Some((output, expected))) => match output.read_materialised() {
                Some(got) if got == expected => continue,
                got => format!("rank 1's output is {got:?}, expected {expected:?}"),
            },
            (Ok(()), None) => continue,
        };
        failures.push(PeerFailure {
            round,
            subject,
            message,
        });
    }
    failures
}

// ---------------------------------------------------------------------------
// Rank 0.

/// Rank 0's state while it runs one sequence.
struct Rank0 {
    device: CpuDevice,
    group: CpuGroup,
    route: CpuRoute,
    executor: CpuExecutor,
    forks: Vec<CpuExecutor>,
    lanes: Vec<Lane>,
    subs: Vec<Sub>,
    rounds: Vec<(usize, Fate)>,
    poisoned: bool,
    mailbox: Arc<Mailbox>,
}

/// Polls `condition` while yielding to the other threads, `SOON` times at most.
fn soon(mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..SOON {
        if condition() {
            return true;
        }
        thread::yield_now();
    }
    condition()
}

impl Rank0 {
    fn lane(&self, lane: usize) -> &CpuExecutor {
        match lane.checked_sub(1) {
            Some(fork) => &self.forks[fork],
            None => &self.executor,
        }
    }

    fn lane_count(&self) -> usize {
        self.forks.len() + 1
    }

    fn observed_terminal(&self, index: usize) -> bool {
        self.subs[index].ended() || self.subs[index].observer.is_terminal()
    }

    // -- The reference model --------------------------------------------------

    fn statuses(&self) -> Vec<Status> {
        let mut statuses: Vec<Status> = Vec::with_capacity(self.subs.len());
        for index in 0..self.subs.len() {
            let sub = &self.subs[index];
            let may_fail = sub.faulted
                || sub.lane_tainted
                || sub
                    .after
                    .iter()
                    .any(|&p| statuses[p].may_fail || self.subs[p].seen == Seen::TornDown);
            let blocked = self.blocked(index, &statuses);
            let due = self.due(index, &statuses);
            statuses.push(Status {
                blocked,
                due,
                may_fail,
            });
        }
        statuses
    }

    fn own_cause_released(&self, index: usize) -> bool {
        let sub = &self.subs[index];
        match (sub.via, sub.round) {
            (Via::LatePeer, Some(round)) => self.rounds[round].1 == Fate::Joined,
            _ => sub.released,
        }
    }

    fn blocked(&self, index: usize, earlier: &[Status]) -> Option<Reason> {
        let sub = &self.subs[index];
        if sub.ended() {
            return None;
        }
        if (sub.via == Via::Hold && !sub.released)
            || sub.holds_at_submit.iter().any(|&h| !self.subs[h].released)
        {
            return Some(Reason::Hold);
        }
        if let Some(round) = sub.round {
            let waiting = self.rounds[..round]
                .iter()
                .any(|(_, fate)| *fate == Fate::Unreleased);
            if !self.own_cause_released(index) || waiting {
                return Some(Reason::Peer);
            }
        }
        sub.after
            .iter()
            .copied()
            .find(|&p| earlier[p].certainly_live())
            .map(|producer| Reason::Order { producer })
    }

    fn due(&self, index: usize, earlier: &[Status]) -> bool {
        let sub = &self.subs[index];
        if sub.ended() {
            return true;
        }
        if !self.own_cause_released(index) {
            return false;
        }
        let lane_free = self
            .subs
            .iter()
            .all(|s| s.lane != sub.lane || s.via != Via::Hold || s.released);
        let before_on_lane = (0..index)
            .filter(|&i| self.subs[i].lane == sub.lane)
            .all(|i| earlier[i].due);
        let producers = sub.after.iter().all(|&p| earlier[p].due);
        let rounds = match sub.round {
            Some(round) => self.rounds[..round].iter().all(|(s, _)| earlier[*s].due),
            None => true,
        };
        lane_free && before_on_lane && producers && rounds
    }

    // -- Steps -----------------------------------------------------------------

    fn step(&mut self, op: Op) {
        let executed = match op {
            Op::Submit { work, lane, fault } => self.submit(work, lane, fault),
            Op::Fork { count } => self.fork(usize::from(count % 3)),
            other => match self.pick(other) {
                Some(index) => {
                    self.apply(index, other);
                    true
                }
                None => false,
            },
        };
        tally(|t| match executed {
            true => t.executed += 1,
            false => t.skipped += 1,
        });
        self.observe();
    }

    /// The submission `op` acts on: `sub` modulo their number when the
    /// operation applies to it, else the next one it applies to.
    fn pick(&self, op: Op) -> Option<usize> {
        let sub = match op {
            Op::Release { sub }
            | Op::IsComplete { sub }
            | Op::Wait { sub }
            | Op::WaitBounded { sub, .. }
            | Op::DropOutputs { sub }
            | Op::DropCompletion { sub }
            | Op::OrderAfter { sub, .. }
            | Op::Retain { sub } => sub,
            // Submissions and forks; and any operation the kit adds later.
            _ => return None,
        };
        let count = self.subs.len();
        let start = usize::from(sub) % count.max(1);
        let statuses = self.statuses();
        (0..count)
            .map(|k| (start + k) % count)
            .find(|&index| self.applies(op, index, statuses[index]))
    }

    fn applies(&self, op: Op, index: usize, status: Status) -> bool {
        let sub = &self.subs[index];
        let held = sub.handle == HandleState::Held;
        match op {
            Op::Release { .. } => !sub.released,
            Op::IsComplete { .. } => held,
            Op::Wait { .. } => held && status.due,
            Op::WaitBounded { timeout, mode, .. } => {
                let cancellable = match (mode, sub.round) {
                    // Only the last round, before its peer joined: no
                    // later round is left doomed, and rank 1 never
                    // meets a torn-down round.
                    (Mode::NativeCancel, Some(round)) => {
                        round + 1 == self.rounds.len() && self.rounds[round].1 == Fate::Unreleased
                    }
                    _ => true,
                };
                held && cancellable && (timeout != Timeout::Unbounded || status.due)
            }
            Op::DropOutputs { .. } => sub.held_outputs.is_some(),
            Op::DropCompletion { .. } => held,
            Op::OrderAfter { .. } | Op::Retain { .. } => held && sub.subject == Subject::Submit,
            _ => false,
        }
    }

    fn apply(&mut self, index: usize, op: Op) {
        match op {
            Op::Release { .. } => self.release(index),
            Op::IsComplete { .. } => self.is_complete(index),
            Op::Wait { .. } => self.wait(index),
            Op::WaitBounded { timeout, mode, .. } => self.wait_bounded(index, timeout, mode),
            Op::DropOutputs { .. } => {
                self.subs[index].held_outputs = None;
            }
            Op::DropCompletion { .. } => {
                self.subs[index].completion = None;
                self.subs[index].handle = HandleState::Dropped;
            }
            Op::OrderAfter { lane, .. } => self.order_after(index, lane),
            Op::Retain { .. } => self.retain(index),
            _ => {}
        }
    }

    /// The lane of the group's latest unfinished round, if any: rounds
    /// start in submission order on one lane (the kit's rule).
    fn group_lane(&self) -> Option<usize> {
        self.rounds
            .iter()
            .rev()
            .map(|(sub, _)| *sub)
            .find(|&sub| !self.observed_terminal(sub))
            .map(|sub| self.subs[sub].lane)
    }

    fn submit(&mut self, work: Work, lane: u8, fault: bool) -> bool {
        let Some(subject) = Subject::of(work) else {
            return false;
        };
        if subject.collective() && self.poisoned {
            return false;
        }
        let lane = match subject.collective() {
            true => self
                .group_lane()
                .unwrap_or(usize::from(lane) % self.lane_count()),
            false => usize::from(lane) % self.lane_count(),
        };
        let index = self.subs.len();
        // A fault lands on this submission only if nothing else on the lane
        // can start first.
        let faulted = fault
            && !subject.collective()
            && self.lanes[lane].gates.is_empty()
            && (0..index)
                .filter(|&i| self.subs[i].lane == lane)
                .all(|i| self.observed_terminal(i));
        if faulted {
            self.lane(lane).inject_fault();
        }
        let holds_at_submit = (0..index)
            .filter(|&i| {
                let s = &self.subs[i];
                s.lane == lane && s.via == Via::Hold && !s.released
            })
            .collect();
        let device = self.device.clone();
        let executor = self.lane(lane).clone();
        let mut hold = None;
        let mut outputs = Vec::new();
        let mut held_outputs = None;
        let mut inputs = Vec::new();
        let result = match subject {
            Subject::LocalDependencies | Subject::Submit => {
                hold = Some(executor.hold());
                let input = tensor(&device, &values(0, 4));
                inputs.push(input.storage_id());
                if subject == Subject::Submit {
                    CpuBackend::submit(&executor, [&input])
                } else {
                    CpuBackend::submit_local_dependencies([&input], &executor).map(|s| s.completion)
                }
            }
            Subject::Sum | Subject::Broadcast => {
                let input = if subject == Subject::Sum {
                    tensor(&device, &values(0, 4))
                } else {
                    tensor(&device, &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0])
                };
                inputs.push(input.storage_id());
                let submitted = if subject == Subject::Sum {
                    CpuBackend::all_reduce_sum(input, &self.group, &executor)
                } else {
                    CpuBackend::broadcast(input, 1, &self.group, &executor)
                };
                submitted.map(|s| {
                    outputs.push(s.output.storage_id());
                    let expected = if subject == Subject::Sum {
                        (0..4).map(|i| values(0, 4)[i] + values(1, 4)[i]).collect()
                    } else {
                        values(1, 4)
                    };
                    held_outputs = Some((vec![s.output], expected));
                    s.completion
                })
            }
            Subject::Barrier => CpuBackend::barrier(&self.group, &executor),
            Subject::SendReceive => {
                let input = tensor(&device, &[0.0; 4]);
                inputs.push(input.storage_id());
                CpuBackend::send_receive(frame(input), &self.route, &executor).map(|s| {
                    outputs.extend(s.output.iter().map(CpuTensor::storage_id));
                    held_outputs = Some((s.output, values(1, 4)));
                    s.completion
                })
            }
        };
        let completion = match result {
            Ok(completion) => completion,
            Err(error) => breach!(
                subject.value_id(),
                "{} (submission {index}) was refused with no fault armed at submission: {error}",
                subject.name()
            ),
        };
        let round = subject.collective().then(|| {
            self.rounds.push((index, Fate::Unreleased));
            self.rounds.len() - 1
        });
        let lane_state = &mut self.lanes[lane];
        let lane_tainted = lane_state.faulted;
        lane_state.faulted |= faulted;
        let after = lane_state.gates.clone();
        self.subs.push(Sub {
            subject,
            lane,
            via: if subject.collective() {
                Via::LatePeer
            } else {
                Via::Hold
            },
            round,
            hold,
            observer: completion.observer(),
            completion: Some(completion),
            handle: HandleState::Held,
            inputs,
            outputs,
            held_outputs,
            flags: Vec::new(),
            faulted,
            lane_tainted,
            released: false,
            holds_at_submit,
            after,
            seen: Seen::Nothing,
            said_complete: false,
            error_seen: false,
            quarantined: false,
            bounded_error: false,
            terminal: None,
        });
        tally(|t| {
            t.submissions += 1;
            t.collectives += usize::from(subject.collective());
        });
        true
    }

    /// Lets submission `index` complete: releases its hold, or lets the
    /// late peer join its round.
    fn release(&mut self, index: usize) {
        let sub = &mut self.subs[index];
        if sub.released {
            return;
        }
        sub.released = true;
        if let Some(hold) = sub.hold.take() {
            hold.release();
        }
        let (subject, torn_down) = (sub.subject, sub.seen == Seen::TornDown);
        if let Some(round) = sub.round {
            if self.rounds[round].1 == Fate::Unreleased {
                let fate = if torn_down {
                    Fate::Skipped
                } else {
                    Fate::Joined
                };
                self.rounds[round].1 = fate;
                self.mailbox.tell(round, fate, subject);
            }
        }
    }

    fn fork(&mut self, count: usize) -> bool {
        if self.lane_count() + count > MAX_LANES {
            return false;
        }
        let lanes = match CpuBackend::fork_executors(&self.executor, count) {
            Ok(lanes) if lanes.len() == count => lanes,
            Ok(lanes) => breach!(
                "SUB-1",
                "fork_executors(executor, {count}) returned {} executors",
                lanes.len()
            ),
            Err(error) => breach!("SUB-1", "fork_executors(executor, {count}) failed: {error}"),
        };
        for lane in lanes {
            self.forks.push(lane);
            self.lanes.push(Lane::default());
        }
        true
    }

    fn order_after(&mut self, index: usize, lane: u8) {
        let lanes = self.lane_count();
        let own = self.subs[index].lane;
        let lane = match lanes {
            1 => 0,
            _ => (own + 1 + usize::from(lane) % (lanes - 1)) % lanes,
        };
        let Some(producer) = &self.subs[index].completion else {
            return;
        };
        if let Err(error) = CpuBackend::order_after(producer, self.lane(lane)) {
            breach!(
                "SUB-3",
                "order_after(submission {index}, lane {lane}) failed: {error}"
            );
        }
        self.lanes[lane].gates.push(index);
    }

    fn retain(&mut self, index: usize) {
        let sub = &self.subs[index];
        let Some(completion) = &sub.completion else {
            return;
        };
        let flag = Arc::new(AtomicBool::new(false));
        let executor = self.lane(sub.lane);
        if let Err(error) =
            CpuBackend::retain_until_complete(executor, completion, DropFlag(Arc::clone(&flag)))
        {
            breach!(
                "RET-6",
                "retain_until_complete on submission {index} failed: {error}"
            );
        }
        self.subs[index].flags.push(flag);
    }

    /// Checks the outputs' values once the work completed.
    fn verify(&mut self, index: usize) {
        let who = self.subs[index].describe(index);
        let id = self.subs[index].subject.value_id();
        let Some((outputs, expected)) = self.subs[index].held_outputs.take() else {
            return;
        };
        for output in outputs {
            let got = output.read_materialised();
            if got.as_deref() != Some(&expected[..]) {
                breach!(
                    id,
                    "{who}: output is {got:?} after completion, expected {expected:?}"
                );
            }
        }
    }

    fn is_complete(&mut self, index: usize) {
        let status = self.statuses()[index];
        let sub = &self.subs[index];
        let who = sub.describe(index);
        let Some(completion) = &sub.completion else {
            return;
        };
        match completion.is_complete() {
            Ok(true) => {
                if sub.error_seen {
                    breach!("EXC-6", "{who}: is_complete() returned Ok(true) after an error had been reported; errors are sticky");
                }
                if sub.faulted {
                    breach!("EXC-2", "{who}: is_complete() returned Ok(true) for work whose injected fault makes it fail");
                }
                if let Some(reason) = status.blocked {
                    breach!(
                        "EXC-2",
                        "{who}: is_complete() returned Ok(true) while {}",
                        why(reason)
                    );
                }
                let sub = &mut self.subs[index];
                if sub.seen == Seen::Nothing {
                    sub.seen = Seen::Completed;
                }
                sub.said_complete = true;
            }
            Ok(false) => {
                match sub.seen {
                    Seen::Completed if sub.said_complete => {
                        breach!("EXC-3", "{who}: is_complete() returned Ok(false) after it had returned Ok(true)")
                    }
                    Seen::Completed => {
                        breach!("EXC-5", "{who}: is_complete() returned Ok(false) after wait() had returned Ok(())")
                    }
                    _ if sub.error_seen => {
                        breach!("EXC-6", "{who}: is_complete() returned Ok(false) after an error had been reported; errors are sticky")
                    }
                    _ => {}
                }
            }
            Err(error) => {
                if sub.seen == Seen::Completed {
                    breach!(
                        "EXC-3",
                        "{who}: is_complete() returned Err({error}) after completion had been reported"
                    );
                }
                if !status.may_fail {
                    breach!(
                        sub.subject.value_id(),
                        "{who}: is_complete() reported an error for work with no injected fault: {error}"
                    );
                }
                self.subs[index].error_seen = true;
            }
        }
    }

    fn wait(&mut self, index: usize) {
        let status = self.statuses()[index];
        let sub = &self.subs[index];
        let who = sub.describe(index);
        let Some(completion) = &sub.completion else {
            return;
        };
        match completion.wait() {
            Ok(()) => {
                if sub.error_seen {
                    breach!("EXC-6", "{who}: wait() returned Ok(()) after an error had been reported; errors are sticky");
                }
                if sub.faulted {
                    breach!(
                        "EXC-4",
                        "{who}: wait() returned Ok(()) for work whose injected fault makes it fail"
                    );
                }
                let state = sub.observer.observe().phase;
                if state != Phase::Completed {
                    breach!(
                        "EXC-4",
                        "{who}: wait() returned Ok(()) while the observer reported {state:?}"
                    );
                }
                self.subs[index].seen = Seen::Completed;
                self.verify(index);
            }
            Err(error) => {
                if sub.seen == Seen::Completed {
                    breach!(
                        "EXC-3",
                        "{who}: wait() returned Err({error}) after completion had been reported"
                    );
                }
                if !status.may_fail {
                    breach!(
                        sub.subject.value_id(),
                        "{who}: wait() failed on work with no injected fault: {error}"
                    );
                }
                self.subs[index].error_seen = true;
            }
        }
    }

    fn wait_bounded(&mut self, index: usize, timeout: Timeout, mode: Mode) {
        let status = self.statuses()[index];
        let policy = match BoundedCompletionWait::new(timeout.duration(), mode.cancellation()) {
            Ok(policy) => policy,
            Err(error) => panic!("(no SPEC ID) bounded wait policy: {error}"),
        };
        let sub = &mut self.subs[index];
        let Some(completion) = sub.completion.take() else {
            return;
        };
        sub.handle = HandleState::Consumed;
        let who = sub.describe(index);
        let started = Instant::now();
        let outcome = completion.wait_bounded(policy);
        let elapsed = started.elapsed();
        let native = mode == Mode::NativeCancel;
        let sub = &self.subs[index];
        match outcome {
            Ok(BoundedCompletionOutcome::Completed) => {
                if sub.error_seen {
                    breach!("EXC-6", "{who}: wait_bounded returned Completed after an error had been reported; errors are sticky");
                }
                if sub.faulted {
                    breach!("CAN-9", "{who}: wait_bounded returned Completed for work whose injected fault makes it fail");
                }
                if let Some(reason) = status.blocked {
                    breach!(
                        "CAN-1",
                        "{who}: wait_bounded returned Completed while {}",
                        why(reason)
                    );
                }
                let state = sub.observer.observe().phase;
                if state != Phase::Completed {
                    breach!(
                        "CAN-1",
                        "{who}: wait_bounded returned Completed while the observer reported {state:?}"
                    );
                }
                self.subs[index].seen = Seen::Completed;
                self.verify(index);
            }
            Ok(BoundedCompletionOutcome::DeadlineExceeded { cancellation }) => {
                if cancellation != mode.cancellation() {
                    breach!("CAN-3", "{who}: wait_bounded reported DeadlineExceeded {{ cancellation: {cancellation:?} }} under a {mode:?} policy");
                }
                if elapsed < policy.timeout() {
                    breach!("CAN-2", "{who}: wait_bounded returned DeadlineExceeded after {elapsed:?} of virtual time, before its {:?} timeout", policy.timeout());
                }
                if sub.seen == Seen::Completed {
                    breach!("CAN-1", "{who}: wait_bounded returned DeadlineExceeded for work that had already reported completion");
                }
                self.disposed(index, native, "DeadlineExceeded");
            }
            Err(error) => {
                if sub.seen == Seen::Completed {
                    breach!("CAN-1", "{who}: wait_bounded returned Err({error}) for work that had already reported completion");
                }
                if !status.may_fail && !sub.error_seen {
                    breach!("CAN-4", "{who}: wait_bounded under {mode:?} returned Err for work with no injected fault: {error}");
                }
                let sub = &mut self.subs[index];
                sub.error_seen = true;
                sub.bounded_error = true;
                self.disposed(index, native, "Err");
            }
        }
    }

    /// After `wait_bounded` gave up: natively cancelled work has finished its
    /// teardown (CAN-5, CAN-7); quarantined work lives on (CAN-6).
    fn disposed(&mut self, index: usize, native: bool, returned: &str) {
        let sub = &self.subs[index];
        let who = sub.describe(index);
        if !native {
            self.subs[index].quarantined = true;
            tally(|t| t.quarantined += 1);
            return;
        }
        // DeadlineExceeded under NativeCancel: teardown is over, every
        // retained resource released (CAN-5). Err: the work has failed for
        // good, or was put in the disposition (CAN-7); its release may still
        // be under way.
        let seen = sub.observer.observe();
        let (id, over) = match returned {
            "Err" => ("CAN-7", seen.phase.is_terminal()),
            _ => ("CAN-5", seen.phase.is_terminal() && seen.released),
        };
        if !over {
            breach!(id, "{who}: native work was {seen:?} right after wait_bounded returned {returned} under NativeCancel: teardown had not finished");
        }
        if returned != "Err" {
            let outputs: &[StorageId] = match sub.held_outputs {
                Some(_) => &[],
                None => &sub.outputs,
            };
            let still = sub
                .inputs
                .iter()
                .chain(outputs)
                .filter(|id| self.device.storage_live(**id))
                .count();
            if still > 0 {
                breach!("CAN-5", "{who}: {still} storage(s) with no caller handle were still allocated right after wait_bounded returned DeadlineExceeded under NativeCancel");
            }
        }
        self.subs[index].seen = Seen::TornDown;
        tally(|t| t.torn_down += 1);
        if let Some(round) = self.subs[index].round {
            self.poisoned = true;
            if self.rounds[round].1 == Fate::Unreleased {
                self.rounds[round].1 = Fate::Skipped;
                self.mailbox
                    .tell(round, Fate::Skipped, self.subs[index].subject);
            }
        }
    }

    // -- After every step ------------------------------------------------------

    fn observe(&mut self) {
        let statuses = self.statuses();
        for (index, status) in statuses.into_iter().enumerate() {
            self.observe_one(index, status);
        }
    }

    /// Probes and flags first, the observer last: a correct backend frees
    /// nothing before its work is terminal, so "freed, then terminal" is
    /// consistent and "freed, then live" is not.
    fn observe_one(&mut self, index: usize, status: Status) {
        let sub = &self.subs[index];
        let live = |id: &&StorageId| self.device.storage_live(**id);
        let dead_inputs = sub.inputs.len() - sub.inputs.iter().filter(live).count();
        let dead_outputs = sub.outputs.len() - sub.outputs.iter().filter(live).count();
        let dropped = sub
            .flags
            .iter()
            .filter(|f| f.load(Ordering::SeqCst))
            .count();
        let state = sub.observer.observe().phase;
        let who = sub.describe(index);
        if let Some(before) = sub.terminal {
            if state != before {
                breach!(
                    "EXC-3",
                    "{who}: the observer reported {before:?}, later {state:?}: a terminal state changed"
                );
            }
        }
        if sub.held_outputs.is_some() && dead_outputs > 0 {
            breach!(
                "RET-5",
                "{who}: an output's storage was freed while the caller still held the output tensor"
            );
        }
        let freed = [
            (dead_inputs, "input", "input storage(s) were freed"),
            (dead_outputs, "output", "output storage(s) were freed"),
            (
                dropped,
                "retained",
                "value(s) given to retain_until_complete were dropped",
            ),
        ]
        .into_iter()
        .find(|(count, _, _)| *count > 0);
        if let Some((count, kind, what)) = freed {
            let id = if sub.quarantined {
                "CAN-6"
            } else if sub.bounded_error {
                "CAN-7"
            } else if sub.handle == HandleState::Dropped {
                "RET-4"
            } else if sub.faulted || sub.error_seen {
                "EXC-7"
            } else {
                match kind {
                    "retained" => "RET-6",
                    "output" => "RET-5",
                    _ if sub.subject.collective() => "RET-3",
                    _ => "RET-1",
                }
            };
            if state == Phase::Failed && !status.may_fail {
                breach!(
                    id,
                    "{who}: its work failed although no fault was injected, and {count} {what}"
                );
            }
            if !state.is_terminal() {
                breach!(
                    id,
                    "{who}: {count} {what} while its work was live (observer: {state:?})"
                );
            }
        }
        if let (Some(reason), Phase::Completed) = (status.blocked, state) {
            let id = match reason {
                Reason::Hold => "(no SPEC ID, the hold instrument)",
                Reason::Peer => sub.subject.value_id(),
                Reason::Order { .. } => "SUB-3",
            };
            breach!(
                id,
                "{who}: its work completed (observer) although {}",
                why(reason)
            );
        }
        if matches!(state, Phase::Failed | Phase::Cancelled)
            && !status.may_fail
            && sub.seen != Seen::TornDown
        {
            let id = if sub.quarantined {
                "CAN-6"
            } else {
                sub.subject.value_id()
            };
            breach!(id, "{who}: its work ended {state:?} (observer) although no fault was injected and no NativeCancel was requested");
        }
        if state.is_terminal() {
            self.subs[index].terminal = Some(state);
        }
    }

    // -- The end ---------------------------------------------------------------

    /// Releases every hold and round, waits for every held completion, drops
    /// every handle, and checks that everything is released (RET-6, RET-7)
    /// and the ledger drains.
    fn drain(&mut self) {
        for index in 0..self.subs.len() {
            self.release(index);
        }
        self.mailbox.done();
        for index in 0..self.subs.len() {
            if self.subs[index].handle == HandleState::Held {
                self.wait(index);
            }
        }
        for sub in &mut self.subs {
            sub.completion = None;
            sub.held_outputs = None;
            if sub.handle == HandleState::Held {
                sub.handle = HandleState::Dropped;
            }
        }
        if !soon(|| self.subs.iter().all(|s| s.all_released(&self.device))) {
            let (index, sub) = self
                .subs
                .iter()
                .enumerate()
                .find(|(_, s)| !s.all_released(&self.device))
                .expect("one is not released");
            let probes_dead = sub
                .inputs
                .iter()
                .chain(&sub.outputs)
                .all(|id| !self.device.storage_live(*id));
            breach!(
                if probes_dead { "RET-6" } else { "RET-7" },
                "{}: resources still alive {SOON} yields after every hold and round was released, every held completion waited for and every handle dropped (its work: {:?})",
                sub.describe(index),
                sub.observer.observe().phase
            );
        }
    }

    /// Rank 1's side of a round may fail only if rank 0's may have (or was
    /// torn down, though rank 1 never joins those).
    fn judge_peer(&self, failures: Vec<PeerFailure>) {
        let statuses = self.statuses();
        for PeerFailure {
            round,
            subject,
            message,
        } in failures
        {
            let sub = self.rounds[round].0;
            if statuses[sub].may_fail || self.subs[sub].seen == Seen::TornDown {
                continue;
            }
            breach!(
                subject.value_id(),
                "round {round} ({}, submission {sub}) with no fault injected on either side: {message}",
                subject.name()
            );
        }
    }

    /// RET-7: the ledger shows no pending or quarantined work at the end.
    fn ledger_drains(&self) {
        let drained = soon(|| {
            let ledger = self.device.ledger();
            ledger.pending_work == 0 && ledger.quarantined == 0
        });
        if !drained {
            breach!("RET-7", "the ledger still shows live work {SOON} yields after every submission of both ranks ended and every handle was dropped: {:?}", self.device.ledger());
        }
    }
}

/// Which device a sequence runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A correct device.
    Clean,
    /// A device with the planted lost wake-up in its executors
    /// (`CpuDevice::with_planted_race`).
    PlantedRace,
    /// A device with one of the kit's planted defects.
    Defect(Defect),
}

/// What the executions on this OS thread did, summed (for reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Operations that acted on the backend.
    pub executed: usize,
    /// Operations the model could not follow in their state, skipped.
    pub skipped: usize,
    /// Submissions made (collectives included).
    pub submissions: usize,
    /// Collective rounds submitted.
    pub collectives: usize,
    /// Bounded waits that returned `DeadlineExceeded` or `Err` and put live
    /// work in quarantine.
    pub quarantined: usize,
    /// Bounded waits that tore work down (NativeCancel).
    pub torn_down: usize,
}

std::thread_local! {
    static TALLY: RefCell<Tally> = RefCell::default();
}

fn tally(update: impl FnOnce(&mut Tally)) {
    TALLY.with(|t| update(&mut t.borrow_mut()));
}

/// What the executions run on this thread so far did; resets the sums.
pub fn take_tally() -> Tally {
    TALLY.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.executed += other.executed;
        self.skipped += other.skipped;
        self.submissions += other.submissions;
        self.collectives += other.collectives;
        self.quarantined += other.quarantined;
        self.torn_down += other.torn_down;
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} operations executed ({} skipped), {} submissions ({} collective rounds), {} quarantined and {} torn down at a deadline",
            self.executed, self.skipped, self.submissions, self.collectives, self.quarantined, self.torn_down
        )
    }
}

/// One execution: `ops` on rank 0 against a fresh `backend` device, the
/// late peer on its own thread, then the drain. Panics with the SPEC ID of
/// the first breach.
pub fn run_sequence(ops: &[Op], backend: Backend) {
    clear_progress();
    let device = match backend {
        Backend::Clean => CpuDevice::new(),
        Backend::PlantedRace => CpuDevice::with_planted_race(),
        Backend::Defect(defect) => CpuDevice::with_defect(defect),
    };
    let (group, peer_group) = match device.group(2) {
        Ok(mut members) if members.len() == 2 => {
            let peer = members.pop().expect("two members");
            (members.pop().expect("two members"), peer)
        }
        other => panic!("(no SPEC ID) making a group of two failed: {other:?}"),
    };
    let id = CommunicationRouteId::new(ROUTE);
    let (route, peer_route) = match (device.route(id, 1, 0, 0), device.route(id, 1, 0, 1)) {
        (Ok(receiver), Ok(sender)) => (receiver, sender),
        (Err(error), _) | (_, Err(error)) => {
            panic!("(no SPEC ID) making the route failed: {error}")
        }
    };
    let mailbox = Arc::new(Mailbox::default());
    let peer = {
        let (device, mailbox) = (device.clone(), Arc::clone(&mailbox));
        thread::Builder::new()
            .name("rank 1 (late peer)".into())
            .spawn(move || late_peer(device, peer_group, peer_route, mailbox))
            .expect("shuttle spawns the late peer")
    };
    let executor = device.executor();
    let mut rank0 = Rank0 {
        device,
        group,
        route,
        executor,
        forks: Vec::new(),
        lanes: vec![Lane::default()],
        subs: Vec::new(),
        rounds: Vec::new(),
        poisoned: false,
        mailbox,
    };
    for (step, &op) in ops.iter().enumerate() {
        progress(|p| {
            *p = Progress {
                step,
                op: Some(op),
                phase: None,
                hint: hang_hint(op),
            }
        });
        rank0.step(op);
    }
    progress(|p| {
        *p = Progress {
            step: ops.len(),
            op: None,
            phase: Some("final drain"),
            hint: Some("EXC-4"),
        }
    });
    rank0.drain();
    match peer.join() {
        Ok(failures) => rank0.judge_peer(failures),
        Err(payload) => std::panic::resume_unwind(payload),
    }
    rank0.ledger_drains();
    // Every executor handle goes: each worker thread must then exit, or
    // shuttle reports the execution deadlocked (a lane outliving its handles).
    progress(|p| {
        p.phase = Some("teardown: every handle dropped, every worker must exit");
        p.hint = Some("RET-7");
    });
    drop(rank0);
}
