//! Completion lifecycle of the CPU backend: pending, hold, retention,
//! cancellation, quarantine, faults, edge deadlines.

mod common;

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError, Phase};
use common::*;
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, Completion};
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend, SumReductionBackend};

#[test]
fn local_dependencies_complete_and_materialise_deferred_values() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let a = tensor(&device, &[1.0, 2.0], &[2]);
    let b = eredu_nn::Tensor::add(&a, &a, &executor).expect("add");
    assert!(!b.is_materialised(), "tensor ops are lazy");
    let values = vec![a.clone(), b];
    let submission = CpuBackend::submit_local_dependencies(values.iter(), &executor).unwrap();
    submission.completion.wait().unwrap();
    assert!(submission.completion.is_complete().unwrap());
    // `false` is allowed under contention (the worker may still be releasing).
    assert!(eventually(|| submission.completion.resources_releasable()));
    for value in &values {
        assert!(value.is_materialised());
    }
}

#[test]
fn held_work_stays_pending_and_retains_inputs_after_handles_are_dropped() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let value = tensor(&device, &[1.0; 4], &[4]);
    let id = value.storage_id();
    let hold = executor.hold();
    let submission = CpuBackend::submit_local_dependencies([&value], &executor).unwrap();
    drop(value);
    std::thread::sleep(Duration::from_millis(20));
    assert!(!submission.completion.is_complete().unwrap());
    assert!(!submission.completion.resources_releasable());
    assert!(device.storage_live(id), "input freed while work is held");
    assert_eq!(device.ledger().pending_work, 1);
    hold.release();
    submission.completion.wait().unwrap();
    drop(submission);
    assert!(
        eventually(|| !device.storage_live(id)),
        "input leaked after completion"
    );
    assert!(eventually(|| device.ledger().pending_work == 0));
}

#[test]
fn a_late_peer_keeps_a_reduction_pending_until_it_joins() {
    let device = CpuDevice::new();
    let (join, joined) = mpsc::channel::<()>();
    let joined = std::sync::Mutex::new(joined);
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let value = tensor(&device, &[rank as f32 + 1.0; 3], &[3]);
        if rank == 1 {
            joined.lock().unwrap().recv().unwrap();
        }
        let sum = CpuBackend::all_reduce_sum(value, &group, &executor).unwrap();
        if rank == 0 {
            std::thread::sleep(Duration::from_millis(30));
            assert!(
                !sum.completion.is_complete().unwrap(),
                "completed without its peer"
            );
            join.send(()).unwrap();
        }
        sum.completion.wait().unwrap();
        sum.output.read_materialised().unwrap()
    });
    assert_eq!(results, vec![vec![3.0; 3], vec![3.0; 3]]);
}

#[test]
fn native_cancel_tears_down_before_returning_and_the_executor_stays_usable() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let value = tensor(&device, &[1.0; 8], &[8]);
    let id = value.storage_id();
    let hold = executor.hold();
    let submission = CpuBackend::submit_local_dependencies([&value], &executor).unwrap();
    drop(value);
    let observer = submission.completion.observer();
    let outcome = submission
        .completion
        .wait_bounded(policy(Duration::from_millis(20), NATIVE))
        .unwrap();
    assert_eq!(
        outcome,
        BoundedCompletionOutcome::DeadlineExceeded {
            cancellation: NATIVE
        }
    );
    assert_eq!(observer.observe().phase, Phase::Cancelled);
    assert!(
        !device.storage_live(id),
        "teardown left the input allocated"
    );
    assert_eq!(device.ledger().pending_work, 0);
    hold.release();
    let next = CpuBackend::submit(&executor, []).unwrap();
    next.wait().unwrap();
}

