//! The case watchdog (RUN-2): what counts as a world's progress, which of
//! the supervisor's time counts at all, and when a world is hung, blocked
//! in a call, or merely too slow on this machine to tell.
//!
//! A world is hung when nothing in it moved for a whole watchdog period of
//! time the kit can vouch for. Three observations make that independent of
//! machine load:
//!
//! - **progress**: a guarded call into the backend returned, a signal was
//!   raised, a poll moved the rank on ([`guarded`], [`polled`],
//!   [`progressed`]), a rank thread was busy computing ([`Sample`]), or,
//!   in a process world, the process moved bytes ([`process`]) or another
//!   process of the world said its rank moved ([`remote_progress`]);
//! - **watched time**: each look of the supervisor adds at most
//!   [`LOOK_GAP`], so a supervisor that was not scheduled adds nothing;
//! - **starvation**: a look adds nothing while some thread of this process
//!   that the kit does not run (the backend's own threads: a lane, a
//!   progress thread) waited to run for a quarter of the last sample
//!   ([`process`]). Work the backend does on its own threads while a rank
//!   sleeps in `wait()` is invisible to the kit; if such a thread could not
//!   get a CPU, the world may be moving as fast as this machine lets it.
//!
//! A rank thread busy computing is progress only while it could be doing
//! something useful: one that has spent a whole watchdog of its *own* run
//! time (not the time it waited for a CPU) inside one call into the
//! backend, with nothing observable moving anywhere in the world since the
//! call began (no call returned, no signal, no bytes, no rank computing in
//! the kit's own code), is spinning: a `wait()` polling in a busy loop for
//! work that never ends, as MPI progress loops and event-polling GPU waits
//! do, is as hung as one asleep, and is a timeout naming the call. Load
//! only stretches the wall time this takes, never makes it one.
//!
//! A world still unfinished at [`CEILING`] watchdog periods of wall time
//! ends [`WorldEnd::Overran`](super::WorldEnd::Overran): inconclusive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::end::WorldEnd;
use super::sample::{guard, kit_threads, process, remote_moved, schedstat, thread_id, SAMPLE};
use crate::check::Finding;

#[derive(Clone)]
struct Call {
    what: &'static str,
    invariant: &'static str,
    started: Instant,
    limit: Duration,
}

/// What the supervisor sees of a rank thread: the call it is in, if any
/// (see [`guarded`]), and when it last made progress (a call into the
/// backend returned, or it raised a signal).
pub(crate) struct CallWatch {
    call: Mutex<Option<Call>>,
    moved: Mutex<Instant>,
    /// The rank thread's id in `/proc/self/task` (Linux), for [`Sample`].
    tid: OnceLock<u32>,
    /// Wall time, in nanoseconds, the rank thread spent in the kit's own
    /// pauses between polls ([`pause`]), waking included.
    paused: AtomicU64,
    /// The rank's last call into the backend ([`inside`]).
    entered: Mutex<Option<Entered>>,
    /// Per kind of call, when the rank's last one returned and the
    /// backtrace it kept ([`inside`]).
    recent: Mutex<Vec<Recent>>,
    /// Shared by the local ranks of one world: in the last sample, one of
    /// them was computing and waited to run for a quarter of it (set by
    /// the [`Watchdog`], read by [`Stopwatch`]).
    peers_starved: Arc<std::sync::atomic::AtomicBool>,
}

/// A call into the backend a rank thread made: where from, and whether it
/// has returned.
struct Entered {
    what: &'static str,
    at: Instant,
    left: Option<Instant>,
    trace: Arc<std::backtrace::Backtrace>,
}

/// The last call of one kind a rank thread made into the backend.
struct Recent {
    what: &'static str,
    left: Instant,
    trace: Arc<std::backtrace::Backtrace>,
}

impl CallWatch {
    /// The watches of a world's `ranks` local rank threads.
    pub(crate) fn world(ranks: usize) -> Vec<Arc<Self>> {
        let peers_starved = Arc::default();
        (0..ranks)
            .map(|_| {
                Arc::new(Self {
                    peers_starved: Arc::clone(&peers_starved),
                    ..Self::default()
                })
            })
            .collect()
    }
}

