//! Process-per-rank worlds: the ranks of a world are processes started by a
//! launcher (`mpirun -n N`), one rank per process, as real communication
//! backends run.
//!
//! Every process runs the same test binary. Rank 0 leads: it picks the cases
//! (filters, `--list`, `--exact` as usual), tells the others which case runs
//! next, writes the one result file and prints the verdicts. A world of `k`
//! ranks runs on processes `0..k`; each calls [`Harness::world`] and then
//! [`Harness::rank`] once, for its own rank. Host-side signals (a late peer
//! joins when told to) travel between the processes, every world ends with
//! an exchange of the processes' outcomes, and every process reaches the same
//! verdict (so retries stay in step).
//!
//! The processes talk over a TCP mesh ([`commcheck_mesh`]): on loopback, or
//! across hosts on the address `COMMCHECK_MESH_ADDRESS` picks (an IP address,
//! an interface name or a network; see [`commcheck_mesh::ADDRESS_SETTING`]).
//! MPI (the `mpi` feature) gives the rank, the size and the mesh addresses;
//! ranks on different hosts (or network namespaces) with loopback listeners
//! are an error at once, naming the setting.
//! A process that dies mid-case is seen at once as a closed connection: the
//! case is a `crash` naming the dead rank, the run stops, and the result file
//! says it is incomplete. A process that stops answering is a `timeout`
//! naming it, after the world's ceiling (six case watchdogs) and the grace
//! `COMMCHECK_GRACE_MS`. The leader's settings (watchdog, grace, seed) are
//! the ones every process runs by; a process whose own differ says so.
//!
//! A vendor's `harness = false` test file for `mpirun`:
//!
//! ```no_run
//! # #[cfg(feature = "mpi")]
//! # fn vendor<H: commcheck::Harness>(harness: impl FnOnce(&commcheck::processes::Processes) -> H) {
//! use commcheck::processes::{main_across, Processes};
//!
//! let processes = Processes::from_mpi().unwrap_or_else(|error| {
//!     eprintln!("{error}");
//!     std::process::exit(2)
//! });
//! let harness = harness(&processes); // e.g. a backend that joins its group from the rank
//! main_across(processes, harness)
//! # }
//! ```
//!
//! Run it with `mpirun -n 2 target/debug/deps/<test>-<hash>` (as root, Open
//! MPI also needs `--allow-run-as-root`; more ranks than cores needs
//! `--oversubscribe`; `--enable-recovery` keeps the survivors of a dead rank
//! alive long enough to report it).
//!
//! [`Harness::world`]: crate::Harness::world
//! [`Harness::rank`]: crate::Harness::rank

mod agree;
mod control;
mod runner;
mod say;
mod world;

use std::sync::Arc;

pub use commcheck_mesh::Listener;
pub use runner::{main_across, run_cases_across};

pub(crate) use control::Control;

/// A process-world error: what was expected and what happened.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The mesh between the processes could not be built or broke.
    #[error("commcheck processes: {0}")]
    Mesh(#[from] commcheck_mesh::MeshError),
    /// The launcher did not give what the kit needs.
    #[error("commcheck processes: {0}")]
    Launcher(String),
    /// Another process died or stopped answering.
    #[error("commcheck processes: {0}")]
    Lost(String),
    /// A `COMMCHECK_*` setting is bad (see [`crate::settings`]).
    #[error("commcheck processes: {0}")]
    Settings(#[from] crate::settings::SettingsError),
}

/// The processes of one launch, seen from one of them: built by
/// `Processes::from_mpi` under `mpirun` (with the `mpi` feature), or
/// [`Processes::connect`] from addresses another launcher exchanged.
pub struct Processes {
    control: Arc<Control>,
    #[cfg(feature = "mpi")]
    universe: Option<mpi::environment::Universe>,
}

impl std::fmt::Debug for Processes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processes")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish()
    }
}

impl Processes {
    /// This process's rank (its world rank in every world it takes part in).
    pub fn rank(&self) -> usize {
        self.control.rank()
    }

    /// Number of processes the launcher started.
    pub fn size(&self) -> usize {
        self.control.size()
    }

    /// Every process's `mine`, in rank order. Every process must call it at
    /// the same point (a harness exchanging its transport's addresses, say).
    pub fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, ProcessError> {
        self.control.all_gather(mine)
    }

