//! What the process did between two looks of the watchdog: whether threads
//! that are not the kit's (the backend's) waited to run (starved), whether
//! the process moved bytes (a transfer on a slow link), and whether another
//! process of the world said its ranks moved. The case watchdog and the
//! stopwatch of poll bounds count no time in which any of these held.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::MutexGuard;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The threads the kit runs (rank threads and supervisors), by id in
/// `/proc/self/task`: [`process`] looks at every other thread.
pub(super) fn kit_threads() -> &'static Mutex<HashSet<u32>> {
    static THREADS: OnceLock<Mutex<HashSet<u32>>> = OnceLock::new();
    THREADS.get_or_init(Mutex::default)
}

/// How often the rank threads and the process's other threads are sampled.
pub(super) const SAMPLE: Duration = Duration::from_millis(250);

/// The nanoseconds thread `tid` of this process has spent running, and
/// waiting to run (`/proc/self/task/<tid>/schedstat`).
pub(super) fn schedstat(tid: u32) -> Option<(u64, u64)> {
    let text = read_proc(&format!("/proc/self/task/{tid}/schedstat"))?;
    let mut fields = text.split_whitespace();
    let run: u64 = fields.next()?.parse().ok()?;
    let wait: u64 = fields.next()?.parse().ok()?;
    Some((run, wait))
}

/// Bytes the kit itself read from `/proc` ([`read_proc`]), which
/// [`io_moved`] leaves out.
static PROC_READ: AtomicU64 = AtomicU64::new(0);

/// Reads a `/proc` file, counting its bytes in [`PROC_READ`].
fn read_proc(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    PROC_READ.fetch_add(text.len() as u64, Ordering::Relaxed);
    Some(text)
}

/// When another process of the current process world last said its rank
/// moved ([`remote_progress`]).
static REMOTE: Mutex<Option<Instant>> = Mutex::new(None);

/// Records that another process of the current world said its rank moved:
/// a world across processes moves wherever one of its ranks does, and a
/// peer computing or sending on its own host is invisible here otherwise.
pub(crate) fn remote_progress() {
    *guard(&REMOTE) = Some(Instant::now());
}

/// Whether another process of the world moved within the last two samples.
pub(super) fn remote_moved() -> bool {
    guard(&REMOTE).is_some_and(|at| at.elapsed() < 2 * SAMPLE)
}

/// Whether this process runs the ranks of process worlds (one rank per
/// process, talking over a network): only then is its I/O a world's.
static ACROSS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks this process as one rank of process worlds (see [`io_moved`]).
pub(crate) fn across_processes() {
    ACROSS.store(true, Ordering::Relaxed);
}

/// The least I/O in one sample that counts as a world moving bytes.
const IO_MOVED: u64 = 4096;

/// Whether this process moved bytes since `before` (updated to now): at
/// least [`IO_MOVED`] through `read`/`write` calls (sockets included:
/// `rchar` and `wchar` of `/proc/self/io`, less the kit's own `/proc`
/// reads), or the send or receive queue of one of its TCP sockets changed
/// with at least [`IO_MOVED`] in it (a sender blocked in one large `write`
/// drains its queue; the kit's own small messages pass through queues too).
/// Only in a process of process worlds, where the bytes it moves during a
/// world are that world's: a transfer on a slow link is the backend moving,
/// however long it takes. A link that is down moves nothing. Transports
/// that bypass the kernel (RDMA, a GPU's links) are not seen.
fn io_moved(before: &mut Option<(u64, Queues)>) -> bool {
    if !ACROSS.load(Ordering::Relaxed) {
        return false;
    }
    let now = io_seen();
    let moved = match (&*before, &now) {
        (Some((bytes_then, queues_then)), Some((bytes, queues))) => {
            bytes.saturating_sub(*bytes_then) >= IO_MOVED
                || queues.iter().any(|(inode, tx, rx)| {
                    let then = queues_then.iter().find(|(i, _, _)| i == inode);
                    let (tx0, rx0) = then.map_or((0, 0), |(_, tx, rx)| (*tx, *rx));
                    (tx0, rx0) != (*tx, *rx) && (*tx).max(*rx).max(tx0).max(rx0) >= IO_MOVED
                })
        }
        _ => false,
    };
    *before = now;
    moved
}