impl Default for CallWatch {
    fn default() -> Self {
        Self {
            call: Mutex::new(None),
            moved: Mutex::new(Instant::now()),
            tid: OnceLock::new(),
            paused: AtomicU64::new(0),
            entered: Mutex::new(None),
            recent: Mutex::new(Vec::new()),
            peers_starved: Arc::default(),
        }
    }
}

thread_local! {
    /// The watch of the rank thread this is, if it is one.
    static WATCH: std::cell::RefCell<Option<Arc<CallWatch>>> = const { std::cell::RefCell::new(None) };
}

/// A thread of the kit's own, for as long as this lives.
pub(crate) struct KitThread(Option<u32>);

impl KitThread {
    /// Marks the calling thread as the kit's (a supervisor).
    pub(crate) fn enter() -> Self {
        let tid = thread_id();
        if let Some(tid) = tid {
            guard(kit_threads()).insert(tid);
        }
        Self(tid)
    }

    /// Marks the calling thread as the rank thread `watch` watches.
    pub(crate) fn rank(watch: Arc<CallWatch>) -> Self {
        let entered = Self::enter();
        if let Some(tid) = entered.0 {
            let _ = watch.tid.set(tid);
        }
        WATCH.with(|slot| *slot.borrow_mut() = Some(watch));
        entered
    }
}

impl Drop for KitThread {
    fn drop(&mut self) {
        if let Some(tid) = self.0 {
            guard(kit_threads()).remove(&tid);
        }
    }
}

/// The kit's pause between two polls: sleeps `duration` and, on a rank
/// thread, records the time it took to sleep and wake, which [`Sample`]
/// leaves out (a thread polling on a loaded machine waits to run after
/// each pause, but it is waiting, not computing).
pub(crate) fn pause(duration: Duration) {
    let started = Instant::now();
    std::thread::sleep(duration);
    WATCH.with(|watch| {
        if let Some(watch) = watch.borrow().as_ref() {
            let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            watch.paused.fetch_add(nanos, Ordering::Relaxed);
        }
    });
}

/// Records that the rank thread this is made progress (see [`Watchdog`]).
pub(crate) fn progressed() {
    WATCH.with(|watch| {
        if let Some(watch) = watch.borrow().as_ref() {
            *guard(&watch.moved) = Instant::now();
        }
    });
}

/// The `invariant` of a [`guarded`] call that no invariant bounds: one the
/// kit makes to set a check up (a `wait()` on released healthy work). Blocked,
/// it makes the case inconclusive.
pub(crate) const SETUP: &str = "setup";

/// Runs `call`, a call into the backend that must return within `limit`
/// (the invariant `invariant` says so). On a rank thread the world's
/// supervisor watches it: once it has blocked for `limit` of time the kit
/// can vouch for (watched, with neither the process's other threads nor
/// this rank thread waiting for a CPU), the case ends at once with a
/// failure of `invariant` (or, for another case's invariant, an
/// inconclusive verdict attributing the hang to `invariant`), instead of
/// waiting for the case watchdog.
///
/// Its return is the rank's progress for the case watchdog (see
/// [`Watchdog`]); a poll, whose return may change nothing, is [`polled`].
pub(crate) fn guarded<T>(
    what: &'static str,
    invariant: &'static str,
    limit: Duration,
    call: impl FnOnce() -> T,
) -> T {
    let result = polled(what, invariant, limit, call);
    progressed();
    result
}

/// A call made again within this of the same kind of call's return (a poll
/// loop, also one that interleaves several kinds of call, such as
/// `is_complete` and `resources_releasable`) keeps the backtrace taken on
/// the first: taking one costs far more than most calls into the backend.
const HOT: Duration = Duration::from_millis(50);

