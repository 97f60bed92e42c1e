//! Routes: directed mailboxes between two ranks.
//!
//! Each `send_receive` on the source end transmits one native message that
//! carries every value's in-band header together with its payload (P2P-3).
//! The destination end compares the header bytes it actually received with
//! its own expected `header()` before its completion can succeed (P2P-2).
//! Every message is recorded in a wire log, the instrument P2P-3 needs.

use std::collections::VecDeque;
use std::sync::Arc;

use eredu_runtime::CommunicationRouteId;

use crate::error::CpuError;
use crate::fabric::{Fabric, RouteInbox};
use crate::frame::Message;
use crate::ledger::{Kind, Ledger};
use crate::sync::rt::{Condvar, Mutex, MutexGuard};
use crate::work::WorkCtx;

/// What the wire log records of one native message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireMessage {
    /// Header bytes carried by the message, one entry per value.
    pub headers: Vec<Vec<u8>>,
    /// Payload bytes carried by the message.
    pub payload_bytes: usize,
}

pub(crate) struct RouteShared {
    id: CommunicationRouteId,
    source: usize,
    destination: usize,
    mailbox: Mutex<VecDeque<Message>>,
    arrived: Condvar,
    /// Receives posted and bundles sent so far (the `rendezvous`
    /// personality's large sends wait for a receive no bundle answered yet).
    posts: Mutex<Posts>,
    posted: Condvar,
    wire: Mutex<Vec<WireMessage>>,
    /// The fabric and world of a route between processes: the source's
    /// process sends each message to the destination's.
    span: Option<(Arc<Fabric>, u64)>,
}

/// Receives posted and bundles sent on a route.
#[derive(Default)]
struct Posts {
    posted: u64,
    sent: u64,
}

impl Posts {
    /// Whether a posted receive has no bundle sent for it yet.
    fn unanswered(&self) -> bool {
        self.posted > self.sent
    }
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl RouteShared {
    pub(crate) fn new(
        id: CommunicationRouteId,
        source: usize,
        destination: usize,
        span: Option<(Arc<Fabric>, u64)>,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            source,
            destination,
            mailbox: Mutex::new(VecDeque::new()),
            arrived: Condvar::new(),
            posts: Mutex::new(Posts::default()),
            posted: Condvar::new(),
            wire: Mutex::new(Vec::new()),
            span,
        })
    }

    pub(crate) fn endpoints(&self) -> (usize, usize) {
        (self.source, self.destination)
    }
}

impl RouteInbox for RouteShared {
    /// A message from the source's process arrived (routes between
    /// processes): the destination's wire log records it too.
    fn arrive(&self, message: Message) {
        guard(&self.wire).push(record(&message));
        guard(&self.mailbox).push_back(message);
        self.arrived.notify_all();
    }
}

/// What the wire log records of `message`.
fn record(message: &Message) -> WireMessage {
    match message {
        Message::Bundle(values) => WireMessage {
            headers: values.iter().map(|v| v.header.clone()).collect(),
            payload_bytes: values.iter().map(|v| v.payload.len() * 4).sum(),
        },
        Message::Headers(headers) => WireMessage {
            headers: headers.clone(),
            payload_bytes: 0,
        },
        Message::Payloads(payloads) => WireMessage {
            headers: Vec::new(),
            payload_bytes: payloads.iter().map(|(_, p)| p.len() * 4).sum(),
        },
    }
}

/// One endpoint's native handle; counted by the ledger.
pub(crate) struct RouteEnd {
    shared: Arc<RouteShared>,
    is_source: bool,
    ledger: Arc<Ledger>,
}

impl Drop for RouteEnd {
    fn drop(&mut self) {
        self.ledger.down(Kind::Route);
    }
}

impl RouteEnd {
    pub(crate) fn id(&self) -> u64 {
        self.shared.id.value()
    }

    /// Transmits one native message.
    pub(crate) fn transmit(&self, message: Message) {
        let shared = &self.shared;
        guard(&shared.wire).push(record(&message));
        if let Some((fabric, world)) = &shared.span {
            fabric.to_route(*world, shared.id.value(), shared.destination, message);
            return;
        }
        guard(&shared.mailbox).push_back(message);
        shared.arrived.notify_all();
    }

