//! A full mesh of TCP connections between the processes of one launch.
//!
//! commcheck runs process-per-rank worlds: a launcher (`mpirun`) starts one
//! process per rank, and the processes talk over TCP: on loopback by
//! default, or across hosts on the address [`ADDRESS_SETTING`] picks
//! ([`Listener::bind_configured`]). The kit's
//! control plane (case starts, host-side signals, verdicts) and the
//! `commcheck-cpu` transport each build one mesh. MPI only starts the
//! processes and exchanges the listeners' addresses: a socket reports a dead
//! peer as end-of-file at once, where MPI without fault tolerance leaves a
//! survivor hanging or takes the whole job down.
//!
//! ```
//! use commcheck_mesh::{Event, Listener};
//! use std::sync::{mpsc, Arc, Mutex};
//!
//! // Two "processes" in one test: each binds, the addresses are exchanged
//! // (a launcher's all-gather in real use), then both connect.
//! let (a, b) = (Listener::bind()?, Listener::bind()?);
//! let addresses = vec![a.address().to_owned(), b.address().to_owned()];
//! let (sent, received) = mpsc::channel();
//! let sent = Mutex::new(sent);
//! let other = std::thread::spawn({
//!     let addresses = addresses.clone();
//!     move || b.connect(1, &addresses, Arc::new(|_| {}))
//! });
//! let mesh = a.connect(0, &addresses, Arc::new(move |event| {
//!     if let Event::Frame { from, bytes } = event {
//!         let _ = sent.lock().unwrap().send((from, bytes));
//!     }
//! }))?;
//! let peer = other.join().unwrap()?;
//! peer.send(0, b"hello")?;
//! assert_eq!(received.recv().unwrap(), (1, b"hello".to_vec()));
//! assert_eq!((mesh.rank(), mesh.size()), (0, 2));
//! # Ok::<(), commcheck_mesh::MeshError>(())
//! ```

mod address;

pub use address::{check_reachable, configured_address, resolve_address, ADDRESS_SETTING};

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long connecting the mesh may take before it is an error, unless
/// [`CONNECT_SETTING`] says otherwise.
pub const CONNECT_LIMIT: Duration = Duration::from_secs(60);

/// The setting for how long connecting the mesh may take: whole
/// milliseconds from 100 to 3 600 000 (default [`CONNECT_LIMIT`]). Each
/// process reads its own when its mesh is built (before anything can reach
/// it from the others).
pub const CONNECT_SETTING: &str = "COMMCHECK_CONNECT_TIMEOUT_MS";

/// The connect limit [`CONNECT_SETTING`] sets in this process's environment
/// ([`CONNECT_LIMIT`] when unset or empty); a value out of range or not a
/// whole number is an error naming the setting.
///
/// ```
/// std::env::set_var("COMMCHECK_CONNECT_TIMEOUT_MS", "2500");
/// assert_eq!(commcheck_mesh::connect_limit()?, std::time::Duration::from_millis(2500));
/// std::env::set_var("COMMCHECK_CONNECT_TIMEOUT_MS", "soon");
/// let error = commcheck_mesh::connect_limit().unwrap_err().to_string();
/// assert!(error.contains("COMMCHECK_CONNECT_TIMEOUT_MS=\"soon\""), "{error}");
/// # Ok::<(), commcheck_mesh::MeshError>(())
/// ```
pub fn connect_limit() -> Result<Duration, MeshError> {
    let value = match std::env::var(CONNECT_SETTING) {
        Ok(value) if !value.trim().is_empty() => value,
        Ok(_) | Err(std::env::VarError::NotPresent) => return Ok(CONNECT_LIMIT),
        Err(std::env::VarError::NotUnicode(value)) => {
            return Err(MeshError::Setting(format!(
                "{CONNECT_SETTING}={value:?} is not UTF-8: expected whole milliseconds from 100 to 3600000"
            )))
        }
    };
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| (100..=3_600_000).contains(ms))
        .map(Duration::from_millis)
        .ok_or_else(|| {
            MeshError::Setting(format!(
                "{CONNECT_SETTING}={value:?} is not accepted: expected whole milliseconds from 100 to 3600000 (default \
                 60000)"
            ))
        })
}

/// The largest frame accepted (a corrupt length is an error, not an allocation).
const MAX_FRAME: usize = 1 << 30;

/// Sent first on every connection: a magic word and the sender's rank.
const HELLO: u32 = 0x636d_6d68;

/// What a mesh's reader threads deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// One frame, as sent by `from`.
    Frame {
        /// The sender's rank.
        from: usize,
        /// The frame's bytes.
        bytes: Vec<u8>,
    },
    /// The connection to `peer` ended: its process exited or closed it.
    Lost {
        /// The peer's rank.
        peer: usize,
        /// What the socket reported.
        reason: String,
    },
}

/// Where a mesh delivers its events (called on its reader threads).
pub type Deliver = Arc<dyn Fn(Event) + Send + Sync>;