/// A process's TCP sockets' queues: `(inode, send queue, receive queue)`.
type Queues = Vec<(u64, u64, u64)>;

/// This process's I/O bytes so far (less its `/proc` reads), and the
/// queues (`tx:rx`, hex) of its TCP sockets by inode.
fn io_seen() -> Option<(u64, Queues)> {
    let text = read_proc("/proc/self/io")?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
    };
    let sockets: HashSet<u64> = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            let target = target.to_str()?;
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect();
    let mut queues = Vec::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Some(text) = read_proc(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(queue), Some(inode)) = (fields.get(4), fields.get(9)) else {
                continue;
            };
            let Some((tx, rx)) = queue.split_once(':') else {
                continue;
            };
            let hex = |text: &str| u64::from_str_radix(text, 16).ok();
            if let (Ok(inode), Some(tx), Some(rx)) = (inode.parse::<u64>(), hex(tx), hex(rx)) {
                if sockets.contains(&inode) {
                    queues.push((inode, tx, rx));
                }
            }
        }
    }
    queues.sort();
    let bytes = field("rchar:")?.saturating_add(field("wchar:")?);
    Some((
        bytes.saturating_sub(PROC_READ.load(Ordering::Relaxed)),
        queues,
    ))
}

/// This thread's id in `/proc/self/task` (Linux).
pub(super) fn thread_id() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// What the last sample of the whole process saw ([`process`]).
#[derive(Clone, Copy, Default)]
pub(super) struct ProcessSeen {
    /// Some thread of this process other than the kit's own waited to run
    /// (runnable, no CPU free) for at least a quarter of the sample. On a
    /// system without `/proc/self/task/*/schedstat` (not Linux), never.
    pub(super) starved: bool,
    /// The process moved bytes ([`io_moved`]).
    pub(super) io_moved: bool,
}

/// The process-wide sample behind [`process`].
struct ProcessSample {
    sampled: Instant,
    /// Each thread's run-queue wait at the last sample.
    waits: HashMap<u32, u64>,
    /// The process's I/O at the last sample ([`io_moved`]).
    io: Option<(u64, Queues)>,
    seen: ProcessSeen,
}

/// What the last sample of this process saw: starvation of the backend's
/// threads, and bytes moved. Samples at most every [`SAMPLE`], for every
/// world of the process at once.
pub(super) fn process() -> ProcessSeen {
    static STATE: OnceLock<Mutex<ProcessSample>> = OnceLock::new();
    let state = STATE.get_or_init(|| {
        Mutex::new(ProcessSample {
            sampled: Instant::now(),
            waits: HashMap::new(),
            io: None,
            seen: ProcessSeen::default(),
        })
    });
    let mut state = guard(state);
    let window = state.sampled.elapsed();
    if window < SAMPLE {
        return state.seen;
    }
    let kit = guard(kit_threads()).clone();
    let mut waits = HashMap::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            if kit.contains(&tid) {
                continue;
            }
            if let Some((_, wait)) = schedstat(tid) {
                waits.insert(tid, wait);
            }
        }
    }
    let starved = waits.iter().any(|(tid, wait)| {
        state
            .waits
            .get(tid)
            .is_some_and(|before| Duration::from_nanos(wait.saturating_sub(*before)) >= window / 4)
    });
    let io_moved = io_moved(&mut state.io);
    state.waits = waits;
    state.seen = ProcessSeen { starved, io_moved };
    state.sampled = Instant::now();
    state.seen
}

/// Whether, at the last sample (at most [`SAMPLE`] old), some thread of
/// this process that is not the kit's waited to run for a quarter of the
/// sample: the process has more to run than the CPUs it gets, so the kit
/// could not vouch for a blocked call now (the runner starts no more cases
/// then).
pub(crate) fn starved() -> bool {
    process().starved
}

/// Locks `mutex`, whatever a panicking holder left in it: the kit's own
/// state stays readable after a rank panicked (the panic is the verdict).
pub(crate) fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