    /// Whether the route's ends live in two processes (whose posts this
    /// process does not see).
    pub(crate) fn spans(&self) -> bool {
        self.shared.span.is_some()
    }

    /// The destination posted a receive (its work started).
    pub(crate) fn post(&self) {
        guard(&self.shared.posts).posted += 1;
        self.shared.posted.notify_all();
    }

    /// The source sent one bundle (one message, or two under the P2P-3
    /// defect).
    pub(crate) fn sent(&self) {
        guard(&self.shared.posts).sent += 1;
    }

    /// Whether the destination has posted a receive that no bundle answered
    /// yet (a rendezvous send can start at once).
    pub(crate) fn receiver_posted(&self) -> bool {
        guard(&self.shared.posts).unanswered()
    }

    /// Waits, observing cancellation, until the destination has posted a
    /// receive that no bundle answered yet (a rendezvous send's start).
    pub(crate) fn await_receiver(
        &self,
        ctx: &WorkCtx<'_>,
        operation: &'static str,
    ) -> Result<(), CpuError> {
        self.wait_for(
            ctx,
            operation,
            |shared| (&shared.posts, &shared.posted),
            |posts| posts.unanswered().then_some(()),
        )
    }

    /// Waits for the next message, observing cancellation.
    pub(crate) fn receive(
        &self,
        ctx: &WorkCtx<'_>,
        operation: &'static str,
    ) -> Result<Message, CpuError> {
        self.wait_for(
            ctx,
            operation,
            |shared| (&shared.mailbox, &shared.arrived),
            VecDeque::pop_front,
        )
    }

    /// Blocks on one of the route's condition variables until `ready` takes
    /// something from what its mutex guards; a cancellation request wakes
    /// the wait and ends it.
    fn wait_for<T: 'static, R>(
        &self,
        ctx: &WorkCtx<'_>,
        operation: &'static str,
        parts: fn(&RouteShared) -> (&Mutex<T>, &Condvar),
        mut ready: impl FnMut(&mut T) -> Option<R>,
    ) -> Result<R, CpuError> {
        ctx.wake_on_cancel(&self.shared, parts, || {
            let (mutex, condvar) = parts(&self.shared);
            let mut state = guard(mutex);
            loop {
                if let Some(taken) = ready(&mut state) {
                    return Ok(taken);
                }
                if ctx.cancelled() {
                    return Err(CpuError::Cancelled { operation });
                }
                state = ctx.block(condvar, state);
            }
        })
    }
}

/// The CPU backend's communication route: this rank's endpoint.
#[derive(Clone)]
pub struct CpuRoute {
    pub(crate) end: Arc<RouteEnd>,
}

impl std::fmt::Debug for CpuRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuRoute")
            .field("id", &self.end.id())
            .field("source", &self.end.shared.source)
            .field("destination", &self.end.shared.destination)
            .field(
                "this_end",
                &if self.end.is_source {
                    "source"
                } else {
                    "destination"
                },
            )
            .finish()
    }
}

impl CpuRoute {
    /// This rank's endpoint of `shared`, a native handle `ledger` counts.
    pub(crate) fn new(ledger: &Arc<Ledger>, shared: Arc<RouteShared>, is_source: bool) -> Self {
        let ledger = Arc::clone(ledger);
        ledger.up(Kind::Route);
        Self {
            end: Arc::new(RouteEnd {
                shared,
                is_source,
                ledger,
            }),
        }
    }

    /// Route identity.
    pub fn id(&self) -> CommunicationRouteId {
        self.end.shared.id
    }

    /// Whether this endpoint sends.
    pub fn is_source(&self) -> bool {
        self.end.is_source
    }

    /// Every native message transmitted on this route so far (the wire-log instrument).
    pub fn wire_log(&self) -> Vec<WireMessage> {
        guard(&self.end.shared.wire).clone()
    }
}
