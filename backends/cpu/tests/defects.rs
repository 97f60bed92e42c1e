//! Every planted `Defect` really misbehaves the way its description says, and
//! the same scenario passes on a correct device.
//!
//! One scenario per defect returns whether the misbehaviour was observed. The
//! table runs every scenario against `CpuDevice::with_defect(d)` (must
//! misbehave) and `CpuDevice::new()` (must not). Every scenario is bounded in
//! time: work a defect makes hang is observed as "still pending after N ms"
//! and then cancelled or released.

mod common;

use std::cell::Cell;
use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use commcheck_cpu::{
    CpuBackend, CpuCompletion, CpuDevice, CpuError, CpuTensor, Defect, Element, Phase, WireMessage,
    PARALLEL_FROM, SUM_BLOCK,
};
use common::*;
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, Completion, Submission};
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, CommunicationBackend, EvenGatherBackend,
    FailureAgreementBackend, PointToPointBackend, SubmissionBackend, SumReductionBackend,
    UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::{CommunicationPeerCounts, CommunicationRouteId};

/// Returns whether the scenario observed the misbehaviour.
type Scenario = fn(&CpuDevice) -> bool;

/// How long work that must not finish is watched, or how long work that must
/// finish promptly is given.
const SHORT: Duration = Duration::from_millis(500);
/// Bound on every cleanup wait.
const BOUND: Duration = Duration::from_secs(5);

const COMPLETED: Result<BoundedCompletionOutcome, CpuError> =
    Ok(BoundedCompletionOutcome::Completed);

/// Bounded cleanup wait.
fn finish(completion: CpuCompletion) -> Result<BoundedCompletionOutcome, CpuError> {
    completion.wait_bounded(policy(BOUND, NATIVE))
}

/// Bounded wait for a submission's output values; `None` when it did not complete.
fn output(submission: Submission<CpuTensor, CpuCompletion>) -> Option<Vec<f32>> {
    match submission.completion.wait_bounded(policy(BOUND, NATIVE)) {
        Ok(BoundedCompletionOutcome::Completed) => submission.output.read_materialised(),
        _ => None,
    }
}

fn single(device: &CpuDevice) -> commcheck_cpu::CpuGroup {
    device.group(1).unwrap().remove(0)
}

/// Runs `check` on the completion after a helper thread releases `hold`,
/// either when `check` has returned or after `SHORT`, whichever is first.
fn release_after<R>(hold: commcheck_cpu::Hold, check: impl FnOnce() -> R) -> R {
    let (done, wait_done) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = wait_done.recv_timeout(SHORT);
            drop(hold);
        });
        let result = check();
        let _ = done.send(());
        result
    })
}

// ---------------------------------------------------------------- RET

fn local_work_drops_inputs(d: &CpuDevice) -> bool {
    let e = d.executor();
    let t = tensor(d, &[1.0; 4], &[4]);
    let id = t.storage_id();
    let hold = e.hold();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(t);
    let freed = !d.storage_live(id);
    drop(hold);
    let _ = finish(sub.completion);
    freed
}

fn executor_not_retained(d: &CpuDevice) -> bool {
    let e = d.executor();
    let t = tensor(d, &[1.0], &[1]);
    let hold = e.hold();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(e);
    drop(hold);
    matches!(finish(sub.completion), Err(CpuError::ExecutorGone { .. }))
}

fn collective_drops_resources(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    let t = tensor(d, &[1.0, 2.0], &[2]);
    let id = t.storage_id();
    let hold = e.hold();
    let sub = CpuBackend::all_reduce_sum(t, &group, &e).unwrap();
    drop(group);
    let dropped = !d.storage_live(id) || d.ledger().groups == 0;
    drop(hold);
    let _ = finish(sub.completion);
    dropped
}

fn drop_releases_pending(d: &CpuDevice) -> bool {
    let e = d.executor();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let hold = e.hold();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop((t, sub));
    let freed = !d.storage_live(id);
    drop(hold);
    eventually_within(BOUND, || d.ledger().pending_work == 0);
    freed
}

fn output_not_retained(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    let hold = e.hold();
    let Submission { output, completion } =
        CpuBackend::all_reduce_sum(tensor(d, &[1.0], &[1]), &group, &e).unwrap();
    let id = output.storage_id();
    drop(output);
    let freed = !d.storage_live(id);
    drop(hold);
    let _ = finish(completion);
    freed
}

fn retain_drops_early(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let (flag, dropped) = DropFlag::new();
    CpuBackend::retain_until_complete(&e, &c, flag).unwrap();
    let early = dropped.load(Ordering::SeqCst);
    drop(hold);
    let _ = finish(c);
    early
}

fn leak_retained(d: &CpuDevice) -> bool {
    let e = d.executor();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    let _ = finish(sub.completion);
    drop(t);
    !eventually_within(SHORT, || !d.storage_live(id))
}

