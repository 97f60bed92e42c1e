//! Transfers whose received bundle does not match what the receiver
//! expects: a sticky error naming the route and the value's index (headers,
//! shapes, bundle length).

use std::time::Duration;

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError, CpuTensor};
use eredu_core::Completion;
use eredu_runtime::backend::PointToPointBackend;
use eredu_runtime::CommunicationRouteId;

use crate::common::*;
use crate::names;

const SCHEMA: &str = "commcheck.bad_input";

fn nan(device: &CpuDevice, shape: &[i32]) -> CpuTensor {
    let len: usize = shape.iter().map(|&d| d as usize).product();
    tensor(device, &vec![f32::NAN; len], shape)
}

/// Rank 0 sends `sent` (framed with `sent_roles`); rank 1 receives into
/// placeholders of `shapes` framed with `expected_roles`. Returns the
/// receiver's completion and outputs, after the sender completed.
fn transfer(
    device: &CpuDevice,
    id: CommunicationRouteId,
    sent_roles: &[(&str, &[usize])],
    expected_roles: &[(&str, &[usize])],
    shapes: &[&[i32]],
) -> (
    commcheck_cpu::CpuCompletion,
    Vec<CpuTensor>,
    commcheck_cpu::CpuRoute,
) {
    let source = device.route(id, 0, 1, 0).unwrap();
    let destination = device.route(id, 0, 1, 1).unwrap();
    let sent: Vec<_> = sent_roles
        .iter()
        .enumerate()
        .map(|(k, (_, shape))| {
            ranked(
                device,
                k,
                &shape.iter().map(|&d| d as i32).collect::<Vec<_>>(),
            )
        })
        .collect();
    let send = CpuBackend::send_receive(
        framed(SCHEMA, id, sent_roles, sent),
        &source,
        &device.executor(),
    )
    .unwrap();
    let placeholders = shapes.iter().map(|shape| nan(device, shape)).collect();
    let receive = CpuBackend::send_receive(
        framed(SCHEMA, id, expected_roles, placeholders),
        &destination,
        &device.executor(),
    )
    .unwrap();
    settle(send);
    (receive.completion, receive.output, destination)
}

#[test]
fn a_header_mismatch_on_receive_is_a_sticky_error_naming_route_and_index() {
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(42);
    let (completion, outputs, route) = transfer(
        &device,
        id,
        &[("hidden", &[2]), ("mask", &[3])],
        &[("hidden", &[2]), ("gate", &[3])],
        &[&[2], &[3]],
    );
    let observer = completion.observer();
    assert!(
        observer.wait_terminal(Duration::from_secs(5)),
        "receive never finished"
    );
    for _ in 0..3 {
        let error = completion.is_complete().unwrap_err();
        assert!(
            matches!(
                error,
                CpuError::HeaderMismatch {
                    route: 42,
                    index: 1,
                    ..
                }
            ),
            "{error:?}"
        );
        names(
            &error,
            &[
                "route 42",
                "header of value 1 differs",
                "expected",
                "received",
            ],
        );
        assert!(completion.wait().is_err());
    }
    let error = failure(completion);
    assert!(
        matches!(
            error,
            CpuError::HeaderMismatch {
                route: 42,
                index: 1,
                ..
            }
        ),
        "{error:?}"
    );
    for output in outputs {
        assert!(output.read_materialised().is_none());
        assert!(output.values().is_err());
    }
    // One message went over the wire; a later correct bundle on the route still arrives.
    assert_eq!(route.wire_log().len(), 1);
    let roles: [(&str, &[usize]); 1] = [("hidden", &[2])];
    let send = CpuBackend::send_receive(
        framed(SCHEMA, id, &roles, vec![ranked(&device, 5, &[2])]),
        &device.route(id, 0, 1, 0).unwrap(),
        &device.executor(),
    )
    .unwrap();
    let receive = CpuBackend::send_receive(
        framed(SCHEMA, id, &roles, vec![nan(&device, &[2])]),
        &route,
        &device.executor(),
    )
    .unwrap();
    settle(send);
    assert_eq!(read(&settle(receive)[0]), [5000.0, 5001.0]);
}

#[test]
fn a_header_from_another_route_is_a_mismatch() {
    // The sender frames for route 1 but sends on route 2.
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(2);
    let source = device.route(id, 0, 1, 0).unwrap();
    let destination = device.route(id, 0, 1, 1).unwrap();
    let roles: [(&str, &[usize]); 1] = [("hidden", &[2])];
    let wrong = framed(
        SCHEMA,
        CommunicationRouteId::new(1),
        &roles,
        vec![ranked(&device, 0, &[2])],
    );
    settle(CpuBackend::send_receive(wrong, &source, &device.executor()).unwrap());
    let receive = CpuBackend::send_receive(
        framed(SCHEMA, id, &roles, vec![nan(&device, &[2])]),
        &destination,
        &device.executor(),
    )
    .unwrap();
    let error = failure(receive.completion);
    assert!(
        matches!(
            error,
            CpuError::HeaderMismatch {
                route: 2,
                index: 0,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn a_received_shape_that_differs_from_the_placeholder_is_an_error() {
    let device = CpuDevice::new();
    let (completion, _, _) = transfer(
        &device,
        CommunicationRouteId::new(3),
        &[("hidden", &[2, 3])],
        &[("hidden", &[2, 3])],
        &[&[3, 2]],
    );
    let error = failure(completion);
    assert!(
        matches!(error, CpuError::InvalidArgument { .. }),
        "{error:?}"
    );
    names(
        &error,
        &["value 0 of shape [3, 2] on route 3", "got shape [2, 3]"],
    );
}

#[test]
fn a_bundle_of_another_length_is_an_error() {
    let device = CpuDevice::new();
    let (completion, _, _) = transfer(
        &device,
        CommunicationRouteId::new(4),
        &[("hidden", &[2]), ("mask", &[1])],
        &[("hidden", &[2])],
        &[&[2]],
    );
    let error = failure(completion);
    names(&error, &["a bundle of 1 values on route 4", "got 2 values"]);
}
