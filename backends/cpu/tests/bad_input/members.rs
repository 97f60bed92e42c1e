//! Members that disagree on their inputs: every member fails, naming the
//! member at fault and quoting the real shapes, and only that collective
//! fails.

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError};
use eredu_runtime::backend::SumReductionBackend;

use crate::common::*;
use crate::{fresh_sum_works, names};

#[test]
fn a_shape_mismatch_in_all_reduce_sum_fails_every_member_and_names_the_member() {
    let device = CpuDevice::new();
    let errors = on_ranks(&device, 3, |rank, group, executor| {
        let shape: &[i32] = if rank == 2 { &[3] } else { &[2] };
        let sub =
            CpuBackend::all_reduce_sum(ranked(&device, rank, shape), &group, &executor).unwrap();
        let output = sub.output.clone();
        let error = failure(sub.completion);
        // The output never becomes a value.
        assert!(output.read_materialised().is_none());
        assert!(output.values().is_err());
        error
    });
    for error in &errors {
        assert!(
            matches!(
                error,
                CpuError::MemberMismatch {
                    operation: "all_reduce_sum",
                    ..
                }
            ),
            "{error:?}"
        );
        names(
            error,
            &[
                "all_reduce_sum",
                "members disagree",
                "submitted shape",
                "[3]",
                "[2]",
            ],
        );
    }
    // The same group (every member departed) and a fresh group both still work.
    fresh_sum_works(&device, 3);
}

#[test]
fn every_member_names_the_odd_member_out_and_quotes_real_shapes() {
    let device = CpuDevice::new();
    let errors = on_ranks(&device, 3, |rank, group, executor| {
        let shape: &[i32] = if rank == 2 { &[3] } else { &[2] };
        let sub =
            CpuBackend::all_reduce_sum(ranked(&device, rank, shape), &group, &executor).unwrap();
        failure(sub.completion)
    });
    for (rank, error) in errors.iter().enumerate() {
        assert!(
            matches!(error, CpuError::MemberMismatch { member: 2, .. }),
            "rank {rank}: {error}"
        );
        // Member 0 submitted [2]; no message may claim it submitted [3].
        assert!(
            !error.to_string().contains("member 0 submitted [3]"),
            "rank {rank}: {error}"
        );
    }
}

#[test]
fn a_shape_mismatch_in_a_sum_wave_fails_only_that_collective() {
    let device = CpuDevice::new();
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let shape: &[i32] = if rank == 1 { &[1] } else { &[2] };
        let bad =
            CpuBackend::all_reduce_sum(ranked(&device, rank, shape), &group, &executor).unwrap();
        let good =
            CpuBackend::all_reduce_sum(ranked(&device, rank, &[2]), &group, &executor).unwrap();
        let error = failure(bad.completion);
        (error, read(&settle(good)))
    });
    for (error, good) in results {
        assert!(
            matches!(error, CpuError::MemberMismatch { .. }),
            "{error:?}"
        );
        assert_eq!(good, [1000.0, 1002.0]);
    }
}