fn local_deps_fence_group(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    let first = CpuBackend::all_reduce_sum(tensor(d, &[1.0], &[1]), &group, &e).unwrap();
    let _ = finish(first.completion);
    let hold = e.hold();
    let t = tensor(d, &[1.0], &[1]);
    let deps = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    let _ = deps
        .completion
        .wait_bounded(policy(Duration::from_millis(1), NATIVE));
    drop(hold);
    let second = CpuBackend::all_reduce_sum(tensor(d, &[2.0], &[1]), &group, &e).unwrap();
    output(second) != Some(vec![2.0])
}

// ---------------------------------------------------------------- EXC

fn blocking_is_complete(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    // A nonblocking query answers `false` at once, long before the release.
    let answer = release_after(hold, || c.is_complete());
    let _ = finish(c);
    answer != Ok(false)
}

fn early_completion(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let observer = c.observer();
    assert!(eventually(|| observer.observe().phase == Phase::Running));
    let early = matches!(c.is_complete(), Ok(true));
    drop(hold);
    let _ = finish(c);
    early
}

fn non_monotonic_completion(d: &CpuDevice) -> bool {
    let e = d.executor();
    let c = CpuBackend::submit(&e, []).unwrap();
    assert!(c.observer().wait_terminal(BOUND));
    let answers: Vec<_> = (0..6).map(|_| c.is_complete()).collect();
    answers
        .windows(2)
        .any(|w| w[0] == Ok(true) && w[1] != Ok(true))
}

fn wait_for_device(d: &CpuDevice) -> bool {
    let (a, b) = (d.executor(), d.executor());
    let hold = b.hold();
    let blocked = CpuBackend::submit(&b, []).unwrap();
    let c = CpuBackend::submit(&a, []).unwrap();
    let (returned, wait_returned) = mpsc::channel();
    let prompt = std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = returned.send(c.wait());
        });
        let prompt = matches!(wait_returned.recv_timeout(SHORT), Ok(Ok(())));
        drop(hold);
        prompt
    });
    let _ = finish(blocked);
    !prompt
}

fn stale_completion_query(d: &CpuDevice) -> bool {
    let e = d.executor();
    let c = CpuBackend::submit(&e, []).unwrap();
    c.wait().unwrap();
    c.is_complete() != Ok(true)
}

fn non_sticky_error(d: &CpuDevice) -> bool {
    let e = d.executor();
    e.inject_fault();
    let c = CpuBackend::submit(&e, []).unwrap();
    let first = c.wait().is_err();
    let later = [c.wait().is_ok(), c.is_complete().is_ok(), c.wait().is_ok()];
    let bounded = finish(c).is_ok();
    assert!(first, "the injected fault was not reported at all");
    later.iter().any(|&ok| ok) || bounded
}

fn error_releases(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    e.inject_fault();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(t);
    let observer = sub.completion.observer();
    assert!(eventually(|| observer.observe().error.is_some()));
    // Held work is live: a correct device keeps the input however long we look.
    let freed = eventually_within(SHORT, || !d.storage_live(id));
    drop(hold);
    let _ = finish(sub.completion);
    freed
}

fn releasable_early(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    e.inject_fault();
    let c = CpuBackend::submit(&e, []).unwrap();
    let observer = c.observer();
    assert!(eventually(|| observer.observe().error.is_some()));
    let releasable = c.resources_releasable();
    drop(hold);
    let _ = finish(c);
    releasable
}

thread_local! {
    /// Set on this thread while it is inside `resources_releasable`.
    static INSIDE_RELEASABLE: Cell<bool> = const { Cell::new(false) };
}

/// Records whether it was dropped inside a `resources_releasable` call.
struct Probe(Arc<AtomicBool>);

