//! `CpuBackend` satisfies every operation-trait bound the runtime can place on
//! a communication backend, and generic code written against those bounds
//! alone drives it correctly.

mod common;

use std::borrow::Borrow;

use commcheck_cpu::{
    CompletionObserver, CpuAgreement, CpuBackend, CpuCompletion, CpuDevice, CpuError, CpuExecutor,
    CpuGroup, CpuRoute, CpuTensor,
};
use common::*;
use eredu_core::{BoundedCompletion, Completion};
use eredu_nn::Tensor;
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, CommunicationBackend, EvenGatherBackend,
    FailureAgreementBackend, PointToPointBackend, SubmissionBackend, SumReductionBackend,
    UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::{CommunicationPeerCounts, CommunicationRouteId, RoleExactBoundaryValue};

/// Every operation trait at once: what a runtime composing all eight asks for.
trait AllOperations:
    SumReductionBackend
    + EvenGatherBackend
    + UnevenGatherBackend
    + VariableAllToAllBackend
    + PointToPointBackend
    + BroadcastBackend
    + BarrierBackend
    + FailureAgreementBackend
{
}

impl<B> AllOperations for B where
    B: SumReductionBackend
        + EvenGatherBackend
        + UnevenGatherBackend
        + VariableAllToAllBackend
        + PointToPointBackend
        + BroadcastBackend
        + BarrierBackend
        + FailureAgreementBackend
{
}

/// Names the eight bounds directly (not through the helper trait).
fn requires_all_eight<B>() -> &'static str
where
    B: SumReductionBackend
        + EvenGatherBackend
        + UnevenGatherBackend
        + VariableAllToAllBackend
        + PointToPointBackend
        + BroadcastBackend
        + BarrierBackend
        + FailureAgreementBackend,
{
    std::any::type_name::<B>()
}

/// Runs every group operation on a single-member group through trait methods
/// only, returning each output's host shape and the agreement.
fn every_group_operation<B: AllOperations>(
    value: B::Tensor,
    group: &B::CommunicationGroup,
    executor: &B::Executor,
) -> Result<(Vec<Vec<i32>>, bool), B::CommunicationError> {
    let extent = value.shape()[0] as usize;
    let counts = CommunicationPeerCounts::new(vec![extent], vec![extent], 1).expect("counts");
    let submissions = vec![
        B::all_reduce_sum(value.clone(), group, executor)?,
        B::all_gather_even(value.clone(), 0, group, executor)?,
        B::all_gather_uneven(value.clone(), &[extent], 0, group, executor)?,
        B::variable_all_to_all(value.clone(), &counts, 0, group, executor)?,
        B::broadcast(value, 0, group, executor)?,
    ];
    let barrier = B::barrier(group, executor)?;
    let agreement = B::agree_success(true, group, executor)?;
    let mut shapes = Vec::new();
    for submission in submissions {
        shapes.push(submission.wait()?.shape().to_vec());
    }
    barrier.wait()?;
    let agreed = B::resolve_failure_agreement(agreement.wait()?)?;
    Ok((shapes, agreed))
}

/// A point-to-point transfer through the trait method only.
fn transfer<B: AllOperations>(
    values: Vec<RoleExactBoundaryValue<B::Tensor>>,
    route: &B::CommunicationRoute,
    executor: &B::Executor,
) -> Result<Vec<B::Tensor>, B::CommunicationError> {
    B::send_receive(values, route, executor)?.wait()
}

fn assert_send_sync<T: Send + Sync + 'static>() {}
fn assert_send<T: Send + 'static>() {}
fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn cpu_backend_is_accepted_under_all_eight_bounds() {
    assert!(requires_all_eight::<CpuBackend>().ends_with("CpuBackend"));
    fn helper<B: AllOperations>() {}
    helper::<CpuBackend>();
}

