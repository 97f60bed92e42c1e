//! `PointToPointBackend`: ordered bundles over a directed route.

use std::sync::{Arc, Weak};

use eredu_core::Submission;
use eredu_runtime::backend::PointToPointBackend;
use eredu_runtime::RoleExactBoundaryValue;

use super::{reach, Retention};
use crate::completion::CpuCompletion;
use crate::defect::Defect;
use crate::error::CpuError;
use crate::executor::{CpuExecutor, WorkKind};
use crate::frame::{Framed, Message};
use crate::progress::{Progress, RENDEZVOUS_CHUNK};
use crate::route::{CpuRoute, RouteEnd};
use crate::tensor::{CpuTensor, Storage, Values};
use crate::work::{Body, Work, WorkCtx};
use crate::CpuBackend;

const OP: &str = "send_receive";

impl PointToPointBackend for CpuBackend {
    fn send_receive(
        values: Vec<RoleExactBoundaryValue<CpuTensor>>,
        route: &CpuRoute,
        executor: &CpuExecutor,
    ) -> Result<Submission<Vec<CpuTensor>, CpuCompletion>, CpuError> {
        let device = executor.device();
        // The `rendezvous` personality's large sends wait for the receiver
        // before they read the sender's buffer (not across processes, whose
        // posts this process does not see).
        let bytes: usize = values
            .iter()
            .map(|value| value.tensor().len() * value.tensor().element().size())
            .sum();
        let rendezvous =
            route.is_source() && device.personality().rendezvous(bytes) && !route.end.spans();
        let weak_inputs = rendezvous && device.has(Defect::RendezvousInputNotRetained);
        let retain_route = !device.has(Defect::CollectiveDropsResources);
        let retain_inputs = retain_route && !weak_inputs;
        let retain_output = !device.has(Defect::OutputNotRetained);
        let mut retention = Retention::default();
        let end = retention.keep(&route.end, retain_route);
        let (headers, tensors): (Vec<Vec<u8>>, Vec<CpuTensor>) = values
            .into_iter()
            .map(RoleExactBoundaryValue::into_parts)
            .unzip();
        for tensor in &tensors {
            device.admits(OP, tensor)?;
        }
        let inputs: Vec<(Weak<Storage>, Vec<i32>)> = tensors
            .iter()
            .map(|t| (retention.storage(t, retain_inputs), t.dims().to_vec()))
            .collect();
        // The planted defect keeps its inputs in the queued work item only,
        // and lets them go once the send must wait for its receiver. A send
        // submitted before its receiver posted must wait: it keeps nothing
        // from the start, so the caller's own drop frees the input at once
        // (what a test observes needs no look at the worker's progress).
        let queued: Vec<_> = if weak_inputs && route.end.receiver_posted() {
            tensors.iter().map(|t| Arc::clone(t.storage())).collect()
        } else {
            Vec::new()
        };
        let (output, body): (Vec<CpuTensor>, Body) = if route.is_source() {
            let separate = device.has(Defect::SeparateHeaderMessage)
                || (rendezvous && device.has(Defect::RendezvousSeparateHeader));
            let progress = Arc::clone(device.progress());
            // Elements per chunk of each input.
            let chunks: Vec<usize> = tensors
                .iter()
                .map(|t| (RENDEZVOUS_CHUNK / t.element().size()).max(1))
                .collect();
            let body = Box::new(move |ctx: &WorkCtx<'_>| {
                let end = reach(&end, OP, "route")?;
                if rendezvous {
                    if !end.receiver_posted() {
                        drop(queued);
                    }
                    end.await_receiver(ctx, OP)?;
                }
                let mut framed = Vec::with_capacity(inputs.len());
                for (((weak, shape), header), &chunk) in inputs.iter().zip(headers).zip(&chunks) {
                    let payload = if rendezvous {
                        read_in_chunks(ctx, &progress, (weak, shape, chunk), weak_inputs)?
                    } else {
                        reach(weak, OP, "input storage")?.force()?
                    };
                    framed.push(Framed {
                        header,
                        shape: shape.clone(),
                        payload,
                    });
                }
                send(&end, framed, separate);
                end.sent();
                Ok(())
            });
            (tensors, body)
        } else {
            let outputs: Vec<CpuTensor> = tensors
                .iter()
                .map(|t| CpuTensor::pending(executor.ledger(), t.dims().to_vec()).of(t.element()))
                .collect();
            let slots: Vec<Weak<Storage>> = outputs
                .iter()
                .map(|t| retention.storage(t, retain_output))
                .collect();
            let skips_large = device.has(Defect::RendezvousSkipsHeaderCheck)
                && device.personality().rendezvous(bytes);
            let check_headers = !(device.has(Defect::SkipHeaderCheck) || skips_large);
            let reversed = device.has(Defect::PointToPointReversed);
            let body = Box::new(move |ctx: &WorkCtx<'_>| {
                let end = reach(&end, OP, "route")?;
                end.post();
                let result = receive(ctx, &end, &headers, &inputs, check_headers);
                let slots = slots
                    .iter()
                    .map(|slot| reach(slot, OP, "output storage"))
                    .collect::<Result<Vec<_>, _>>()?;
                match result {
                    Ok(mut received) => {
                        if reversed {
                            received.reverse();
                        }
                        for (slot, value) in slots.iter().zip(received) {
                            slot.publish(Ok(value.payload));
                        }
                        Ok(())
                    }
                    Err(error) => {
                        for slot in &slots {
                            slot.publish(Err(error.clone()));
                        }
                        Err(error)
                    }
                }
            });
            (outputs, body)
        };
        let completion =
            executor.enqueue(OP, WorkKind::Communication, retention.into_vec(), || {
                Work::local(body)
            })?;
        let completion = if rendezvous {
            completion.of_rendezvous_send()
        } else {
            completion
        };
        Ok(Submission { output, completion })
    }
}