impl Drop for Probe {
    fn drop(&mut self) {
        if INSIDE_RELEASABLE.with(Cell::get) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

fn releasable_runs_destructors(d: &CpuDevice) -> bool {
    let e = d.executor();
    // Held, so the value is retained rather than dropped at once as "already complete".
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let dropped_inside = Arc::new(AtomicBool::new(false));
    CpuBackend::retain_until_complete(&e, &c, Probe(Arc::clone(&dropped_inside))).unwrap();
    drop(hold);
    c.wait().unwrap();
    eventually_within(SHORT, || {
        INSIDE_RELEASABLE.with(|inside| inside.set(true));
        let _ = c.resources_releasable();
        INSIDE_RELEASABLE.with(|inside| inside.set(false));
        dropped_inside.load(Ordering::SeqCst)
    })
}

/// Whether `probe` says `resources_releasable()` while its work is live.
fn releasable_while_live(probe: &CpuCompletion) -> bool {
    let releasable = probe.resources_releasable();
    // Terminal states are final: live now means live during the call.
    releasable && !probe.observer().is_terminal()
}

/// Quarantine: held work is still live after the other handle's `wait_bounded`
/// returned `DeadlineExceeded`.
fn releasable_after_quarantine_deadline(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let probe = c.clone();
    let outcome = c.wait_bounded(policy(Duration::from_millis(5), QUARANTINE));
    assert_eq!(
        outcome,
        Ok(BoundedCompletionOutcome::DeadlineExceeded {
            cancellation: QUARANTINE
        })
    );
    let early = releasable_while_live(&probe);
    drop(hold);
    assert!(probe.observer().wait_terminal(BOUND));
    early
}

/// NativeCancel tears running work down before `wait_bounded` returns
/// (CAN-5), so the clone is probed from another thread *during* the teardown.
/// That needs work that takes a while to observe the request: lazy evaluation
/// looks at its work's cancel token only before each value and between the
/// rows of a matmul, so the work evaluates a chain of single-row products by
/// a 4096×4096 matrix (each link copies the matrix and computes one row of
/// 16M multiply-adds without a look: about 15 ms, the workspace building the
/// backend optimised even for tests). Where the request lands in a link is up to the scheduler, so a
/// defective device gets a few attempts to show it.
fn releasable_during_native_teardown(d: &CpuDevice) -> bool {
    const WIDTH: i32 = 4096;
    let e = d.executor();
    let matrix = tensor(d, &vec![0.5; (WIDTH * WIDTH) as usize], &[WIDTH, WIDTH]);
    let links = 4;
    (0..3).any(|_| {
        let mut product = tensor(d, &vec![0.5; WIDTH as usize], &[1, WIDTH]);
        for _ in 0..links {
            product = eredu_nn::Tensor::matmul(&product, &matrix, &e).unwrap();
        }
        let c = CpuBackend::submit(&e, [&product]).unwrap();
        let probe = c.clone();
        let observer = c.observer();
        let started = Instant::now();
        while observer.observe().phase == Phase::Queued && started.elapsed() < BOUND {
            std::thread::yield_now();
        }
        let seen = std::thread::scope(|scope| {
            let watcher = scope.spawn(move || {
                let mut seen = false;
                while !seen && !probe.observer().is_terminal() {
                    seen = releasable_while_live(&probe);
                    std::thread::yield_now();
                }
                seen
            });
            let outcome = c.wait_bounded(policy(Duration::from_millis(1), NATIVE));
            assert!(outcome.is_ok(), "{outcome:?}");
            watcher.join().expect("watcher thread")
        });
        assert!(
            observer.observe().deadline_passed,
            "the evaluation finished before the deadline"
        );
        assert!(observer.wait_terminal(BOUND));
        seen
    })
}

fn releasable_after_deadline(d: &CpuDevice) -> bool {
    let quarantine = releasable_after_quarantine_deadline(d);
    let native = releasable_during_native_teardown(d);
    quarantine || native
}

fn releasable_never_true(d: &CpuDevice) -> bool {
    let e = d.executor();
    let c = CpuBackend::submit(&e, []).unwrap();
    c.wait().unwrap();
    !eventually_within(SHORT, || c.resources_releasable())
}

fn empty_local_deps_hang(d: &CpuDevice) -> bool {
    let e = d.executor();
    let sub = CpuBackend::submit_local_dependencies([], &e).unwrap();
    sub.completion.wait_bounded(policy(SHORT, NATIVE)) != COMPLETED
}

// ---------------------------------------------------------------- CAN

fn completed_at_deadline(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let outcome = c.wait_bounded(policy(Duration::from_millis(20), QUARANTINE));
    drop(hold);
    outcome == COMPLETED
}

fn early_deadline(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let timeout = Duration::from_millis(200);
    let started = Instant::now();
    let outcome = c.wait_bounded(policy(timeout, QUARANTINE));
    let elapsed = started.elapsed();
    drop(hold);
    assert!(outcome.is_ok(), "{outcome:?}");
    elapsed < timeout
}

fn wrong_cancellation_mode(d: &CpuDevice) -> bool {
    let e = d.executor();
    [NATIVE, QUARANTINE].into_iter().any(|mode| {
        let hold = e.hold();
        let c = CpuBackend::submit(&e, []).unwrap();
        let outcome = c.wait_bounded(policy(Duration::from_millis(5), mode));
        drop(hold);
        outcome != Ok(BoundedCompletionOutcome::DeadlineExceeded { cancellation: mode })
    })
}

fn native_cancel_errors(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let outcome = c.wait_bounded(policy(Duration::from_millis(5), NATIVE));
    drop(hold);
    outcome.is_err()
}

fn native_cancel_no_teardown(d: &CpuDevice) -> bool {
    // Whether the worker has already noticed the request when the call
    // returns is a race under the defect; a correct device never loses it.
    // (Only the phase is checked here; `native_cancel_releases_everything_before_returning`
    // checks the release of the retained resources.)
    (0..20).any(|_| {
        let e = d.executor();
        let hold = e.hold();
        let sub = CpuBackend::submit(&e, []).unwrap();
        let observer = sub.observer();
        assert!(eventually(|| observer.observe().phase == Phase::Running));
        let outcome = sub.wait_bounded(policy(Duration::from_millis(1), NATIVE));
        let torn_down = observer.is_terminal();
        drop(hold);
        assert!(observer.wait_terminal(BOUND));
        assert!(outcome.is_ok(), "{outcome:?}");
        !torn_down
    })
}

fn quarantine_drops_live(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(t);
    let observer = sub.completion.observer();
    let outcome = sub
        .completion
        .wait_bounded(policy(Duration::from_millis(5), QUARANTINE));
    let freed = !d.storage_live(id);
    drop(hold);
    assert!(observer.wait_terminal(BOUND));
    assert!(outcome.is_ok(), "{outcome:?}");
    freed
}

fn error_drops_live(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    e.inject_fault();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(t);
    let observer = sub.completion.observer();
    // The fault is published while the work is held: `Err` with live work.
    let outcome = sub.completion.wait_bounded(policy(BOUND, QUARANTINE));
    let freed_while_live = !d.storage_live(id) && !observer.is_terminal();
    drop(hold);
    assert!(observer.wait_terminal(BOUND));
    assert!(outcome.is_err(), "{outcome:?}");
    freed_while_live
}

fn deadline_overflow(d: &CpuDevice) -> bool {
    let e = d.executor();
    let c = CpuBackend::submit(&e, []).unwrap();
    c.wait().unwrap();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        c.wait_bounded(policy(Duration::MAX, NATIVE))
    }));
    !matches!(outcome, Ok(Ok(BoundedCompletionOutcome::Completed)))
}

