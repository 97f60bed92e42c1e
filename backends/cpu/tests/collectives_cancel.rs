//! The `collectives-cancel` personality, in a process of its own (its
//! `supports_cancellation` answer is a setting of the process):
//! `supports_cancellation(NativeCancel)` is false, and a NativeCancel wait on
//! a transfer asked anyway hands the live work to quarantine before it
//! refuses the policy, never dropping it.

mod common;

use std::time::Duration;

use commcheck_cpu::{personality, CpuBackend, CpuCompletion, CpuDevice, CpuError, Personality};
use common::*;
use eredu_core::{BoundedCompletion, Completion};
use eredu_runtime::backend::PointToPointBackend;
use eredu_runtime::CommunicationRouteId;

#[test]
fn transfers_refuse_native_cancel_and_quarantine_their_live_work() {
    personality::restrict_native_cancel_to_collectives().expect("nothing answered before");
    assert!(!CpuCompletion::supports_cancellation(NATIVE));
    assert!(CpuCompletion::supports_cancellation(QUARANTINE));
    // Idempotent once restricted.
    personality::restrict_native_cancel_to_collectives().expect("still restricted");

    let device = CpuDevice::new()
        .with_personality(Personality::CollectivesCancel)
        .expect("a fresh device");
    let id = CommunicationRouteId::new(11);
    let roles: &[(&str, &[usize])] = &[("x", &[4])];
    // The receiver (member 1) submits; its sender has not.
    let receiving = device.route(id, 0, 1, 1).expect("receiver's endpoint");
    let executor = device.executor();
    let placeholder = tensor(&device, &[0.0; 4], &[4]);
    let probe = placeholder.storage_id();
    let submission = CpuBackend::send_receive(
        framed("collectives-cancel", id, roles, vec![placeholder]),
        &receiving,
        &executor,
    )
    .expect("a receive is accepted");
    drop(receiving);
    let outcome = submission
        .completion
        .wait_bounded(policy(Duration::from_millis(40), NATIVE));
    assert!(
        matches!(
            outcome,
            Err(CpuError::NativeCancelUnsupported {
                operation: "send_receive"
            })
        ),
        "{outcome:?}"
    );
    // The live receive was quarantined, with what it retains.
    assert_eq!(device.ledger().quarantined, 1);
    assert!(
        device.storage_live(probe),
        "the quarantined receive's input was freed"
    );

    // The sender joins: the quarantined receive completes and is released.
    let sending = device.route(id, 0, 1, 0).expect("sender's endpoint");
    let sender = device.executor();
    let sent = CpuBackend::send_receive(
        framed(
            "collectives-cancel",
            id,
            roles,
            vec![tensor(&device, &[1.0, 2.0, 3.0, 4.0], &[4])],
        ),
        &sending,
        &sender,
    )
    .expect("a send is accepted");
    sent.completion.wait().expect("the send completes");
    assert!(eventually(|| device.ledger().quarantined == 0));
    assert!(eventually(|| !device.storage_live(probe)));
}