#[test]
fn native_cancel_of_a_collective_fails_its_peers_instead_of_hanging() {
    let device = CpuDevice::new();
    // Member 1 joins only once member 0's bounded wait returned: its deadline
    // passes with no peer however the threads are scheduled.
    let (cancelled, wait_cancelled) = mpsc::channel::<()>();
    let wait_cancelled = std::sync::Mutex::new(wait_cancelled);
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let value = tensor(&device, &[1.0], &[1]);
        if rank == 0 {
            let sum = CpuBackend::all_reduce_sum(value, &group, &executor).unwrap();
            let outcome = sum
                .completion
                .wait_bounded(policy(Duration::from_millis(20), NATIVE));
            cancelled.send(()).unwrap();
            format!("{outcome:?}")
        } else {
            wait_cancelled.lock().unwrap().recv().unwrap();
            let sum = CpuBackend::all_reduce_sum(value, &group, &executor).unwrap();
            format!("{:?}", sum.completion.wait().is_err())
        }
    });
    assert!(results[0].contains("NativeCancel"), "{results:?}");
    assert_eq!(results[1], "true");
}

#[test]
fn quarantine_keeps_everything_until_the_work_really_completes() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let value = tensor(&device, &[1.0; 8], &[8]);
    let id = value.storage_id();
    let hold = executor.hold();
    let submission = CpuBackend::submit_local_dependencies([&value], &executor).unwrap();
    drop(value);
    let observer = submission.completion.observer();
    let outcome = submission
        .completion
        .wait_bounded(policy(Duration::from_millis(10), QUARANTINE))
        .unwrap();
    assert_eq!(
        outcome,
        BoundedCompletionOutcome::DeadlineExceeded {
            cancellation: QUARANTINE
        }
    );
    assert_eq!(device.ledger().quarantined, 1);
    assert!(device.storage_live(id));
    assert!(!observer.is_terminal());
    hold.release();
    assert!(observer.wait_terminal(Duration::from_secs(5)));
    assert_eq!(observer.observe().phase, Phase::Completed);
    assert!(eventually(|| !device.storage_live(id)));
    assert_eq!(device.ledger().quarantined, 0);
}

#[test]
fn injected_faults_are_sticky_and_not_release() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let value = tensor(&device, &[1.0], &[1]);
    let id = value.storage_id();
    let hold = executor.hold();
    executor.inject_fault();
    let submission = CpuBackend::submit_local_dependencies([&value], &executor).unwrap();
    drop(value);
    let completion = submission.completion;
    assert!(eventually(|| completion.is_complete().is_err()));
    assert!(matches!(
        completion.wait(),
        Err(CpuError::InjectedFault { .. })
    ));
    assert!(
        !completion.resources_releasable(),
        "an error is not release"
    );
    assert!(device.storage_live(id));
    hold.release();
    assert!(eventually(|| completion.resources_releasable()));
    for _ in 0..3 {
        assert!(completion.is_complete().is_err());
        assert!(completion.wait().is_err());
    }
    assert!(completion
        .wait_bounded(policy(Duration::from_millis(5), NATIVE))
        .is_err());
}

#[test]
fn edge_deadlines_neither_panic_nor_overflow() {
    let device = CpuDevice::new();
    let executor = device.executor();
    for timeout in [
        Duration::from_nanos(1),
        Duration::from_micros(500),
        Duration::MAX,
    ] {
        for mode in [NATIVE, QUARANTINE] {
            let done = CpuBackend::submit(&executor, []).unwrap();
            let outcome = done.wait_bounded(policy(timeout, mode));
            assert!(outcome.is_ok(), "{timeout:?} {mode:?}: {outcome:?}");
        }
    }
    let hold = executor.hold();
    let pending = CpuBackend::submit(&executor, []).unwrap();
    let outcome = pending
        .wait_bounded(policy(Duration::from_nanos(1), NATIVE))
        .unwrap();
    assert_eq!(
        outcome,
        BoundedCompletionOutcome::DeadlineExceeded {
            cancellation: NATIVE
        }
    );
    drop(hold);
}