#[test]
fn generic_code_drives_every_group_operation() {
    let device = CpuDevice::new();
    let group = device.group(1).unwrap().remove(0);
    let executor = device.executor();
    let (shapes, agreed) =
        every_group_operation::<CpuBackend>(ranked(&device, 0, &[2, 3]), &group, &executor)
            .unwrap();
    assert_eq!(shapes, vec![vec![2, 3]; 5]);
    assert!(agreed);
}

#[test]
fn generic_code_drives_point_to_point() {
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(3);
    let source = device.route(id, 0, 1, 0).unwrap();
    let destination = device.route(id, 0, 1, 1).unwrap();
    let roles: [(&str, &[usize]); 1] = [("hidden", &[2])];
    let sent = framed("trait_bounds", id, &roles, vec![ranked(&device, 4, &[2])]);
    let placeholder = framed(
        "trait_bounds",
        id,
        &roles,
        vec![tensor(&device, &[f32::NAN; 2], &[2])],
    );
    let executor = device.executor();
    transfer::<CpuBackend>(sent, &source, &executor).unwrap();
    let received = transfer::<CpuBackend>(placeholder, &destination, &device.executor()).unwrap();
    assert_eq!(read(&received[0]), [4000.0, 4001.0]);
}

#[test]
fn associated_types_are_the_cpu_types_and_thread_safe() {
    fn same<T: 'static, U: 'static>() -> bool {
        std::any::TypeId::of::<T>() == std::any::TypeId::of::<U>()
    }
    type B = CpuBackend;
    assert!(same::<<B as eredu_nn::NeuralBackend>::Tensor, CpuTensor>());
    assert!(same::<<B as SubmissionBackend>::Executor, CpuExecutor>());
    assert!(same::<<B as SubmissionBackend>::Completion, CpuCompletion>());
    assert!(same::<
        <B as CommunicationBackend>::CommunicationGroup,
        CpuGroup,
    >());
    assert!(same::<
        <B as CommunicationBackend>::CommunicationRoute,
        CpuRoute,
    >());
    assert!(same::<
        <B as CommunicationBackend>::CommunicationCompletion,
        CpuCompletion,
    >());
    assert!(same::<
        <B as CommunicationBackend>::CommunicationError,
        CpuError,
    >());
    assert!(same::<
        <B as FailureAgreementBackend>::FailureAgreementOutput,
        CpuAgreement,
    >());
    fn borrows<O: Borrow<E>, E: ?Sized>() {}
    borrows::<<B as SubmissionBackend>::OwnedExecutor, <B as SubmissionBackend>::Executor>();

    assert_error::<CpuError>();
    assert_send_sync::<CpuTensor>();
    assert_send_sync::<CpuExecutor>();
    assert_send_sync::<CpuGroup>();
    assert_send_sync::<CpuRoute>();
    assert_send_sync::<CpuDevice>();
    assert_send_sync::<CpuAgreement>();
    assert_send_sync::<CompletionObserver>();
    // Completions move to other threads (quarantine owners, waiters).
    assert_send::<CpuCompletion>();
}

#[test]
fn both_cancellation_modes_are_claimed() {
    assert!(<CpuCompletion as BoundedCompletion>::supports_cancellation(
        NATIVE
    ));
    assert!(<CpuCompletion as BoundedCompletion>::supports_cancellation(
        QUARANTINE
    ));
}

#[test]
fn completion_errors_convert_into_neural_errors() {
    let error = CpuError::Cancelled { operation: "x" };
    let converted: eredu_nn::Error = error.clone().into();
    assert!(
        converted.to_string().contains(&error.to_string()),
        "{converted}"
    );
    // The default `resources_releasable` agreement (EXC-9) holds for a finished submission.
    let device = CpuDevice::new();
    let completion = CpuBackend::submit(&device.executor(), []).unwrap();
    completion.wait().unwrap();
    assert!(eventually(|| completion.resources_releasable()));
    assert_eq!(completion.is_complete(), Ok(true));
}