fn failed_is_completed(d: &CpuDevice) -> bool {
    let e = d.executor();
    e.inject_fault();
    let c = CpuBackend::submit(&e, []).unwrap();
    assert!(c.observer().wait_terminal(BOUND));
    c.wait_bounded(policy(BOUND, NATIVE)) == COMPLETED
}

// ---------------------------------------------------------------- SUB

fn fork_shares_lane(d: &CpuDevice) -> bool {
    let e = d.executor();
    let lanes = CpuBackend::fork_executors(&e, 2).unwrap();
    assert_eq!(lanes.len(), 2);
    let hold = lanes[0].hold();
    let c = CpuBackend::submit(&lanes[1], []).unwrap();
    let outcome = c.wait_bounded(policy(SHORT, NATIVE));
    drop(hold);
    outcome != COMPLETED
}

fn submit_skips_evaluation(d: &CpuDevice) -> bool {
    // A collective's output is the one value that is not materialised yet.
    let producer = d.executor();
    let lane = d.executor();
    let group = single(d);
    let hold = producer.hold();
    let sum = CpuBackend::all_reduce_sum(tensor(d, &[3.0], &[1]), &group, &producer).unwrap();
    let c = CpuBackend::submit(&lane, [&sum.output]).unwrap();
    let (outcome, materialised) = release_after(hold, || {
        (
            c.wait_bounded(policy(BOUND, NATIVE)),
            sum.output.read_materialised(),
        )
    });
    let _ = finish(sum.completion);
    !(outcome == COMPLETED && materialised == Some(vec![3.0]))
}

fn order_after_ignored(d: &CpuDevice) -> bool {
    let (producer_lane, consumer_lane) = (d.executor(), d.executor());
    let hold = producer_lane.hold();
    let producer = CpuBackend::submit(&producer_lane, []).unwrap();
    CpuBackend::order_after(&producer, &consumer_lane).unwrap();
    let consumer = CpuBackend::submit(&consumer_lane, []).unwrap();
    let early = consumer.observer().wait_terminal(SHORT);
    drop(hold);
    let _ = (finish(producer), finish(consumer));
    early
}

fn submit_error_leaves_work(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    e.fail_next_submission();
    let t = tensor(d, &[1.0], &[1]);
    let refused = CpuBackend::submit_local_dependencies([&t], &e);
    let pending = d.ledger().pending_work;
    drop(hold);
    eventually_within(BOUND, || d.ledger().pending_work == 0);
    refused.is_ok() || pending > 0
}

// ---------------------------------------------------------------- operations

fn sum_skips_last_member(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |rank, group, e| {
        output(CpuBackend::all_reduce_sum(ranked(d, rank, &[2]), &group, &e).unwrap())
    });
    results != vec![Some(vec![1000.0, 1002.0]); 2]
}

fn lazy_launch(d: &CpuDevice) -> bool {
    // A wave of two sums, waited in opposite orders on the two ranks.
    let results = on_ranks(d, 2, |rank, group, e| {
        let mut wave: Vec<_> = (0..2)
            .map(|_| Some(CpuBackend::all_reduce_sum(ranked(d, rank, &[1]), &group, &e).unwrap()))
            .collect();
        let order = if rank == 0 { [0, 1] } else { [1, 0] };
        order.map(|k| {
            let sub = wave[k].take().unwrap();
            sub.completion
                .wait_bounded(policy(Duration::from_secs(1), NATIVE))
                == COMPLETED
        })
    });
    results.iter().flatten().any(|&completed| !completed)
}