#[test]
fn retained_values_live_exactly_until_completion() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let hold = executor.hold();
    let completion = CpuBackend::submit(&executor, []).unwrap();
    let (flag, dropped) = DropFlag::new();
    CpuBackend::retain_until_complete(&executor, &completion, flag).unwrap();
    std::thread::sleep(Duration::from_millis(10));
    assert!(!dropped.load(Ordering::SeqCst));
    hold.release();
    completion.wait().unwrap();
    drop(completion);
    assert!(eventually(|| dropped.load(Ordering::SeqCst)));
}

#[test]
fn order_after_orders_a_consumer_after_its_producer() {
    let device = CpuDevice::new();
    let producer_lane = device.executor();
    let consumer_lane = device.executor();
    let hold = producer_lane.hold();
    let producer = CpuBackend::submit(&producer_lane, []).unwrap();
    CpuBackend::order_after(&producer, &consumer_lane).unwrap();
    let consumer = CpuBackend::submit(&consumer_lane, []).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!consumer.is_complete().unwrap());
    hold.release();
    consumer.wait().unwrap();
    assert!(producer.is_complete().unwrap());
}

#[test]
fn forked_executors_are_independent_lanes() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let lanes = CpuBackend::fork_executors(&executor, 3).unwrap();
    assert_eq!(lanes.len(), 3);
    let _hold = lanes[0].hold();
    let started = Instant::now();
    for lane in &lanes[1..] {
        CpuBackend::submit(lane, []).unwrap().wait().unwrap();
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(device.ledger().executors, 4);
}

#[test]
fn dropping_pending_completions_releases_nothing_early() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let value = tensor(&device, &[2.0], &[1]);
    let id = value.storage_id();
    let hold = executor.hold();
    let submission = CpuBackend::submit_local_dependencies([&value], &executor).unwrap();
    drop((value, submission));
    std::thread::sleep(Duration::from_millis(10));
    assert!(device.storage_live(id));
    drop(hold);
    assert!(eventually(|| !device.storage_live(id)));
}

#[test]
fn a_clone_is_a_second_handle_that_outlives_a_bounded_wait() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let value = tensor(&device, &[3.0; 4], &[4]);
    let id = value.storage_id();
    let hold = executor.hold();
    let submission = CpuBackend::submit_local_dependencies([&value], &executor).unwrap();
    drop(value);
    let original = submission.completion;
    let clone = original.clone();
    assert_eq!(clone.operation(), original.operation());
    // Both handles agree on pending, held work.
    for handle in [&original, &clone] {
        assert!(!handle.is_complete().unwrap());
        assert!(!handle.resources_releasable());
    }
    // Dropping one clone releases nothing (RET-4).
    drop(original.clone());
    assert!(
        device.storage_live(id),
        "dropping a clone released the input"
    );
    assert_eq!(device.ledger().pending_work, 1);
    // The original is consumed; the clone survives and still sees live work.
    let outcome = original.wait_bounded(policy(Duration::from_millis(10), QUARANTINE));
    assert_eq!(
        outcome,
        Ok(BoundedCompletionOutcome::DeadlineExceeded {
            cancellation: QUARANTINE
        })
    );
    assert!(!clone.is_complete().unwrap());
    assert!(
        !clone.resources_releasable(),
        "a deadline alone is not release (EXC-8)"
    );
    assert!(clone.observer().observe().deadline_passed);
    assert!(device.storage_live(id));
    hold.release();
    clone.wait().unwrap();
    assert!(clone.is_complete().unwrap());
    assert!(eventually(|| clone.resources_releasable()));
    assert!(eventually(|| !device.storage_live(id)));
    assert_eq!(
        clone.wait_bounded(policy(Duration::from_millis(5), NATIVE)),
        Ok(BoundedCompletionOutcome::Completed)
    );
}

