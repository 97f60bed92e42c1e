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
//! one world of processes), its group or route, and its content (its
//! encoding is [`crate::frame`]'s).
//!
//! The transport sits below the groups and routes it serves: an open group
//! or route registers itself as a [`GroupInbox`] or [`RouteInbox`], which
//! incoming frames and lost peers are delivered to.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use commcheck_mesh::{Event, Listener, Mesh};

use crate::error::CpuError;
use crate::frame::{decode, encode, Frame, Message, Target};

/// A group's rendezvous as the transport sees it: what another member's
/// process sends is applied to it, and a lost process fails it.
pub(crate) trait GroupInbox: Send + Sync {
    /// Applies a frame another member's process sent.
    fn receive(&self, frame: Frame);
    /// The process of member `peer` died: every collective still waiting
    /// for members fails, naming it.
    fn peer_lost(&self, peer: usize, reason: &str);
}

/// A route's destination mailbox as the transport sees it.
pub(crate) trait RouteInbox: Send + Sync {
    /// A message from the source's process arrived.
    fn arrive(&self, message: Message);
}

#[derive(Default)]
struct Registry {
    groups: HashMap<Target, Weak<dyn GroupInbox>>,
    routes: HashMap<Target, Weak<dyn RouteInbox>>,
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
    pub(crate) fn open_group<G: GroupInbox + 'static>(
        &self,
        world: u64,
        key: &str,
        group: &Arc<G>,
    ) {
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
        let group: Weak<G> = Arc::downgrade(group);
        registry.groups.insert(target, group);
    }

    /// Opens route `id` of world `world` here (see [`Fabric::open_group`]).
    pub(crate) fn open_route<R: RouteInbox + 'static>(&self, world: u64, id: u64, route: &Arc<R>) {
        let target = Target::Route { world, id };
        let mut registry = guard(&self.registry);
        for frame in registry.early.remove(&target).unwrap_or_default() {
            if let Frame::Route(message) = frame {
                route.arrive(message);
            }
        }
        registry.routes.retain(|_, weak| weak.strong_count() > 0);
        let route: Weak<R> = Arc::downgrade(route);
        registry.routes.insert(target, route);
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
    Group(Arc<dyn GroupInbox>),
    Route(Arc<dyn RouteInbox>),
}
