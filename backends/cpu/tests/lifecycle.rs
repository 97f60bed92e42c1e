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
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let value = tensor(&device, &[1.0], &[1]);
        if rank == 0 {
            let sum = CpuBackend::all_reduce_sum(value, &group, &executor).unwrap();
            let outcome = sum
                .completion
                .wait_bounded(policy(Duration::from_millis(20), NATIVE));
            format!("{outcome:?}")
        } else {
            std::thread::sleep(Duration::from_millis(100));
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