/// Runs `call`, a call into the backend named `what`, recording on a rank
/// thread where it was called from (a backtrace of the rank thread) and
/// whether it returned: what a timeout reports of each hung rank
/// ([`whereabouts`]).
pub(crate) fn inside<T>(what: &'static str, call: impl FnOnce() -> T) -> T {
    let watch = WATCH.with(|watch| watch.borrow().clone());
    let Some(watch) = watch else { return call() };
    let now = Instant::now();
    let kept = guard(&watch.recent)
        .iter()
        .find(|recent| recent.what == what && now.saturating_duration_since(recent.left) < HOT)
        .map(|recent| Arc::clone(&recent.trace));
    let trace = kept.unwrap_or_else(|| Arc::new(std::backtrace::Backtrace::force_capture()));
    *guard(&watch.entered) = Some(Entered {
        what,
        at: now,
        left: None,
        trace: Arc::clone(&trace),
    });
    let result = call();
    let left = Instant::now();
    if let Some(last) = guard(&watch.entered).as_mut() {
        last.left = Some(left);
    }
    let mut recent = guard(&watch.recent);
    match recent.iter_mut().find(|recent| recent.what == what) {
        Some(entry) => (entry.left, entry.trace) = (left, trace),
        None => recent.push(Recent { what, left, trace }),
    }
    result
}

/// Where the rank thread `watch` watches is: inside a call into the
/// backend, or between calls, with the backtrace of its last call.
pub(crate) fn whereabouts(watch: &CallWatch) -> String {
    let entered = guard(&watch.entered);
    let Some(last) = entered.as_ref() else {
        return "no call the kit tracks had been made yet".to_owned();
    };
    let place = match last.left {
        None => format!("inside {} for {:?}", last.what, last.at.elapsed()),
        Some(left) => format!(
            "in no call the kit tracks; its last tracked call, {}, returned {:?} before",
            last.what,
            left.elapsed()
        ),
    };
    format!(
        "{place}; {} called from:\n{}",
        last.what,
        frames(&last.trace)
    )
}

/// The frames of `trace` that say where a rank was: the kit's, the
/// harness's and the backend's, without the standard library's and the
/// watchdog's own (at most [`FRAMES`]).
fn frames(trace: &std::backtrace::Backtrace) -> String {
    if trace.status() != std::backtrace::BacktraceStatus::Captured {
        return "      (no backtrace on this platform)".to_owned();
    }
    const SKIP: &[&str] = &[
        "std::",
        "core::",
        "alloc::",
        "<std::",
        "<core::",
        "<alloc::",
        "__",
        "_start",
        "clone",
        "start_thread",
        "commcheck::world::watch::",
    ];
    let text = trace.to_string();
    let (mut out, mut keep, mut kept) = (Vec::new(), false, 0);
    for line in text.lines() {
        let line = line.trim_start();
        let frame = line
            .split_once(": ")
            .filter(|(index, _)| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()));
        if let Some((_, symbol)) = frame {
            keep = !SKIP.iter().any(|skip| symbol.starts_with(skip));
            if keep {
                kept += 1;
                if kept > FRAMES {
                    out.push("      ...".to_owned());
                    break;
                }
                out.push(format!("      {symbol}"));
            }
        } else if keep && line.starts_with("at ") {
            out.push(format!("        {line}"));
        }
    }
    out.join("\n")
}

/// The most frames [`whereabouts`] gives.
const FRAMES: usize = 16;

/// [`guarded`] for a poll (`is_complete()`, `resources_releasable()`): its
/// return is no progress, since a rank polling work that never completes is
/// as stuck as one blocked in `wait()`. The caller records progress when
/// the answer moves the rank on ([`progressed`]).
pub(crate) fn polled<T>(
    what: &'static str,
    invariant: &'static str,
    limit: Duration,
    call: impl FnOnce() -> T,
) -> T {
    let watch = WATCH.with(|watch| watch.borrow().clone());
    let Some(watch) = watch else { return call() };
    let previous = guard(&watch.call).replace(Call {
        what,
        invariant,
        started: Instant::now(),
        limit,
    });
    let result = inside(what, call);
    *guard(&watch.call) = previous;
    result
}

