//! How many cases run at once when `COMMCHECK_JOBS` does not say: as many
//! as the machine has room for. Most cases spend their time waiting (work
//! kept pending for a late peer, a bounded wait running out, a release
//! slack), a few computing (the value checks' size sweeps).
//!
//! The count is of worlds, which are what a backend holds at a time
//! (devices, contexts, memory): a case whose world sizes run at once counts
//! each of them.
//!
//! - A run always has one world per CPU running (its floor), and any case
//!   may run alone.
//! - Beyond that, one more starts only while the rest of the machine (every
//!   process but this one) used less than one CPU's worth of the last look
//!   at `/proc/stat`, no thread of the backend's waited for a CPU in the
//!   last quarter-second sample (`world::starved`), and at most [`LIMIT`]
//!   worlds run in the whole process (every run in it: a precision matrix
//!   runs several at once). So waiting cases fill the room that computing
//!   ones leave, but not past the point where the kit could no longer vouch
//!   that a call blocked (in a starved process such checks end
//!   inconclusive). A machine loaded by others keeps each run to its floor,
//!   as a fixed count would.
//!
//! With the adaptive count a case's world sizes run at once, and the cases
//! that run the most ranks in all start first (`cli::start_order`); a fixed
//! count runs each case's worlds in turn, so it bounds the worlds a backend
//! has at a time.
//!
//! Verdicts do not depend on the count: every bound a check rests on counts
//! only time in which the backend could run (see the case watchdog in
//! `kit/EVIDENCE.md`).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most worlds the adaptive count runs at once in one process.
pub(crate) const LIMIT: usize = 32;

/// How long a look at the machine lasts at least.
const LOOK: Duration = Duration::from_millis(50);

/// The cases of one run, and the gate a new one waits at.
pub(crate) struct Admission {
    /// `Some(n)`: exactly `n` at once (`COMMCHECK_JOBS`); `None`: adaptive.
    fixed: Option<usize>,
    cpus: usize,
    /// This run's cases running.
    running: Mutex<usize>,
}

/// What every adaptive run of the process shares: the cases running beyond
/// their runs' floors, and the look at the machine.
struct Shared {
    extra: usize,
    /// The CPU times at the start of the current look, and when it started.
    look: Option<(CpuTimes, Instant)>,
    /// Whether the last whole look found the rest of the machine using
    /// less than one CPU's worth.
    room: bool,
}

static SHARED: Mutex<Shared> = Mutex::new(Shared {
    extra: 0,
    look: None,
    room: false,
});

/// Woken whenever a case of any run ends.
static ENDED: Condvar = Condvar::new();

/// Idle and total jiffies of all CPUs, this process's jiffies, and how many
/// CPUs there are.
#[derive(Clone, Copy)]
struct CpuTimes {
    idle: u64,
    total: u64,
    own: u64,
    cpus: u64,
}