/// Transmits a bundle: one native message, or two under the P2P-3 defect.
fn send(end: &RouteEnd, framed: Vec<Framed>, separate: bool) {
    if separate {
        end.transmit(Message::Headers(
            framed.iter().map(|f| f.header.clone()).collect(),
        ));
        end.transmit(Message::Payloads(
            framed.into_iter().map(|f| (f.shape, f.payload)).collect(),
        ));
    } else {
        end.transmit(Message::Bundle(framed));
    }
}

/// Receives one bundle and checks it against the expected headers and shapes.
fn receive(
    ctx: &WorkCtx<'_>,
    end: &RouteEnd,
    expected_headers: &[Vec<u8>],
    expected: &[(Weak<Storage>, Vec<i32>)],
    check_headers: bool,
) -> Result<Vec<Framed>, CpuError> {
    let received = match end.receive(ctx, OP)? {
        Message::Bundle(values) => values,
        Message::Headers(headers) => match end.receive(ctx, OP)? {
            Message::Payloads(payloads) => headers
                .into_iter()
                .zip(payloads)
                .map(|(header, (shape, payload))| Framed {
                    header,
                    shape,
                    payload,
                })
                .collect(),
            other => return Err(malformed(end, &other)),
        },
        other => return Err(malformed(end, &other)),
    };
    if received.len() != expected.len() {
        return Err(CpuError::invalid(
            OP,
            format!(
                "a bundle of {} values on route {}",
                expected.len(),
                end.id()
            ),
            format!("{} values", received.len()),
        ));
    }
    for (index, (value, (header, (_, shape)))) in received
        .iter()
        .zip(expected_headers.iter().zip(expected))
        .enumerate()
    {
        if check_headers && value.header != *header {
            return Err(CpuError::HeaderMismatch {
                route: end.id(),
                index,
                expected: header.clone(),
                received: value.header.clone(),
            });
        }
        if value.shape != *shape {
            return Err(CpuError::invalid(
                OP,
                format!("value {index} of shape {shape:?} on route {}", end.id()),
                format!("shape {:?}", value.shape),
            ));
        }
    }
    Ok(received)
}

fn malformed(end: &RouteEnd, message: &Message) -> CpuError {
    CpuError::invalid(
        OP,
        format!("a bundle message on route {}", end.id()),
        format!("{message:?}"),
    )
}

/// A rendezvous send's read of one input: `chunk` elements
/// ([`RENDEZVOUS_CHUNK`] bytes) per call into the backend on the device (see [`crate::progress`]), each
/// chunk read from the input's storage as it is then. Under the planted
/// defect a freed storage reads as zeros (what reading freed memory would
/// send).
fn read_in_chunks(
    ctx: &WorkCtx<'_>,
    progress: &Arc<Progress>,
    (weak, shape, chunk): (&Weak<Storage>, &[i32], usize),
    weak_inputs: bool,
) -> Result<Values, CpuError> {
    let len: usize = shape.iter().map(|&d| d.max(0) as usize).product();
    let mut read = Vec::with_capacity(len);
    let mut seen = progress.calls();
    while read.len() < len {
        seen = progress.after(ctx, seen, OP)?;
        let values = match reach(weak, OP, "input storage") {
            Ok(storage) => Some(storage.force()?),
            Err(_) if weak_inputs => None,
            Err(error) => return Err(error),
        };
        match values {
            Some(values) => {
                let end = (read.len() + chunk).min(len).min(values.len());
                if end <= read.len() {
                    return Err(CpuError::invalid(
                        OP,
                        format!("an input of {len} elements"),
                        format!("{} elements", values.len()),
                    ));
                }
                read.extend_from_slice(&values[read.len()..end]);
            }
            None => read.resize(len, 0.0),
        }
    }
    Ok(Arc::new(read))
}