/// Runs `call`, which `invariant` says returns at once: within
/// [`slack::PROMPT`](crate::check::slack::PROMPT) (250 ms). The supervisor
/// watches it as [`polled`] does, under the block guard's own limit
/// ([`slack::BLOCKED`](crate::check::slack::BLOCKED), a second): a call that
/// blocks that long, counting only time the kit can vouch for, ends the
/// case as a failure of `invariant`. (The supervisor samples the threads'
/// run queues every quarter second, too coarsely to vouch for 250 ms.) A
/// call that took longer than `PROMPT` of wall time, but that the
/// supervisor did not catch, is [`Finding::Inconclusive`] (prefixed with
/// `context` of the result): the kit cannot say that it blocked rather than
/// waited for a CPU, so it is retried, never failed on a clock.
pub(crate) fn prompt<T>(
    what: &'static str,
    invariant: &'static str,
    call: impl FnOnce() -> T,
    context: impl FnOnce(&T) -> String,
) -> Result<T, Finding> {
    let limit = crate::check::slack::PROMPT;
    let start = Instant::now();
    let result = polled(what, invariant, crate::check::slack::BLOCKED, call);
    let took = start.elapsed();
    if took > limit {
        return Err(Finding::Inconclusive(format!(
            "{}: {what} took {took:?} of wall time, more than the {limit:?} a nonblocking call may take \
             ({invariant}), but the kit cannot vouch that it blocked rather than waited for a CPU (the block \
             guard fails a call blocked for {:?} of time in which it could have run)",
            context(&result),
            crate::check::slack::BLOCKED
        )));
    }
    Ok(result)
}

/// The most a world may run while its ranks still make progress: this many
/// case watchdogs (`COMMCHECK_CASE_TIMEOUT_MS`) of wall time. One still
/// moving then is [`WorldEnd::Overran`], which proves nothing either way.
pub(crate) const CEILING: u32 = 6;

/// The ceiling of a world's run for the case watchdog `limit` (see
/// [`CEILING`]).
pub(crate) fn overrun(limit: Duration) -> Duration {
    limit.saturating_mul(CEILING)
}

/// The most one look of the supervisor adds to a world's idle time: the
/// supervisor looks every [`WATCH_PERIOD`]; a longer gap means it was not
/// running, and time it did not watch proves nothing.
const LOOK_GAP: Duration = Duration::from_millis(100);

/// How often the supervisor looks at the ranks' guarded calls.
pub(crate) const WATCH_PERIOD: Duration = Duration::from_millis(20);

/// A clock for the kit's bounds on a backend's progress in a poll loop
/// ("still pending 5 s after every member submitted"): like the watchdog,
/// it counts only time the kit can vouch for. Each reading adds the time
/// since the last one, at most [`LOOK_GAP`] (a poller that was not
/// scheduled proves nothing), and nothing while the backend's own threads
/// are starved ([`process`]), a rank of the same world is computing
/// but waiting to run (a late peer building its inputs: the work waits
/// for it), or, in a process world, the process is moving bytes
/// ([`process`]: a transfer on a slow link) or another process of the
/// world said its rank moved ([`remote_progress`]). On a machine loaded past that, the bound is
/// never reached and the world ends at its ceiling, inconclusive.
pub(crate) struct Stopwatch {
    counted: Duration,
    last: Instant,
}

impl Stopwatch {
    /// A stopwatch started now.
    pub(crate) fn start() -> Self {
        Self {
            counted: Duration::ZERO,
            last: Instant::now(),
        }
    }

    /// The time counted so far (read it in the poll loop: each reading
    /// counts the time since the previous one).
    pub(crate) fn elapsed(&mut self) -> Duration {
        let now = Instant::now();
        let gap = now.saturating_duration_since(self.last).min(LOOK_GAP);
        self.last = now;
        let peers = WATCH.with(|watch| {
            watch
                .borrow()
                .as_ref()
                .is_some_and(|watch| watch.peers_starved.load(Ordering::Relaxed))
        });
        let process = process();
        if !process.starved && !process.io_moved && !peers && !remote_moved() {
            self.counted += gap;
        }
        self.counted
    }
}

/// What one sample of a world's rank threads saw.
#[derive(Clone, Default)]
struct Sample {
    /// Some rank thread ran, or waited to run, for half of the sample,
    /// less the kit's own pauses: it was computing (the kit's own work, or
    /// a backend computing inside the rank's call, such as in `wait()`).
    /// Load stretches a computing thread but leaves it busy; a blocked or
    /// sleeping one is not. A spinning rank (see [`Spin`]) is not busy.
    busy: bool,
    /// Some rank thread was busy outside any call into the backend: the
    /// kit's own code moved, which is observable progress.
    outside: bool,
    /// The rank (by offset) that has spun longest, and its run time since
    /// the later of its call's start and the world's last observable
    /// progress: at least a watchdog of it.
    spinning: Option<(usize, Duration)>,
    /// Per rank: the thread waited to run for a quarter of the sample, so
    /// a call it is in cannot be said to have blocked.
    waiting: Vec<bool>,
}