fn gather_reversed(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |rank, group, e| {
        output(CpuBackend::all_gather_even(ranked(d, rank, &[1]), 0, &group, &e).unwrap())
    });
    results != vec![Some(vec![0.0, 1000.0]); 2]
}

fn sum_tail_block_untouched(d: &CpuDevice) -> bool {
    // Past the parallel split, with a last partial block.
    let len = PARALLEL_FROM + SUM_BLOCK + 5;
    let results = on_ranks(d, 2, |rank, group, e| {
        let input = tensor(d, &vec![rank as f32 + 1.0; len], &[len as i32]);
        output(CpuBackend::all_reduce_sum(input, &group, &e).unwrap())
    });
    results != vec![Some(vec![3.0; len]); 2]
}

fn sum_bf16_as_f16(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |_, group, e| {
        let input = d.typed_tensor(Element::Bf16, &[1.0, 2.0], &[2]).unwrap();
        output(CpuBackend::all_reduce_sum(input, &group, &e).unwrap())
    });
    results != vec![Some(vec![2.0, 4.0]); 2]
}

fn gather_middle_axis_swapped(d: &CpuDevice) -> bool {
    // Shape [2, 1, 3] on axis 1: outer 2, inner 3.
    let results = on_ranks(d, 2, |rank, group, e| {
        output(CpuBackend::all_gather_even(ranked(d, rank, &[2, 1, 3]), 1, &group, &e).unwrap())
    });
    let rows = |o: usize| (0..2).flat_map(move |r| (0..3).map(move |i| value(r, o * 3 + i)));
    results != vec![Some((0..2).flat_map(rows).collect()); 2]
}

fn gather_by_arrival(d: &CpuDevice) -> bool {
    // Member 1 submits first, member 0 once member 1's submission returned.
    let (submitted, wait_submitted) = mpsc::channel::<()>();
    let wait_submitted = Mutex::new(wait_submitted);
    let results = on_ranks(d, 2, |rank, group, e| {
        if rank == 0 {
            let _ = wait_submitted.lock().unwrap().recv_timeout(BOUND);
        }
        let submission = CpuBackend::all_gather_even(ranked(d, rank, &[1]), 0, &group, &e).unwrap();
        if rank == 1 {
            let _ = submitted.send(());
        }
        output(submission)
    });
    results != vec![Some(vec![value(0, 0), value(1, 0)]); 2]
}

fn uneven_counts_as_elements(d: &CpuDevice) -> bool {
    let counts = [2, 1];
    let results = on_ranks(d, 2, |rank, group, e| {
        let input = ranked(d, rank, &[counts[rank] as i32, 2]);
        output(CpuBackend::all_gather_uneven(input, &counts, 0, &group, &e).unwrap())
    });
    results != vec![Some(vec![0.0, 1.0, 2.0, 3.0, 1000.0, 1001.0]); 2]
}

fn all_to_all_zero_skips(d: &CpuDevice) -> bool {
    // Member 1 sends and receives nothing; member 0 joins late.
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let results = on_ranks(d, 2, |rank, group, e| {
        let (send, receive) = if rank == 0 {
            (vec![1, 0], vec![1, 0])
        } else {
            (vec![0, 0], vec![0, 0])
        };
        let counts = CommunicationPeerCounts::new(send.clone(), receive, 2).unwrap();
        let input = ranked(d, rank, &[send.iter().sum::<usize>() as i32]);
        if rank == 0 {
            let _ = wait_go.lock().unwrap().recv_timeout(BOUND);
        }
        let sub = CpuBackend::variable_all_to_all(input, &counts, 0, &group, &e).unwrap();
        let early = rank == 1 && sub.completion.observer().wait_terminal(SHORT);
        if rank == 1 {
            go.send(()).unwrap();
        }
        let _ = finish(sub.completion);
        early
    });
    results[1]
}

const SCHEMA: &str = "commcheck.defects";

/// What a transfer observed: the receive outcome, the received values, the wire log.
type Transfer = (
    Result<BoundedCompletionOutcome, CpuError>,
    Vec<Option<Vec<f32>>>,
    Vec<WireMessage>,
);

/// Sends `values` (framed with `sent`) from rank 0 to rank 1, which expects
/// roles `expected`; returns the receive outcome, its values and the wire log.
fn transfer(
    d: &CpuDevice,
    sent: &[(&str, &[usize])],
    expected: &[(&str, &[usize])],
    values: Vec<CpuTensor>,
) -> Transfer {
    let id = CommunicationRouteId::new(1);
    let source = d.route(id, 0, 1, 0).unwrap();
    let destination = d.route(id, 0, 1, 1).unwrap();
    let placeholders = values
        .iter()
        .map(|v| {
            tensor(
                d,
                &vec![f32::NAN; v.dims().iter().product::<i32>() as usize],
                v.dims(),
            )
        })
        .collect();
    let send =
        CpuBackend::send_receive(framed(SCHEMA, id, sent, values), &source, &d.executor()).unwrap();
    let receive = CpuBackend::send_receive(
        framed(SCHEMA, id, expected, placeholders),
        &destination,
        &d.executor(),
    )
    .unwrap();
    let _ = finish(send.completion);
    let outcome = finish(receive.completion);
    let received = receive
        .output
        .iter()
        .map(CpuTensor::read_materialised)
        .collect();
    (outcome, received, source.wire_log())
}