#[test]
fn clones_share_sticky_errors() {
    let device = CpuDevice::new();
    let executor = device.executor();
    executor.inject_fault();
    let original = CpuBackend::submit(&executor, []).unwrap();
    assert!(original.wait().is_err());
    let clone = original.clone();
    for handle in [&original, &clone, &original.clone()] {
        assert!(matches!(handle.wait(), Err(CpuError::InjectedFault { .. })));
        assert!(handle.is_complete().is_err());
    }
    drop(original);
    assert!(clone
        .wait_bounded(policy(Duration::from_millis(5), NATIVE))
        .is_err());
}

/// A lazy chain of `links` matmuls of the 256×256 matrix `x` by the
/// identity: each link is a full 256×256×256 product, and the value is `x`.
fn identity_chain(
    device: &CpuDevice,
    executor: &commcheck_cpu::CpuExecutor,
    x: &[f32],
    links: usize,
) -> Vec<commcheck_cpu::CpuTensor> {
    const N: usize = 256;
    let identity: Vec<f32> = (0..N * N)
        .map(|i| if i / N == i % N { 1.0 } else { 0.0 })
        .collect();
    let identity = tensor(device, &identity, &[N as i32, N as i32]);
    let mut chain = vec![tensor(device, x, &[N as i32, N as i32])];
    for _ in 0..links {
        let last = chain.last().expect("a first link");
        chain.push(eredu_nn::Tensor::matmul(last, &identity, executor).expect("matmul"));
    }
    chain
}

#[test]
fn native_cancel_stops_a_running_lazy_evaluation_promptly() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let x: Vec<f32> = (0..256 * 256).map(|i| (i % 251) as f32).collect();
    // Long enough that cancelling within one row of one matmul is far sooner
    // than finishing: a link's time depends on how the backend was built (the
    // workspace builds it optimised even in tests), so four links are timed
    // first and the chain is made to last about half a second.
    let probe = identity_chain(&device, &executor, &x, 4);
    let started = Instant::now();
    CpuBackend::submit(&executor, probe.last())
        .unwrap()
        .wait()
        .unwrap();
    let per_link = started.elapsed() / 4;
    drop(probe);
    let links = (Duration::from_millis(500).as_nanos() / per_link.as_nanos().max(1)).clamp(8, 1024)
        as usize;
    // The chain's own duration, evaluated to the end by the same executor.
    let chain = identity_chain(&device, &executor, &x, links);
    let started = Instant::now();
    CpuBackend::submit(&executor, chain.last())
        .unwrap()
        .wait()
        .unwrap();
    let full = started.elapsed();
    assert_eq!(read(chain.last().unwrap()), x);
    drop(chain);
    for local_dependencies in [false, true] {
        let mut chain = identity_chain(&device, &executor, &x, links);
        let tail = chain.pop().unwrap();
        let tail_id = tail.storage_id();
        let middle = chain.swap_remove(links / 2);
        drop(chain);
        let completion = if local_dependencies {
            CpuBackend::submit_local_dependencies([&tail], &executor)
                .unwrap()
                .completion
        } else {
            CpuBackend::submit(&executor, [&tail]).unwrap()
        };
        drop(tail);
        let observer = completion.observer();
        assert!(eventually(|| observer.observe().phase == Phase::Running));
        let started = Instant::now();
        let outcome = completion.wait_bounded(policy(Duration::from_millis(5), NATIVE));
        let cancelled = started.elapsed();
        assert_eq!(
            outcome,
            Ok(BoundedCompletionOutcome::DeadlineExceeded {
                cancellation: NATIVE
            }),
            "local dependencies: {local_dependencies}"
        );
        assert!(
            cancelled < full / 2,
            "NativeCancel took {cancelled:?}; the whole chain takes {full:?}"
        );
        // Teardown finished before wait_bounded returned.
        let seen = observer.observe();
        assert_eq!(seen.phase, Phase::Cancelled);
        assert!(seen.released);
        assert!(matches!(seen.error, Some(CpuError::Cancelled { .. })));
        assert_eq!(device.ledger().pending_work, 0);
        assert!(
            !device.storage_live(tail_id),
            "teardown left the submitted value allocated"
        );
        // An aborted evaluation leaves no value half-computed: a link is
        // either still deferred or holds its exact value, and it still evaluates.
        if let Some(values) = middle.read_materialised() {
            assert_eq!(values, x);
        }
        assert_eq!(middle.values().unwrap(), x);
    }
    // The executor completes new work afterwards.
    let chain = identity_chain(&device, &executor, &x, 2);
    CpuBackend::submit(&executor, chain.last())
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read(chain.last().unwrap()), x);
    assert!(eventually(|| device.ledger().pending_work == 0));
}

