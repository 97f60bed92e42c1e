//! The multi-process transport: groups and routes whose members live in
//! other processes (one rank per process, started by a launcher).
//!
//! Every process holds its own copy of a group's rendezvous and of a route's
//! mailbox. A member's contribution to collective `k` (or its abort, or a
//! fence) is sent to every other member's process, which records it in its
//! copy exactly as a local member's; a route's source sends each native
//! message, headers and payload in one frame, to the destination's process.
//! A late peer keeps the others pending for real: its contribution has not
//! arrived. A peer process that dies fails every rendezvous waiting for it.
//!
//! The processes talk over a loopback TCP mesh ([`commcheck_mesh`]); the
//! launcher only exchanges the listeners' addresses (see
//! [`Fabric::connect`]). A frame names its world (the harness's number for
//! one world of processes), its group or route, and its content.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use commcheck_mesh::{Event, Listener, Mesh};

use crate::error::CpuError;
use crate::group::{Contribution, GroupShared};
use crate::route::{Framed, Message, RouteShared};
use crate::tensor::Element;

/// Operation names a contribution may carry (frames carry the name).
const OPERATIONS: [&str; 7] = [
    "all_reduce_sum",
    "all_gather_even",
    "all_gather_uneven",
    "variable_all_to_all",
    "broadcast",
    "barrier",
    "agree_success",
];

/// What a frame is addressed to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    Group { world: u64, key: String },
    Route { world: u64, id: u64 },
}

/// What a frame says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Frame {
    /// `member`'s contribution to collective `seq`.
    Deposit {
        seq: u64,
        member: usize,
        contribution: Contribution,
    },
    /// `member` left collective `seq` without contributing.
    Abort {
        seq: u64,
        member: usize,
        reason: String,
    },
    /// Every later collective on the group fails.
    Fence { reason: String },
    /// One native message on a route.
    Route(Message),
}

#[derive(Default)]
struct Registry {
    groups: HashMap<Target, Weak<GroupShared>>,
    routes: HashMap<Target, Weak<RouteShared>>,
    /// Frames for groups and routes this process has not opened yet.
    early: HashMap<Target, Vec<Frame>>,
    lost: BTreeMap<usize, String>,
}

/// One process's end of the transport.
pub struct Fabric {
    mesh: Mesh,
    registry: Arc<Mutex<Registry>>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("rank", &self.mesh.rank())
            .field("size", &self.mesh.size())
            .finish()
    }
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Fabric {
    /// Connects this process, rank `rank`, to the others: `addresses[r]` is
    /// rank `r`'s `listener` address, exchanged by the launcher.
    ///
    /// ```
    /// use commcheck_cpu::Fabric;
    /// use commcheck_mesh::Listener;
    ///
    /// // A launch of one process: nothing to exchange.
    /// let listener = Listener::bind().unwrap();
    /// let addresses = vec![listener.address().to_owned()];
    /// let fabric = Fabric::connect(listener, 0, &addresses).unwrap();
    /// assert_eq!((fabric.rank(), fabric.size()), (0, 1));
    /// ```
    pub fn connect(
        listener: Listener,
        rank: usize,
        addresses: &[String],
    ) -> Result<Arc<Self>, CpuError> {
        let registry: Arc<Mutex<Registry>> = Arc::default();
        let delivering = Arc::clone(&registry);
        let mesh = listener
            .connect(
                rank,
                addresses,
                Arc::new(move |event| deliver(&delivering, event)),
            )
            .map_err(|error| CpuError::Transport(error.to_string()))?;
        Ok(Arc::new(Self { mesh, registry }))
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.mesh.rank()
    }

    /// Number of processes.
    pub fn size(&self) -> usize {
        self.mesh.size()
    }

    /// Opens `group` of world `world` here: frames that arrived for it
    /// before are applied now, later ones as they arrive.
    pub(crate) fn open_group(&self, world: u64, key: &str, group: &Arc<GroupShared>) {
        let target = Target::Group {
            world,
            key: key.to_owned(),
        };
        let mut registry = guard(&self.registry);
        for (peer, reason) in &registry.lost {
            group.peer_lost(*peer, reason);
        }
        for frame in registry.early.remove(&target).unwrap_or_default() {
            group.receive(frame);
        }
        registry.groups.retain(|_, weak| weak.strong_count() > 0);
        registry.groups.insert(target, Arc::downgrade(group));
    }

    /// Opens route `id` of world `world` here (see [`Fabric::open_group`]).
    pub(crate) fn open_route(&self, world: u64, id: u64, route: &Arc<RouteShared>) {
        let target = Target::Route { world, id };
        let mut registry = guard(&self.registry);
        for frame in registry.early.remove(&target).unwrap_or_default() {
            if let Frame::Route(message) = frame {
                route.arrive(message);
            }
        }
        registry.routes.retain(|_, weak| weak.strong_count() > 0);
        registry.routes.insert(target, Arc::downgrade(route));
    }

    /// Sends a group frame to the process of every member but this one.
    pub(crate) fn to_group(&self, world: u64, key: &str, members: usize, frame: &Frame) {
        let bytes = encode(
            &Target::Group {
                world,
                key: key.to_owned(),
            },
            frame,
        );
        for to in (0..members).filter(|to| *to != self.rank()) {
            // A failed send shows up as a lost peer on its reader.
            let _ = self.mesh.send(to, &bytes);
        }
    }

    /// Sends a route message to the destination's process.
    pub(crate) fn to_route(&self, world: u64, id: u64, destination: usize, message: Message) {
        let bytes = encode(&Target::Route { world, id }, &Frame::Route(message));
        let _ = self.mesh.send(destination, &bytes);
    }
}