const TWO: [(&str, &[usize]); 2] = [("first", &[2]), ("second", &[2])];

fn point_to_point_reversed(d: &CpuDevice) -> bool {
    let (outcome, received, _) =
        transfer(d, &TWO, &TWO, vec![ranked(d, 0, &[2]), ranked(d, 1, &[2])]);
    outcome != COMPLETED || received != [Some(vec![0.0, 1.0]), Some(vec![1000.0, 1001.0])]
}

fn skip_header_check(d: &CpuDevice) -> bool {
    let other: [(&str, &[usize]); 2] = [("first", &[2]), ("other", &[2])];
    let (outcome, _, _) = transfer(
        d,
        &TWO,
        &other,
        vec![ranked(d, 0, &[2]), ranked(d, 1, &[2])],
    );
    outcome.is_ok()
}

fn separate_header_message(d: &CpuDevice) -> bool {
    let values = vec![ranked(d, 0, &[2]), ranked(d, 1, &[2])];
    let headers: Vec<Vec<u8>> = framed(SCHEMA, CommunicationRouteId::new(1), &TWO, values.clone())
        .iter()
        .map(|v| v.header().to_vec())
        .collect();
    let (outcome, _, wire) = transfer(d, &TWO, &TWO, values);
    assert_eq!(outcome, COMPLETED);
    wire != [WireMessage {
        headers,
        payload_bytes: 16,
    }]
}

fn broadcast_sums(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |rank, group, e| {
        output(CpuBackend::broadcast(ranked(d, rank, &[2]), 0, &group, &e).unwrap())
    });
    results != vec![Some(vec![0.0, 1.0]); 2]
}

fn broadcast_root_wraps(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    match CpuBackend::broadcast(tensor(d, &[1.0], &[1]), 1, &group, &e) {
        Ok(sub) => {
            let _ = finish(sub.completion);
            true
        }
        Err(_) => false,
    }
}

fn barrier_early(d: &CpuDevice) -> bool {
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let results = on_ranks(d, 2, |rank, group, e| {
        if rank == 1 {
            let _ = wait_go.lock().unwrap().recv_timeout(BOUND);
        }
        let barrier = CpuBackend::barrier(&group, &e).unwrap();
        let early = rank == 0 && barrier.observer().wait_terminal(SHORT);
        if rank == 0 {
            go.send(()).unwrap();
        }
        let _ = finish(barrier);
        early
    });
    results[0]
}

fn agreement_local(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |rank, group, e| {
        let sub = CpuBackend::agree_success(rank == 0, &group, &e).unwrap();
        let _ = finish(sub.completion);
        CpuBackend::resolve_failure_agreement(sub.output)
    });
    results != vec![Ok(false), Ok(false)]
}

fn agreement_blocks(d: &CpuDevice) -> bool {
    // Rank 0 reports when it calls `agree_success` and when the call returned;
    // rank 1 joins only after that (or after SHORT).
    let (report, reports) = mpsc::channel::<()>();
    let reports = Mutex::new(reports);
    let results = on_ranks(d, 2, |rank, group, e| {
        let prompt = rank == 0 || {
            let reports = reports.lock().unwrap();
            reports.recv_timeout(BOUND).is_ok() && reports.recv_timeout(SHORT).is_ok()
        };
        if rank == 0 {
            report.send(()).unwrap();
        }
        let sub = CpuBackend::agree_success(true, &group, &e).unwrap();
        if rank == 0 {
            report.send(()).unwrap();
        }
        let _ = finish(sub.completion);
        prompt
    });
    !results[1]
}

// ---------------------------------------------------------------- the table