#[test]
fn a_value_whose_evaluation_was_cancelled_evaluates_afresh_outside_work() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let x: Vec<f32> = (0..256 * 256).map(|i| (i % 7) as f32).collect();
    let links = 16;
    let chain = identity_chain(&device, &executor, &x, links);
    let tail = chain.last().unwrap();
    let completion = CpuBackend::submit(&executor, [tail]).unwrap();
    let observer = completion.observer();
    assert!(eventually(|| observer.observe().phase == Phase::Running));
    let outcome = completion.wait_bounded(policy(Duration::from_millis(1), NATIVE));
    assert!(outcome.is_ok(), "{outcome:?}");
    if observer.observe().phase == Phase::Cancelled {
        // The cancellation belonged to the work, not to the value: the value
        // stayed deferred, and a read with no work item evaluates all of it.
        assert!(!tail.is_materialised());
    }
    assert_eq!(tail.values().unwrap(), x);
    assert_eq!(read(tail), x);
}

#[test]
fn an_observer_answers_resources_releasable_like_its_completion() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let hold = executor.hold();
    let completion = CpuBackend::submit(&executor, []).unwrap();
    let (flag, dropped) = DropFlag::new();
    CpuBackend::retain_until_complete(&executor, &completion, flag).unwrap();
    let observer = completion.observer();
    assert!(!completion.resources_releasable());
    assert!(!observer.resources_releasable());
    hold.release();
    completion.wait().unwrap();
    // `false` is allowed under contention (the worker may still be releasing),
    // and the retained value is dropped just after the work turned terminal
    // (released after completion, RET-7), not in the same instant.
    assert!(eventually(|| observer.resources_releasable()));
    assert!(eventually(|| completion.resources_releasable()));
    assert!(eventually(|| dropped.load(Ordering::SeqCst)));
    drop(completion);
    assert!(eventually(|| observer.resources_releasable()));
}

#[test]
fn native_cancel_while_evaluating_a_collective_input_fails_its_peers() {
    let device = CpuDevice::new();
    let x: Vec<f32> = (0..256 * 256).map(|i| (i % 3) as f32).collect();
    let links = 64;
    let results = on_ranks(&device, 2, |rank, group, executor| {
        if rank == 0 {
            let input = identity_chain(&device, &executor, &x, links).pop().unwrap();
            let sum = CpuBackend::all_reduce_sum(input, &group, &executor).unwrap();
            let observer = sum.completion.observer();
            assert!(eventually(|| observer.observe().phase == Phase::Running));
            let outcome = sum
                .completion
                .wait_bounded(policy(Duration::from_millis(5), NATIVE));
            format!("{outcome:?}")
        } else {
            let value = tensor(&device, &x, &[256, 256]);
            let sum = CpuBackend::all_reduce_sum(value, &group, &executor).unwrap();
            let outcome = sum
                .completion
                .wait_bounded(policy(Duration::from_secs(10), NATIVE));
            format!("{outcome:?}")
        }
    });
    assert!(results[0].contains("NativeCancel"), "{results:?}");
    assert!(results[1].contains("PeerFailed"), "{results:?}");
}