/// Where a group's other members are: the fabric, the world and the
/// group's key there.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) fabric: Arc<Fabric>,
    pub(crate) world: u64,
    pub(crate) key: String,
}

impl Span {
    /// Sends `frame` to the processes of the group's other `members`.
    pub(crate) fn to_group(&self, members: usize, frame: &Frame) {
        self.fabric.to_group(self.world, &self.key, members, frame);
    }
}

/// Applies one mesh event: a frame goes to its group or route (or waits
/// for it to open); a lost peer fails every open group's waiting members.
fn deliver(registry: &Mutex<Registry>, event: Event) {
    let mut registry = guard(registry);
    match event {
        Event::Frame { from, bytes } => {
            let Some((target, frame)) = decode(&bytes) else {
                registry
                    .lost
                    .entry(from)
                    .or_insert_with(|| "it sent an undecodable frame".into());
                return;
            };
            let open = match &target {
                Target::Group { .. } => registry
                    .groups
                    .get(&target)
                    .map(|weak| weak.upgrade().map(Opened::Group)),
                Target::Route { .. } => registry
                    .routes
                    .get(&target)
                    .map(|weak| weak.upgrade().map(Opened::Route)),
            };
            match open {
                Some(Some(Opened::Group(group))) => group.receive(frame),
                Some(Some(Opened::Route(route))) => {
                    if let Frame::Route(message) = frame {
                        route.arrive(message);
                    }
                }
                // Opened once and gone: nobody waits for it any more.
                Some(None) => {}
                None => registry.early.entry(target).or_default().push(frame),
            }
        }
        Event::Lost { peer, reason } => {
            registry.lost.entry(peer).or_insert_with(|| reason.clone());
            registry.groups.retain(|_, weak| weak.strong_count() > 0);
            for group in registry.groups.values().filter_map(Weak::upgrade) {
                group.peer_lost(peer, &reason);
            }
        }
    }
}

enum Opened {
    Group(Arc<GroupShared>),
    Route(Arc<RouteShared>),
}

// The wire format: little-endian integers, length-prefixed strings and
// lists. Only processes of one build talk to each other.

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, value: u8) {
        self.0.push(value);
    }
    fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn usize(&mut self, value: usize) {
        self.u64(value as u64);
    }
    fn bytes(&mut self, value: &[u8]) {
        self.usize(value.len());
        self.0.extend_from_slice(value);
    }
    fn str(&mut self, value: &str) {
        self.bytes(value.as_bytes());
    }
    fn f32s(&mut self, values: &[f32]) {
        self.usize(values.len());
        for value in values {
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }
    fn i32s(&mut self, values: &[i32]) {
        self.usize(values.len());
        for value in values {
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }
    fn usizes(&mut self, values: &[usize]) {
        self.usize(values.len());
        for value in values {
            self.usize(*value);
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn usize(&mut self) -> Option<usize> {
        usize::try_from(self.u64()?).ok()
    }
    /// A count of items of `width` bytes, refused when the frame is shorter.
    fn count(&mut self, width: usize) -> Option<usize> {
        let n = self.usize()?;
        (n.checked_mul(width)? <= self.0.len()).then_some(n)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.count(1)?;
        self.take(n).map(<[u8]>::to_vec)
    }
    fn str(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }
    fn f32s(&mut self) -> Option<Vec<f32>> {
        let n = self.count(4)?;
        (0..n)
            .map(|_| Some(f32::from_le_bytes(self.take(4)?.try_into().ok()?)))
            .collect()
    }
    fn i32s(&mut self) -> Option<Vec<i32>> {
        let n = self.count(4)?;
        (0..n)
            .map(|_| Some(i32::from_le_bytes(self.take(4)?.try_into().ok()?)))
            .collect()
    }
    fn usizes(&mut self) -> Option<Vec<usize>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.usize()).collect()
    }
}

fn encode(target: &Target, frame: &Frame) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    match target {
        Target::Group { world, key } => {
            w.u8(0);
            w.u64(*world);
            w.str(key);
        }
        Target::Route { world, id } => {
            w.u8(1);
            w.u64(*world);
            w.u64(*id);
        }
    }
    match frame {
        Frame::Deposit {
            seq,
            member,
            contribution,
        } => {
            w.u8(0);
            w.u64(*seq);
            w.usize(*member);
            w.str(contribution.operation);
            w.f32s(&contribution.values);
            w.i32s(&contribution.shape);
            w.u8(match contribution.element {
                Element::F32 => 0,
                Element::F16 => 1,
                Element::Bf16 => 2,
            });
            w.usizes(&contribution.meta);
        }
        Frame::Abort {
            seq,
            member,
            reason,
        } => {
            w.u8(1);
            w.u64(*seq);
            w.usize(*member);
            w.str(reason);
        }
        Frame::Fence { reason } => {
            w.u8(2);
            w.str(reason);
        }
        Frame::Route(Message::Bundle(values)) => {
            w.u8(3);
            w.usize(values.len());
            for value in values {
                w.bytes(&value.header);
                w.i32s(&value.shape);
                w.f32s(&value.payload);
            }
        }
        Frame::Route(Message::Headers(headers)) => {
            w.u8(4);
            w.usize(headers.len());
            for header in headers {
                w.bytes(header);
            }
        }
        Frame::Route(Message::Payloads(payloads)) => {
            w.u8(5);
            w.usize(payloads.len());
            for (shape, payload) in payloads {
                w.i32s(shape);
                w.f32s(payload);
            }
        }
    }
    w.0
}