/// The supervisor's watchdog over one world's local ranks.
pub(crate) struct Watchdog {
    limit: Duration,
    started: Instant,
    ceiling: Instant,
    /// Idle time so far: watched, unstarved time since the last progress.
    idle: Duration,
    looked: Instant,
    seen: Instant,
    sampled: Instant,
    /// Each rank thread's run plus run-queue time, its run-queue time, and
    /// its pauses, at the last sample.
    before: Vec<Option<(u64, u64, u64)>>,
    last: Sample,
    /// Per rank: the guarded call being timed (by its start) and the time
    /// counted against its limit.
    calls: Vec<Option<(Instant, Duration)>>,
    /// Per rank: the call into the backend it is inside, and its run time
    /// when this watch of it began.
    spins: Vec<Option<Spin>>,
    /// When this process last told the others its ranks moved.
    announced: Instant,
    _kit: KitThread,
}

/// A rank thread inside one call into the backend, watched since the
/// later of the call's start and the world's last observable progress.
#[derive(Clone, Copy)]
struct Spin {
    /// When the call began ([`inside`]).
    call: Instant,
    /// The thread's run time, in nanoseconds, when the watch began.
    run: u64,
}

/// How a world's watch ended.
pub(crate) enum Expired {
    /// Nothing moved for a whole watchdog of counted time, or the rank at
    /// this offset burnt a whole watchdog of its own run time inside one
    /// call while nothing else moved (how much: `Some`).
    Hung(Option<(usize, Duration)>),
    /// Still moving at the ceiling.
    Overran { ran: Duration, idle: Duration },
    /// A guarded call blocked beyond its limit.
    Blocked(WorldEnd),
}

impl Watchdog {
    /// A watchdog of `limit` over `ranks` local rank threads, started now,
    /// on the supervisor's thread.
    pub(crate) fn new(limit: Duration, ranks: usize) -> Self {
        let now = Instant::now();
        Self {
            limit,
            started: now,
            ceiling: now + overrun(limit),
            idle: Duration::ZERO,
            looked: now,
            seen: now,
            sampled: now,
            before: vec![None; ranks],
            last: Sample {
                busy: false,
                waiting: vec![false; ranks],
                ..Sample::default()
            },
            calls: vec![None; ranks],
            spins: vec![None; ranks],
            announced: now,
            _kit: KitThread::enter(),
        }
    }

    /// One look at the ranks `first..` watched by `watches`: `Some` once the
    /// world is hung, blocked in a call, or past the ceiling.
    /// `announce` tells the world's other processes when this one's ranks
    /// moved in a sample (by their own evidence, not another's).
    pub(crate) fn look(
        &mut self,
        watches: &[Arc<CallWatch>],
        first: usize,
        announce: Option<&(dyn Fn() + Send + Sync)>,
    ) -> Option<Expired> {
        let now = Instant::now();
        let gap = now.saturating_duration_since(self.looked).min(LOOK_GAP);
        self.looked = now;
        let fresh = self.sample(watches, now);
        let process = process();
        let starved = process.starved;
        for (offset, (watch, timed)) in watches.iter().zip(&mut self.calls).enumerate() {
            let Some(call) = guard(&watch.call).clone() else {
                *timed = None;
                continue;
            };
            let counted = match timed {
                Some((started, counted)) if *started == call.started => counted,
                _ => &mut timed.insert((call.started, Duration::ZERO)).1,
            };
            if !starved && !self.last.waiting[offset] {
                *counted += gap;
            }
            if *counted >= call.limit {
                return Some(Expired::Blocked(WorldEnd::Blocked {
                    rank: first + offset,
                    what: call.what.to_owned(),
                    invariant: call.invariant.to_owned(),
                    limit: call.limit,
                }));
            }
        }
        let moved = watches
            .iter()
            .map(|watch| *guard(&watch.moved))
            .fold(self.started, Instant::max);
        let local = fresh && (self.last.busy || process.io_moved);
        if fresh && (local || moved > self.announced) {
            if let Some(announce) = announce {
                announce();
            }
            self.announced = now;
        }
        let remote = fresh && remote_moved();
        // Observable progress: a spinning rank's watch starts again.
        if moved > self.seen || (fresh && (self.last.outside || process.io_moved)) || remote {
            self.spins.iter_mut().for_each(|spin| *spin = None);
        } else if fresh && !self.last.busy && self.last.spinning.is_some() {
            return Some(Expired::Hung(self.last.spinning));
        }
        if local || remote {
            (self.idle, self.seen) = (Duration::ZERO, now);
        } else if moved > self.seen {
            (self.idle, self.seen) = (Duration::ZERO, moved);
        } else if !starved {
            self.idle += gap;
        }
        if self.idle >= self.limit {
            return Some(Expired::Hung(None));
        }
        (now >= self.ceiling).then(|| Expired::Overran {
            ran: self.started.elapsed(),
            idle: self.idle,
        })
    }