    /// Connects this process, rank `rank`, to the others: `addresses[r]` is
    /// the address of rank `r`'s `listener` (a launcher other than MPI
    /// exchanges them; `Processes::from_mpi`, with the `mpi` feature, does it
    /// with MPI).
    pub fn connect(
        listener: Listener,
        rank: usize,
        addresses: &[String],
    ) -> Result<Self, ProcessError> {
        crate::world::across_processes();
        Ok(Self {
            control: Control::connect(listener, rank, addresses)?,
            #[cfg(feature = "mpi")]
            universe: None,
        })
    }

    /// Whether this process was started by an MPI launcher (`mpirun`):
    /// Open MPI's, MPICH's or a PMIx launcher's environment is present.
    pub fn launched() -> bool {
        ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
            .iter()
            .any(|name| std::env::var_os(name).is_some())
    }

    /// Initialises MPI (the `mpi` feature), reads this process's rank and the launch's size, and
    /// connects the kit's mesh (its addresses are exchanged with an MPI
    /// all-gather). MPI is used for nothing else until the run ends.
    #[cfg(feature = "mpi")]
    pub fn from_mpi() -> Result<Self, ProcessError> {
        use mpi::traits::{Communicator, CommunicatorCollectives};
        let universe = mpi::initialize().ok_or_else(|| {
            ProcessError::Launcher("MPI was already initialised in this process".into())
        })?;
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let (rank, size) = match (usize::try_from(rank), usize::try_from(size)) {
            (Ok(rank), Ok(size)) if rank < size => (rank, size),
            _ => {
                return Err(ProcessError::Launcher(format!(
                    "MPI gave rank {rank} of a world of {size}"
                )))
            }
        };
        // Every rank learns every other's listener and place before any
        // connects, so a rank that cannot be reached is an error at once.
        let listener = Listener::bind_configured();
        let address = listener.as_ref().map_or("", |l| l.address());
        let entry = format!("{address}\t{}", place());
        let mut mine = [0u8; ADDRESS_BYTES];
        if entry.len() > ADDRESS_BYTES {
            return Err(ProcessError::Launcher(format!(
                "the mesh address and place {entry:?} are longer than {ADDRESS_BYTES} bytes"
            )));
        }
        mine[..entry.len()].copy_from_slice(entry.as_bytes());
        let mut all = vec![0u8; ADDRESS_BYTES * size];
        world.all_gather_into(&mine[..], &mut all[..]);
        // After the all-gather, so that no rank waits on one that failed to bind.
        let listener = listener?;
        let (addresses, places): (Vec<String>, Vec<String>) = all
            .chunks(ADDRESS_BYTES)
            .map(|chunk| {
                let end = chunk.iter().position(|b| *b == 0).unwrap_or(chunk.len());
                let entry = String::from_utf8_lossy(&chunk[..end]).into_owned();
                let (address, place) = entry.split_once('\t').unwrap_or((&entry, ""));
                (address.to_owned(), place.to_owned())
            })
            .unzip();
        if let Some(rank) = addresses.iter().position(String::is_empty) {
            return Err(ProcessError::Launcher(format!(
                "rank {rank} could not bind its mesh listener (its own error says why)"
            )));
        }
        commcheck_mesh::check_reachable(&addresses, &places)?;
        let mut processes = Self::connect(listener, rank, &addresses)?;
        processes.universe = Some(universe);
        Ok(processes)
    }

    /// Ends this process's part in the launch: finalises MPI when every
    /// process is still there and answering, and leaves it otherwise
    /// (finalising with a dead or unreachable peer would hang).
    pub fn finish(self) {
        let healthy = self.control.lost().is_none() && self.control.broken().is_none();
        #[cfg(feature = "mpi")]
        {
            let mut this = self;
            if healthy {
                drop(this.universe.take());
            } else {
                std::mem::forget(this.universe.take());
            }
        }
        #[cfg(not(feature = "mpi"))]
        drop((self, healthy));
    }

    /// [`Processes::finish`], then exits with `code`.
    fn exit(self, code: i32) -> ! {
        self.finish();
        std::process::exit(code)
    }
}

/// Where this process runs, as far as reaching a loopback listener goes:
/// its host name and network namespace (`host/net:[inode]`). Two processes
/// in different places cannot meet on loopback.
#[cfg(feature = "mpi")]
fn place() -> String {
    let namespace = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{}/{namespace}", crate::build::hostname())
}

/// Bytes of one rank's mesh address and place in the MPI all-gather
/// (`ip:port`, a tab, `host/net:[inode]`, padded).
#[cfg(feature = "mpi")]
const ADDRESS_BYTES: usize = 320;