/// One scenario per defect, in `Defect::ALL` (SPEC) order.
const SCENARIOS: &[(Defect, Scenario)] = &[
    (Defect::LocalWorkDropsInputs, local_work_drops_inputs),
    (Defect::ExecutorNotRetained, executor_not_retained),
    (Defect::CollectiveDropsResources, collective_drops_resources),
    (Defect::DropReleasesPending, drop_releases_pending),
    (Defect::OutputNotRetained, output_not_retained),
    (Defect::RetainDropsEarly, retain_drops_early),
    (Defect::LeakRetained, leak_retained),
    (Defect::LocalDepsFenceGroup, local_deps_fence_group),
    (Defect::BlockingIsComplete, blocking_is_complete),
    (Defect::EarlyCompletion, early_completion),
    (Defect::NonMonotonicCompletion, non_monotonic_completion),
    (Defect::WaitForDevice, wait_for_device),
    (Defect::StaleCompletionQuery, stale_completion_query),
    (Defect::NonStickyError, non_sticky_error),
    (Defect::ErrorReleases, error_releases),
    (Defect::ReleasableEarly, releasable_early),
    (
        Defect::ReleasableRunsDestructors,
        releasable_runs_destructors,
    ),
    (Defect::ReleasableAfterDeadline, releasable_after_deadline),
    (Defect::ReleasableNeverTrue, releasable_never_true),
    (Defect::EmptyLocalDepsHang, empty_local_deps_hang),
    (Defect::CompletedAtDeadline, completed_at_deadline),
    (Defect::EarlyDeadline, early_deadline),
    (Defect::WrongCancellationMode, wrong_cancellation_mode),
    (Defect::NativeCancelErrors, native_cancel_errors),
    (Defect::NativeCancelNoTeardown, native_cancel_no_teardown),
    (Defect::QuarantineDropsLive, quarantine_drops_live),
    (Defect::ErrorDropsLive, error_drops_live),
    (Defect::DeadlineOverflow, deadline_overflow),
    (Defect::FailedIsCompleted, failed_is_completed),
    (Defect::ForkSharesLane, fork_shares_lane),
    (Defect::SubmitSkipsEvaluation, submit_skips_evaluation),
    (Defect::OrderAfterIgnored, order_after_ignored),
    (Defect::SubmitErrorLeavesWork, submit_error_leaves_work),
    (Defect::SumSkipsLastMember, sum_skips_last_member),
    (Defect::LazyLaunch, lazy_launch),
    (Defect::SumTailBlockUntouched, sum_tail_block_untouched),
    (Defect::SumBf16AsF16, sum_bf16_as_f16),
    (Defect::GatherReversed, gather_reversed),
    (Defect::GatherMiddleAxisSwapped, gather_middle_axis_swapped),
    (Defect::GatherByArrival, gather_by_arrival),
    (Defect::UnevenCountsAsElements, uneven_counts_as_elements),
    (Defect::AllToAllZeroSkips, all_to_all_zero_skips),
    (Defect::PointToPointReversed, point_to_point_reversed),
    (Defect::SkipHeaderCheck, skip_header_check),
    (Defect::SeparateHeaderMessage, separate_header_message),
    (Defect::BroadcastSums, broadcast_sums),
    (Defect::BroadcastRootWraps, broadcast_root_wraps),
    (Defect::BarrierEarly, barrier_early),
    (Defect::AgreementLocal, agreement_local),
    (Defect::AgreementBlocks, agreement_blocks),
];

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

/// Runs every scenario (in parallel, each on its own device) and returns the
/// defects for which the observation differs from `misbehaves`.
fn mismatches(device: impl Fn(Defect) -> CpuDevice + Sync, misbehaves: bool) -> Vec<String> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = SCENARIOS
            .iter()
            .map(|&(defect, scenario)| {
                let device = device(defect);
                let run = scope.spawn(move || catch_unwind(AssertUnwindSafe(|| scenario(&device))));
                (defect, run)
            })
            .collect();
        runs.into_iter()
            .filter_map(|(defect, run)| {
                let what = defect.description();
                match run.join().expect("scenario thread") {
                    Ok(observed) if observed == misbehaves => None,
                    Ok(true) => Some(format!("{defect}: misbehaved on a correct device ({what})")),
                    Ok(false) => Some(format!("{defect}: misbehaviour not observed ({what})")),
                    Err(panic) => Some(format!(
                        "{defect}: scenario panicked: {}",
                        panic_message(&*panic)
                    )),
                }
            })
            .collect()
    })
}

