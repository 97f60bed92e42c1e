//! Directed routes between two stream-ranks: each exchange is a rendezvous
//! of the sender (member 0) and the receiver (member 1). The sender frames
//! every value's header and payload into one device buffer (one native
//! message, recorded in the route's wire log); the receiver's kernels
//! compare the header bytes that arrived with the expected ones before
//! copying the payloads out.

use crate::device::CudaDevice;
use crate::error::CudaError;
use crate::group::{Contribution, Sequence};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// One native message of a route, as the wire log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireMessage {
    /// The headers the message carried, in order.
    pub headers: Vec<Vec<u8>>,
    /// Payload bytes it carried.
    pub payload_bytes: u64,
}

struct RouteShared {
    id: u64,
    source: usize,
    destination: usize,
    sequence: Arc<Sequence>,
    wire: Mutex<Vec<WireMessage>>,
    device: CudaDevice,
}

struct EndToken {
    device: CudaDevice,
}

impl Drop for EndToken {
    fn drop(&mut self) {
        self.device
            .shared
            .counters
            .routes
            .fetch_sub(1, Ordering::SeqCst);
    }
}

/// One end of a directed route.
#[derive(Clone)]
pub struct CudaRoute {
    shared: Arc<RouteShared>,
    source_end: bool,
    token: Arc<EndToken>,
}

impl std::fmt::Debug for CudaRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaRoute")
            .field("id", &self.shared.id)
            .field("source", &self.shared.source)
            .field("destination", &self.shared.destination)
            .field("source_end", &self.source_end)
            .finish()
    }
}

impl CudaRoute {
    /// Route `id` from member `source` to member `destination`: its two
    /// ends, (sender's, receiver's).
    pub fn pair(
        device: &CudaDevice,
        id: u64,
        source: usize,
        destination: usize,
    ) -> Result<(Self, Self), CudaError> {
        if source == destination {
            return Err(CudaError::Invalid {
                operation: "route",
                expected: "distinct source and destination members".into(),
                got: format!("{source} → {destination}"),
            });
        }
        let shared = Arc::new(RouteShared {
            id,
            source,
            destination,
            sequence: Arc::new(Sequence::new(device, 2)),
            wire: Mutex::new(Vec::new()),
            device: device.clone(),
        });
        let end = |source_end| {
            device.shared.counters.routes.fetch_add(1, Ordering::SeqCst);
            Self {
                shared: Arc::clone(&shared),
                source_end,
                token: Arc::new(EndToken {
                    device: device.clone(),
                }),
            }
        };
        Ok((end(true), end(false)))
    }

    /// Whether this is the sender's end.
    pub fn is_source(&self) -> bool {
        self.source_end
    }

    /// The route's identity.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// Every native message sent on the route so far (the wire-log
    /// instrument).
    pub fn wire_log(&self) -> Vec<WireMessage> {
        self.shared
            .wire
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn log(&self, headers: &[Vec<u8>], payload_bytes: u64) {
        self.shared
            .wire
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(WireMessage {
                headers: headers.to_vec(),
                payload_bytes,
            });
    }

    pub(crate) fn sequence(&self) -> &Sequence {
        &self.shared.sequence
    }

    /// What a work item retains of the route (RET-3).
    pub(crate) fn retained(&self) -> Box<dyn std::any::Any + Send> {
        let _ = &self.shared.device;
        Box::new((Arc::clone(&self.token), Arc::clone(&self.shared)))
    }
}

/// The exchange's plan: both ends get the message's address; the bundles
/// must pair up value for value (count, shapes, element types, header
/// lengths; the header bytes themselves are compared on the device). A
/// bundle that does not is the receiver's failure alone: the sender did
/// send it.
pub(crate) fn plan(
    operation: &'static str,
    all: &[Contribution],
) -> Vec<Result<Vec<u8>, CudaError>> {
    let (sender, receiver) = (&all[0], &all[1]);
    let message = sender.input.as_ref().map_or(0, |(address, _)| *address);
    let plan = message.to_le_bytes().to_vec();
    vec![
        Ok(plan.clone()),
        pairs_up(operation, sender, receiver).map(|()| plan),
    ]
}

fn pairs_up(
    operation: &'static str,
    sender: &Contribution,
    receiver: &Contribution,
) -> Result<(), CudaError> {
    if sender.values.len() != receiver.values.len() {
        return Err(CudaError::Invalid {
            operation,
            expected: format!("a bundle of {} values", receiver.values.len()),
            got: format!("{} values", sender.values.len()),
        });
    }
    for (index, (sent, expected)) in sender.values.iter().zip(&receiver.values).enumerate() {
        if sent.1 != expected.1 {
            return Err(CudaError::Invalid {
                operation,
                expected: format!("value {index} shaped {:?}", expected.1),
                got: format!("shape {:?}", sent.1),
            });
        }
        if sent.2 != expected.2 {
            return Err(CudaError::Invalid {
                operation,
                expected: format!("value {index} of {}", expected.2),
                got: format!("{} elements", sent.2),
            });
        }
        if sent.0.len() != expected.0.len() {
            return Err(CudaError::Device {
                operation,
                code: 2,
                meaning: "the header bytes received differ from the expected header (P2P-2)",
            });
        }
    }
    Ok(())
}