fn decode(bytes: &[u8]) -> Option<(Target, Frame)> {
    let mut r = Reader(bytes);
    let target = match r.u8()? {
        0 => Target::Group {
            world: r.u64()?,
            key: r.str()?,
        },
        1 => Target::Route {
            world: r.u64()?,
            id: r.u64()?,
        },
        _ => return None,
    };
    let frame = match r.u8()? {
        0 => {
            let (seq, member) = (r.u64()?, r.usize()?);
            let name = r.str()?;
            let operation = OPERATIONS.iter().find(|known| **known == name)?;
            Frame::Deposit {
                seq,
                member,
                contribution: Contribution {
                    operation,
                    values: Arc::new(r.f32s()?),
                    shape: r.i32s()?,
                    element: match r.u8()? {
                        0 => Element::F32,
                        1 => Element::F16,
                        2 => Element::Bf16,
                        _ => return None,
                    },
                    meta: r.usizes()?,
                    arrival: 0,
                },
            }
        }
        1 => Frame::Abort {
            seq: r.u64()?,
            member: r.usize()?,
            reason: r.str()?,
        },
        2 => Frame::Fence { reason: r.str()? },
        3 => {
            let n = r.count(1)?;
            let values = (0..n)
                .map(|_| {
                    Some(Framed {
                        header: r.bytes()?,
                        shape: r.i32s()?,
                        payload: Arc::new(r.f32s()?),
                    })
                })
                .collect::<Option<_>>()?;
            Frame::Route(Message::Bundle(values))
        }
        4 => {
            let n = r.count(1)?;
            Frame::Route(Message::Headers(
                (0..n).map(|_| r.bytes()).collect::<Option<_>>()?,
            ))
        }
        5 => {
            let n = r.count(1)?;
            Frame::Route(Message::Payloads(
                (0..n)
                    .map(|_| Some((r.i32s()?, Arc::new(r.f32s()?))))
                    .collect::<Option<_>>()?,
            ))
        }
        _ => return None,
    };
    r.0.is_empty().then_some((target, frame))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_decodes_to_itself() {
        let frames = [
            Frame::Deposit {
                seq: 7,
                member: 1,
                contribution: Contribution {
                    operation: "all_gather_uneven",
                    values: Arc::new(vec![1.5, -2.0]),
                    shape: vec![2],
                    element: Element::Bf16,
                    meta: vec![3, 0],
                    arrival: 0,
                },
            },
            Frame::Abort {
                seq: 2,
                member: 0,
                reason: "cancelled".into(),
            },
            Frame::Fence {
                reason: "a deadline".into(),
            },
            Frame::Route(Message::Bundle(vec![Framed {
                header: vec![1, 2],
                shape: vec![1, 2],
                payload: Arc::new(vec![3.0, 4.0]),
            }])),
            Frame::Route(Message::Headers(vec![vec![9], vec![]])),
            Frame::Route(Message::Payloads(vec![(vec![1], Arc::new(vec![5.0]))])),
        ];
        for frame in frames {
            let target = Target::Group {
                world: 3,
                key: "world".into(),
            };
            let bytes = encode(&target, &frame);
            assert_eq!(decode(&bytes), Some((target, frame.clone())));
            // Every truncation is refused, never a panic.
            for cut in 0..bytes.len() {
                assert_eq!(decode(&bytes[..cut]), None, "{frame:?} cut at {cut}");
            }
        }
    }
}