#[test]
fn every_planted_defect_misbehaves_as_described() {
    let failures = mismatches(CpuDevice::with_defect, true);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_scenario_passes_on_a_correct_device() {
    let failures = mismatches(|_| CpuDevice::new(), false);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_scenario_table_covers_every_defect_exactly_once() {
    let table: Vec<Defect> = SCENARIOS.iter().map(|&(defect, _)| defect).collect();
    let unique: BTreeSet<Defect> = table.iter().copied().collect();
    assert_eq!(unique.len(), table.len(), "a defect has two scenarios");
    let all: BTreeSet<Defect> = Defect::ALL.iter().copied().collect();
    let missing: Vec<_> = all.difference(&unique).collect();
    assert!(
        missing.is_empty(),
        "defects without a scenario: {missing:?}"
    );
    assert_eq!(table, Defect::ALL, "the table is not in Defect::ALL order");
    for defect in Defect::ALL {
        assert!(
            !defect.description().is_empty() && defect.invariant().contains('-'),
            "{defect}"
        );
    }
}

#[test]
fn native_cancel_releases_everything_before_returning() {
    let d = CpuDevice::new();
    let e = d.executor();
    let mut late = 0;
    for _ in 0..200 {
        let hold = e.hold();
        let t = tensor(&d, &[1.0], &[1]);
        let id = t.storage_id();
        let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
        drop(t);
        let observer = sub.completion.observer();
        assert!(eventually(|| observer.observe().phase == Phase::Running));
        let outcome = sub
            .completion
            .wait_bounded(policy(Duration::from_millis(1), NATIVE));
        assert_eq!(
            outcome,
            Ok(BoundedCompletionOutcome::DeadlineExceeded {
                cancellation: NATIVE
            })
        );
        if d.storage_live(id) || d.ledger().pending_work != 0 {
            late += 1;
        }
        drop(hold);
        assert!(eventually(|| d.ledger().pending_work == 0));
    }
    assert_eq!(
        late, 0,
        "teardown reported finished while resources were still held"
    );
}

#[test]
fn releasable_after_deadline_misbehaves_in_both_modes() {
    let modes: [(&str, Scenario); 2] = [
        (
            "QuarantineUntilComplete",
            releasable_after_quarantine_deadline,
        ),
        ("NativeCancel", releasable_during_native_teardown),
    ];
    for (mode, scenario) in modes {
        assert!(
            scenario(&CpuDevice::with_defect(Defect::ReleasableAfterDeadline)),
            "{mode}: a clone did not report releasable after the deadline"
        );
        assert!(
            !scenario(&CpuDevice::new()),
            "{mode}: a correct device reported live work releasable"
        );
    }
}

#[test]
fn deferred_launch_happens_once_from_whichever_clone_is_observed() {
    let d = CpuDevice::with_defect(Defect::LazyLaunch);
    let e = d.executor();
    let group = single(&d);
    let Submission { output, completion } =
        CpuBackend::all_reduce_sum(tensor(&d, &[2.0], &[1]), &group, &e).unwrap();
    let clone = completion.clone();
    // The launch slot survives dropping the handle it was created with.
    drop(completion);
    assert!(!clone.observer().wait_terminal(Duration::from_millis(20)));
    assert_eq!(finish(clone.clone()), COMPLETED);
    assert_eq!(output.read_materialised(), Some(vec![2.0]));
    assert!(clone.is_complete().unwrap());
}

/// `resources_releasable()` of a completion and of its observer, which must agree.
fn both_releasable(completion: &CpuCompletion, expected: bool) -> (bool, bool) {
    let observer = completion.observer();
    if expected {
        // `false` is allowed under contention, so a `true` is waited for.
        (
            eventually_within(SHORT, || completion.resources_releasable()),
            eventually_within(SHORT, || observer.resources_releasable()),
        )
    } else {
        (
            completion.resources_releasable(),
            observer.resources_releasable(),
        )
    }
}

#[test]
fn observers_answer_resources_releasable_like_their_completion() {
    let devices = [
        None,
        Some(Defect::ReleasableNeverTrue),
        Some(Defect::ReleasableEarly),
        Some(Defect::ReleasableAfterDeadline),
        Some(Defect::ReleasableRunsDestructors),
    ];
    for defect in devices {
        let d = defect.map_or_else(CpuDevice::new, CpuDevice::with_defect);
        let e = d.executor();
        // Live work whose error was published (the ReleasableEarly case).
        let hold = e.hold();
        e.inject_fault();
        let c = CpuBackend::submit(&e, []).unwrap();
        assert!(eventually(|| c.observer().observe().error.is_some()));
        let early = defect == Some(Defect::ReleasableEarly);
        assert_eq!(both_releasable(&c, early), (early, early), "{defect:?}");
        drop(hold);
        let _ = finish(c);
        // Live work after another handle's deadline (the ReleasableAfterDeadline case).
        let hold = e.hold();
        let c = CpuBackend::submit(&e, []).unwrap();
        let probe = c.clone();
        let outcome = c.wait_bounded(policy(Duration::from_millis(5), QUARANTINE));
        assert!(outcome.is_ok(), "{outcome:?}");
        let late = defect == Some(Defect::ReleasableAfterDeadline);
        assert_eq!(both_releasable(&probe, late), (late, late), "{defect:?}");
        drop(hold);
        assert!(probe.observer().wait_terminal(BOUND));
        // Completed work (the ReleasableNeverTrue case).
        let c = CpuBackend::submit(&e, []).unwrap();
        c.wait().unwrap();
        let done = defect != Some(Defect::ReleasableNeverTrue);
        assert_eq!(both_releasable(&c, done), (done, done), "{defect:?}");
    }
}

#[test]
fn only_the_completion_runs_the_destructors_kept_by_the_defect() {
    let d = CpuDevice::with_defect(Defect::ReleasableRunsDestructors);
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let (flag, dropped) = DropFlag::new();
    CpuBackend::retain_until_complete(&e, &c, flag).unwrap();
    drop(hold);
    c.wait().unwrap();
    let observer = c.observer();
    assert!(eventually(|| observer.resources_releasable()));
    assert!(
        !dropped.load(Ordering::SeqCst),
        "an observer's answer ran the kept destructors"
    );
    assert!(eventually(|| c.resources_releasable()));
    assert!(dropped.load(Ordering::SeqCst));
}
