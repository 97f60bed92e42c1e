//! Worlds: `n` rank threads per case, each building its own rank state, with
//! host-side signals for choreography (a late peer joins when told to).

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::check::{harness, Check, Finding};
use crate::dtype::{Dtype, HostValues};
use crate::harness::{
    CompletionRef, Executor, Group, Harness, HoldGuard, Ledger, Observer, Probe, Tensor,
    TensorContext,
};
use crate::runner::results::Attributed;

mod watch;

pub(crate) use watch::{
    across_processes, guarded, inside, overrun, pause, polled, progressed, remote_progress,
    CallWatch, Stopwatch, SETUP, WATCH_PERIOD,
};
use watch::{Expired, KitThread, Watchdog};

/// Where a world's signals also go: the other processes of a world whose
/// ranks are processes (see [`crate::processes`]).
pub(crate) type Relay = Box<dyn Fn(&str) + Send + Sync>;

/// Host-side signals shared by the rank threads of one world (and, through
/// the relay, by its other processes).
#[derive(Default)]
pub(crate) struct Signals {
    raised: Mutex<HashSet<String>>,
    changed: Condvar,
    relay: Option<Relay>,
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Signals {
    /// Signals that are also sent through `relay`.
    pub(crate) fn relayed(relay: Relay) -> Self {
        Self {
            relay: Some(relay),
            ..Self::default()
        }
    }

    /// Raises `name` here and on every process the relay reaches.
    fn raise(&self, name: &str) {
        self.deliver(name);
        if let Some(relay) = &self.relay {
            relay(name);
        }
    }

    /// Raises `name` here only (a signal another process raised).
    pub(crate) fn deliver(&self, name: &str) {
        guard(&self.raised).insert(name.to_owned());
        self.changed.notify_all();
    }

    fn wait(&self, name: &str, limit: Duration) -> bool {
        self.wait_any(&[name], limit).is_some()
    }

    /// Start barrier: records that rank `index` was built (or could not be)
    /// and waits until every rank was built. `Err` names what went wrong:
    /// a rank that could not be built, or a timeout.
    fn start_barrier(
        &self,
        index: usize,
        built: bool,
        ranks: usize,
        limit: Duration,
    ) -> Result<(), String> {
        self.raise(&if built {
            format!("built-{index}")
        } else {
            format!("unbuilt-{index}")
        });
        let deadline = Instant::now() + limit;
        let mut raised = guard(&self.raised);
        loop {
            if let Some(broken) =
                (0..ranks).find(|rank| raised.contains(&format!("unbuilt-{rank}")))
            {
                return Err(format!("rank {broken} could not be built"));
            }
            if (0..ranks).all(|rank| raised.contains(&format!("built-{rank}"))) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "not every rank of the world was built within {limit:?}"
                ));
            }
            raised = match self.changed.wait_timeout(raised, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Waits for the first of `names` to be raised; returns its index.
    fn wait_any(&self, names: &[&str], limit: Duration) -> Option<usize> {
        let deadline = Instant::now() + limit;
        let mut raised = guard(&self.raised);
        loop {
            if let Some(index) = names.iter().position(|name| raised.contains(*name)) {
                return Some(index);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            raised = match self.changed.wait_timeout(raised, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// What the ranks of one case record beside their verdicts: notes on the
/// verdict, and violations of other invariants than the case's own.
#[derive(Default)]
pub(crate) struct Journal {
    notes: Mutex<Vec<String>>,
    attributed: Mutex<Vec<Attributed>>,
    /// Whether a rank used an instrument of the harness.
    instrumented: std::sync::atomic::AtomicBool,
    /// The first time `is_complete()` reported `Ok(true)` while the
    /// harness's observer saw the work still live (an EXC-2 violation).
    early: Mutex<Option<String>>,
}

impl Journal {
    /// The first early completion report seen (see [`note_completion_report`]).
    pub(crate) fn early_completion(&self) -> Option<String> {
        guard(&self.early).clone()
    }

    /// Whether a rank used an instrument of the harness.
    pub(crate) fn instrumented(&self) -> bool {
        self.instrumented.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many notes and attributed violations were recorded so far.
    pub(crate) fn marks(&self) -> (usize, usize) {
        (guard(&self.notes).len(), guard(&self.attributed).len())
    }

    /// What was recorded after `marks`, for the other processes of a world.
    pub(crate) fn since(&self, (notes, attributed): (usize, usize)) -> JournalPart {
        JournalPart {
            notes: guard(&self.notes).get(notes..).unwrap_or_default().to_vec(),
            attributed: guard(&self.attributed)
                .get(attributed..)
                .unwrap_or_default()
                .to_vec(),
            instrumented: self.instrumented(),
            early: self.early_completion(),
        }
    }

    /// Adds what another process of the world recorded.
    pub(crate) fn merge(&self, part: JournalPart) {
        guard(&self.notes).extend(part.notes);
        guard(&self.attributed).extend(part.attributed);
        if part.instrumented {
            self.instrumented
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if let Some(early) = part.early {
            guard(&self.early).get_or_insert(early);
        }
    }

    /// Everything recorded so far (notes without duplicates).
    pub(crate) fn take(&self) -> (Vec<String>, Vec<Attributed>) {
        let mut notes = std::mem::take(&mut *guard(&self.notes));
        notes.dedup();
        let mut attributed = std::mem::take(&mut *guard(&self.attributed));
        attributed.dedup();
        (notes, attributed)
    }
}

/// What one process of a world recorded in a world run (see [`Journal::since`]).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct JournalPart {
    notes: Vec<String>,
    attributed: Vec<Attributed>,
    instrumented: bool,
    early: Option<String>,
}

/// A call into the backend that the kit expects to return at once, as the
/// watcher of its rank sees it.
/// What a rank thread needs to cross-check a completion report with the
/// harness's observer: its journal, and the observer query (typed by the
/// harness, behind `Any`).
struct ReportCheck {
    journal: Arc<Journal>,
    observe: Box<dyn std::any::Any>,
}

/// The observer query of a rank thread of harness `H`.
type Observe<H> = Box<dyn Fn(CompletionRef<'_, H>) -> Option<crate::harness::WorkState>>;

thread_local! {
    /// The completion-report check of the rank thread this is, if any.
    static REPORTS: std::cell::RefCell<Option<ReportCheck>> = const { std::cell::RefCell::new(None) };
}

/// Called when `is_complete()` on `completion` returned `Ok(true)`: when
/// the harness's observer says the work is still live, the report was early
/// (EXC-2). The case's journal records it; a failure of another invariant in
/// the same case then cannot be trusted (it is made inconclusive), since
/// every check reads completion through `is_complete()`.
pub(crate) fn note_completion_report<H: Harness>(completion: CompletionRef<'_, H>) {
    REPORTS.with(|reports| {
        let reports = reports.borrow();
        let Some(check) = reports.as_ref() else { return };
        let Some(observe) = check.observe.downcast_ref::<Observe<H>>() else {
            return;
        };
        if observe(completion) == Some(crate::harness::WorkState::Live) {
            guard(&check.journal.early).get_or_insert_with(|| {
                "is_complete() returned Ok(true) while the harness's observer reported the work still Live".into()
            });
        }
    })
}

/// One rank's view of a case: its state, the harness, and the world's signals.
pub struct RankCtx<'w, H: Harness> {
    harness: &'w H,
    rank: H::Rank,
    index: usize,
    size: usize,
    signals: &'w Signals,
    journal: &'w Journal,
    seed: u64,
    attempt: u32,
    /// Late-peer rounds this rank has started (see `matrix::Pending`).
    pub(crate) rounds: std::cell::Cell<usize>,
    /// Whether a bounded wait earlier in the case left this rank's
    /// communication work unfinished (quarantined, cancelled or failed
    /// while live): a backend may refuse new work on the group until that
    /// work completes (eredu neither requires nor forbids such a fence), so
    /// a refusal then blames no invariant (see `matrix::failed`).
    pub(crate) fenced: std::cell::Cell<bool>,
    /// The dtype [`RankCtx::tensor`] builds and [`RankCtx::read`] reads
    /// (`f32` but inside a value check's steps of another dtype).
    dtype: std::cell::Cell<Dtype>,
}

impl<'w, H: Harness> RankCtx<'w, H> {
    /// Rank `index` of a world of `size` ranks whose threads another
    /// scheduler runs, outside [`run_ranks`] (the sequence model's
    /// `crate::model::check_sequence_on`): no watchdog watches it.
    pub(crate) fn unwatched(
        harness: &'w H,
        rank: H::Rank,
        index: usize,
        size: usize,
        signals: &'w Signals,
        journal: &'w Journal,
    ) -> Self {
        Self {
            harness,
            rank,
            index,
            size,
            signals,
            journal,
            seed: 0,
            attempt: 0,
            rounds: std::cell::Cell::new(0),
            fenced: std::cell::Cell::new(false),
            dtype: std::cell::Cell::new(Dtype::F32),
        }
    }

    /// This rank's index.
    pub fn rank(&self) -> usize {
        self.index
    }

    /// Number of ranks in the world.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The case's seed (for randomised cases).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Which attempt at the case this is (0 first; retries of an
    /// inconclusive case use more lazy work).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Records a note on the case's verdict (e.g. why an invariant holds by
    /// design although the provoked situation never arose).
    pub fn note(&self, note: impl Into<String>) {
        guard(&self.journal.notes).push(note.into());
    }

    /// How many violations of other invariants were recorded so far.
    pub(crate) fn attributed_count(&self) -> usize {
        guard(&self.journal.attributed).len()
    }

    /// The violations of other invariants recorded after the first `from`.
    pub(crate) fn attributed_since(&self, from: usize) -> Vec<Attributed> {
        guard(&self.journal.attributed)
            .get(from..)
            .unwrap_or_default()
            .to_vec()
    }

    /// Records a violation of `invariant`, another invariant than the case's
    /// own, seen while checking it. It goes to the result file, never to the
    /// case's verdict.
    pub fn attribute(&self, invariant: &str, message: impl Into<String>) {
        guard(&self.journal.attributed).push(Attributed {
            invariant: invariant.to_owned(),
            message: message.into(),
        });
    }

    /// The harness.
    pub fn harness(&self) -> &'w H {
        self.harness
    }

    /// The rank's harness-built state.
    pub fn state(&self) -> &H::Rank {
        &self.rank
    }

    /// The rank's executor.
    pub fn executor(&self) -> &Executor<H> {
        self.harness.executor(&self.rank)
    }

    /// The rank's tensor context.
    pub fn context(&self) -> &TensorContext<H> {
        self.harness.context(&self.rank)
    }

    /// The tensor context for work to submit on `executor`: the harness's
    /// [`Harness::context_on`], else the rank's own.
    pub fn context_on<'a>(&'a self, executor: &'a Executor<H>) -> &'a TensorContext<H> {
        self.harness
            .context_on(&self.rank, executor)
            .unwrap_or_else(|| self.context())
    }

    /// The world group, as seen from this rank.
    pub fn group(&self) -> &Group<H> {
        self.harness.group(&self.rank)
    }

    /// This rank's handle on a group of the world in `members` order (see
    /// [`Harness::ordered_group`]); `None` when the harness builds none.
    pub fn ordered_group(
        &self,
        key: u64,
        members: &[usize],
    ) -> Result<Option<crate::harness::OwnedGroup<H>>, Finding> {
        self.harness
            .ordered_group(&self.rank, key, members)
            .transpose()
            .map_err(|error| Finding::Harness(error.0))
    }

    /// Makes a tensor; a harness failure becomes [`Finding::Harness`].
    pub fn tensor(&self, values: &[f32], shape: &[usize]) -> Result<Tensor<H>, Finding> {
        inside("Harness::tensor", || self.tensor_in(values, shape))
    }

    fn tensor_in(&self, values: &[f32], shape: &[usize]) -> Result<Tensor<H>, Finding> {
        let dtype = self.dtype.get();
        if dtype == Dtype::F32 {
            return harness(self.harness.tensor(&self.rank, values, shape));
        }
        let built = HostValues::narrow(dtype, values);
        let tensor = harness(self.harness.tensor_of(&self.rank, &built, shape))?;
        // Read back before any backend call: a tensor that does not hold
        // what it was built from is the harness's error, never the backend's.
        let back = harness(self.harness.read_as(&self.rank, &tensor, dtype))?;
        let bits = |values: &HostValues| -> Vec<u32> {
            values.widen().iter().map(|v| v.to_bits()).collect()
        };
        if back.dtype() != dtype || bits(&back) != bits(&built) {
            return Err(Finding::Harness(format!(
                "a {dtype} tensor of shape {shape:?} built from {} values read back, before any \
                 backend call, as {} {} values that differ from them",
                built.len(),
                back.len(),
                back.dtype()
            )));
        }
        Ok(tensor)
    }

    /// Reads a tensor back without evaluating it, in the current dtype
    /// (widened to `f32`); a tensor of another dtype is a violation of the
    /// check that reads it (a backend's output of the wrong dtype).
    pub fn read(&self, tensor: &Tensor<H>) -> Result<Vec<f32>, Finding> {
        inside("Harness::read", || self.read_in(tensor))
    }

    fn read_in(&self, tensor: &Tensor<H>) -> Result<Vec<f32>, Finding> {
        let dtype = self.dtype.get();
        if dtype == Dtype::F32 {
            return harness(self.harness.read(&self.rank, tensor));
        }
        let got = harness(self.harness.read_as(&self.rank, tensor, dtype))?;
        if got.dtype() != dtype {
            return Err(Finding::Violation(format!(
                "the output is a {} tensor, expected {dtype} (the dtype of the inputs)",
                got.dtype()
            )));
        }
        Ok(got.widen())
    }

    /// The dtype [`RankCtx::tensor`] builds in and [`RankCtx::read`] reads.
    pub fn dtype(&self) -> Dtype {
        self.dtype.get()
    }

    /// Runs `steps` with tensors built and read in `dtype`.
    pub(crate) fn in_dtype<T>(&self, dtype: Dtype, steps: impl FnOnce() -> T) -> T {
        let before = self.dtype.replace(dtype);
        let result = steps();
        self.dtype.set(before);
        result
    }

    /// This rank's endpoint of a route.
    pub fn route(&self, id: u64, source: usize, destination: usize) -> Result<H::Route, Finding> {
        harness(self.harness.route(&self.rank, id, source, destination))
    }

    /// Records that the case used an instrument (its evidence is then
    /// `instrumented`), passing `found` through.
    fn used<T>(&self, found: Option<T>) -> Option<T> {
        if found.is_some() {
            self.journal
                .instrumented
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        found
    }

    /// The observer on `completion` when the harness provides one (optional
    /// extra evidence; using it makes the case `instrumented`).
    pub fn optional_observer(&self, completion: CompletionRef<'_, H>) -> Option<Observer> {
        self.used(self.harness.observer(completion))
    }

    /// The ledger when the harness provides one (optional extra evidence).
    pub fn optional_ledger(&self) -> Option<Ledger> {
        self.used(self.harness.ledger(&self.rank))
    }

    /// A hold on `executor` when the harness provides one (optional).
    pub fn optional_hold(&self, executor: &Executor<H>) -> Option<HoldGuard> {
        self.used(self.harness.hold(&self.rank, executor))
    }

    /// Why an instrument's method answered nothing: not declared
    /// (`NotSupported`), or declared and then absent (a harness error).
    fn absent(&self, declared: bool, instrument: &str, method: &str) -> Finding {
        if declared {
            Finding::Harness(format!(
                "the harness declares the {instrument} instrument, but `Harness::{method}` answered nothing"
            ))
        } else {
            Finding::NotSupported(format!("the harness provides no {instrument} instrument"))
        }
    }

    /// Holds `executor` (the hold instrument), or reports it unsupported.
    pub fn hold(&self, executor: &Executor<H>) -> Result<HoldGuard, Finding> {
        let declared = self.harness.instruments().hold;
        self.used(self.harness.hold(&self.rank, executor))
            .ok_or_else(|| self.absent(declared, "hold", "hold"))
    }

    /// A liveness probe on `tensor`, or `NotSupported`.
    pub fn probe(&self, tensor: &Tensor<H>) -> Result<Probe, Finding> {
        let declared = self.harness.instruments().probe;
        self.used(self.harness.probe(&self.rank, tensor))
            .ok_or_else(|| self.absent(declared, "liveness probe", "probe"))
    }

    /// The resource ledger, or `NotSupported`.
    pub fn ledger(&self) -> Result<Ledger, Finding> {
        let declared = self.harness.instruments().ledger;
        self.used(self.harness.ledger(&self.rank))
            .ok_or_else(|| self.absent(declared, "resource ledger", "ledger"))
    }

    /// An observer on `completion`, or `NotSupported`.
    pub fn observer(&self, completion: CompletionRef<'_, H>) -> Result<Observer, Finding> {
        let declared = self.harness.instruments().observer;
        self.used(self.harness.observer(completion))
            .ok_or_else(|| self.absent(declared, "observer", "observer"))
    }

    /// The native messages sent on `route` so far, when the harness keeps a
    /// wire log.
    pub fn wire_log(&self, route: &H::Route) -> Option<Vec<crate::harness::WireRecord>> {
        self.used(self.harness.wire_log(route))
    }

    /// Makes the next native work item on `executor` fail, or `NotSupported`.
    pub fn inject_fault(&self, executor: &Executor<H>) -> Check {
        if self.harness.inject_fault(&self.rank, executor) {
            self.used(Some(()));
            Ok(())
        } else {
            let declared = self.harness.instruments().fault;
            Err(self.absent(declared, "fault injection", "inject_fault"))
        }
    }

    /// Makes the next submission on `executor` return `Err`, or `NotSupported`.
    pub fn fail_next_submission(&self, executor: &Executor<H>) -> Check {
        if self.harness.fail_next_submission(&self.rank, executor) {
            self.used(Some(()));
            Ok(())
        } else {
            let declared = self.harness.instruments().submission_fault;
            Err(self.absent(
                declared,
                "submission fault injection",
                "fail_next_submission",
            ))
        }
    }

    /// Raises a host-side signal every rank can wait for.
    pub fn signal(&self, name: &str) {
        progressed();
        self.signals.raise(name);
    }

    /// Waits for a host-side signal; `false` after `limit`.
    pub fn await_signal(&self, name: &str, limit: Duration) -> bool {
        self.signals.wait(name, limit)
    }

    /// Waits for the first of several signals; its index, or `None` after `limit`.
    pub fn await_any_signal(&self, names: &[&str], limit: Duration) -> Option<usize> {
        self.signals.wait_any(names, limit)
    }
}

/// How one world run ended.
pub(crate) enum WorldEnd {
    /// Every rank returned; findings in rank order.
    Finished(Vec<Check>),
    /// A rank panicked, or its process died; `message` says which
    /// (`panicked: ...`).
    Crashed { rank: usize, message: String },
    /// Not every rank returned, and none of the world's ranks made progress
    /// for a whole case watchdog: a hang.
    TimedOut {
        ranks: Vec<usize>,
        /// Where each of `ranks` was ([`watch::whereabouts`]; for a rank
        /// of another process, as that process said).
        stacks: Vec<String>,
    },
    /// Not every rank returned by the ceiling ([`overrun`]), but the world
    /// was still making progress (its last progress `idle` before): too slow
    /// on this machine now to tell a hang from load, so it proves nothing.
    Overran {
        ranks: Vec<usize>,
        ran: Duration,
        idle: Duration,
    },
    /// A rank blocked in a call the kit expects to return at once (see
    /// [`guarded`]).
    Blocked {
        rank: usize,
        what: String,
        invariant: String,
        limit: Duration,
    },
}

/// The ranks of a timed-out world and where each was, as lines to append
/// to a message (empty when nothing is known).
pub(crate) fn where_they_were(ranks: &[usize], stacks: &[String]) -> String {
    ranks
        .iter()
        .zip(stacks)
        .map(|(rank, stack)| format!("\n  rank {rank}: {stack}"))
        .collect()
}

/// The per-rank script of a case.
pub(crate) type Script<H> = Arc<dyn Fn(&RankCtx<'_, H>) -> Check + Send + Sync>;

/// Runs `script` on every rank of a fresh `ranks`-rank world, under a watchdog.
///
/// World creation, every rank thread and every drop of rank state happen on
/// supervised threads: a hang anywhere becomes `TimedOut` (nothing moved for
/// `limit`), a panic anywhere `Crashed`, and the caller always gets an answer
/// within [`overrun`]`(limit)`.
pub(crate) fn run_world<H: Harness>(
    harness: Arc<H>,
    ranks: usize,
    seed: u64,
    limit: Duration,
    script: Script<H>,
    run: &Run,
) -> WorldEnd {
    let world = Ranks {
        size: ranks,
        local: 0..ranks,
        signals: Arc::new(Signals::default()),
        announce: None,
    };
    run_ranks(harness, &world, seed, limit, script, run, &|| None)
}

/// The ranks of a world that this process runs, and the world's signals.
pub(crate) struct Ranks {
    /// Ranks in the whole world.
    pub(crate) size: usize,
    /// The ranks run here (all of them, or one per process).
    pub(crate) local: std::ops::Range<usize>,
    /// The world's signals.
    pub(crate) signals: Arc<Signals>,
    /// Tells the world's other processes that this one's ranks moved (see
    /// [`watch::remote_progress`]); `None` for a world in one process.
    pub(crate) announce: Option<Box<dyn Fn() + Send + Sync>>,
}

/// Builds the world, runs `script` on every local rank's thread, and
/// supervises them: `Finished` holds the local ranks' checks in rank order.
/// `interrupt` is asked every [`WATCH_PERIOD`] whether the world already
/// ended elsewhere (another process's rank crashed), and its answer ends
/// the wait.
pub(crate) fn run_ranks<H: Harness>(
    harness: Arc<H>,
    world: &Ranks,
    seed: u64,
    limit: Duration,
    script: Script<H>,
    run: &Run,
    interrupt: &dyn Fn() -> Option<WorldEnd>,
) -> WorldEnd {
    let (ranks, first, local) = (world.size, world.local.start, world.local.len());
    let (report, reports) = mpsc::channel::<(usize, std::thread::Result<Check>)>();
    let watches = CallWatch::world(local);
    let supervisor = {
        let report = report.clone();
        let watches = watches.clone();
        let journal = Arc::clone(&run.journal);
        let attempt = run.attempt;
        let signals = Arc::clone(&world.signals);
        move || {
            let built = catch_unwind(AssertUnwindSafe(|| harness.world(ranks)));
            let world = match built {
                Ok(Ok(world)) => Arc::new(world),
                Ok(Err(error)) => {
                    for index in first..first + local {
                        let _ = report.send((index, Ok(Err(Finding::Harness(error.0.clone())))));
                    }
                    return;
                }
                Err(payload) => {
                    let message = format!("in Harness::world: {}", panic_message(payload.as_ref()));
                    let _ = report.send((first, Err(Box::new(message))));
                    return;
                }
            };
            for (index, watch) in (first..).zip(watches) {
                let (harness, world, signals, script, report, journal) = (
                    Arc::clone(&harness),
                    Arc::clone(&world),
                    Arc::clone(&signals),
                    Arc::clone(&script),
                    report.clone(),
                    Arc::clone(&journal),
                );
                let spawned = std::thread::Builder::new()
                    .name(format!("commcheck-rank-{index}"))
                    .spawn({
                        let report = report.clone();
                        move || {
                            let _kit = KitThread::rank(watch);
                            if harness.instruments().observer {
                                let observing = Arc::clone(&harness);
                                let observe: Observe<H> = Box::new(move |completion| {
                                    observing.observer(completion).map(|o| o.state())
                                });
                                REPORTS.with(|slot| {
                                    *slot.borrow_mut() = Some(ReportCheck {
                                        journal: Arc::clone(&journal),
                                        observe: Box::new(observe),
                                    })
                                });
                            }
                            let outcome = catch_unwind(AssertUnwindSafe(|| {
                                let rank =
                                    catch_unwind(AssertUnwindSafe(|| harness.rank(&world, index)))
                                        .map_err(|payload| {
                                            format!(
                                                "in Harness::rank: {}",
                                                panic_message(payload.as_ref())
                                            )
                                        });
                                let rank = match rank {
                                    Ok(rank) => rank,
                                    Err(message) => {
                                        let _ = signals.start_barrier(index, false, ranks, limit);
                                        std::panic::resume_unwind(Box::new(message));
                                    }
                                };
                                // No script starts before every rank's state exists.
                                let started =
                                    signals.start_barrier(index, rank.is_ok(), ranks, limit);
                                let rank = rank.map_err(|e| Finding::Harness(e.0))?;
                                started.map_err(Finding::Harness)?;
                                let ctx = RankCtx {
                                    harness: &*harness,
                                    rank,
                                    index,
                                    size: ranks,
                                    signals: &signals,
                                    journal: &journal,
                                    seed,
                                    attempt,
                                    rounds: std::cell::Cell::new(0),
                                    fenced: std::cell::Cell::new(false),
                                    dtype: std::cell::Cell::new(Dtype::F32),
                                };
                                script(&ctx)
                            }));
                            let _ = report.send((index, outcome));
                        }
                    });
                if let Err(error) = spawned {
                    let finding =
                        Finding::Harness(format!("could not start rank thread {index}: {error}"));
                    let _ = report.send((index, Ok(Err(finding))));
                }
            }
        }
    };
    if let Err(error) = std::thread::Builder::new()
        .name("commcheck-world".into())
        .spawn(supervisor)
    {
        return WorldEnd::Finished(
            (0..local)
                .map(|_| {
                    Err(Finding::Harness(format!(
                        "could not start the world thread: {error}"
                    )))
                })
                .collect(),
        );
    }
    drop(report);
    let mut watchdog = Watchdog::new(limit, local);
    let mut results: Vec<Option<Check>> = (0..local).map(|_| None).collect();
    while results.iter().any(Option::is_none) {
        if let Some(end) = interrupt() {
            return end;
        }
        if let Some(expired) = watchdog.look(&watches, first, world.announce.as_deref()) {
            let ranks: Vec<usize> = (first..first + local)
                .filter(|r| results[*r - first].is_none())
                .collect();
            return match expired {
                Expired::Blocked(blocked) => blocked,
                Expired::Hung => {
                    let stacks = ranks
                        .iter()
                        .map(|rank| watch::whereabouts(&watches[rank - first]))
                        .collect();
                    WorldEnd::TimedOut { ranks, stacks }
                }
                Expired::Overran { ran, idle } => WorldEnd::Overran { ranks, ran, idle },
            };
        }
        match reports.recv_timeout(WATCH_PERIOD) {
            Ok((rank, Ok(check))) => results[rank - first] = Some(check),
            Ok((rank, Err(payload))) => {
                return WorldEnd::Crashed {
                    rank,
                    message: format!("panicked: {}", panic_message(payload.as_ref())),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let ranks = (first..first + local)
                    .filter(|r| results[*r - first].is_none())
                    .collect();
                return WorldEnd::TimedOut {
                    ranks,
                    stacks: Vec::new(),
                };
            }
        }
    }
    WorldEnd::Finished(results.into_iter().flatten().collect())
}

/// What one attempt at a case shares with its world runs.
#[derive(Default)]
pub(crate) struct Run {
    /// Notes and attributed violations of the case.
    pub(crate) journal: Arc<Journal>,
    /// Which attempt this is (0 first).
    pub(crate) attempt: u32,
}

impl Run {
    /// Records a violation of `invariant` seen by the supervisor.
    pub(crate) fn journal_attribute(&self, invariant: &str, message: &str) {
        guard(&self.journal.attributed).push(Attributed {
            invariant: invariant.to_owned(),
            message: message.to_owned(),
        });
    }
}

/// The message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".into())
}

/// Runs `script` on every rank of a fresh world of `ranks` ranks, under the
/// watchdog, and says how it went: `Ok` when every rank passed, otherwise a
/// message naming the rank and the finding (including not-supported).
///
/// This is the building block for property tests over world shapes: each
/// generated instance is one world.
pub fn run_script<H: Harness>(
    harness: Arc<H>,
    ranks: usize,
    seed: u64,
    limit: Duration,
    script: impl Fn(&RankCtx<'_, H>) -> Check + Send + Sync + 'static,
) -> Result<(), String> {
    match run_world(
        harness,
        ranks,
        seed,
        limit,
        Arc::new(script),
        &Run::default(),
    ) {
        WorldEnd::Finished(checks) => {
            let problems: Vec<String> = checks
                .into_iter()
                .enumerate()
                .filter_map(|(rank, check)| {
                    check
                        .err()
                        .map(|finding| format!("rank {rank}: {finding:?}"))
                })
                .collect();
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("; "))
            }
        }
        WorldEnd::Crashed { rank, message } => Err(format!("rank {rank} {message}")),
        WorldEnd::TimedOut { ranks, stacks } => Err(format!(
            "rank(s) {ranks:?} timed out: nothing moved for {limit:?}{}",
            crate::world::where_they_were(&ranks, &stacks)
        )),
        WorldEnd::Overran { ranks, ran, .. } => Err(format!(
            "rank(s) {ranks:?} still running after {ran:?}, though not hung (the machine is too slow now)"
        )),
        WorldEnd::Blocked {
            rank,
            what,
            invariant,
            limit,
        } => Err(format!(
            "rank {rank}: {what} had not returned after {limit:?} ({invariant})"
        )),
    }
}
