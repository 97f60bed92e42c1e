//! One rank's view of a case ([`RankCtx`]): its state, the harness, the
//! world's signals, and every call into the harness and backend the kit
//! tracks; and the cross-check of completion reports with the harness's
//! observer (EXC-2).

use super::sample::guard;
use super::signals::{Journal, Signals};
use super::watch::{inside, progressed};
use crate::check::{harness, Check, Finding};
use crate::dtype::{Dtype, HostValues};
use crate::harness::{
    CompletionRef, Executor, Group, Harness, HoldGuard, Ledger, Observer, Probe, Tensor,
    TensorContext,
};
use crate::results::Attributed;
use std::sync::Arc;
use std::time::Duration;

/// A call into the backend that the kit expects to return at once, as the
/// watcher of its rank sees it.
/// What a rank thread needs to cross-check a completion report with the
/// harness's observer: its journal, and the observer query (typed by the
/// harness, behind `Any`).
pub(super) struct ReportCheck {
    pub(super) journal: Arc<Journal>,
    pub(super) observe: Box<dyn std::any::Any>,
}

/// The observer query of a rank thread of harness `H`.
pub(super) type Observe<H> = Box<dyn Fn(CompletionRef<'_, H>) -> Option<crate::harness::WorkState>>;

thread_local! {
    /// The completion-report check of the rank thread this is, if any.
    pub(super) static REPORTS: std::cell::RefCell<Option<ReportCheck>> = const { std::cell::RefCell::new(None) };
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
    pub(super) harness: &'w H,
    pub(super) rank: H::Rank,
    pub(super) index: usize,
    pub(super) size: usize,
    pub(super) signals: &'w Signals,
    pub(super) journal: &'w Journal,
    pub(super) seed: u64,
    pub(super) attempt: u32,
    /// See [`RankCtx::large`].
    pub(super) large: Option<usize>,
    /// See [`RankCtx::large_dtype`].
    pub(super) large_dtype: Dtype,
    /// See [`RankCtx::largest_world`].
    pub(super) largest_world: usize,
    /// See [`RankCtx::subject_sends`].
    pub(super) sends: bool,
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
    pub(super) dtype: std::cell::Cell<Dtype>,
}

impl<'w, H: Harness> RankCtx<'w, H> {
    /// Rank `index` of a world of `size` ranks whose threads another
    /// scheduler runs, outside [`run_ranks`](super::run_ranks) (the sequence
    /// model's `crate::model::check_sequence_on`): no watchdog watches it.
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
            large: None,
            large_dtype: Dtype::F32,
            largest_world: size,
            sends: false,
            rounds: std::cell::Cell::new(0),
            fenced: std::cell::Cell::new(false),
            dtype: std::cell::Cell::new(Dtype::F32),
        }
    }

    /// This rank's index.
    pub fn rank(&self) -> usize {
        self.index
    }

    /// The elements each rank contributes to the completion matrix's
    /// operation submissions in this world when the case runs them past
    /// the largest protocol boundary the harness names (where a backend
    /// switches from an eager to a rendezvous or chunked path); `None` for
    /// their standard sizes of a few elements.
    pub(crate) fn large(&self) -> Option<usize> {
        self.large
    }

    /// The dtype of the completion matrix's operation submissions in this
    /// world: `f32`, or, past the boundaries, another dtype whose protocol
    /// boundaries differ from `f32`'s (see [`RankCtx::large`]).
    pub(crate) fn large_dtype(&self) -> Dtype {
        self.large_dtype
    }

    /// The largest world the case runs on (its worlds the harness builds):
    /// the value checks' size sweep runs there too.
    pub(crate) fn largest_world(&self) -> usize {
        self.largest_world.max(self.size)
    }

    /// Whether the subject (rank 0) of the completion matrix's transfer is
    /// its sender in this world, its late peer the receiver (a send a
    /// rendezvous protocol keeps pending until the receiver posts); the
    /// receiver otherwise.
    pub(crate) fn subject_sends(&self) -> bool {
        self.sends
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

    /// The value under `key` that every rank of this world computes alike
    /// (a function of the case's seed, the world's size and `key`): built
    /// once, by the first rank that asks, and shared while the world lasts.
    pub(crate) fn shared<T: Send + Sync + 'static>(
        &self,
        key: String,
        build: impl FnOnce() -> T,
    ) -> std::sync::Arc<T> {
        self.signals.shared(key, build)
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
        if !back.same_bits(&built) {
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

/// The per-rank script of a case.
pub(crate) type Script<H> = Arc<dyn Fn(&RankCtx<'_, H>) -> Check + Send + Sync>;