    /// Samples the rank threads when a sample is due; whether it was.
    fn sample(&mut self, watches: &[Arc<CallWatch>], now: Instant) -> bool {
        let window = now.saturating_duration_since(self.sampled);
        if window < SAMPLE {
            return false;
        }
        self.sampled = now;
        let mut sample = Sample {
            waiting: vec![false; watches.len()],
            ..Sample::default()
        };
        let mut starved = false;
        for (offset, (((watch, before), waiting), spin)) in watches
            .iter()
            .zip(&mut self.before)
            .zip(&mut sample.waiting)
            .zip(&mut self.spins)
            .enumerate()
        {
            let stat = watch.tid.get().copied().and_then(schedstat);
            let current = stat.map(|(run, wait)| {
                (
                    run.saturating_add(wait),
                    wait,
                    watch.paused.load(Ordering::Relaxed),
                )
            });
            // The call it is inside, watched from its start or the world's
            // last observable progress (a reset spin starts again here).
            let call = guard(&watch.entered)
                .as_ref()
                .filter(|entered| entered.left.is_none())
                .map(|entered| entered.at);
            *spin = match (call, stat) {
                (Some(call), Some((run, _))) => Some(match *spin {
                    Some(spin) if spin.call == call => spin,
                    _ => Spin { call, run },
                }),
                _ => None,
            };
            let spun = spin
                .zip(stat)
                .map(|(spin, (run, _))| Duration::from_nanos(run.saturating_sub(spin.run)))
                .filter(|spun| *spun >= self.limit);
            if let Some(spun) = spun {
                if sample.spinning.is_none_or(|(_, most)| spun > most) {
                    sample.spinning = Some((offset, spun));
                }
            }
            if let (Some((scheduled, wait, paused)), Some((then, wait_then, paused_then))) =
                (current, *before)
            {
                // Scheduled time less the kit's own pauses: what is left is
                // the thread computing, or waiting to compute.
                let computing = scheduled
                    .saturating_sub(then)
                    .saturating_sub(paused.saturating_sub(paused_then));
                let busy = Duration::from_nanos(computing) >= window / 2;
                sample.busy |= busy && spun.is_none();
                sample.outside |= busy && call.is_none();
                *waiting = Duration::from_nanos(wait.saturating_sub(wait_then)) >= window / 4;
                starved |= busy && *waiting;
            }
            *before = current;
        }
        self.last = sample;
        if let Some(watch) = watches.first() {
            watch.peers_starved.store(starved, Ordering::Relaxed);
        }
        true
    }
}

/// Polls `condition` until it holds or `limit` passes; returns whether it
/// held. On a rank thread of a loaded machine, `limit` counts only time in
/// which the backend's threads could run (see the case watchdog in
/// `kit/EVIDENCE.md`): the wait may take longer, never end sooner.
pub fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let mut clock = Stopwatch::start();
    loop {
        if condition() {
            return true;
        }
        if clock.elapsed() >= limit {
            return false;
        }
        pause(Duration::from_millis(1));
    }
}