/// A mesh error: what was expected and what happened.
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    /// A socket operation failed.
    #[error("mesh: {what}: {source}")]
    Io {
        /// What the mesh was doing.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The peers did not all connect in time, or said something unexpected.
    #[error("mesh: {0}")]
    Protocol(String),
    /// [`ADDRESS_SETTING`] names no address of this host, or
    /// [`CONNECT_SETTING`] is no accepted limit.
    #[error("mesh: {0}")]
    Setting(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> MeshError {
    let what = what.into();
    move |source| MeshError::Io { what, source }
}

/// A bound listener, before the mesh is connected.
#[derive(Debug)]
pub struct Listener {
    listener: TcpListener,
    address: String,
}

impl Listener {
    /// Binds `127.0.0.1` on a free port.
    pub fn bind() -> Result<Self, MeshError> {
        Self::bind_at(std::net::IpAddr::from([127, 0, 0, 1]))
    }

    /// Binds the address [`ADDRESS_SETTING`] picks (loopback when unset) on
    /// a free port: what the kit's control plane and the CPU backend's
    /// transport listen on.
    pub fn bind_configured() -> Result<Self, MeshError> {
        Self::bind_at(configured_address()?)
    }

    /// Binds `ip` on a free port.
    pub fn bind_at(ip: std::net::IpAddr) -> Result<Self, MeshError> {
        let listener =
            TcpListener::bind((ip, 0)).map_err(io(format!("binding {ip} on a free port")))?;
        let address = listener
            .local_addr()
            .map_err(io("reading the listener's address"))?
            .to_string();
        Ok(Self { listener, address })
    }

    /// The address peers connect to (`ip:port`, `[ip6]:port`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Connects the mesh: this process is `rank`, and `addresses[r]` is rank
    /// `r`'s listener. Connects to every lower rank and accepts every higher
    /// one, within [`connect_limit`]. Frames and lost connections go to
    /// `deliver`, from one reader thread per peer.
    pub fn connect(
        self,
        rank: usize,
        addresses: &[String],
        deliver: Deliver,
    ) -> Result<Mesh, MeshError> {
        let size = addresses.len();
        if rank >= size {
            return Err(MeshError::Protocol(format!(
                "rank {rank} is outside a mesh of {size} addresses"
            )));
        }
        let limit = connect_limit()?;
        let deadline = Instant::now() + limit;
        let mut streams: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
        for (peer, address) in addresses.iter().enumerate().take(rank) {
            let mut stream = connect_until(address, deadline).map_err(io(format!(
                "rank {rank} connecting to rank {peer} at {address}"
            )))?;
            let mut hello = [0u8; 8];
            hello[..4].copy_from_slice(&HELLO.to_be_bytes());
            hello[4..].copy_from_slice(&(rank as u32).to_be_bytes());
            stream
                .write_all(&hello)
                .map_err(io(format!("greeting rank {peer} at {address}")))?;
            streams[peer] = Some(stream);
        }
        self.listener
            .set_nonblocking(true)
            .map_err(io("making the listener non-blocking"))?;
        while streams.iter().skip(rank + 1).any(Option::is_none) {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(io("making a connection blocking"))?;
                    stream
                        .set_read_timeout(Some(deadline.saturating_duration_since(Instant::now())))
                        .map_err(io("setting a greeting timeout"))?;
                    let mut hello = [0u8; 8];
                    stream
                        .read_exact(&mut hello)
                        .map_err(io("reading a peer's greeting"))?;
                    let magic = u32::from_be_bytes([hello[0], hello[1], hello[2], hello[3]]);
                    let peer =
                        u32::from_be_bytes([hello[4], hello[5], hello[6], hello[7]]) as usize;
                    if magic != HELLO || peer <= rank || peer >= size || streams[peer].is_some() {
                        return Err(MeshError::Protocol(format!(
                            "rank {rank} expected a greeting from one of ranks {}..{size}, got magic {magic:#x} from rank {peer}",
                            rank + 1
                        )));
                    }
                    stream
                        .set_read_timeout(None)
                        .map_err(io("clearing the greeting timeout"))?;
                    streams[peer] = Some(stream);
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<usize> =
                            (rank + 1..size).filter(|r| streams[*r].is_none()).collect();
                        return Err(MeshError::Protocol(format!(
                            "rank {rank}: ranks {missing:?} did not connect within {limit:?} ({CONNECT_SETTING})"
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(error) => return Err(io("accepting a peer")(error)),
            }
        }
        let closing = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::with_capacity(size);
        for (peer, stream) in streams.into_iter().enumerate() {
            let Some(stream) = stream else {
                writers.push(None);
                continue;
            };
            stream
                .set_nodelay(true)
                .map_err(io("disabling Nagle's algorithm"))?;
            let reader = stream.try_clone().map_err(io("cloning a connection"))?;
            let (deliver, closing) = (Arc::clone(&deliver), Arc::clone(&closing));
            std::thread::Builder::new()
                .name(format!("commcheck-mesh-{rank}-from-{peer}"))
                .spawn(move || read_frames(reader, peer, &deliver, &closing))
                .map_err(io("starting a reader thread"))?;
            writers.push(Some(Mutex::new(stream)));
        }
        Ok(Mesh {
            rank,
            size,
            writers,
            closing,
        })
    }
}

fn connect_until(address: &str, deadline: Instant) -> Result<TcpStream, std::io::Error> {
    loop {
        match TcpStream::connect(address) {
            Ok(stream) => return Ok(stream),
            Err(error) if Instant::now() >= deadline => return Err(error),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn read_frames(mut stream: TcpStream, peer: usize, deliver: &Deliver, closing: &AtomicBool) {
    let reason = loop {
        let mut length = [0u8; 4];
        if let Err(error) = stream.read_exact(&mut length) {
            break if error.kind() == std::io::ErrorKind::UnexpectedEof {
                "the connection was closed (the process exited)".to_owned()
            } else {
                error.to_string()
            };
        }
        let length = u32::from_be_bytes(length) as usize;
        if length > MAX_FRAME {
            break format!("a frame of {length} bytes exceeds the {MAX_FRAME}-byte limit");
        }
        let mut bytes = vec![0u8; length];
        if let Err(error) = stream.read_exact(&mut bytes) {
            break format!("the connection broke inside a frame: {error}");
        }
        deliver(Event::Frame { from: peer, bytes });
    };
    if !closing.load(Ordering::SeqCst) {
        deliver(Event::Lost { peer, reason });
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A connected mesh: one connection to every other rank.
#[derive(Debug)]
pub struct Mesh {
    rank: usize,
    size: usize,
    writers: Vec<Option<Mutex<TcpStream>>>,
    closing: Arc<AtomicBool>,
}

impl Mesh {
    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of processes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Sends one frame to rank `to` (never to this rank itself).
    pub fn send(&self, to: usize, bytes: &[u8]) -> Result<(), MeshError> {
        let Some(Some(writer)) = self.writers.get(to) else {
            return Err(MeshError::Protocol(format!(
                "rank {} cannot send to rank {to}: the mesh has ranks 0..{} and none to itself",
                self.rank, self.size
            )));
        };
        let length = u32::try_from(bytes.len())
            .ok()
            .filter(|length| (*length as usize) <= MAX_FRAME)
            .ok_or_else(|| {
                MeshError::Protocol(format!("a frame of {} bytes is too large", bytes.len()))
            })?;
        let mut writer = lock(writer);
        writer
            .write_all(&length.to_be_bytes())
            .and_then(|()| writer.write_all(bytes))
            .map_err(io(format!("sending to rank {to}")))
    }

    /// Sends one frame to every other rank; the first error, if any.
    pub fn broadcast(&self, bytes: &[u8]) -> Result<(), MeshError> {
        let mut first = Ok(());
        for to in (0..self.size).filter(|to| *to != self.rank) {
            if let Err(error) = self.send(to, bytes) {
                first = first.and(Err(error));
            }
        }
        first
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        for writer in self.writers.iter().flatten() {
            let _ = lock(writer).shutdown(Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn mesh_of(size: usize) -> (Vec<Mesh>, mpsc::Receiver<(usize, Event)>) {
        let listeners: Vec<Listener> = (0..size).map(|_| Listener::bind().unwrap()).collect();
        let addresses: Vec<String> = listeners.iter().map(|l| l.address().to_owned()).collect();
        let (sent, received) = mpsc::channel();
        let threads: Vec<_> = listeners
            .into_iter()
            .enumerate()
            .map(|(rank, listener)| {
                let addresses = addresses.clone();
                let sent = Mutex::new(sent.clone());
                std::thread::spawn(move || {
                    listener.connect(
                        rank,
                        &addresses,
                        Arc::new(move |event| {
                            let _ = lock(&sent).send((rank, event));
                        }),
                    )
                })
            })
            .collect();
        let meshes = threads
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect();
        (meshes, received)
    }

    #[test]
    fn frames_reach_every_peer_in_order() {
        let (meshes, received) = mesh_of(3);
        meshes[2].broadcast(b"one").unwrap();
        meshes[2].broadcast(b"two").unwrap();
        let mut got: Vec<(usize, Event)> = (0..4).map(|_| received.recv().unwrap()).collect();
        got.sort_by_key(|(at, _)| *at);
        let frame = |bytes: &[u8]| Event::Frame {
            from: 2,
            bytes: bytes.to_vec(),
        };
        assert_eq!(
            got,
            vec![
                (0, frame(b"one")),
                (0, frame(b"two")),
                (1, frame(b"one")),
                (1, frame(b"two"))
            ]
        );
    }

    #[test]
    fn a_dropped_peer_is_reported_lost_by_the_others() {
        let (mut meshes, received) = mesh_of(2);
        drop(meshes.pop());
        let (at, event) = received.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(at, 0);
        assert!(matches!(event, Event::Lost { peer: 1, .. }), "{event:?}");
    }

    #[test]
    fn sending_to_oneself_or_outside_the_mesh_is_an_error() {
        let (meshes, _received) = mesh_of(2);
        assert!(meshes[0].send(0, b"x").is_err());
        assert!(meshes[0].send(5, b"x").is_err());
    }
}