/// A running case: dropping it lets the next one in.
pub(crate) struct Admitted<'a> {
    admission: &'a Admission,
    /// The worlds it runs at once.
    worlds: usize,
    /// Admitted beyond the run's floor (counted in [`Shared::extra`]).
    extra: bool,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let mut shared = lock(&SHARED);
        *lock(&self.admission.running) -= self.worlds;
        if self.extra {
            shared.extra -= self.worlds;
        }
        drop(shared);
        ENDED.notify_all();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Admission {
    /// `COMMCHECK_JOBS`' count when it is set (`fixed`), else adaptive.
    pub(crate) fn new(fixed: Option<usize>) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            fixed,
            cpus,
            running: Mutex::new(0),
        }
    }

    /// How many workers to start: each takes a case when admitted.
    pub(crate) fn workers(&self) -> usize {
        self.fixed.unwrap_or(LIMIT.max(self.cpus))
    }

    /// Waits until a case of `worlds` worlds at once may start: within
    /// the run's floor of one world per CPU (or alone in the run, however
    /// many worlds it has), or as extra room. Worlds are what a backend holds
    /// at a time (devices, contexts, memory), so they are what is counted.
    /// (The shared state is locked first, then the run's count, everywhere.)
    pub(crate) fn enter(&self, worlds: usize) -> Admitted<'_> {
        let worlds = worlds.max(1);
        let mut shared = lock(&SHARED);
        loop {
            let running = *lock(&self.running);
            let (room, extra) = match self.fixed {
                Some(jobs) => (running < jobs, false),
                None if running == 0 || running + worlds <= self.cpus => (true, false),
                None => (
                    shared.extra + worlds <= LIMIT.saturating_sub(self.cpus)
                        && room(&mut shared)
                        && !crate::world::starved(),
                    true,
                ),
            };
            if room {
                *lock(&self.running) += worlds;
                if extra {
                    shared.extra += worlds;
                }
                return Admitted {
                    admission: self,
                    worlds,
                    extra,
                };
            }
            shared = ENDED
                .wait_timeout(shared, LOOK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Whether the rest of the machine (every process but this one) used less
/// than one CPU's worth of the last whole look of [`LOOK`] or more; a call
/// past a look's end closes it and starts the next, so the answer follows
/// what the machine does. Without `/proc` (not Linux): never, so each run
/// keeps to one case per CPU.
fn room(shared: &mut Shared) -> bool {
    if shared
        .look
        .is_some_and(|(_, started)| started.elapsed() < LOOK)
    {
        return shared.room;
    }
    let Some(now) = cpu_times() else {
        return false;
    };
    if let Some((then, _)) = shared.look {
        let total = now.total.saturating_sub(then.total);
        let busy = total.saturating_sub(now.idle.saturating_sub(then.idle));
        let others = busy.saturating_sub(now.own.saturating_sub(then.own));
        shared.room = total > 0 && others * now.cpus < total;
    }
    shared.look = Some((now, Instant::now()));
    shared.room
}

/// The machine's idle and total CPU time (`cpu` line of `/proc/stat`) and
/// this process's (`utime` and `stime` of `/proc/self/stat`), all in clock
/// ticks.
fn cpu_times() -> Option<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    let cpus = stat
        .lines()
        .filter(|line| line.starts_with("cpu") && !line.starts_with("cpu "))
        .count()
        .max(1) as u64;
    // After the command name (in parentheses, which may hold spaces): the
    // state is field 3, utime 14 and stime 15.
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    let mut after = own.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u64 = after.next()?.parse().ok()?;
    let stime: u64 = after.next()?.parse().ok()?;
    Some(CpuTimes {
        idle,
        total: fields.iter().take(8).sum(),
        own: utime + stime,
        cpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_count_admits_that_many_at_once() {
        let admission = Admission::new(Some(2));
        assert_eq!(admission.workers(), 2);
        let first = admission.enter(1);
        let _second = admission.enter(1);
        assert_eq!(*lock(&admission.running), 2);
        drop(first);
        let _third = admission.enter(1);
        assert_eq!(*lock(&admission.running), 2);
    }

    #[test]
    fn every_adaptive_run_has_one_case_per_cpu_whatever_the_others_run() {
        let first = Admission::new(None);
        let second = Admission::new(None);
        let a: Vec<_> = (0..first.cpus).map(|_| first.enter(1)).collect();
        let b: Vec<_> = (0..second.cpus).map(|_| second.enter(1)).collect();
        assert_eq!(a.len() + b.len(), 2 * first.cpus);
        assert!(a.iter().chain(&b).all(|admitted| !admitted.extra));
        assert!(first.workers() >= first.cpus);
    }

    #[test]
    fn a_case_of_more_worlds_than_cpus_runs_alone_in_its_run_and_counts_them_all() {
        let run = Admission::new(None);
        let many = run.cpus + 3;
        let admitted = run.enter(many);
        assert!(!admitted.extra);
        assert_eq!(*lock(&run.running), many);
        drop(admitted);
        assert_eq!(*lock(&run.running), 0);
    }

    #[test]
    fn this_process_s_cpu_time_is_read() {
        let Some(before) = cpu_times() else {
            return; // not Linux
        };
        let start = Instant::now();
        let mut spin = 0u64;
        while start.elapsed() < Duration::from_millis(60) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let after = cpu_times().expect("read once, read again");
        assert!(
            after.own > before.own,
            "60 ms of spinning moved no clock tick of this process"
        );
        assert!(after.total >= before.total);
    }
}
