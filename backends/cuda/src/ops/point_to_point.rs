//! Point-to-point (P2P-1, P2P-3): the sender frames every value's header and
//! payload into one device buffer, one native message in the route's wire
//! log; the receiver's kernels compare the header bytes that arrived with
//! the expected ones (P2P-2) before they copy the payloads out. Both ends
//! retain their values, the route and the message (RET-3). The planted
//! `PointToPointReversed` and `SeparateHeaderMessage` defects break it.

use super::part::Part;
use crate::backend::CudaBackend;
use crate::defect::Defect;
use crate::error::CudaError;
use crate::executor::CudaExecutor;
use crate::ffi::Launch;
use crate::group::Contribution;
use crate::route::CudaRoute;
use crate::tensor::CudaTensor;
use crate::work::CudaCompletion;
use eredu_core::Submission;
use eredu_runtime::backend::PointToPointBackend;
use eredu_runtime::RoleExactBoundaryValue;
use std::sync::Arc;

impl PointToPointBackend for CudaBackend {
    fn send_receive(
        values: Vec<RoleExactBoundaryValue<CudaTensor>>,
        route: &CudaRoute,
        executor: &CudaExecutor,
    ) -> Result<Submission<Vec<CudaTensor>, CudaCompletion>, CudaError> {
        const OP: &str = "send_receive";
        let (headers, tensors): (Vec<Vec<u8>>, Vec<CudaTensor>) = values
            .into_iter()
            .map(RoleExactBoundaryValue::into_parts)
            .unzip();
        let device = executor.device();
        // The message: each value's header, then its payload, each padded
        // to four bytes; one device buffer, one native message. Layout:
        // (offset, header bytes, payload halves) per value.
        let layout: Vec<(u64, u64, u64)> = {
            let mut offset = 0u64;
            headers
                .iter()
                .zip(&tensors)
                .map(|(header, tensor)| {
                    let at = offset;
                    let header_len = header.len() as u64;
                    let halves = tensor.len() as u64 * tensor.element().halves();
                    offset += header_len.next_multiple_of(4) + (2 * halves).next_multiple_of(4);
                    (at, header_len, halves)
                })
                .collect()
        };
        let message_bytes = layout.last().map_or(0, |&(at, header, halves)| {
            at + header.next_multiple_of(4) + (2 * halves).next_multiple_of(4)
        });
        let header_slots = headers
            .iter()
            .map(|header| {
                let slot = Arc::new(device.slot(header.len().max(1))?);
                slot.write_bytes(header)?;
                Ok(slot)
            })
            .collect::<Result<Vec<_>, CudaError>>()?;
        let contribution = Contribution {
            values: headers
                .iter()
                .zip(&tensors)
                .map(|(h, t)| (h.clone(), eredu_nn::Tensor::shape(t).to_vec(), t.element()))
                .collect(),
            ..Contribution::default()
        };
        let mut part = Part::new(OP, crate::route::plan);
        part.retained.push(route.retained());
        part.plan = 8;
        if route.is_source() {
            let message = Arc::new(device.alloc(message_bytes as usize)?);
            part.contribution = Contribution {
                input: Some((message.address(), Vec::new())),
                ..contribution
            };
            for ((tensor, slot), &(at, header_len, len)) in
                tensors.iter().zip(&header_slots).zip(&layout)
            {
                part.before.push(Launch::Frame {
                    header: slot.address(),
                    header_len,
                    payload: tensor.address(),
                    len,
                    message: message.address() + at,
                });
            }
            let payload = 2 * layout.iter().map(|&(_, _, halves)| halves).sum::<u64>();
            if device.has(Defect::SeparateHeaderMessage) {
                // The defect: headers and payloads as two messages.
                route.log(&headers, 0);
                route.log(&[], payload);
            } else {
                route.log(&headers, payload);
            }
            part.inputs = tensors.iter().collect();
            part.retained.push(Box::new(Arc::clone(&message)));
            part.device_owned.push(Box::new(header_slots));
            let completion = part.submit(route.sequence(), 0, executor)?.completion;
            Ok(Submission {
                output: tensors,
                completion,
            })
        } else {
            let outputs = tensors
                .iter()
                .map(|t| {
                    CudaTensor::pending(device, t.element(), eredu_nn::Tensor::shape(t).to_vec())
                })
                .collect::<Result<Vec<_>, _>>()?;
            part.contribution = contribution;
            // The receiver's values are inputs too: retained like the
            // sender's (RET-3), though only their shapes are read.
            part.inputs = tensors.iter().collect();
            let receives: Vec<(u64, u64, u64, u64, u64)> = outputs
                .iter()
                .zip(&header_slots)
                .zip(&layout)
                .map(|((out, slot), &(at, header_len, len))| {
                    (at, header_len, slot.address(), out.address(), len)
                })
                .collect();
            part.kernels = Box::new(move |plan| {
                receives
                    .iter()
                    .map(
                        |&(at, header_len, expected, payload, len)| Launch::Receive {
                            plan,
                            offset: at,
                            header_len,
                            expected,
                            payload,
                            len,
                        },
                    )
                    .collect()
            });
            part.outputs = outputs;
            part.device_owned.push(Box::new(header_slots));
            let mut submitted = part.submit(route.sequence(), 1, executor)?;
            if device.has(Defect::PointToPointReversed) {
                submitted.outputs.reverse();
            }
            Ok(Submission {
                output: submitted.outputs,
                completion: submitted.completion,
            })
        }
    }
}
